/*
 * lifetime.c - the lifetime tracker of lifetime.h: live blocks as compact
 * 28-byte records in pages, found through an open-addressing index keyed by
 * (process, heap, addr) with a fully mixing hash, linear probing and
 * backward-shift deletion (no tombstones). About 45 to 60 bytes per live
 * block in all (index and record), whatever the number of events.
 */
#define _GNU_SOURCE /* qsort_r */
#include "analysis/lifetime.h"

#include <stdlib.h>
#include <string.h>

#include "base/vec.h"

/*
 * A live block. What varies little between blocks (process, heap, thread,
 * allocating function) is one "owner" id; sizes of 2 GiB or more live in a
 * side table (the size field then holds BIG | its index there).
 */
struct __attribute__((packed, aligned(4))) rec {
	uint64_t addr; /* 0: a free record (next free in .owner) */
	uint64_t alloc_ts;
	uint32_t stack;
	uint32_t size;
	uint32_t owner;
};

#define BIG 0x80000000u

struct owner {
	uint64_t heap;
	uint32_t process;
	int32_t tid;
	uint8_t func;
	uint8_t from_realloc;
};

/* Records come in pages, so growing never copies them or doubles the memory. */
#define PAGE_BITS 15
#define PAGE_RECS (1u << PAGE_BITS)
#define NO_REC UINT32_MAX

struct ht__life_tracker {
	ht__life_fn on_end;
	void *ctx;
	int unfreed_only; /* ht__life_unfreed_only() */
	/* index: per slot the low 32 bits of the block's hash (its home slot,
	   and a tag that spares reading records that do not match) above its
	   record number + 1; 0 empty; at most half full, a quarter while small
	   (QUARTER_SLOTS: linear probing on a dense heap needs the room; at 3/4
	   python's lookups took 40% longer) */
	uint64_t *slots;
	uint64_t mask;
	HT_VEC(struct rec *) pages;
	uint32_t nrecs;	    /* records handed out from the pages so far */
	uint32_t free_head; /* a record to reuse, NO_REC: none */
	HT_VEC(struct owner) owners;
	struct ht__hindex owner_ix;
	uint32_t last_owner;   /* + 1; 0: none yet */
	HT_VEC(uint64_t) bigs; /* sizes >= BIG; a free entry holds the next free */
	uint64_t big_free;     /* + 1; 0: none */
	struct ht__life_stats st;
	/* Live blocks per process image, so an image that ends with none (or
	   few) costs nothing (or stops early) instead of a scan of the records. */
	HT_VEC(uint64_t) per_proc;
};

#define MIN_SLOTS 1024u
/*
 * An index under this many slots (4 MiB) is kept at most a quarter full,
 * larger ones half full: a heap's blocks fill runs of neighbouring slots
 * (hash() below), and at half full they merge into runs long enough that
 * python's lookups took 10 probes (the pass's thread: 1347 M -> 1184 M
 * instructions at a quarter). Past 131072 live blocks the memory counts
 * more (jq: 3.4 million blocks, a 64 MiB index at half full).
 */
#define QUARTER_SLOTS (1u << 19)

struct ht__life_tracker *ht__life_new(ht__life_fn on_end, void *ctx)
{
	struct ht__life_tracker *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->slots = calloc(MIN_SLOTS, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return NULL;
	}
	t->mask = MIN_SLOTS - 1;
	t->free_head = NO_REC;
	t->on_end = on_end;
	t->ctx = ctx;
	return t;
}

static inline struct rec *rec_at(const struct ht__life_tracker *t, uint32_t i)
{
	return &t->pages.v[i >> PAGE_BITS][i & (PAGE_RECS - 1)];
}

static inline const struct owner *owner_of(const struct ht__life_tracker *t, const struct rec *r)
{
	return &t->owners.v[r->owner];
}

static inline uint64_t size_of(const struct ht__life_tracker *t, const struct rec *r)
{
	return r->size & BIG ? t->bigs.v[r->size & ~BIG] : r->size;
}

/*
 * Each 4 KiB page of a heap gets a random home in the index, and the blocks
 * in it follow their address from there (a slot per 16 bytes). Blocks that
 * are near in memory (a structure freed in the order it was built, malloc
 * reusing what was just freed) then share cache lines of the index, and
 * pages spread like random keys. A hash that kept addresses in order over
 * 16 MiB made probe runs merge into runs of millions on a large dense heap
 * (jq: 3.4 million live blocks, 95% of the time in lookups).
 */
static inline uint64_t hash(uint32_t process, uint64_t heap, uint64_t addr)
{
	return ht__mix64((addr >> 12) ^ (heap * 0x9e3779b97f4a7c15ull) ^
			 ((uint64_t)process << 47)) +
	       ((addr >> 4) & 255);
}

#define SLOT_REC(s) ((uint32_t)(s)-1)
#define SLOT_HOME(s) ((s) >> 32)
#define SLOT(h, rec) ((uint64_t)(uint32_t)(h) << 32 | ((uint64_t)(rec) + 1))

/* Slot of the block whose hash() is h, or of the empty slot where it would go. */
static uint64_t *lookup_hashed(const struct ht__life_tracker *t, uint64_t h, uint32_t process,
			       uint64_t heap, uint64_t addr)
{
	uint64_t i = h & t->mask;
	uint32_t tag = (uint32_t)h;
	for (;;) {
		uint64_t *s = &t->slots[i];
		if (!*s)
			return s;
		if ((uint32_t)SLOT_HOME(*s) != tag) {
			i = (i + 1) & t->mask;
			continue;
		}
		const struct rec *r = rec_at(t, SLOT_REC(*s));
		if (r->addr == addr) {
			const struct owner *o = owner_of(t, r);
			if (o->process == process && o->heap == heap)
				return s;
		}
		i = (i + 1) & t->mask;
	}
}

/* Slot of the block, or of the empty slot where it would go. */
static uint64_t *lookup(const struct ht__life_tracker *t, uint32_t process, uint64_t heap,
			uint64_t addr)
{
	return lookup_hashed(t, hash(process, heap, addr), process, heap, addr);
}

static int grow_index(struct ht__life_tracker *t)
{
	uint64_t size = (t->mask + 1) * 2, old_size = t->mask + 1;
	uint64_t *old = t->slots;
	uint64_t *slots = calloc(size, sizeof(*slots));
	if (!slots)
		return HT_ERR_NOMEM;
	t->slots = slots;
	t->mask = size - 1;
	for (uint64_t i = 0; i < old_size; i++) {
		if (!old[i])
			continue;
		uint64_t j = SLOT_HOME(old[i]) & t->mask;
		while (slots[j])
			j = (j + 1) & t->mask;
		slots[j] = old[i];
	}
	free(old);
	return 0;
}

/* Empties slot s, moving later entries of its probe run back into the gap. */
static void remove_slot(struct ht__life_tracker *t, uint64_t *s)
{
	uint64_t i = (uint64_t)(s - t->slots);
	uint64_t j = i;
	for (;;) {
		j = (j + 1) & t->mask;
		uint64_t c = t->slots[j];
		if (!c)
			break;
		uint64_t home = SLOT_HOME(c) & t->mask;
		/* c may move to i when its home is not cyclically inside (i, j]. */
		if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
			t->slots[i] = c;
			i = j;
		}
	}
	t->slots[i] = 0;
}

/* A record to fill, or NO_REC when out of memory. */
static uint32_t rec_new(struct ht__life_tracker *t)
{
	if (t->free_head != NO_REC) {
		uint32_t i = t->free_head;
		t->free_head = rec_at(t, i)->owner;
		return i;
	}
	if (t->nrecs == NO_REC)
		return NO_REC;
	if (!(t->nrecs & (PAGE_RECS - 1)) && (t->nrecs >> PAGE_BITS) == t->pages.len) {
		struct rec *pg = malloc(PAGE_RECS * sizeof(*pg));
		if (!pg || ht__vec_push(&t->pages, pg) < 0) {
			free(pg);
			return NO_REC;
		}
	}
	return t->nrecs++;
}

static void rec_release(struct ht__life_tracker *t, uint32_t i)
{
	struct rec *r = rec_at(t, i);
	if (r->size & BIG) {
		uint32_t b = r->size & ~BIG;
		t->bigs.v[b] = t->big_free;
		t->big_free = (uint64_t)b + 1;
	}
	r->addr = 0;
	r->owner = t->free_head;
	t->free_head = i;
}

static uint64_t owner_hash(const void *ctx, uint32_t id)
{
	const struct owner *o = &((const struct ht__life_tracker *)ctx)->owners.v[id];
	return ht__mix64(o->heap ^ ((uint64_t)o->process << 32 | (uint32_t)o->tid) ^
			 ((uint64_t)o->func << 56) ^ ((uint64_t)o->from_realloc << 48));
}

static int same_owner(const struct owner *a, const struct owner *b)
{
	return a->heap == b->heap && a->process == b->process && a->tid == b->tid &&
	       a->func == b->func && a->from_realloc == b->from_realloc;
}

/* The owner id of o (interned), or NO_REC when out of memory. */
static uint32_t owner_id(struct ht__life_tracker *t, const struct owner *o)
{
	if (t->last_owner && same_owner(&t->owners.v[t->last_owner - 1], o))
		return t->last_owner - 1;
	if (ht__vec_push(&t->owners, *o) < 0)
		return NO_REC;
	uint32_t id = (uint32_t)t->owners.len - 1;
	uint64_t h = owner_hash(t, id);
	for (uint32_t *s = ht__hindex_find(&t->owner_ix, h); *s;
	     s = ht__hindex_next(&t->owner_ix, s))
		if (same_owner(&t->owners.v[*s - 1], o)) {
			t->owners.len--;
			t->last_owner = *s;
			return *s - 1;
		}
	if (ht__hindex_insert(&t->owner_ix, h, id, owner_hash, t) < 0) {
		t->owners.len--;
		return NO_REC;
	}
	t->last_owner = id + 1;
	return id;
}

static struct ht__life life_of(const struct ht__life_tracker *t, const struct rec *r, uint64_t ts,
			       int by_realloc, int at_exit)
{
	const struct owner *o = owner_of(t, r);
	return (struct ht__life){
	    .heap = o->heap,
	    .addr = r->addr,
	    .size = size_of(t, r),
	    .count = 1,
	    .block_size = size_of(t, r),
	    .alloc_ts = r->alloc_ts,
	    .free_ts = ts,
	    .process = o->process,
	    .stack = r->stack,
	    .tid = o->tid,
	    .func = o->func,
	    .from_realloc = o->from_realloc,
	    .freed_by_realloc = (uint8_t)by_realloc,
	    .at_exit = (uint8_t)at_exit,
	};
}

static void end_rec(struct ht__life_tracker *t, const struct rec *r, uint64_t ts, int by_realloc,
		    int at_exit)
{
	const struct owner *o = owner_of(t, r);
	uint64_t size = size_of(t, r);
	t->st.live_count--;
	if (o->process < t->per_proc.len)
		t->per_proc.v[o->process]--;
	t->st.live_bytes -= size;
	if (t->on_end && (!t->unfreed_only || at_exit || ts == HT_TS_NEVER)) {
		struct ht__life l = life_of(t, r, ts, by_realloc, at_exit);
		t->on_end(t->ctx, &l);
	}
}

void ht__life_each_live(const struct ht__life_tracker *t, ht__life_fn fn, void *ctx)
{
	for (uint32_t i = 0; i < t->nrecs; i++) {
		const struct rec *r = rec_at(t, i);
		if (r->addr) {
			struct ht__life l = life_of(t, r, HT_TS_NEVER, 0, 0);
			fn(ctx, &l);
		}
	}
}

/* Ends the block in slot s and forgets it. */
static void end_slot(struct ht__life_tracker *t, uint64_t *s, uint64_t ts, int by_realloc)
{
	uint32_t i = SLOT_REC(*s);
	end_rec(t, rec_at(t, i), ts, by_realloc, 0);
	remove_slot(t, s);
	rec_release(t, i);
}

/* Frees (process, heap, addr) at ts; an unknown block is only counted. */
static void free_block(struct ht__life_tracker *t, const struct ht_event *ev, uint64_t addr,
		       int by_realloc)
{
	uint64_t *s = lookup(t, ev->process, ev->heap, addr);
	if (!*s) {
		t->st.unknown_frees++;
		return;
	}
	end_slot(t, s, ev->ts, by_realloc);
}

static int alloc_block(struct ht__life_tracker *t, const struct ht_event *ev, int from_realloc)
{
	if ((t->st.live_count + 1) * (t->mask < QUARTER_SLOTS ? 4 : 2) > t->mask + 1 &&
	    grow_index(t) < 0)
		return HT_ERR_NOMEM;
	if (ht__vec_grow_zero(&t->per_proc, (size_t)ev->process + 1) < 0)
		return HT_ERR_NOMEM;
	uint64_t h = hash(ev->process, ev->heap, ev->addr);
	uint64_t *s = lookup_hashed(t, h, ev->process, ev->heap, ev->addr);
	if (*s) {
		/* Its free was never seen (a path we do not hook): it ended here. */
		end_slot(t, s, ev->ts, 0);
		s = lookup_hashed(t, h, ev->process, ev->heap, ev->addr);
	}
	struct owner o = {ev->heap, ev->process, ev->tid, ev->func, (uint8_t)from_realloc};
	uint32_t oid = owner_id(t, &o);
	uint32_t size = (uint32_t)ev->size;
	if (ev->size >= BIG) {
		uint64_t b = t->big_free;
		if (b) {
			t->big_free = t->bigs.v[b - 1];
			t->bigs.v[b - 1] = ev->size;
		} else if (t->bigs.len < BIG && ht__vec_push(&t->bigs, ev->size) == 0) {
			b = t->bigs.len;
		} else {
			return HT_ERR_NOMEM;
		}
		size = BIG | (uint32_t)(b - 1);
	}
	uint32_t i = oid == NO_REC ? NO_REC : rec_new(t);
	if (i == NO_REC)
		return HT_ERR_NOMEM;
	struct rec *r = rec_at(t, i);
	r->addr = ev->addr;
	r->alloc_ts = ev->ts;
	r->stack = ev->stack;
	r->size = size;
	r->owner = oid;
	*s = SLOT(h, i);
	t->st.live_count++;
	t->per_proc.v[ev->process]++;
	t->st.live_bytes += ev->size;
	return 0;
}

static int destroy_heap(struct ht__life_tracker *t, const struct ht_event *ev);

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
		return destroy_heap(t, ev);
	default:
		return 0;
	}
}

/* Oldest first, then by heap and address: an order that does not depend on
   where the records or the index put the blocks. */
static int rec_cmp(const void *a, const void *b, void *ctx)
{
	const struct ht__life_tracker *t = ctx;
	const struct rec *x = rec_at(t, *(const uint32_t *)a), *y = rec_at(t, *(const uint32_t *)b);
	if (x->alloc_ts != y->alloc_ts)
		return x->alloc_ts < y->alloc_ts ? -1 : 1;
	uint64_t xh = owner_of(t, x)->heap, yh = owner_of(t, y)->heap;
	if (xh != yh)
		return xh < yh ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Which live blocks live_sorted() takes. */
struct pick {
	int all;	  /* every block */
	int by_heap;	  /* only those of heap */
	uint32_t process; /* else those of process */
	uint64_t heap;
};

static int picked(const struct ht__life_tracker *t, const struct rec *r, const struct pick *p)
{
	if (!r->addr)
		return 0;
	if (p->all)
		return 1;
	const struct owner *o = owner_of(t, r);
	return o->process == p->process && (!p->by_heap || o->heap == p->heap);
}

/*
 * The live records p picks (at most n), oldest first, in *out (free()d by
 * the caller). Returns their count, or -1 when out of memory.
 */
static int64_t live_sorted(struct ht__life_tracker *t, const struct pick *p, uint64_t n,
			   uint32_t **out)
{
	uint32_t *v = n ? malloc(n * sizeof(*v)) : NULL;
	if (n && !v)
		return -1;
	uint64_t k = 0;
	for (uint32_t i = 0; i < t->nrecs && k < n; i++)
		if (picked(t, rec_at(t, i), p))
			v[k++] = i;
	if (k)
		qsort_r(v, k, sizeof(*v), rec_cmp, t);
	*out = v;
	return (int64_t)k;
}

/* Ends the records v[0 .. k) at ts, in that order, and forgets them. */
static void end_all(struct ht__life_tracker *t, const uint32_t *v, int64_t k, uint64_t ts,
		    int at_exit)
{
	for (int64_t i = 0; i < k; i++) {
		const struct rec *r = rec_at(t, v[i]);
		const struct owner *o = owner_of(t, r);
		uint64_t *s = lookup(t, o->process, o->heap, r->addr);
		end_rec(t, r, ts, 0, at_exit);
		remove_slot(t, s);
		rec_release(t, v[i]);
	}
}

static void reset(struct ht__life_tracker *t)
{
	memset(t->slots, 0, (t->mask + 1) * sizeof(*t->slots));
	for (size_t i = 0; i < t->pages.len; i++)
		free(t->pages.v[i]);
	t->pages.len = 0;
	t->nrecs = 0;
	t->free_head = NO_REC;
	t->bigs.len = 0;
	t->big_free = 0;
}

/* Ends every live block of (process, heap), oldest first: a custom heap was
   destroyed. Returns 0 or HT_ERR_NOMEM. */
static int destroy_heap(struct ht__life_tracker *t, const struct ht_event *ev)
{
	uint64_t left = ev->process < t->per_proc.len ? t->per_proc.v[ev->process] : 0;
	if (!left)
		return 0;
	uint32_t *v = NULL;
	struct pick pk = {.by_heap = 1, .process = ev->process, .heap = ev->heap};
	int64_t k = live_sorted(t, &pk, left, &v);
	if (k < 0)
		return HT_ERR_NOMEM;
	end_all(t, v, k, ev->ts, 0);
	free(v);
	return 0;
}

void ht__life_finish(struct ht__life_tracker *t)
{
	uint64_t n = t->st.live_count, bytes = t->st.live_bytes;
	uint32_t *v = NULL;
	struct pick all = {.all = 1};
	int64_t k = live_sorted(t, &all, n, &v);
	if (k < 0) {
		/* No memory to sort: in record order. */
		for (uint32_t i = 0; i < t->nrecs; i++)
			if (rec_at(t, i)->addr)
				end_rec(t, rec_at(t, i), HT_TS_NEVER, 0, 0);
	}
	for (int64_t i = 0; i < k; i++)
		end_rec(t, rec_at(t, v[i]), HT_TS_NEVER, 0, 0);
	free(v);
	reset(t);
	/* The stats keep describing the blocks live at the end. */
	t->st.live_count = n;
	t->st.live_bytes = bytes;
}

int ht__life_end_process(struct ht__life_tracker *t, uint32_t process, uint64_t ts)
{
	uint64_t left = process < t->per_proc.len ? t->per_proc.v[process] : 0;
	if (!left)
		return 0;
	uint32_t *v = NULL;
	struct pick pk = {.process = process};
	int64_t k = live_sorted(t, &pk, left, &v);
	if (k < 0)
		return HT_ERR_NOMEM;
	end_all(t, v, k, ts, 1);
	free(v);
	return 0;
}

void ht__life_unfreed_only(struct ht__life_tracker *t)
{
	t->unfreed_only = 1;
}

const struct ht__life_stats *ht__life_stats(const struct ht__life_tracker *t)
{
	return &t->st;
}

void ht__life_free(struct ht__life_tracker *t)
{
	if (!t)
		return;
	free(t->slots);
	for (size_t i = 0; i < t->pages.len; i++)
		free(t->pages.v[i]);
	ht__vec_release(&t->pages);
	ht__vec_release(&t->owners);
	ht__hindex_release(&t->owner_ix);
	ht__vec_release(&t->bigs);
	ht__vec_release(&t->per_proc);
	free(t);
}
