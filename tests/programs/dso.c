/*
 * dso.c - libhtdso.so, the shared library dlopen_prog loads: its constructor
 * allocates 2 blocks of 4321 bytes (one kept, one freed in the destructor) and
 * dso_alloc() allocates n blocks of 1234 that the caller frees.
 */
#include <stdlib.h>

#include "prog.h"

static void *kept[2];

NOINLINE static void *dso_ctor_alloc(void)
{
	return malloc(4321); /* @dso_ctor_alloc */
}

__attribute__((constructor)) static void dso_init(void)
{
	kept[0] = dso_ctor_alloc();
	kept[1] = dso_ctor_alloc();
}

__attribute__((destructor)) static void dso_fini(void)
{
	free(kept[1]);
	kept[1] = NULL;
}

__attribute__((visibility("default"))) void *dso_alloc(void)
{
	return malloc(1234); /* @dso_alloc */
}
