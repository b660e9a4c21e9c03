/* A library that allocates in its constructor and on request (dlopen test). */
#include <stdlib.h>

void *dso_kept;

__attribute__((constructor)) static void dso_init(void)
{
	dso_kept = malloc(8001);
}

__attribute__((noinline)) void *dso_alloc(void)
{
	return malloc(8002);
}

__attribute__((destructor)) static void dso_fini(void)
{
	free(dso_kept);
}
