/*
 * peak_prog.c - a heap with a known peak, known temporaries and known leaks,
 * for the tests of export, diff, --at-peak and --temporary (tests/export/).
 * With scale N (argv[1], default 1), in this order:
 *
 *   grow_buffers   10*N blocks of 1000 bytes, kept for now
 *   make_temps     5 blocks of 64 bytes, each freed before the next malloc
 *                  (temporary: 5 blocks, 320 bytes)
 *   make_peak      one block of 100000 bytes
 *   make_leak      3 blocks of 300 bytes, never freed
 *   then frees the 100000-byte block and 5 of the 1000-byte blocks.
 *
 * The heap peaks at the third leak block: 10000*N + 100000 + 900 bytes in
 * 10*N + 4 blocks. At exit 1000*(10*N - 5) + 900 bytes in 10*N - 2 blocks
 * are leaked. Change the tests with this comment.
 */
#include <stdlib.h>

#include "prog.h"

#define MAX_BUFS 100

static void *bufs[MAX_BUFS];
static void *leaks[3];

NOINLINE static void grow_buffers(int n)
{
	for (int i = 0; i < n; i++) {
		bufs[i] = malloc(1000);
		PROG_CHECK(bufs[i]);
	}
}

NOINLINE static void make_temps(void)
{
	for (int i = 0; i < 5; i++) {
		void *p = malloc(64);
		PROG_CHECK(p);
		prog_sink(p);
		free(p);
	}
}

NOINLINE static void *make_peak(void)
{
	void *p = malloc(100000);
	PROG_CHECK(p);
	return p;
}

NOINLINE static void make_leak(void)
{
	for (int i = 0; i < 3; i++) {
		leaks[i] = malloc(300);
		PROG_CHECK(leaks[i]);
	}
}

int main(int argc, char **argv)
{
	int scale = argc > 1 ? atoi(argv[1]) : 1;
	PROG_CHECK(scale >= 1 && scale * 10 <= MAX_BUFS);
	grow_buffers(10 * scale);
	make_temps();
	void *big = make_peak();
	make_leak();
	prog_sink(leaks[2]);
	free(big);
	for (int i = 0; i < 5; i++)
		free(bufs[i]);
	return 0;
}
