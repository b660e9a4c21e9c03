/*
 * mmap_ops.c - mapping calls with known addresses and sizes, for tests/cli/:
 * a committed mapping unmapped in three parts (a hole first), a reservation
 * committed and decommitted with mprotect, an mremap that grows, a failed
 * mmap, a file mapping, and brk/sbrk by the program itself.
 *
 *   mmap     5 calls: 16384 rw anon, 1 MiB PROT_NONE, 8192 rw, failed (len 0), 4096 file
 *   munmap   6 calls: 4096 (hole at +4096), 4096 (+0), 8192 (+8192), 1 MiB, 65536 (remapped), 4096
 * file mprotect 2 calls: 65536 -> rw, 65536 -> none mremap   1 call : 8192 -> 65536
 * (MREMAP_MAYMOVE) sbrk     sbrk(0) (asks, no event), sbrk(+8192), sbrk(-8192); brk back to the
 * start
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prog.h"

#define RW (PROT_READ | PROT_WRITE)
#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)

NOINLINE static void partial_unmap(void)
{
	char *p = mmap(NULL, 16384, RW, ANON, -1, 0); /* @map_rw */
	PROG_CHECK(p != MAP_FAILED);
	memset(p, 1, 16384);
	PROG_CHECK(munmap(p + 4096, 4096) == 0); /* a hole: two pieces remain */
	PROG_CHECK(munmap(p, 4096) == 0);
	PROG_CHECK(munmap(p + 8192, 8192) == 0);
}

NOINLINE static void reserve_commit(void)
{
	char *p = mmap(NULL, 1 << 20, PROT_NONE, ANON, -1, 0); /* @map_reserve */
	PROG_CHECK(p != MAP_FAILED);
	PROG_CHECK(mprotect(p, 65536, RW) == 0); /* @mprotect_commit */
	memset(p, 2, 65536);
	PROG_CHECK(mprotect(p, 65536, PROT_NONE) == 0);
	PROG_CHECK(munmap(p, 1 << 20) == 0);
}

NOINLINE static void grow_remap(void)
{
	char *p = mmap(NULL, 8192, RW, ANON, -1, 0);
	PROG_CHECK(p != MAP_FAILED);
	char *q = mremap(p, 8192, 65536, MREMAP_MAYMOVE); /* @mremap */
	PROG_CHECK(q != MAP_FAILED);
	memset(q, 3, 65536);
	PROG_CHECK(munmap(q, 65536) == 0);
}

NOINLINE static void failed_map(void)
{
	void *p = mmap(NULL, 0, RW, ANON, -1, 0); /* @map_failed: EINVAL */
	PROG_CHECK(p == MAP_FAILED);
}

NOINLINE static void file_map(const char *self)
{
	int fd = open(self, O_RDONLY);
	PROG_CHECK(fd >= 0);
	void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0); /* @map_file */
	PROG_CHECK(p != MAP_FAILED);
	close(fd);
	PROG_CHECK(munmap(p, 4096) == 0);
}

NOINLINE static void break_moves(void)
{
	void *start = sbrk(0);
	PROG_CHECK(start != (void *)-1);
	PROG_CHECK(sbrk(8192) == start); /* @sbrk_grow */
	PROG_CHECK(sbrk(-8192) != (void *)-1);
	PROG_CHECK(brk(start) == 0);
}

int main(int argc, char **argv)
{
	partial_unmap();
	reserve_commit();
	grow_remap();
	failed_map();
	file_map(argv[0]);
	break_moves();
	return 0;
}
