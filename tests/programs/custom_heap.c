/*
 * custom_heap.c - a fixed-size pool allocator that declares itself through
 * include/heaptrail/heap.h, for tests/cli/. Pool "test pool": 6 allocations of
 * 48 bytes (pool_alloc), 2 freed, 1 resized to 96 (a new slot), 1 request of
 * 4096 that fails, then destroyed with 4 blocks still in it. Pool "second
 * pool": 2 allocations of 16, both freed, destroyed empty. The heap handle of
 * each pool is its address, printed as "test pool=0x..." on stdout.
 */
#include <stdint.h>
#include <string.h>

#include "heaptrail/heap.h"
#include "prog.h"

#define SLOT 128
#define SLOTS 16

struct pool {
	char mem[SLOTS][SLOT];
	unsigned char used[SLOTS];
};

NOINLINE static void pool_init(struct pool *p, const char *name)
{
	memset(p, 0, sizeof(*p));
	ht_heap_create(p, name); /* @pool_init */
}

NOINLINE static void *pool_alloc(struct pool *p, size_t n)
{
	void *r = NULL;
	if (n <= SLOT) {
		for (int i = 0; i < SLOTS && !r; i++) {
			if (!p->used[i]) {
				p->used[i] = 1;
				r = p->mem[i];
			}
		}
	}
	ht_heap_alloc(p, r, n); /* @pool_alloc */
	return r;
}

NOINLINE static void pool_free(struct pool *p, void *r)
{
	ht_heap_free(p, r);
	p->used[((char *)r - p->mem[0]) / SLOT] = 0;
}

NOINLINE static void *pool_realloc(struct pool *p, void *old, size_t n)
{
	void *r = NULL;
	for (int i = 0; i < SLOTS && !r; i++) {
		if (!p->used[i]) {
			p->used[i] = 1;
			r = p->mem[i];
		}
	}
	PROG_CHECK(r && n <= SLOT);
	memcpy(r, old, SLOT);
	p->used[((char *)old - p->mem[0]) / SLOT] = 0;
	ht_heap_realloc(p, old, r, n);
	return r;
}

NOINLINE static void pool_destroy(struct pool *p)
{
	ht_heap_destroy(p);
}

static struct pool first, second;

int main(void)
{
	PROG_CHECK(ht_heap_traced() || 1);
	pool_init(&first, "test pool");
	pool_init(&second, "second pool");
	printf("test pool=%#lx second pool=%#lx\n", (unsigned long)(uintptr_t)&first,
	       (unsigned long)(uintptr_t)&second);
	fflush(stdout);

	void *b[6];
	for (int i = 0; i < 6; i++)
		b[i] = pool_alloc(&first, 48);
	pool_free(&first, b[1]);
	pool_free(&first, b[4]);
	b[0] = pool_realloc(&first, b[0], 96);
	PROG_CHECK(pool_alloc(&first, 4096) == NULL);

	void *c = pool_alloc(&second, 16), *d = pool_alloc(&second, 16);
	pool_free(&second, c);
	pool_free(&second, d);

	pool_destroy(&first);
	pool_destroy(&second);
	return 0;
}
