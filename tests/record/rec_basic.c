/*
 * rec_basic.c - a program with known allocations for the record tests:
 * 12 x make_block(1000 + i), 6 of them freed; calloc(3, 333); realloc(NULL,
 * 777) grown to 7777; then exits with the code in argv[1], or aborts when
 * argv[1] is "abort".
 */
#include <stdlib.h>
#include <string.h>

static void *volatile keep;

__attribute__((noinline)) void *make_block(size_t n)
{
	void *p = malloc(n);
	keep = p;
	return p;
}

int main(int argc, char **argv)
{
	void *p[12];
	for (int i = 0; i < 12; i++)
		p[i] = make_block(1000 + (size_t)i);
	for (int i = 0; i < 12; i += 2)
		free(p[i]);
	void *c = calloc(3, 333);
	void *r = realloc(NULL, 777);
	r = realloc(r, 7777);
	keep = c;
	keep = r;
	free(c);
	free(r);
	if (argc > 1 && !strcmp(argv[1], "abort"))
		abort();
	return argc > 1 ? atoi(argv[1]) : 0;
}
