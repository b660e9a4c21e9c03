/*
 * leaky.c - leaks two blocks on known lines (for the leak gate): 1000 bytes
 * from main and 4000 bytes from leak_more(), and frees a third.
 */
#include <stdlib.h>
#include <string.h>

static void *volatile sink;

__attribute__((noinline)) static void leak_more(void)
{
	sink = malloc(4000); /* @leak-more */
}

int main(void)
{
	sink = malloc(1000); /* @leak-main */
	leak_more();
	free(malloc(300));
	return 0;
}
