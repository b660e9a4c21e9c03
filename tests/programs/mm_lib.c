/*
 * mm_lib.c - libhtmm.so, which many_modules loads under thousands of names:
 * mm_alloc(n) allocates n bytes from its own frame.
 */
#include <stdlib.h>

#include "prog.h"

__attribute__((visibility("default"))) NOINLINE void *mm_alloc(size_t n)
{
	return malloc(n); /* @mm_alloc */
}
