/* A library the stack cache test loads, unloads and loads again: its frames
   sit between the program's, and it calls back into the program. */
#include <stdlib.h>

__attribute__((noinline)) void *stack_dso_chain(int depth, void *(*back)(int))
{
	if (depth > 0) {
		void *volatile p = stack_dso_chain(depth - 1, back);
		return p;
	}
	return back ? back(3) : malloc(9101);
}
