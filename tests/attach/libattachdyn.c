/*
 * libattachdyn.c - a module the waiter loads only after heaptrail attached:
 * its own calls to malloc must be traced too (its GOT is redirected when
 * dlopen returns).
 */
#include <stdlib.h>

int attachdyn_work(int n)
{
	int sum = 0;
	for (int i = 0; i < n; i++) {
		volatile char *p = malloc(23456);
		if (!p)
			return -1;
		p[0] = (char)i;
		sum += p[0];
		free((void *)p);
	}
	return sum;
}
