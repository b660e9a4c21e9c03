/*
 * rec_many.c - many small events for the lossy and buffer tests: argv[1]
 * times malloc(48) then free, so 2 x argv[1] heap events of size 48.
 */
#include <stdlib.h>

static void *volatile keep;

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	for (long i = 0; i < n; i++) {
		void *p = malloc(48);
		keep = p;
		free(p);
	}
	return 0;
}
