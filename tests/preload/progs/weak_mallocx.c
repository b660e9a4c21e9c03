/*
 * A program that uses jemalloc's API when a weak reference says it is there,
 * as some libraries do, built without jemalloc. Under the recorder the
 * reference is its hook: the calls must still work (zeroed, aligned, resized).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void *mallocx(size_t size, int flags) __attribute__((weak));
void *rallocx(void *p, size_t size, int flags) __attribute__((weak));
size_t xallocx(void *p, size_t size, size_t extra, int flags) __attribute__((weak));
void dallocx(void *p, int flags) __attribute__((weak));
void sdallocx(void *p, size_t size, int flags) __attribute__((weak));

int main(void)
{
	if (!mallocx || !rallocx || !xallocx || !dallocx || !sdallocx) {
		puts("no jemalloc API");
		return 0;
	}
	char *p = mallocx(5001, 0);
	memset(p, 'x', 5001);
	p = rallocx(p, 5002, 0);
	int ok = p && p[5000] == 'x';
	ok &= xallocx(p, 1 << 20, 0, 0) < (1 << 20); /* cannot grow in place */
	dallocx(p, 0);
	/* MALLOCX_LG_ALIGN(12) | MALLOCX_ZERO */
	unsigned char *z = mallocx(5003, 12 | 0x40);
	ok &= z && ((uintptr_t)z & 4095) == 0;
	for (int i = 0; z && i < 5003; i++)
		ok &= z[i] == 0;
	z = rallocx(z, 5004, 12 | 0x40);
	ok &= z && ((uintptr_t)z & 4095) == 0 && z[5003] == 0;
	sdallocx(z, 5004, 0);
	puts(ok ? "jemalloc API works" : "jemalloc API broken");
	return !ok;
}
