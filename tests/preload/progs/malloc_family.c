/*
 * Calls every function of the malloc family a known number of times with
 * sizes no one else uses, and checks that errno survives each hook. Exits
 * non-zero naming the first check that failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failed;

static void check(int ok, const char *what)
{
	if (!ok && !failed) {
		failed = 1;
		write(2, "check failed: ", 14);
		write(2, what, strlen(what));
		write(2, "\n", 1);
	}
}

int main(void)
{
	void *p[10];
	/* malloc x10: 1001..1010 bytes; errno is left as the program set it. */
	for (int i = 0; i < 10; i++) {
		errno = 1234;
		p[i] = malloc(1001 + i);
		check(p[i] && errno == 1234, "malloc errno");
	}
	for (int i = 0; i < 10; i++) {
		errno = 4321;
		free(p[i]);
		check(errno == 4321, "free errno");
	}
	free(NULL); /* not an event */

	/* calloc x5: 3 * 111 bytes, zeroed */
	for (int i = 0; i < 5; i++) {
		unsigned char *c = calloc(3, 111);
		check(c && c[0] == 0 && c[332] == 0, "calloc zero");
		free(c);
	}

	/* realloc: grow, from NULL, failing, to zero */
	char *r = malloc(2001);
	r = realloc(r, 2002);
	check(r != NULL, "realloc grow");
	char *n = realloc(NULL, 2003);
	errno = 0;
	char *f = realloc(n, SIZE_MAX / 2);
	check(f == NULL && errno == ENOMEM, "realloc fail errno");
	errno = 77;
	check(realloc(n, 0) == NULL, "realloc zero");
	check(errno == 77, "realloc zero errno");
	r = reallocarray(r, 7, 301);
	check(r != NULL, "reallocarray");
	free(r);

	/* a failed malloc is recorded with its size */
	errno = 0;
	void *big = malloc(SIZE_MAX / 4);
	check(big == NULL && errno == ENOMEM, "malloc fail errno");

	/* the aligned family */
	void *a[2];
	for (int i = 0; i < 2; i++) {
		errno = 55;
		check(posix_memalign(&a[i], 64, 3001) == 0 && ((uintptr_t)a[i] & 63) == 0,
		      "posix_memalign");
		check(errno == 55, "posix_memalign errno");
	}
	void *b = aligned_alloc(64, 3008);
	void *m = memalign(256, 3003);
	void *v = valloc(3004);
	void *pv = pvalloc(3005);
	check(b && m && v && pv && ((uintptr_t)m & 255) == 0 && ((uintptr_t)v & 4095) == 0,
	      "aligned");
	free(a[0]);
	free(a[1]);
	free(b);
	free(m);
	free(v);
	free(pv);
	return failed;
}
