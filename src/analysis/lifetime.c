/*
 * lifetime.c - the lifetime tracker of lifetime.h: an open-addressing hash
 * table of live blocks keyed by (process, heap, addr), with linear probing
 * and backward-shift deletion so it needs no tombstones and stays small.
 */
#include "analysis/lifetime.h"

#include <stdlib.h>
#include <string.h>

#include "base/vec.h"

struct block {
	uint64_t addr; /* 0: empty slot (no live block has address 0) */
	uint64_t heap;
	uint64_t size;
	uint64_t alloc_ts;
	uint32_t process;
	uint32_t stack;
	int32_t tid;
	uint8_t func;
	uint8_t from_realloc;
};

struct ht__life_tracker {
	ht__life_fn on_end;
	void *ctx;
	struct block *tab;
	uint64_t mask; /* table size - 1, size a power of two */
	struct ht__life_stats st;
	/* Live blocks per process image, so an image that ends with none (or
	   few) costs nothing (or stops early) instead of a scan of the table. */
	HT_VEC(uint64_t) per_proc;
};

#define MIN_SIZE 1024u

struct ht__life_tracker *ht__life_new(ht__life_fn on_end, void *ctx)
{
	struct ht__life_tracker *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->tab = calloc(MIN_SIZE, sizeof(*t->tab));
	if (!t->tab) {
		free(t);
		return NULL;
	}
	t->mask = MIN_SIZE - 1;
	t->on_end = on_end;
	t->ctx = ctx;
	return t;
}

/*
 * Slots follow addresses within each 16 MiB window (a block of 32 bytes or
 * more per 16-byte slot step, so a dense heap fills at most half of them),
 * and windows, heaps and processes land at random offsets. Neighbouring
 * blocks then share cache lines in the table: malloc reuses recently freed
 * memory, so most lookups hit lines that are already cached, where a fully
 * mixing hash would miss the cache on every event of a large trace.
 */
static uint64_t hash(uint32_t process, uint64_t heap, uint64_t addr)
{
	uint64_t h = (addr >> 24) ^ (heap * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)process << 40);
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return (addr >> 4) + h;
}

/* Slot of the block, or of the empty slot where it would go. */
static struct block *lookup(const struct ht__life_tracker *t, uint32_t process, uint64_t heap,
			    uint64_t addr)
{
	uint64_t i = hash(process, heap, addr) & t->mask;
	for (;;) {
		struct block *b = &t->tab[i];
		if (!b->addr || (b->addr == addr && b->process == process && b->heap == heap))
			return b;
		i = (i + 1) & t->mask;
	}
}

static int grow(struct ht__life_tracker *t)
{
	uint64_t size = (t->mask + 1) * 2;
	struct block *old = t->tab;
	uint64_t old_size = t->mask + 1;
	struct block *tab = calloc(size, sizeof(*tab));
	if (!tab)
		return HT_ERR_NOMEM;
	t->tab = tab;
	t->mask = size - 1;
	for (uint64_t i = 0; i < old_size; i++)
		if (old[i].addr)
			*lookup(t, old[i].process, old[i].heap, old[i].addr) = old[i];
	free(old);
	return 0;
}

/* Empties slot b, moving later entries of its probe run back into the gap. */
static void remove_slot(struct ht__life_tracker *t, struct block *b)
{
	uint64_t i = (uint64_t)(b - t->tab);
	uint64_t j = i;
	for (;;) {
		j = (j + 1) & t->mask;
		struct block *c = &t->tab[j];
		if (!c->addr)
			break;
		uint64_t home = hash(c->process, c->heap, c->addr) & t->mask;
		/* c may move to i when its home is not cyclically inside (i, j]. */
		if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
			t->tab[i] = *c;
			i = j;
		}
	}
	memset(&t->tab[i], 0, sizeof(t->tab[i]));
}

static void end_block(struct ht__life_tracker *t, struct block *b, uint64_t ts, int by_realloc,
		      int at_exit)
{
	t->st.live_count--;
	if (b->process < t->per_proc.len)
		t->per_proc.v[b->process]--;
	t->st.live_bytes -= b->size;
	if (t->on_end) {
		struct ht__life l = {
		    .heap = b->heap,
		    .addr = b->addr,
		    .size = b->size,
		    .alloc_ts = b->alloc_ts,
		    .free_ts = ts,
		    .process = b->process,
		    .stack = b->stack,
		    .tid = b->tid,
		    .func = b->func,
		    .from_realloc = b->from_realloc,
		    .freed_by_realloc = (uint8_t)by_realloc,
		    .at_exit = (uint8_t)at_exit,
		};
		t->on_end(t->ctx, &l);
	}
}

/* Frees (process, heap, addr) at ts; an unknown block is only counted. */
static void free_block(struct ht__life_tracker *t, const struct ht_event *ev, uint64_t addr,
		       int by_realloc)
{
	struct block *b = lookup(t, ev->process, ev->heap, addr);
	if (!b->addr) {
		t->st.unknown_frees++;
		return;
	}
	end_block(t, b, ev->ts, by_realloc, 0);
	remove_slot(t, b);
}

static int alloc_block(struct ht__life_tracker *t, const struct ht_event *ev, int from_realloc)
{
	if ((t->st.live_count + 1) * 10 > (t->mask + 1) * 7 && grow(t) < 0)
		return HT_ERR_NOMEM;
	if (ht__vec_grow_zero(&t->per_proc, (size_t)ev->process + 1) < 0)
		return HT_ERR_NOMEM;
	struct block *b = lookup(t, ev->process, ev->heap, ev->addr);
	if (b->addr) {
		/* Its free was never seen (a path we do not hook): it ended here. */
		end_block(t, b, ev->ts, 0, 0);
	}
	*b = (struct block){
	    .addr = ev->addr,
	    .heap = ev->heap,
	    .size = ev->size,
	    .alloc_ts = ev->ts,
	    .process = ev->process,
	    .stack = ev->stack,
	    .tid = ev->tid,
	    .func = ev->func,
	    .from_realloc = (uint8_t)from_realloc,
	};
	t->st.live_count++;
	t->per_proc.v[ev->process]++;
	t->st.live_bytes += ev->size;
	return 0;
}

/* Ends every live block of (process, heap): a custom heap was destroyed. */
static void destroy_heap(struct ht__life_tracker *t, const struct ht_event *ev)
{
	uint64_t i = 0;
	while (i <= t->mask) {
		struct block *b = &t->tab[i];
		if (b->addr && b->process == ev->process && b->heap == ev->heap) {
			end_block(t, b, ev->ts, 0, 0);
			remove_slot(t, b);
			continue; /* another entry may have moved into slot i */
		}
		i++;
	}
}

int ht__life_event(struct ht__life_tracker *t, const struct ht_event *ev)
{
	switch (ev->type) {
	case HT_EV_ALLOC:
		return ev->addr ? alloc_block(t, ev, 0) : 0;
	case HT_EV_FREE:
		if (ev->addr)
			free_block(t, ev, ev->addr, 0);
		return 0;
	case HT_EV_REALLOC:
		if (ev->flags & HT_EVF_FAILED)
			return 0; /* old_addr stays allocated as it was */
		if (ev->old_addr)
			free_block(t, ev, ev->old_addr, 1);
		return ev->addr ? alloc_block(t, ev, 1) : 0;
	case HT_EV_HEAP_DESTROY:
		destroy_heap(t, ev);
		return 0;
	default:
		return 0;
	}
}

struct live_ref {
	uint64_t ts;
	uint64_t slot;
};

static int live_cmp(const void *a, const void *b)
{
	const struct live_ref *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->slot < y->slot ? -1 : x->slot > y->slot;
}

void ht__life_finish(struct ht__life_tracker *t)
{
	/* Oldest first, so the order does not depend on the hash layout. */
	uint64_t n = t->st.live_count, bytes = t->st.live_bytes, k = 0;
	struct live_ref *refs = n ? malloc(n * sizeof(*refs)) : NULL;
	for (uint64_t i = 0; i <= t->mask; i++) {
		if (!t->tab[i].addr)
			continue;
		if (refs && k < n)
			refs[k++] = (struct live_ref){t->tab[i].alloc_ts, i};
		else
			end_block(t, &t->tab[i], HT_TS_NEVER, 0, 0); /* no memory to sort */
	}
	if (refs) {
		qsort(refs, k, sizeof(*refs), live_cmp);
		for (uint64_t i = 0; i < k; i++)
			end_block(t, &t->tab[refs[i].slot], HT_TS_NEVER, 0, 0);
		free(refs);
	}
	memset(t->tab, 0, (t->mask + 1) * sizeof(*t->tab));
	/* The stats keep describing the blocks live at the end. */
	t->st.live_count = n;
	t->st.live_bytes = bytes;
}

static int block_cmp(const void *a, const void *b)
{
	const struct block *x = a, *y = b;
	if (x->alloc_ts != y->alloc_ts)
		return x->alloc_ts < y->alloc_ts ? -1 : 1;
	if (x->heap != y->heap)
		return x->heap < y->heap ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int ht__life_end_process(struct ht__life_tracker *t, uint32_t process, uint64_t ts)
{
	uint64_t left = process < t->per_proc.len ? t->per_proc.v[process] : 0;
	/* Taken out first (removal moves entries), then ended oldest first. */
	HT_VEC(struct block) ended = {0};
	uint64_t i = 0;
	while (left && i <= t->mask) {
		struct block *b = &t->tab[i];
		if (b->addr && b->process == process) {
			if (ht__vec_push(&ended, *b) < 0) {
				ht__vec_release(&ended);
				return HT_ERR_NOMEM;
			}
			remove_slot(t, b);
			left--;
			continue; /* another entry may have moved into slot i */
		}
		i++;
	}
	if (ended.len)
		qsort(ended.v, ended.len, sizeof(*ended.v), block_cmp);
	for (size_t k = 0; k < ended.len; k++)
		end_block(t, &ended.v[k], ts, 0, 1);
	ht__vec_release(&ended);
	return 0;
}

const struct ht__life_stats *ht__life_stats(const struct ht__life_tracker *t)
{
	return &t->st;
}

void ht__life_free(struct ht__life_tracker *t)
{
	if (!t)
		return;
	free(t->tab);
	ht__vec_release(&t->per_proc);
	free(t);
}
