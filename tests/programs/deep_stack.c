/*
 * deep_stack.c - allocations 100 calls deep, as an interpreter's are (a
 * Python trace's stacks are hundreds of frames), for the report's browser
 * test: its flame graph is taller than the page's flame box. dive() recurses
 * to depth 100 and mallocs 1000 bytes there, and 500 bytes at depth 50 on
 * the way back; nothing is freed.
 */
#include "prog.h"

#define DEPTH 100

NOINLINE static void dive(int depth)
{
	if (depth == DEPTH) {
		prog_sink(malloc(1000));
		return;
	}
	dive(depth + 1);
	if (depth == DEPTH / 2)
		prog_sink(malloc(500));
}

int main(void)
{
	dive(1);
	return 0;
}
