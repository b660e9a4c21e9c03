/*
 * child_prog.c - started by spawn_tree through posix_spawn and fork + exec:
 * allocates N blocks of 3333 bytes (N = argv[1]), frees none, and exits with
 * status N so the tests can tell the children apart by exit code.
 */
#include <stdlib.h>

#include "prog.h"

NOINLINE static void child_alloc(int n)
{
	for (int i = 0; i < n; i++)
		prog_sink(malloc(3333)); /* @child_alloc */
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	child_alloc(n);
	return n;
}
