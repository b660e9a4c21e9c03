/* Allocations before main (constructor) and after it (atexit, destructor). */
#include <stdlib.h>

static void *kept[3];

__attribute__((constructor)) static void early(void)
{
	kept[0] = malloc(9001);
}

static void at_exit(void)
{
	kept[1] = malloc(9002);
}

__attribute__((destructor)) static void late(void)
{
	kept[2] = malloc(9003);
}

int main(void)
{
	atexit(at_exit);
	void *p = malloc(9004);
	free(p);
	return 4;
}
