/*
 * static_prog.c - built statically linked (no dynamic linker, so no
 * LD_PRELOAD): `heaptrail record` must say it cannot be traced. It makes 10
 * allocations of 123 bytes, which no trace can show.
 */
#include <stdlib.h>

int main(void)
{
	for (int i = 0; i < 10; i++) {
		char *volatile p = malloc(123);
		free(p);
	}
	return 0;
}
