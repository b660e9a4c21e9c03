/*
 * lifetime.c - the lifetime tracker of lifetime.h: live blocks kept by the
 * 4 KiB page of their heap they start in. A small index finds a page by
 * (process, heap, address), and the page holds its blocks as 8-byte
 * entries: the offset in the page, the allocation time as a delta from the
 * page's first, and a "site" (owner, stack and size, interned: blocks of a
 * dense heap share few). About 10 bytes per live block on a dense heap,
 * whatever the number of events.
 */
#define _GNU_SOURCE /* qsort_r */
#include "analysis/lifetime.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "base/vec.h"

/* What varies little between blocks: process, heap, thread, function. */
struct owner {
	uint64_t heap;
	uint32_t process;
	int32_t tid;
	uint8_t func;
	uint8_t from_realloc;
};

/*
 * What blocks share: who made them (owner), where (stack), how large. A site
 * counts the live blocks that name it; one that has none stays in the index
 * (the same site often comes back: a loop's malloc and free) until dead ones
 * outnumber the live, then sweep_sites() frees them, so the table follows
 * the live blocks, not the events.
 */
struct site {
	uint64_t size;
	uint32_t stack; /* the next free site, for one on the free list */
	uint32_t owner; /* NO_ID: on the free list */
	uint32_t live;
};

#define NO_ID UINT32_MAX
#define PAGE_SHIFT 12
#define PAGE_MASK ((1u << PAGE_SHIFT) - 1)
#define OFF_ESC 0x8000u	 /* the entry's time and site are in t->esc, at index dt */
#define OFF_MASK 0x7fffu /* an entry's offset without OFF_ESC (find()) */
#define OFF_NONE 0xffffu /* past the last entry: matches no offset under OFF_MASK */
#define SITE_ESC 0xffffu /* site ids from here on are kept in t->esc */
#define FREE_PAGE 1	 /* struct page.addr of a page on the free list */
#define MAX_CAP (PAGE_MASK + 1)
/* A page's room shrinks only above this many entries (remove_entry()): at most
   256 bytes of arrays (512 with times) for a page's last block. */
#define SHRINK_MIN 64

/*
 * A page's live blocks, in no order: entry i is at addr + (off[i] &
 * PAGE_MASK), allocated at ts_base + dt[i] * unit, of site site[i]; or, when
 * off[i] has OFF_ESC, at the time and of the site kept in esc[dt[i]] (a
 * time before ts_base, too far after it or not a multiple of the unit, or a
 * site id from SITE_ESC on). The three arrays are one allocation of cap
 * entries, the offsets rounded up to 8 (find() reads vectors of 8; offsets
 * past n are OFF_NONE). dt[] holds 2 bytes an entry until a value needs
 * more (a page that fills within 65536 units of its first block: jq's
 * 3.4 million blocks live took 13.7 MB at 4 bytes), then 4 (wide): 6 or 8
 * bytes an entry. A tracker without times (ht__life_no_times()) has no
 * dt[]: 4 bytes an entry, and no OFF_ESC.
 */
struct page {
	uint64_t addr; /* FREE_PAGE: unused, heap then holds the next free page */
	uint64_t heap;
	uint64_t ts_base;
	uint32_t process;
	uint16_t n, cap;
	uint16_t *mem; /* off[cap rounded up to 8], then site[cap], then dt[cap] (2 or 4 bytes) */
	uint8_t wide;  /* dt[] of 4 bytes an entry */
	/* bit k: an entry at offset 16 k (malloc's alignment) is live. An
	   allocation at such an offset whose bit is clear, or a free, needs no
	   scan of the offsets (python: the scans were 17 % of the pass);
	   entries at other offsets are only found by scanning. */
	uint64_t at16[(PAGE_MASK + 1) / 16 / 64];
};

/* Whether an entry at offset off may be live: 0 when it cannot be. */
static inline int maybe_at(const struct page *p, uint32_t off)
{
	return (int)((p->at16[off >> 10] >> (off >> 4 & 63) & 1) | ((off & 15) != 0));
}

static inline void mark_at(struct page *p, uint32_t off)
{
	if (!(off & 15))
		p->at16[off >> 10] |= 1ull << (off >> 4 & 63);
}

static inline void unmark_at(struct page *p, uint32_t off)
{
	if (!(off & 15))
		p->at16[off >> 10] &= ~(1ull << (off >> 4 & 63));
}

static inline uint16_t *offs(const struct page *p)
{
	return p->mem;
}

static inline uint16_t *sites_of(const struct page *p)
{
	return p->mem + ((p->cap + 7) & ~7u);
}

/* After the sites: 4-byte aligned, since cap is even. */
static inline void *dts(const struct page *p)
{
	return sites_of(p) + p->cap;
}

static inline uint32_t dt_get(const struct page *p, uint32_t i)
{
	return p->wide ? ((const uint32_t *)dts(p))[i] : ((const uint16_t *)dts(p))[i];
}

/* dt[i] = v; v fits a page not wide (at most 0xffff). */
static inline void dt_set(struct page *p, uint32_t i, uint32_t v)
{
	if (p->wide)
		((uint32_t *)dts(p))[i] = v;
	else
		((uint16_t *)dts(p))[i] = (uint16_t)v;
}

/* The largest dt[] value page p holds. */
static inline uint32_t dt_max(const struct page *p)
{
	return p->wide ? UINT32_MAX : UINT16_MAX;
}

/* Bytes of a page's arrays for cap entries, with times (wide or not) or without. */
static inline size_t page_bytes(uint32_t cap, int times, int wide)
{
	return ((cap + 7) & ~7u) * sizeof(uint16_t) + cap * sizeof(uint16_t) +
	       (times ? cap * (wide ? sizeof(uint32_t) : sizeof(uint16_t)) : 0);
}

/* The room a page of cap entries grows to: 8, then about 1.25 times
   (jq: 3.4 million blocks live in 95 thousand pages, 90 % of the room used;
   1.5 times below 64 entries took 2 MB more). Room for 8 from the start
   spares a page of a dense heap two remakes (jq: 1 % of the pass's
   instructions; the same peak RSS on the bench traces). */
static inline uint32_t next_cap(uint32_t cap)
{
	uint32_t c = cap < 8 ? (cap ? cap * 2 : 8) : (cap * 5 / 4 + 7) & ~7u;
	return c < MAX_CAP ? c : MAX_CAP;
}

/* Recent sites and pages, 16 KiB each: with 256 of each, alloc_loop's
   sites (513 sizes of 8 to 520 bytes) and live pages missed them half the
   time, and each miss costs a hash lookup (and the inline paths their
   place: alloc_fast(), free_fast()). */
#define SITE_CACHE_BITS 12
#define SITE_CACHE (1u << SITE_CACHE_BITS)
#define PAGE_CACHE 4096
/* Pages' arrays of up to about 2 KiB are cut from slabs of SLAB_BYTES,
   one size class at a time, and those given back kept for the next page
   that needs one of their size: a page grows by remaking its arrays (jq:
   750 thousand times for 3.4 million allocations), and malloc and free
   took 170 instructions a remake; with the arrays given back to malloc
   past 1 MiB kept, its free() of jq's 95 thousand emptied pages' arrays
   missed the cache on its chunks' neighbours (85 thousand of the run's
   1.3 million last-level misses in callgrind's model). The slabs go back
   at once (reset()). */
#define POOL_GRAIN 16
#define POOL_CLASSES 128
#define SLAB_BYTES (64u << 10)
#define PAGE_CACHED(t, addr) (&(t)->page_cache[((addr) >> PAGE_SHIFT) & (PAGE_CACHE - 1)])

/* A set of blocks by heap and address (addr 0, which no block has:
   empty), open addressing, at most half full; never shrinks. */
struct aset {
	struct ht__life_addr *v;
	uint64_t cap, n;
};

/*
 * A process image's part in fork inheritance (ht__life_fork(),
 * docs/processes.md): the image it was forked from, and what its fork
 * children ask of it while they may free its blocks.
 */
struct inh {
	uint32_t parent;	    /* + 1: the image it was forked from; 0: none */
	uint32_t watchers;	    /* its fork children started and not ended */
	uint32_t pending;	    /* its fork children yet to start (ht__life_fork_expect()) */
	uint8_t ended;		    /* its image ended (its live blocks are in frozen) */
	struct aset consumed;	    /* blocks of its parent's it freed */
	struct aset noted;	    /* blocks it freed while it had children */
	struct aset frozen;	    /* its live blocks when it ended, children still running */
	HT_VEC(uint64_t) destroyed; /* heaps it destroyed: its parent's blocks there are gone */
};

/* A time and a site an entry cannot hold; a free one holds the next in ts. */
struct esc {
	uint64_t ts;
	uint32_t site;
};

struct ht__life_tracker {
	ht__life_fn on_end;
	void *ctx;
	int unfreed_only;  /* ht__life_unfreed_only() */
	int quiet_frees;   /* no on_end call for a freed block (free_fast()) */
	int no_ts;	   /* ht__life_no_times(), until a site id needs OFF_ESC */
	int any_order;	   /* ht__life_no_times(): blocks ending at once in page order */
	int no_caller;	   /* ht__life_no_caller(): owners by heap and process only */
	uint64_t unit;	   /* ht__life_ts_unit() */
	uint64_t unit_inv; /* 2^64 / unit rounded up, when 1 < unit < 2^16; else 0 */
	/* page index: per slot the low 32 bits of the page's hash (its home
	   slot, and a tag that spares reading pages that do not match) above
	   its page id + 1; 0 empty; at most half full */
	uint64_t *slots;
	uint64_t mask;
	uint64_t npages; /* pages in the index */
	HT_VEC(struct page) pages;
	uint32_t page_free; /* NO_ID: none */
	uint32_t last_made; /* + 1: the page page_get() made last; 0: none */
	uint32_t first_cap; /* the room of the page it makes now (first_cap_of()) */
	/* + 1: pages found lately, by the low bits of their page number; each
	   is checked (it may have been freed, or its id reused since) */
	uint32_t page_cache[PAGE_CACHE];
	HT_VEC(struct site) sites;
	struct ht__hindex site_ix;	 /* keeps the hashes */
	uint32_t site_free;		 /* NO_ID: none */
	uint32_t site_cache[SITE_CACHE]; /* + 1: recent sites by site_slot() */
	uint64_t sites_dead;		 /* in the index with no live block */
	HT_VEC(struct owner) owners;
	struct ht__hindex owner_ix;
	uint32_t last_owner;	/* + 1; 0: none yet */
	HT_VEC(struct esc) esc; /* times and sites kept aside */
	uint64_t esc_free;	/* + 1; 0: none */
	struct ht__life_stats st;
	/* Live blocks per process image, so an image that ends with none (or
	   few) costs nothing (or stops early) instead of a scan of the pages. */
	HT_VEC(uint64_t) per_proc;
	/* pages' arrays given back, per size class: each holds the next */
	void *pool[POOL_CLASSES];
	/* per size class, the slab being cut: its next array and its end */
	char *slab_next[POOL_CLASSES], *slab_end[POOL_CLASSES];
	void *slabs;	   /* every slab: each holds the next */
	size_t big_arrays; /* arrays larger than a class: malloc()'s */
	/* per process image: fork inheritance (ht__life_fork()) */
	HT_VEC(struct inh) inh;
};

#define MIN_SLOTS 1024u

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
	t->page_free = NO_ID;
	t->site_free = NO_ID;
	t->unit = 1;
	t->on_end = on_end;
	t->ctx = ctx;
	t->quiet_frees = !on_end;
	return t;
}

void ht__life_ts_unit(struct ht__life_tracker *t, uint64_t unit_ns)
{
	t->unit = unit_ns ? unit_ns : 1;
	t->unit_inv = t->unit > 1 && t->unit < (1u << 16) ? UINT64_MAX / t->unit + 1 : 0;
}

/*
 * d / unit, without a division where unit_inv is known: exact for d <
 * 2^64 / unit^2, so for every d a page entry can hold (below 2^32 units);
 * the caller checks the quotient anyway (q * unit == d).
 */
static inline uint64_t units_of(const struct ht__life_tracker *t, uint64_t d)
{
	if (t->unit_inv)
		return (uint64_t)(((unsigned __int128)d * t->unit_inv) >> 64);
	return t->unit == 1 ? d : d / t->unit;
}

/* ---- sites and owners ---- */

static uint64_t site_hash_of(uint32_t owner, uint32_t stack, uint64_t size)
{
	return ht__mix64(size ^ ((uint64_t)stack << 32 | owner) * 0x9e3779b97f4a7c15ull);
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

/* The owner id of o (interned), or NO_ID when out of memory. */
static uint32_t owner_id(struct ht__life_tracker *t, const struct owner *o)
{
	if (t->last_owner && same_owner(&t->owners.v[t->last_owner - 1], o))
		return t->last_owner - 1;
	if (ht__vec_push(&t->owners, *o) < 0)
		return NO_ID;
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
		return NO_ID;
	}
	t->last_owner = id + 1;
	return id;
}

/* Whether the allocation ev is of the last owner (owner_of(), alloc_fast()). */
static inline bool last_owner_is(const struct ht__life_tracker *t, const struct ht_event *ev,
				 int from_realloc)
{
	if (!t->last_owner)
		return false;
	const struct owner *l = &t->owners.v[t->last_owner - 1];
	return l->heap == ev->heap && l->process == ev->process &&
	       (t->no_caller ||
		(l->tid == ev->tid && l->func == ev->func && l->from_realloc == from_realloc));
}

/*
 * The owner id of an allocation: the last one's when it matches, the
 * commonest case (read from the event, no owner made to compare), else
 * owner_id()'s. After ht__life_no_caller() an owner is its heap and
 * process only (tid, func and from_realloc 0): python's allocations
 * change function or thread often enough to miss the last owner 16 % of
 * the time.
 */
static inline uint32_t owner_of(struct ht__life_tracker *t, const struct ht_event *ev,
				int from_realloc)
{
	if (last_owner_is(t, ev, from_realloc))
		return t->last_owner - 1;
	/* A process's first owner gives it its count of live blocks (an owner
	   of it found again, it has one). */
	if (ht__vec_grow_zero(&t->per_proc, (size_t)ev->process + 1) < 0)
		return NO_ID;
	struct owner o = {ev->heap, ev->process, ev->tid, ev->func, (uint8_t)from_realloc};
	if (t->no_caller)
		o = (struct owner){.heap = ev->heap, .process = ev->process};
	return owner_id(t, &o);
}

/* A site's place in site_cache: a cheap hash (a miss costs only the lookup). */
static inline uint32_t site_slot(uint32_t owner, uint32_t stack, uint64_t size)
{
	return (uint32_t)((stack * 0x9e3779b97f4a7c15ull ^ size * 0xc2b2ae3d27d4eb4full ^ owner) >>
			  (64 - SITE_CACHE_BITS));
}

/* The site of (owner, stack, size) with one more live block, or NO_ID when
   out of memory. */
static uint32_t site_take(struct ht__life_tracker *t, uint32_t owner, uint32_t stack, uint64_t size)
{
	struct site *s;
	uint32_t *c = &t->site_cache[site_slot(owner, stack, size)];
	if (*c) {
		s = &t->sites.v[*c - 1];
		if (s->size == size && s->stack == stack && s->owner == owner)
			goto found;
	}
	uint64_t h = site_hash_of(owner, stack, size);
	for (uint32_t *x = ht__hindex_find(&t->site_ix, h); *x;
	     x = ht__hindex_next(&t->site_ix, x)) {
		if (ht__hindex_hash(&t->site_ix, x) != (uint32_t)h)
			continue;
		s = &t->sites.v[*x - 1];
		if (s->size == size && s->stack == stack && s->owner == owner) {
			*c = *x;
			goto found;
		}
	}
	uint32_t id = t->site_free;
	if (id != NO_ID) {
		t->site_free = t->sites.v[id].stack;
	} else {
		if (t->sites.len >= NO_ID - 1 || ht__vec_reserve(&t->sites, t->sites.len + 1) < 0)
			return NO_ID;
		id = (uint32_t)t->sites.len++;
	}
	if (ht__hindex_insert_kept(&t->site_ix, h, id) < 0) {
		t->sites.v[id].owner = NO_ID;
		t->sites.v[id].stack = t->site_free;
		t->site_free = id;
		return NO_ID;
	}
	t->sites.v[id] = (struct site){.size = size, .stack = stack, .owner = owner, .live = 1};
	*c = id + 1;
	return id;
found:
	if (!s->live++)
		t->sites_dead--; /* it had none: it was counted dead */
	return (uint32_t)(s - t->sites.v);
}

/* Frees the sites no live block names, rebuilding the index of the others. */
static __attribute__((noinline)) void sweep_sites(struct ht__life_tracker *t)
{
	/* In place: the live are fewer than the index held, so it has room
	   for them without growing (and re-inserting cannot fail). */
	struct ht__hindex *ix = &t->site_ix;
	memset(ix->slots, 0, ix->cap * sizeof(*ix->slots));
	ix->count = 0;
	for (size_t i = 0; i < t->sites.len; i++) {
		struct site *s = &t->sites.v[i];
		if (s->owner == NO_ID)
			continue;
		if (s->live) {
			(void)ht__hindex_insert_kept(ix, site_hash_of(s->owner, s->stack, s->size),
						     (uint32_t)i);
			continue;
		}
		s->owner = NO_ID;
		s->stack = t->site_free;
		t->site_free = (uint32_t)i;
	}
	t->sites_dead = 0;
	memset(t->site_cache, 0, sizeof(t->site_cache));
}

/* One live block less names site id. */
static inline void site_drop(struct ht__life_tracker *t, uint32_t id)
{
	if (--t->sites.v[id].live)
		return;
	t->sites_dead++;
	if (t->sites_dead > 16384 && t->sites_dead * 2 > t->site_ix.count)
		sweep_sites(t);
}

/* ---- times kept aside ---- */

static uint32_t esc_put(struct ht__life_tracker *t, uint64_t ts, uint32_t site)
{
	uint64_t b = t->esc_free;
	struct esc e = {ts, site};
	if (b) {
		t->esc_free = t->esc.v[b - 1].ts;
		t->esc.v[b - 1] = e;
		return (uint32_t)(b - 1);
	}
	if (t->esc.len >= NO_ID || ht__vec_push(&t->esc, e) < 0)
		return NO_ID;
	return (uint32_t)(t->esc.len - 1);
}

static void esc_release(struct ht__life_tracker *t, uint32_t i)
{
	t->esc.v[i].ts = t->esc_free;
	t->esc_free = (uint64_t)i + 1;
}

/* ---- pages ---- */

/*
 * A page's home slot: a random place for each aligned group of eight
 * pages (32 KiB), the pages of a group in consecutive slots. A heap that
 * makes and frees its pages in address order (jq: 95 thousand pages made
 * one after another, then freed oldest first) then finds a group's slots
 * in one or two cache lines: with a random home for every page, each new
 * page's lookup and each page's removal missed the cache (jq: 15 % of the
 * run's time on the first slot read). The index is at most half full, so
 * the runs stay a few lines long.
 */
#define GROUP_BITS 3
#define GROUP_MASK ((1u << GROUP_BITS) - 1)

static inline uint64_t page_hash(uint32_t process, uint64_t heap, uint64_t addr)
{
	uint64_t pg = addr >> PAGE_SHIFT;
	uint64_t h = ht__mix64((pg >> GROUP_BITS) ^ (heap * 0x9e3779b97f4a7c15ull) ^
			       ((uint64_t)process << 47));
	return (h & ~(uint64_t)GROUP_MASK) | (pg & GROUP_MASK);
}

#define SLOT_ID(s) ((uint32_t)(s)-1)
#define SLOT_HOME(s) ((s) >> 32)
#define SLOT(h, id) ((uint64_t)(uint32_t)(h) << 32 | ((uint64_t)(id) + 1))

static inline int page_is(const struct page *p, uint32_t process, uint64_t heap, uint64_t addr)
{
	return p->addr == addr && p->heap == heap && p->process == process;
}

/* Slot of the page whose page_hash() is h, or of the empty slot where it would go. */
static uint64_t *page_slot(const struct ht__life_tracker *t, uint64_t h, uint32_t process,
			   uint64_t heap, uint64_t addr)
{
	uint64_t i = h & t->mask;
	uint32_t tag = (uint32_t)h;
	for (;;) {
		uint64_t *s = &t->slots[i];
		if (!*s)
			return s;
		if ((uint32_t)SLOT_HOME(*s) == tag &&
		    page_is(&t->pages.v[SLOT_ID(*s)], process, heap, addr))
			return s;
		i = (i + 1) & t->mask;
	}
}

/* The page of (process, heap, page address addr), or NULL. */
static inline struct page *page_find(struct ht__life_tracker *t, uint32_t process, uint64_t heap,
				     uint64_t addr)
{
	uint32_t *c = PAGE_CACHED(t, addr);
	if (*c) {
		struct page *p = &t->pages.v[*c - 1];
		if (page_is(p, process, heap, addr))
			return p;
	}
	uint64_t *s = page_slot(t, page_hash(process, heap, addr), process, heap, addr);
	if (!*s)
		return NULL;
	*c = SLOT_ID(*s) + 1;
	return &t->pages.v[SLOT_ID(*s)];
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

/*
 * The room a new page (id) starts with: as many entries as the page made
 * before it holds now (rounded up to 8), at least 8. A heap that fills its
 * pages one after another (jq: 95 thousand pages of about 36 blocks each)
 * then fills the next with no remake (five each from 8: 376 thousand on
 * jq); a page made after a sparse one starts at 8. Each page lends its
 * count to one page only, so the room given this way is at most the live
 * blocks' count more.
 */
static inline uint32_t first_cap_of(const struct ht__life_tracker *t, uint32_t id)
{
	if (!t->last_made || t->last_made - 1 == id)
		return 8;
	const struct page *q = &t->pages.v[t->last_made - 1];
	uint32_t c = q->addr == FREE_PAGE ? 0 : (q->n + 7u) & ~7u;
	return c > 8 ? c : 8;
}

/* The page of (process, heap, addr), made (empty, its times based at ts)
   when there is none; NULL when out of memory. */
static struct page *page_get(struct ht__life_tracker *t, uint32_t process, uint64_t heap,
			     uint64_t addr, uint64_t ts)
{
	uint32_t *c = PAGE_CACHED(t, addr);
	struct page *p = *c ? &t->pages.v[*c - 1] : NULL;
	if (p && page_is(p, process, heap, addr))
		return p;
	/* One probe finds the page or the slot a new one takes (page_find()
	   and a second probe for the insert cost jq 7 M instructions). */
	uint64_t h = page_hash(process, heap, addr);
	uint64_t *s = page_slot(t, h, process, heap, addr);
	if (*s) {
		*c = SLOT_ID(*s) + 1;
		return &t->pages.v[SLOT_ID(*s)];
	}
	if ((t->npages + 1) * 2 > t->mask + 1) {
		if (grow_index(t) < 0)
			return NULL;
		s = page_slot(t, h, process, heap, addr);
	}
	uint32_t id = t->page_free;
	if (id != NO_ID) {
		t->page_free = (uint32_t)t->pages.v[id].heap;
	} else {
		if (t->pages.len >= NO_ID - 1 || ht__vec_reserve(&t->pages, t->pages.len + 1) < 0)
			return NULL;
		id = (uint32_t)t->pages.len++;
	}
	*s = SLOT(h, id);
	t->npages++;
	t->first_cap = first_cap_of(t, id);
	t->last_made = id + 1;
	p = &t->pages.v[id];
	*p = (struct page){.addr = addr, .heap = heap, .ts_base = ts, .process = process};
	*c = id + 1;
	return p;
}

/* A pool class's size, and the class of an array of bytes (POOL_CLASSES:
   none). 16 k + 24 bytes: what a malloc chunk of 16 (k + 2) bytes holds. */
static inline size_t class_bytes(size_t c)
{
	return c * POOL_GRAIN + 24;
}

static inline size_t class_of(size_t bytes)
{
	size_t c = bytes <= 24 ? 0 : (bytes - 9) / POOL_GRAIN;
	return c < POOL_CLASSES ? c : POOL_CLASSES;
}

/* An array of at least bytes for a page: from the pool when it has one,
   else cut from its class's slab; NULL when out of memory. */
static void *mem_get(struct ht__life_tracker *t, size_t bytes)
{
	size_t c = class_of(bytes);
	if (c == POOL_CLASSES) {
		void *big = malloc(bytes);
		t->big_arrays += big != NULL;
		return big;
	}
	void *m = t->pool[c];
	if (m) {
		memcpy(&t->pool[c], m, sizeof(void *));
		return m;
	}
	size_t size = class_bytes(c); /* a multiple of 8 */
	if ((size_t)(t->slab_end[c] - t->slab_next[c]) < size) {
		char *slab = malloc(SLAB_BYTES);
		if (!slab)
			return NULL;
		memcpy(slab, &t->slabs, sizeof(void *));
		t->slabs = slab;
		t->slab_next[c] = slab + 16;
		t->slab_end[c] = slab + SLAB_BYTES;
	}
	m = t->slab_next[c];
	t->slab_next[c] += size;
	return m;
}

/* Gives back m, an array of mem_get(t, bytes) (NULL: nothing). */
static void mem_put(struct ht__life_tracker *t, void *m, size_t bytes)
{
	size_t c = class_of(bytes);
	if (!m)
		return;
	if (c == POOL_CLASSES) {
		free(m);
		t->big_arrays--;
		return;
	}
	memcpy(m, &t->pool[c], sizeof(void *));
	t->pool[c] = m;
}

/* Every array of a class (given back or not) goes with its slab. */
static void pool_release(struct ht__life_tracker *t)
{
	while (t->slabs) {
		void *slab = t->slabs;
		memcpy(&t->slabs, slab, sizeof(void *));
		free(slab);
	}
	memset(t->pool, 0, sizeof(t->pool));
	memset(t->slab_next, 0, sizeof(t->slab_next));
	memset(t->slab_end, 0, sizeof(t->slab_end));
}

/* Gives page p's memory back and forgets it (its entries are gone). */
static void page_delete(struct ht__life_tracker *t, struct page *p)
{
	uint32_t id = (uint32_t)(p - t->pages.v);
	uint64_t *s =
	    page_slot(t, page_hash(p->process, p->heap, p->addr), p->process, p->heap, p->addr);
	remove_slot(t, s);
	t->npages--;
	mem_put(t, p->mem, page_bytes(p->cap, !t->no_ts, p->wide));
	*p = (struct page){.addr = FREE_PAGE, .heap = t->page_free};
	t->page_free = id; /* page_cache may still name it: page_find() checks */
}

/* Page p with room for cap entries (>= n, even), its times kept when
   times (and the room for them made when make_times), dt[] wide when wide
   (a wide page stays wide). 0 or HT_ERR_NOMEM. */
static int page_remake(struct ht__life_tracker *t, struct page *p, uint32_t cap, int times,
		       int make_times, int wide)
{
	uint16_t *m = mem_get(t, page_bytes(cap, times || make_times, wide));
	if (!m)
		return HT_ERR_NOMEM;
	struct page q = *p;
	q.mem = m;
	q.cap = (uint16_t)cap;
	q.wide = (uint8_t)wide;
	if (p->n) {
		memcpy(offs(&q), offs(p), p->n * sizeof(uint16_t));
		memcpy(sites_of(&q), sites_of(p), p->n * sizeof(uint16_t));
		if (times && wide == p->wide)
			memcpy(dts(&q), dts(p),
			       p->n * (wide ? sizeof(uint32_t) : sizeof(uint16_t)));
		else if (times)
			for (uint32_t i = 0; i < p->n; i++)
				dt_set(&q, i, dt_get(p, i));
		else if (make_times)
			memset(dts(&q), 0, p->n * (wide ? sizeof(uint32_t) : sizeof(uint16_t)));
	}
	memset(offs(&q) + p->n, 0xff, (((cap + 7) & ~7u) - p->n) * sizeof(uint16_t)); /* OFF_NONE */
	mem_put(t, p->mem, page_bytes(p->cap, times, p->wide));
	*p = q;
	return 0;
}

static int page_resize(struct ht__life_tracker *t, struct page *p, uint32_t cap)
{
	return page_remake(t, p, cap, !t->no_ts, 0, p->wide);
}

/*
 * A tracker without times that meets a site id from SITE_ESC on (which
 * needs an entry's dt for its place in esc) keeps times from now on: every
 * page gets its dt[], 0 for the blocks it holds (whose times nothing
 * reads). 0 or HT_ERR_NOMEM (the tracker then stays without).
 */
static __attribute__((noinline)) int keep_times(struct ht__life_tracker *t)
{
	for (size_t k = 0; k < t->pages.len; k++) {
		struct page *p = &t->pages.v[k];
		if (p->addr != FREE_PAGE && p->mem && page_remake(t, p, p->cap, 0, 1, 0) < 0)
			return HT_ERR_NOMEM; /* those remade are the same without times */
	}
	t->no_ts = 0;
	return 0;
}

/*
 * Index of the entry at offset off of page p, or -1: the last vector of 8
 * first, then from the first entry on (live entries' offsets are distinct:
 * the first match met is the one). Python's frees most often name a block
 * allocated lately, appended at its page's end: from the first entry on
 * alone they read about 45 entries a free; jq's last frees go oldest first,
 * for which a scan from the end back cost 2.3 % of its pass. The offsets
 * from n to the last vector's end are OFF_NONE, which no offset matches,
 * so no scan needs a bound.
 */
static inline int find(const struct page *p, uint32_t off)
{
	const uint16_t *o = offs(p);
	uint32_t n = p->n;
	if (!n)
		return -1;
#ifdef __SSE2__
	const __m128i want = _mm_set1_epi16((short)off), mask = _mm_set1_epi16(OFF_MASK);
	uint32_t last = (n - 1) & ~7u;
	__m128i v = _mm_and_si128(_mm_loadu_si128((const __m128i *)(o + last)), mask);
	unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(v, want));
	if (m)
		return (int)(last + (uint32_t)__builtin_ctz(m) / 2);
	for (uint32_t i = 0; i < last; i += 8) {
		v = _mm_and_si128(_mm_loadu_si128((const __m128i *)(o + i)), mask);
		m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(v, want));
		if (m)
			return (int)(i + (uint32_t)__builtin_ctz(m) / 2);
	}
	return -1;
#else
	for (uint32_t i = n; i--;)
		if ((o[i] & OFF_MASK) == off)
			return (int)i;
	return -1;
#endif
}

static inline uint64_t ts_at(const struct ht__life_tracker *t, const struct page *p, uint32_t i)
{
	if (t->no_ts)
		return p->ts_base;
	uint32_t d = dt_get(p, i);
	return offs(p)[i] & OFF_ESC ? t->esc.v[d].ts : p->ts_base + d * t->unit;
}

static inline uint32_t site_at(const struct ht__life_tracker *t, const struct page *p, uint32_t i)
{
	return offs(p)[i] & OFF_ESC ? t->esc.v[dt_get(p, i)].site : sites_of(p)[i];
}

static inline uint64_t addr_at(const struct page *p, uint32_t i)
{
	return p->addr | (offs(p)[i] & PAGE_MASK);
}

static struct ht__life life_of(const struct ht__life_tracker *t, const struct page *p, uint32_t i,
			       uint64_t ts, int by_realloc, int at_exit)
{
	const struct site *s = &t->sites.v[site_at(t, p, i)];
	const struct owner *o = &t->owners.v[s->owner];
	return (struct ht__life){
	    .heap = o->heap,
	    .addr = addr_at(p, i),
	    .size = s->size,
	    .count = 1,
	    .block_size = s->size,
	    .alloc_ts = ts_at(t, p, i),
	    .free_ts = ts,
	    .process = o->process,
	    .stack = s->stack,
	    .tid = o->tid,
	    .func = o->func,
	    .from_realloc = o->from_realloc,
	    .freed_by_realloc = (uint8_t)by_realloc,
	    .at_exit = (uint8_t)at_exit,
	};
}

static __attribute__((noinline)) void report_end(struct ht__life_tracker *t, const struct page *p,
						 uint32_t i, uint64_t ts, int by_realloc,
						 int at_exit)
{
	struct ht__life l = life_of(t, p, i, ts, by_realloc, at_exit);
	t->on_end(t->ctx, &l);
}

/* Entry i of page p ends at ts: counted and reported (still in the page). */
static inline uint32_t end_entry(struct ht__life_tracker *t, const struct page *p, uint32_t i,
				 uint64_t ts, int by_realloc, int at_exit)
{
	uint32_t site = site_at(t, p, i);
	t->st.live_count--;
	t->per_proc.v[p->process]--; /* its block's owner_of() made it */
	t->st.live_bytes -= t->sites.v[site].size;
	if (t->on_end && (!t->unfreed_only || at_exit || ts == HT_TS_NEVER))
		report_end(t, p, i, ts, by_realloc, at_exit);
	return site; /* for remove_entry() */
}

/* What entry i, of site site, holds elsewhere (the site, a time kept
   aside) let go. */
static inline void entry_release(struct ht__life_tracker *t, const struct page *p, uint32_t i,
				 uint32_t site)
{
	site_drop(t, site);
	if (offs(p)[i] & OFF_ESC)
		esc_release(t, dt_get(p, i));
}

/* Takes entry i, of site site (end_entry()), out of page p (the last takes its place); the page
   keeps at most eight times the room its entries need, or SHRINK_MIN entries: most pages of a
   dense heap lose their blocks in a burst and go (jq's last 3.4 million frees), and shrinking
   them on the way cost jq 3.4 % of the pass's instructions (with a floor of 16 entries). */
static inline __attribute__((always_inline)) void
remove_entry(struct ht__life_tracker *t, struct page *p, uint32_t i, uint32_t site)
{
	entry_release(t, p, i, site);
	unmark_at(p, offs(p)[i] & PAGE_MASK);
	uint32_t last = --p->n;
	if (!t->no_ts)
		dt_set(p, i, dt_get(p, last));
	sites_of(p)[i] = sites_of(p)[last];
	offs(p)[i] = offs(p)[last];
	offs(p)[last] = OFF_NONE;
	if (p->n && p->cap > SHRINK_MIN && p->n < p->cap / 8)
		page_resize(t, p, ((uint32_t)p->n * 2 + 1) & ~1u); /* no memory: stays larger */
}

void ht__life_each_live(const struct ht__life_tracker *t, ht__life_fn fn, void *ctx)
{
	for (size_t k = 0; k < t->pages.len; k++) {
		const struct page *p = &t->pages.v[k];
		for (uint32_t i = 0; i < p->n; i++) {
			struct ht__life l = life_of(t, p, i, HT_TS_NEVER, 0, 0);
			fn(ctx, &l);
		}
	}
}

static int inherited_free(struct ht__life_tracker *t, uint32_t process, uint64_t heap,
			  uint64_t addr);

/* A free of a block the process does not hold: one of its parent's a fork
   child frees (ht__life_fork()), or unknown, only counted. Apart from
   free_slow(), whose every call then saved and restored two registers more
   (jq: 150 thousand instructions). */
static __attribute__((noinline, cold)) void free_unheld(struct ht__life_tracker *t,
							const struct ht_event *ev, uint64_t addr)
{
	if (!inherited_free(t, ev->process, ev->heap, addr))
		t->st.unknown_frees++;
}

/* Frees (process, heap, addr) at ts (free_unheld() when it holds none). */
static __attribute__((noinline)) void
free_slow(struct ht__life_tracker *t, const struct ht_event *ev, uint64_t addr, int by_realloc)
{
	struct page *p = page_find(t, ev->process, ev->heap, addr & ~(uint64_t)PAGE_MASK);
	int i = p ? find(p, addr & PAGE_MASK) : -1;
	if (i < 0) {
		free_unheld(t, ev, addr);
		return;
	}
	uint32_t site = end_entry(t, p, (uint32_t)i, ev->ts, by_realloc, 0);
	remove_entry(t, p, (uint32_t)i, site);
	if (!p->n)
		page_delete(t, p);
}

/*
 * ht__life_free_block()'s common case: the block's page the one cached for
 * its address, the block's entry neither the page's last nor one whose
 * removal shrinks it, nor with a time or site kept aside. What free_slow()
 * does then, with fewer registers (its saves and restores were 19
 * instructions a free on jq), and the block reported (report_end()) when
 * the tracker reports freed blocks (table, timeline, report). 1 done, 0
 * not (nothing changed).
 */
static inline __attribute__((always_inline)) int
free_fast(struct ht__life_tracker *t, const struct ht_event *ev, uint64_t addr, int by_realloc)
{
	uint32_t c = *PAGE_CACHED(t, addr);
	if (!c || ev->ts == HT_TS_NEVER)
		return 0;
	struct page *p = &t->pages.v[c - 1];
	uint32_t off = addr & PAGE_MASK;
	if (!page_is(p, ev->process, ev->heap, addr & ~(uint64_t)PAGE_MASK))
		return 0;
	int i = find(p, off);
	if (i < 0 || (offs(p)[i] & OFF_ESC))
		return 0;
	uint32_t last = p->n - 1u;
	if (!last || (p->cap > SHRINK_MIN && last < p->cap / 8u))
		return 0;
	uint16_t *sites = sites_of(p);
	struct site *s = &t->sites.v[sites[i]];
	t->st.live_count--;
	t->per_proc.v[p->process]--;
	t->st.live_bytes -= s->size;
	if (!t->quiet_frees)
		report_end(t, p, (uint32_t)i, ev->ts, by_realloc, 0);
	unmark_at(p, off);
	p->n = (uint16_t)last;
	if (!t->no_ts)
		dt_set(p, i, dt_get(p, last));
	sites[i] = sites[last];
	offs(p)[i] = offs(p)[last];
	offs(p)[last] = OFF_NONE;
	if (!--s->live && ++t->sites_dead > 16384 && t->sites_dead * 2 > t->site_ix.count)
		sweep_sites(t);
	return 1;
}

void ht__life_free_block(struct ht__life_tracker *t, const struct ht_event *ev, uint64_t addr,
			 int by_realloc)
{
	if (!free_fast(t, ev, addr, by_realloc))
		free_slow(t, ev, addr, by_realloc);
}

/*
 * ht__life_alloc()'s common case: the last owner's, a site in the cache, a
 * page in the cache with room and no block at the address, a time its
 * entry holds. What alloc_slow() does then, with no call (its saves and
 * restores were 18 instructions an allocation on jq). 1 done, 0 not
 * (nothing changed).
 */
static inline __attribute__((always_inline)) int
alloc_fast(struct ht__life_tracker *t, const struct ht_event *ev, int from_realloc)
{
	uint32_t c = *PAGE_CACHED(t, ev->addr);
	if (!c || !last_owner_is(t, ev, from_realloc))
		return 0;
	uint32_t owner = t->last_owner - 1, stack = ev->stack, sc;
	uint64_t size = ev->size;
	sc = t->site_cache[site_slot(owner, stack, size)];
	if (!sc || sc - 1 >= SITE_ESC)
		return 0;
	struct site *s = &t->sites.v[sc - 1];
	if (s->size != size || s->stack != stack || s->owner != owner)
		return 0;
	struct page *p = &t->pages.v[c - 1];
	uint32_t off = ev->addr & PAGE_MASK;
	if (!page_is(p, ev->process, ev->heap, ev->addr & ~(uint64_t)PAGE_MASK) ||
	    maybe_at(p, off) || p->n == p->cap)
		return 0;
	uint32_t k = p->n;
	if (!t->no_ts) {
		uint64_t d = ev->ts - p->ts_base, q = units_of(t, d);
		if (ev->ts < p->ts_base || q > dt_max(p) || q * t->unit != d)
			return 0;
		dt_set(p, k, (uint32_t)q);
	}
	p->n = (uint16_t)(k + 1);
	if (!s->live++)
		t->sites_dead--;
	sites_of(p)[k] = (uint16_t)(sc - 1);
	offs(p)[k] = (uint16_t)off;
	mark_at(p, off);
	t->st.live_count++;
	t->per_proc.v[ev->process]++;
	t->st.live_bytes += size;
	return 1;
}

static __attribute__((noinline)) int alloc_slow(struct ht__life_tracker *t,
						const struct ht_event *ev, int from_realloc);

int ht__life_alloc(struct ht__life_tracker *t, const struct ht_event *ev, int from_realloc)
{
	return alloc_fast(t, ev, from_realloc) ? 0 : alloc_slow(t, ev, from_realloc);
}

static int alloc_slow(struct ht__life_tracker *t, const struct ht_event *ev, int from_realloc)
{
	uint32_t oid = owner_of(t, ev, from_realloc);
	uint32_t sid = oid == NO_ID ? NO_ID : site_take(t, oid, ev->stack, ev->size);
	if (sid == NO_ID)
		return HT_ERR_NOMEM;
	uint64_t base = ev->addr & ~(uint64_t)PAGE_MASK;
	uint32_t off = ev->addr & PAGE_MASK;
	struct page *p = page_get(t, ev->process, ev->heap, base, ev->ts);
	if (!p) {
		site_drop(t, sid);
		return HT_ERR_NOMEM;
	}
	int i = maybe_at(p, off) ? find(p, off) : -1;
	if (i >= 0) {
		/* Its free was never seen (a path we do not hook): it ended here. */
		uint32_t site = end_entry(t, p, (uint32_t)i, ev->ts, 0, 0);
		remove_entry(t, p, (uint32_t)i, site);
	}
	uint32_t dt = 0;
	uint16_t flag = 0;
	int rc = t->no_ts && sid >= SITE_ESC ? keep_times(t) : 0;
	if (!t->no_ts && !rc) {
		uint64_t d = ev->ts - p->ts_base, q = units_of(t, d);
		dt = (uint32_t)q;
		if (ev->ts < p->ts_base || q > UINT32_MAX || q * t->unit != d || sid >= SITE_ESC) {
			dt = esc_put(t, ev->ts, sid);
			flag = OFF_ESC;
		}
		rc = flag && dt == NO_ID ? HT_ERR_NOMEM : 0;
	}
	/* A page full, or whose dt[] cannot hold dt, is remade (wide for dt). */
	int wide = p->wide || (!t->no_ts && dt > UINT16_MAX);
	if (!rc && (p->n == p->cap || wide != p->wide) &&
	    (rc = page_remake(t, p,
			      p->n < p->cap ? p->cap
			      : p->cap	    ? next_cap(p->cap)
					    : t->first_cap,
			      !t->no_ts, 0, wide)) < 0 &&
	    flag)
		esc_release(t, dt);
	if (rc < 0) {
		site_drop(t, sid);
		if (!p->n)
			page_delete(t, p);
		return rc;
	}
	uint32_t k = p->n++;
	if (!t->no_ts)
		dt_set(p, k, dt);
	sites_of(p)[k] = (uint16_t)sid; /* SITE_ESC and more: not read */
	offs(p)[k] = (uint16_t)(off | flag);
	mark_at(p, off);
	t->st.live_count++;
	t->per_proc.v[ev->process]++;
	t->st.live_bytes += ev->size;
	return 0;
}

/* Not inlined: ht__life_event() then saved more registers on every call
   (python's reallocs: 470 thousand instructions). */
static __attribute__((noinline)) int destroy_heap(struct ht__life_tracker *t,
						  const struct ht_event *ev);

#define LIFE_AHEAD 12 /* events: 1152 bytes */

uint32_t ht__life_heap_run(struct ht__life_tracker *t, const struct ht_event *ev, uint32_t n,
			   uint64_t stop, uint64_t *max_ts, uint32_t types, ht__life_ev_fn fn,
			   void *ctx, struct ht__pass *arg, int *rc)
{
	const struct ht_event *e = ev, *end = ev + n;
	const struct ht_event *ahead_end = n > LIFE_AHEAD ? end - LIFE_AHEAD : ev;
	uint64_t top = *max_ts;
	int err = 0;
	for (; e < end; e++) {
		/* The reader's worker wrote the events on another core, where
		   they wait in its cache: each line read here missed (jq: the
		   loads of an event's type, time and stack were 12 % of the
		   pass's thread). Fetched a few events ahead, within the run:
		   past it may be a batch the worker is still writing. */
		if (e < ahead_end) {
			__builtin_prefetch(e + LIFE_AHEAD);
			__builtin_prefetch((const char *)(e + LIFE_AHEAD) + 64);
		}
		unsigned type = e->type;
		if (type > HT_EV_FREE || e->ts >= stop)
			break;
		if (e->ts > top)
			top = e->ts;
		if (type == HT_EV_ALLOC && e->addr) {
			if (!alloc_fast(t, e, 0) && (err = alloc_slow(t, e, 0)) != 0)
				break;
		} else if (type == HT_EV_FREE) {
			if (e->addr && !free_fast(t, e, e->addr, 0))
				free_slow(t, e, e->addr, 0);
		} else if ((err = ht__life_event(t, e)) != 0) {
			break;
		}
		if ((types >> type & 1) && (err = fn(ctx, arg, e)) != 0)
			break;
	}
	*max_ts = top;
	*rc = err;
	return (uint32_t)(e - ev) + (err != 0); /* the event that failed was taken */
}

int ht__life_event(struct ht__life_tracker *t, const struct ht_event *ev)
{
	switch (ev->type) {
	case HT_EV_ALLOC:
		return ev->addr ? ht__life_alloc(t, ev, 0) : 0;
	case HT_EV_FREE:
		if (ev->addr)
			ht__life_free_block(t, ev, ev->addr, 0);
		return 0;
	case HT_EV_REALLOC:
		if (ev->flags & HT_EVF_FAILED)
			return 0; /* old_addr stays allocated as it was */
		if (ev->old_addr)
			ht__life_free_block(t, ev, ev->old_addr, 1);
		return ev->addr ? ht__life_alloc(t, ev, 1) : 0;
	case HT_EV_HEAP_DESTROY:
		return destroy_heap(t, ev);
	default:
		return 0;
	}
}

/* A live block named by its page id (high bits) and entry index (low 16). */
#define HANDLE(page, i) ((uint64_t)(page) << 16 | (i))
#define H_PAGE(h) ((uint32_t)((h) >> 16))
#define H_ENTRY(h) ((uint32_t)((h)&0xffff))

/* Oldest first, then by heap and address: an order that does not depend on
   where the pages put the blocks. */
static int handle_cmp(const void *a, const void *b, void *ctx)
{
	const struct ht__life_tracker *t = ctx;
	uint64_t ha = *(const uint64_t *)a, hb = *(const uint64_t *)b;
	const struct page *x = &t->pages.v[H_PAGE(ha)], *y = &t->pages.v[H_PAGE(hb)];
	uint64_t xt = ts_at(t, x, H_ENTRY(ha)), yt = ts_at(t, y, H_ENTRY(hb));
	if (xt != yt)
		return xt < yt ? -1 : 1;
	if (x->heap != y->heap)
		return x->heap < y->heap ? -1 : 1;
	uint64_t xa = addr_at(x, H_ENTRY(ha)), ya = addr_at(y, H_ENTRY(hb));
	return xa < ya ? -1 : xa > ya;
}

/* Which pages live_sorted() takes. */
struct pick {
	int all;	  /* every page */
	int by_heap;	  /* only those of heap */
	uint32_t process; /* else those of process */
	uint64_t heap;
};

static int picked(const struct page *p, const struct pick *k)
{
	if (p->addr == FREE_PAGE || !p->n)
		return 0;
	return k->all || (p->process == k->process && (!k->by_heap || p->heap == k->heap));
}

/*
 * The live blocks of the pages k picks (at most n), oldest first (in page
 * order after ht__life_no_times()), in *out
 * (free()d by the caller). Returns their count, or -1 when out of memory.
 */
static int64_t live_sorted(struct ht__life_tracker *t, const struct pick *k, uint64_t n,
			   uint64_t **out)
{
	uint64_t *v = n ? malloc(n * sizeof(*v)) : NULL;
	if (n && !v)
		return -1;
	uint64_t m = 0;
	for (size_t pg = 0; pg < t->pages.len && m < n; pg++) {
		const struct page *p = &t->pages.v[pg];
		if (!picked(p, k))
			continue;
		for (uint32_t i = 0; i < p->n && m < n; i++)
			v[m++] = HANDLE(pg, i);
	}
	/* Without times the order is asked of no one: clang++'s 16 thousand
	   blocks at its exit took 10 M instructions to sort. */
	if (m && !t->any_order)
		qsort_r(v, m, sizeof(*v), handle_cmp, t);
	*out = v;
	return (int64_t)m;
}

/* Ends the blocks v[0 .. k) at ts, in that order, then forgets their pages
   (every block of a picked page is in v). */
static void end_all(struct ht__life_tracker *t, const uint64_t *v, int64_t k, uint64_t ts,
		    int at_exit)
{
	for (int64_t i = 0; i < k; i++)
		end_entry(t, &t->pages.v[H_PAGE(v[i])], H_ENTRY(v[i]), ts, 0, at_exit);
	for (int64_t i = 0; i < k; i++) {
		struct page *p = &t->pages.v[H_PAGE(v[i])];
		if (p->addr == FREE_PAGE)
			continue;
		for (uint32_t e = 0; e < p->n; e++)
			entry_release(t, p, e, site_at(t, p, e));
		p->n = 0;
		page_delete(t, p);
	}
}

static void reset(struct ht__life_tracker *t)
{
	memset(t->slots, 0, (t->mask + 1) * sizeof(*t->slots));
	for (size_t i = 0; i < t->pages.len && t->big_arrays; i++) {
		struct page *p = &t->pages.v[i];
		if (p->addr != FREE_PAGE)
			mem_put(t, p->mem, page_bytes(p->cap, !t->no_ts, p->wide));
	}
	pool_release(t);
	t->pages.len = 0;
	t->npages = 0;
	t->page_free = NO_ID;
	memset(t->page_cache, 0, sizeof(t->page_cache));
	t->sites.len = 0;
	ht__hindex_release(&t->site_ix);
	t->site_free = NO_ID;
	memset(t->site_cache, 0, sizeof(t->site_cache));
	t->sites_dead = 0;
	t->esc.len = 0;
	t->esc_free = 0;
}

/* ---- fork children: their parent's blocks ---- */

static inline uint64_t aset_slot(const struct aset *s, uint64_t heap, uint64_t addr)
{
	return ht__mix64(addr ^ heap * 0x9e3779b97f4a7c15ull) & (s->cap - 1);
}

static int aset_has(const struct aset *s, uint64_t heap, uint64_t addr)
{
	if (!s->n)
		return 0;
	for (uint64_t i = aset_slot(s, heap, addr);; i = (i + 1) & (s->cap - 1)) {
		const struct ht__life_addr *e = &s->v[i];
		if (!e->addr)
			return 0;
		if (e->addr == addr && e->heap == heap)
			return 1;
	}
}

/* Adds (heap, addr) (addr not 0) when absent: 0 or HT_ERR_NOMEM. */
static int aset_add(struct aset *s, uint64_t heap, uint64_t addr)
{
	if ((s->n + 1) * 2 > s->cap) {
		struct aset g = {calloc(s->cap ? s->cap * 2 : 64, sizeof(*g.v)),
				 s->cap ? s->cap * 2 : 64, s->n};
		if (!g.v)
			return HT_ERR_NOMEM;
		for (uint64_t i = 0; i < s->cap; i++) {
			if (!s->v[i].addr)
				continue;
			uint64_t j = aset_slot(&g, s->v[i].heap, s->v[i].addr);
			while (g.v[j].addr)
				j = (j + 1) & (g.cap - 1);
			g.v[j] = s->v[i];
		}
		free(s->v);
		*s = g;
	}
	uint64_t i = aset_slot(s, heap, addr);
	for (; s->v[i].addr; i = (i + 1) & (s->cap - 1))
		if (s->v[i].addr == addr && s->v[i].heap == heap)
			return 0;
	s->v[i] = (struct ht__life_addr){heap, addr};
	s->n++;
	return 0;
}

static void aset_free(struct aset *s)
{
	free(s->v);
	*s = (struct aset){0};
}

/* The inheritance state of process, or NULL when it has none. */
static inline struct inh *inh_of(const struct ht__life_tracker *t, uint32_t process)
{
	return process < t->inh.len ? &t->inh.v[process] : NULL;
}

static struct inh *inh_make(struct ht__life_tracker *t, uint32_t process)
{
	return ht__vec_grow_zero(&t->inh, (size_t)process + 1) < 0 ? NULL : &t->inh.v[process];
}

/* Whether its fork children may still ask process about its blocks. */
static inline int watched(const struct inh *s)
{
	return s && (s->watchers || s->pending);
}

static int destroyed(const struct inh *s, uint64_t heap)
{
	for (size_t i = 0; i < s->destroyed.len; i++)
		if (s->destroyed.v[i] == heap)
			return 1;
	return 0;
}

/* Whether block (heap, addr) of process's is live there (its pages). */
static int live_in(struct ht__life_tracker *t, uint32_t process, uint64_t heap, uint64_t addr)
{
	struct page *p = page_find(t, process, heap, addr & ~(uint64_t)PAGE_MASK);
	return p && find(p, addr & PAGE_MASK) >= 0;
}

/*
 * Whether image process held (heap, addr) at a fork of it: live in it now,
 * freed by it while it had children, live at its end, or held by it of its
 * own parent's and not freed. For a child's free of a block it does not
 * hold itself, whose truth is that the block was the parent's at the fork.
 */
static int held_by(struct ht__life_tracker *t, uint32_t process, uint64_t heap, uint64_t addr)
{
	for (;;) {
		struct inh *s = inh_of(t, process);
		if (!(s && s->ended) && live_in(t, process, heap, addr))
			return 1;
		if (!s)
			return 0;
		if (aset_has(&s->noted, heap, addr) || aset_has(&s->frozen, heap, addr))
			return 1;
		/* A heap it destroyed after the fork is still the child's. */
		if (!s->parent || aset_has(&s->consumed, heap, addr))
			return 0;
		process = s->parent - 1;
	}
}

/* A free of (heap, addr) that process's own blocks do not hold: 1 when it
   is a block of its parent's it held since its fork (counted), else 0. */
static int inherited_free(struct ht__life_tracker *t, uint32_t process, uint64_t heap,
			  uint64_t addr)
{
	struct inh *c = inh_of(t, process);
	if (!c || !c->parent || aset_has(&c->consumed, heap, addr) || destroyed(c, heap) ||
	    !held_by(t, c->parent - 1, heap, addr))
		return 0;
	/* No memory to note it: a second free of it would be taken as
	   inherited too (never a miscount of the first). */
	(void)aset_add(&c->consumed, heap, addr);
	t->st.inherited_frees++;
	return 1;
}

/* Forgets what process keeps for its children, once none may ask (and
   its own place among its parent's watchers, once it ended). */
static void inh_release(struct ht__life_tracker *t, uint32_t process)
{
	for (;;) {
		struct inh *s = inh_of(t, process);
		if (!s || !s->ended || watched(s))
			return;
		aset_free(&s->noted);
		aset_free(&s->frozen);
		aset_free(&s->consumed);
		ht__vec_release(&s->destroyed);
		uint32_t parent = s->parent;
		s->parent = 0;
		struct inh *ps = parent ? inh_of(t, parent - 1) : NULL;
		if (!ps || !ps->watchers)
			return;
		ps->watchers--;
		process = parent - 1;
	}
}

void ht__life_fork_expect(struct ht__life_tracker *t, uint32_t parent)
{
	struct inh *s = inh_make(t, parent);
	if (s)
		s->pending++;
}

int ht__life_fork(struct ht__life_tracker *t, uint32_t parent, uint32_t child)
{
	if (parent == child || !inh_make(t, parent > child ? parent : child))
		return parent == child ? 0 : HT_ERR_NOMEM;
	struct inh *c = &t->inh.v[child], *ps = &t->inh.v[parent];
	if (c->parent)
		return 0;
	c->parent = parent + 1;
	ps->watchers++;
	if (ps->pending)
		ps->pending--;
	return 0;
}

int ht__life_note_free(struct ht__life_tracker *t, const struct ht_event *ev)
{
	struct inh *s = inh_of(t, ev->process);
	if (!watched(s) || s->ended)
		return 0;
	uint64_t addr = ev->type == HT_EV_FREE					    ? ev->addr
			: ev->type == HT_EV_REALLOC && !(ev->flags & HT_EVF_FAILED) ? ev->old_addr
										    : 0;
	return addr ? aset_add(&s->noted, ev->heap, addr) : 0;
}

/* The blocks v[0 .. k) of process end (its image ended, or a heap of it
   was destroyed) while its fork children may still hold them: into set. 0
   or HT_ERR_NOMEM. */
static int inh_keep(struct ht__life_tracker *t, struct aset *set, const uint64_t *v, int64_t k)
{
	for (int64_t i = 0; i < k; i++) {
		const struct page *p = &t->pages.v[H_PAGE(v[i])];
		if (aset_add(set, p->heap, addr_at(p, H_ENTRY(v[i]))) < 0)
			return HT_ERR_NOMEM;
	}
	return 0;
}

/* Process's image ends with its live blocks v[0 .. k): they are kept
   (frozen) while its fork children may still ask for them, and what it
   kept is forgotten once none may. 0 or HT_ERR_NOMEM. */
static int inh_end(struct ht__life_tracker *t, uint32_t process, const uint64_t *v, int64_t k)
{
	struct inh *s = inh_of(t, process);
	if (!s)
		return 0;
	int rc = watched(s) ? inh_keep(t, &s->frozen, v, k) : 0;
	s->ended = 1;
	inh_release(t, process);
	return rc;
}

/* Ends every live block of (process, heap), oldest first: a custom heap was
   destroyed. Returns 0 or HT_ERR_NOMEM. */
static int destroy_heap(struct ht__life_tracker *t, const struct ht_event *ev)
{
	struct inh *s = inh_of(t, ev->process);
	if (s && s->parent && !destroyed(s, ev->heap) && ht__vec_push(&s->destroyed, ev->heap) < 0)
		return HT_ERR_NOMEM;
	uint64_t left = ev->process < t->per_proc.len ? t->per_proc.v[ev->process] : 0;
	if (!left)
		return 0;
	uint64_t *v = NULL;
	struct pick pk = {.by_heap = 1, .process = ev->process, .heap = ev->heap};
	int64_t k = live_sorted(t, &pk, left, &v);
	if (k < 0)
		return HT_ERR_NOMEM;
	/* Its fork children keep their copies of the heap's blocks. */
	int rc = watched(s) && !s->ended ? inh_keep(t, &s->noted, v, k) : 0;
	end_all(t, v, k, ev->ts, 0);
	free(v);
	return rc;
}

void ht__life_finish(struct ht__life_tracker *t)
{
	uint64_t n = t->st.live_count, bytes = t->st.live_bytes;
	uint64_t *v = NULL;
	struct pick all = {.all = 1};
	int64_t k = live_sorted(t, &all, n, &v);
	if (k < 0) {
		/* No memory to sort: in page order. */
		for (size_t pg = 0; pg < t->pages.len; pg++)
			for (uint32_t i = 0; i < t->pages.v[pg].n; i++)
				end_entry(t, &t->pages.v[pg], i, HT_TS_NEVER, 0, 0);
	}
	for (int64_t i = 0; i < k; i++)
		end_entry(t, &t->pages.v[H_PAGE(v[i])], H_ENTRY(v[i]), HT_TS_NEVER, 0, 0);
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
		return inh_end(t, process, NULL, 0);
	uint64_t *v = NULL;
	struct pick pk = {.process = process};
	int64_t k = live_sorted(t, &pk, left, &v);
	if (k < 0)
		return HT_ERR_NOMEM;
	int rc = inh_end(t, process, v, k); /* before its pages go */
	end_all(t, v, k, ts, 1);
	free(v);
	return rc;
}

void ht__life_unfreed_only(struct ht__life_tracker *t)
{
	t->unfreed_only = 1;
	t->quiet_frees = 1;
}

void ht__life_no_caller(struct ht__life_tracker *t)
{
	if (!t->pages.len)
		t->no_caller = 1;
}

void ht__life_no_times(struct ht__life_tracker *t)
{
	if (!t->pages.len)
		t->no_ts = t->any_order = 1;
}

const struct ht__life_stats *ht__life_stats(const struct ht__life_tracker *t)
{
	return &t->st;
}

void ht__life_free(struct ht__life_tracker *t)
{
	if (!t)
		return;
	reset(t);
	free(t->slots);
	ht__vec_release(&t->pages);
	ht__vec_release(&t->sites);
	ht__vec_release(&t->owners);
	ht__hindex_release(&t->owner_ix);
	ht__vec_release(&t->esc);
	ht__vec_release(&t->per_proc);
	for (size_t i = 0; i < t->inh.len; i++) {
		aset_free(&t->inh.v[i].noted);
		aset_free(&t->inh.v[i].frozen);
		aset_free(&t->inh.v[i].consumed);
		ht__vec_release(&t->inh.v[i].destroyed);
	}
	ht__vec_release(&t->inh);
	free(t);
}
