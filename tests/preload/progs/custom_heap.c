/*
 * A toy pool declared through heaptrail/heap.h: create, 3 allocs, a realloc,
 * 2 frees, destroy. Runs the same with or without the recorder.
 */
#include <heaptrail/heap.h>
#include <stdio.h>

static char pool[4096];

int main(void)
{
	ht_heap_create(pool, "toy pool");
	char *a = pool, *b = pool + 100, *c = pool + 300;
	ht_heap_alloc(pool, a, 100);
	ht_heap_alloc(pool, b, 200);
	ht_heap_alloc(pool, c, 300);
	ht_heap_realloc(pool, c, pool + 1000, 600);
	ht_heap_alloc(pool, NULL, 99999);
	ht_heap_free(pool, a);
	ht_heap_free(pool, b);
	ht_heap_destroy(pool);
	printf("%d\n", ht_heap_traced());
	return 0;
}
