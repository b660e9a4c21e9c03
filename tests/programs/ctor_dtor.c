/*
 * ctor_dtor.c - allocations outside main, for tests/cli/: a constructor that
 * runs before main allocates 2 blocks of 7007 (frees one), main allocates 1
 * block of 100 and registers an atexit handler that allocates 1 block of 8008,
 * and a destructor that runs after exit allocates 1 block of 9009 and frees
 * it. The recorder must be ready before the first and still there after the
 * last.
 */
#include <stdlib.h>

#include "prog.h"

static void *early_kept;

NOINLINE static void *early_alloc(void)
{
	return malloc(7007); /* @early_alloc */
}

__attribute__((constructor)) static void before_main(void)
{
	early_kept = early_alloc();
	free(early_alloc());
}

NOINLINE static void at_exit_alloc(void)
{
	prog_sink(malloc(8008)); /* @at_exit_alloc */
}

__attribute__((destructor)) static void after_exit(void)
{
	void *p = malloc(9009); /* @after_exit */
	prog_sink(p);
	free(p);
}

int main(void)
{
	prog_sink(malloc(100));
	PROG_CHECK(atexit(at_exit_alloc) == 0);
	return 0;
}
