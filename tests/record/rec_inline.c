/*
 * rec_inline.c - an allocation inside an inlined function, for the symbol
 * tests: built with -O2, inner_alloc() is inlined into outer_fn(), so the
 * return address of malloc resolves to two logical frames. 4 x 4321 bytes.
 */
#include <stdlib.h>

static void *volatile keep;

static inline __attribute__((always_inline)) void *inner_alloc(size_t n)
{
	return malloc(n); /* line 12 */
}

__attribute__((noinline)) void *outer_fn(size_t n)
{
	void *p = inner_alloc(n); /* line 17 */
	keep = p;
	return p;
}

int main(void)
{
	for (int i = 0; i < 4; i++)
		outer_fn(4321);
	return 0;
}
