/*
 * own_malloc.c - a program whose allocator is inside the executable: it
 * defines malloc, free, calloc and realloc itself (a bump allocator) and
 * exports them, so they are found before the recorder's and no allocation
 * reaches it. `heaptrail record` must say so.
 */
#include <stddef.h>
#include <string.h>

static char arena[1 << 20];
static size_t used;

void *malloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (used + n > sizeof(arena))
		return NULL;
	void *p = arena + used;
	used += n;
	return p;
}

void free(void *p)
{
	(void)p;
}

void *calloc(size_t a, size_t b)
{
	void *p = malloc(a * b);
	if (p)
		memset(p, 0, a * b);
	return p;
}

void *realloc(void *old, size_t n)
{
	void *p = malloc(n);
	if (p && old)
		memcpy(p, old, n); /* the arena is contiguous: reading past old is fine */
	return p;
}

int main(void)
{
	for (int i = 0; i < 10; i++) {
		char *volatile p = malloc(123);
		free(p);
	}
	return 0;
}
