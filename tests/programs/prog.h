/*
 * prog.h - what the programs under test share: a sink that keeps the compiler
 * from removing allocations it could prove unused, and a fatal check. The
 * programs are recorded end to end by tests/cli/; their counts, sizes and
 * function names are the expected values there, so change both together.
 */
#ifndef HT_TEST_PROG_H
#define HT_TEST_PROG_H

#include <stdio.h>
#include <stdlib.h>

/* Publishes a pointer through a volatile global: the allocation is observable. */
static void *volatile prog_sink_slot;
static inline void prog_sink(void *p)
{
	prog_sink_slot = p;
}

#define PROG_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
			exit(99);                                                                  \
		}                                                                                  \
	} while (0)

#define NOINLINE __attribute__((noinline))

#endif
