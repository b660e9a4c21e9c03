/*
 * Calls every mapping hook a known number of times: mmap, mmap64, mprotect,
 * mremap, munmap (one of each failing where it can), brk and sbrk.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	/* three anonymous maps of 3 pages, one reserved PROT_NONE */
	char *a = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *b = mmap64(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *r = mmap(NULL, 3 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED || b == MAP_FAILED || r == MAP_FAILED)
		return 10;
	a[0] = b[0] = 1;
	/* a failing mmap: a bad descriptor */
	errno = 0;
	if (mmap(NULL, pg, PROT_READ, MAP_PRIVATE, 12345, 0) != MAP_FAILED || errno != EBADF)
		return 11;
	if (mprotect(r, pg, PROT_READ | PROT_WRITE) != 0)
		return 12;
	char *c = mremap(a, 3 * pg, 5 * pg, MREMAP_MAYMOVE);
	if (c == MAP_FAILED)
		return 13;
	if (munmap(c, 5 * pg) || munmap(b, 3 * pg) || munmap(r, 3 * pg))
		return 14;
	/* the break: grow by 2 pages with sbrk, back with brk */
	char *old = sbrk(0);
	if (sbrk(2 * pg) != old)
		return 15;
	if (brk(old) != 0)
		return 16;
	return 0;
}
