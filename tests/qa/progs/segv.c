/* segv N: N mallocs of 2468 bytes (kept), a line on stdout, then SIGSEGV. */
#include <stdio.h>
#include <stdlib.h>

static void *kept[100000];

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	for (int i = 0; i < n && i < 100000; i++)
		kept[i] = malloc(2468);
	printf("before crash\n");
	fflush(stdout);
	*(volatile int *)(argc > 1000 ? (void *)argv[0] : NULL) = 1;
	return 0;
}
