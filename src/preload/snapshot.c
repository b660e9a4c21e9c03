/*
 * Heap snapshot mode (HT_SHM_SNAPSHOT, docs/session-protocol.md "Heap
 * snapshots"): instead of ALLOC/REALLOC/FREE records, the recorder keeps the
 * live blocks of this process image in a lock-free address table (address
 * -> stack id, size) and what each stack holds in the session file: in
 * the thread's table (its ring's, written without a locked instruction) or
 * the stacks' region, which the collector adds up when it takes a snapshot.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/*
 * The address table is a list of open-addressing levels, each twice the
 * size of the one before; inserts go to the newest. A new level is made
 * when the newest gets crowded: a thread's last SNAP_WINDOW inserts into
 * it probed SNAP_CROWDED slots past their homes (linear probing's average
 * reaches that at about 30 % of the slots live; tombs do not count, an
 * insert reuses them), or when an insert finds no free slot within
 * SNAP_PROBES of its home. So memory follows the peak of live blocks, and
 * the newest level stays sparse: a removal mostly finds its block at the
 * first probe, and looks in the older levels only when it is not in the
 * newest. A slot is EMPTY, TOMB (freed: reusable, but never EMPTY again,
 * so probe chains stay whole) or an address. One address
 * is never inserted and removed at once: malloc hands it out once at a
 * time, and a free is removed before the real free is made, so a removal
 * needs no lock (any thread removes a block from either table).
 *
 * There are two such tables. Only one thread at a time, the owner, inserts
 * into the owned one, with plain stores; every other thread inserts into
 * the shared one, claiming a slot with a compare-and-swap (two threads may
 * want one free slot there). So a program that allocates from one thread
 * at a time pays no locked instruction. The owner changes only by its own
 * hand, never inside its insert: a thread that has made SNAP_PATIENCE
 * inserts into the shared table claims the owned one when it has no owner,
 * or asks for it (marks snap_owner); the owner gives it up at its next
 * insert (which goes to the shared table) or when its thread exits. An
 * owner that never allocates again keeps it: the others go on in the
 * shared table, as every thread did before there were two.
 */
#define SNAP_LEVELS 16
#define SNAP_LEVEL0_BITS 12
#define SNAP_PROBES 32
#define SNAP_EMPTY 0u
#define SNAP_TOMB 1u
#define SNAP_SIZE_BITS 36 /* a block of 64 GiB or more is not tracked (counted) */
#define SNAP_STACK_LIMIT (1u << (64 - SNAP_SIZE_BITS))
#define SNAP_PATIENCE 256
#define SNAP_WINDOW 1024
#define SNAP_CROWDED 512 /* probes past the home in a window: grow */

struct snap_ent {
	_Atomic uint64_t key;
	_Atomic uint64_t val; /* stack << SNAP_SIZE_BITS | size */
};

struct snap_table {
	struct snap_ent *_Atomic level[SNAP_LEVELS];
	_Atomic uint32_t nlevels;
};

static struct snap_table snap_owned, snap_shared;

/* The owner's key (a thread's snap_key: even, never 0), | SNAP_ASKED when
   another thread wants the table, or SNAP_NOBODY; on a line of its own:
   every insert reads it, a handover writes it. The last key handed out is
   never reset, so a key a fork child inherited in its thread is never
   handed out again. */
#define SNAP_ASKED 1u
#define SNAP_NOBODY UINT64_MAX
static _Alignas(64) _Atomic uint64_t snap_owner = SNAP_NOBODY;
static _Atomic uint64_t snap_keys;

static inline uint64_t snap_hash(uint64_t p)
{
	return (p >> 4) * 0x9e3779b97f4a7c15ull;
}

static inline size_t snap_level_bytes(uint32_t l)
{
	return ((size_t)1 << (SNAP_LEVEL0_BITS + l)) * sizeof(struct snap_ent);
}

/* Makes level l of tab exist (several threads may race: one mapping wins). */
static HT_COLD int snap_grow(struct snap_table *tab, uint32_t l)
{
	if (l >= SNAP_LEVELS)
		return 0;
	if (!atomic_load_explicit(&tab->level[l], memory_order_acquire)) {
		struct snap_ent *mine = ht__raw_mmap(snap_level_bytes(l));
		if (!mine)
			return 0;
		struct snap_ent *none = NULL;
		if (!atomic_compare_exchange_strong(&tab->level[l], &none, mine))
			syscall(SYS_munmap, mine, snap_level_bytes(l));
	}
	uint32_t n = l;
	atomic_compare_exchange_strong(&tab->nlevels, &n, l + 1);
	return 1;
}

static void snap_untracked(uint64_t size)
{
	atomic_fetch_add_explicit(&ht__g.hdr->snap_untracked_count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&ht__g.hdr->snap_untracked_bytes, size, memory_order_relaxed);
}

/* The end of a thread's window of inserts into level n - 1 of tab: a new
   level when they probed too far. A window that saw the table grow (or a
   fork child's new table) is not judged. Not marked cold: GCC then took
   the path to its call, every insert, for a cold one and moved the
   insert's stores to the function's cold part, a jump away and back. */
static __attribute__((noinline)) void snap_window(struct ht__thread *t, struct snap_table *tab,
						  uint32_t n)
{
	if (t->snap_wlevel == n && t->snap_wprobes > SNAP_CROWDED)
		snap_grow(tab, n);
	t->snap_wins = t->snap_wprobes = 0;
	t->snap_wlevel = atomic_load_explicit(&tab->nlevels, memory_order_relaxed);
}

/* Puts p in tab with val; 0 when every level is full (a limit). mine: the
   owned table by its owner, a plain store; else a compare-and-swap. */
static inline __attribute__((always_inline)) int
snap_put_in(struct ht__thread *t, struct snap_table *tab, uint64_t p, uint64_t val, int mine)
{
	uint64_t h = snap_hash(p);
	for (;;) {
		uint32_t n = atomic_load_explicit(&tab->nlevels, memory_order_acquire);
		if (n) {
			uint32_t bits = SNAP_LEVEL0_BITS + n - 1;
			uint64_t mask = ((uint64_t)1 << bits) - 1;
			struct snap_ent *l =
			    atomic_load_explicit(&tab->level[n - 1], memory_order_acquire);
			uint64_t i = h >> (64 - bits);
			for (unsigned k = 0; k < SNAP_PROBES; k++) {
				struct snap_ent *e = &l[(i + k) & mask];
				uint64_t key = atomic_load_explicit(&e->key, memory_order_relaxed);
				if (key > SNAP_TOMB)
					continue;
				if (mine) {
					atomic_store_explicit(&e->val, val, memory_order_relaxed);
					atomic_store_explicit(&e->key, p, memory_order_release);
				} else if (atomic_compare_exchange_strong_explicit(
					       &e->key, &key, p, memory_order_relaxed,
					       memory_order_relaxed)) {
					atomic_store_explicit(&e->val, val, memory_order_relaxed);
				} else {
					continue;
				}
				t->snap_wprobes += k;
				if (HT_UNLIKELY(++t->snap_wins >= SNAP_WINDOW))
					snap_window(t, tab, n);
				return 1;
			}
		}
		if (!snap_grow(tab, n))
			return 0;
	}
}

/* A thread not the owner: the shared table, or the owned one handed over. */
static __attribute__((noinline)) int snap_put_other(struct ht__thread *t, uint64_t p, uint64_t val)
{
	uint64_t o = atomic_load_explicit(&snap_owner, memory_order_relaxed);
	if (o == (t->snap_key | SNAP_ASKED)) {
		/* Asked for: given up, this insert going to the shared table. */
		atomic_compare_exchange_strong(&snap_owner, &o, SNAP_NOBODY);
	} else if (t->snap_sput++ >= SNAP_PATIENCE && !t->exited) {
		t->snap_sput = 0;
		if (o == SNAP_NOBODY) {
			uint64_t key = atomic_fetch_add(&snap_keys, 2) + 2;
			if (atomic_compare_exchange_strong(&snap_owner, &o, key)) {
				t->snap_key = key;
				return snap_put_in(t, &snap_owned, p, val, 1);
			}
		} else if (!(o & SNAP_ASKED)) {
			atomic_compare_exchange_strong(&snap_owner, &o, o | SNAP_ASKED);
		}
	}
	return snap_put_in(t, &snap_shared, p, val, 0);
}

/* Puts p in a table with val; 0 when it is full (a limit). Inlined: it is
   half of every allocation's cost. */
static inline __attribute__((always_inline)) int snap_put(struct ht__thread *t, uint64_t p,
							  uint64_t val)
{
	if (HT_LIKELY(atomic_load_explicit(&snap_owner, memory_order_relaxed) == t->snap_key))
		return snap_put_in(t, &snap_owned, p, val, 1);
	return snap_put_other(t, p, val);
}

void ht__snap_thread_exit(struct ht__thread *t)
{
	/* The owner gives the owned table up as it goes. */
	uint64_t o = atomic_load_explicit(&snap_owner, memory_order_relaxed);
	if ((o | SNAP_ASKED) == (t->snap_key | SNAP_ASKED))
		atomic_compare_exchange_strong(&snap_owner, &o, SNAP_NOBODY);
}

/* Looks for p in level l of tab from h's home: removes it and gives its
   value; 0 when an EMPTY slot or SNAP_PROBES slots say it is not there. */
static inline __attribute__((always_inline)) int snap_take_at(struct snap_table *tab, uint32_t l,
							      uint64_t p, uint64_t h, uint64_t *val)
{
	uint32_t bits = SNAP_LEVEL0_BITS + l;
	uint64_t mask = ((uint64_t)1 << bits) - 1;
	struct snap_ent *e0 = atomic_load_explicit(&tab->level[l], memory_order_acquire);
	uint64_t i = h >> (64 - bits);
	for (unsigned k = 0; k < SNAP_PROBES; k++) {
		struct snap_ent *e = &e0[(i + k) & mask];
		uint64_t key = atomic_load_explicit(&e->key, memory_order_relaxed);
		if (HT_LIKELY(key == p)) {
			*val = atomic_load_explicit(&e->val, memory_order_relaxed);
			atomic_store_explicit(&e->key, SNAP_TOMB, memory_order_release);
			return 1;
		}
		if (key == SNAP_EMPTY)
			break;
	}
	return 0;
}

/* The levels of tab before its newest, n - 1 of them, newest first. */
static __attribute__((noinline)) int snap_take_old(struct snap_table *tab, uint32_t n, uint64_t p,
						   uint64_t h, uint64_t *val)
{
	while (n--)
		if (snap_take_at(tab, n, p, h, val))
			return 1;
	return 0;
}

static inline __attribute__((always_inline)) int snap_take_in(struct snap_table *tab, uint64_t p,
							      uint64_t h, uint64_t *val)
{
	uint32_t n = atomic_load_explicit(&tab->nlevels, memory_order_acquire);
	if (HT_UNLIKELY(!n))
		return 0;
	return snap_take_at(tab, n - 1, p, h, val) ||
	       (n > 1 && snap_take_old(tab, n - 1, p, h, val));
}

/* Removes p from the table t inserts into first, then from the other. */
static inline __attribute__((always_inline)) int snap_take(struct ht__thread *t, uint64_t p,
							   uint64_t *val)
{
	uint64_t h = snap_hash(p);
	int own = atomic_load_explicit(&snap_owner, memory_order_relaxed) == t->snap_key;
	struct snap_table *first = own ? &snap_owned : &snap_shared;
	struct snap_table *second = own ? &snap_shared : &snap_owned;
	return snap_take_in(first, p, h, val) || snap_take_in(second, p, h, val);
}

int ht__snap_take(uint64_t p, uint64_t *val)
{
	return snap_take(&ht__t, p, val);
}

void ht__snap_put_back(struct ht__thread *t, uint64_t p, uint64_t val)
{
	if (!snap_put(t, p, val)) {
		/* Counted live when it was allocated: now it is lost to the
		   table, so it is freed from its stack and counted untracked. */
		ht__snap_freed(t, val);
		snap_untracked(val & (((uint64_t)1 << SNAP_SIZE_BITS) - 1));
	}
}

/*
 * The counts of the process heap's stacks go to the thread's table, its
 * ring's (docs/session-protocol.md, "The threads' tables"): only the ring's
 * owner writes it, so an add is a load and a store, no locked instruction.
 * Without a table (no ring free, a thread past its key destructor) or
 * without room in it for the stack, they go to the stacks' region with
 * atomic adds.
 */
static HT_COLD struct ht__snap_thr_ent *snap_tab_find(struct ht__thread *t)
{
	struct ht__snap_thr_ent *tab = NULL;
	int e = errno; /* the free hook leaves errno to us (hooks_malloc.c) */
	if (!t->ring && !t->exited && !t->snap_noring && !ht__ring_claim_now(t))
		t->snap_noring = 1; /* counts go to the region; a later claim is seen */
	errno = e;
	if (t->ring && !t->exited) {
		size_t i = (size_t)((char *)t->ring - ht__g.rings) / ht__g.ring_stride;
		tab = (struct ht__snap_thr_ent *)(ht__g.snap_thr + i * ht__g.snap_thr_bytes);
	}
	/* Without a table nothing matches (a ring's address | 1 is never 0),
	   so the next count comes back here. */
	t->snap_ring = tab ? (uintptr_t)t->ring | 1 : 0;
	t->snap_tab = tab;
	return tab;
}

static HT_COLD struct ht__snap_stack *snap_tab_take(struct ht__thread *t,
						    struct ht__snap_thr_ent *e, uint32_t key)
{
	atomic_store_explicit(&e->key, key, memory_order_release);
	if (!atomic_load_explicit(&t->ring->snap_used, memory_order_relaxed))
		atomic_store_explicit(&t->ring->snap_used, 1, memory_order_release);
	return &e->c;
}

#define SNAP_THR_BITS 10 /* HT_SNAP_THR_SLOTS, the only size a recorder takes */
_Static_assert(HT_SNAP_THR_SLOTS == 1u << SNAP_THR_BITS, "threads' table size");

/* stack's counters in the thread's table, or NULL: count on the region. */
static inline __attribute__((always_inline)) struct ht__snap_stack *snap_mine(struct ht__thread *t,
									      uint32_t stack)
{
	struct ht__snap_thr_ent *tab = t->snap_tab;
	if (HT_UNLIKELY(t->snap_ring != ((uintptr_t)t->ring | 1)) && !(tab = snap_tab_find(t)))
		return NULL;
	uint32_t key = stack + 1;
	uint32_t i = (uint32_t)(key * 0x9e3779b9u) >> (32 - SNAP_THR_BITS);
	for (uint32_t k = 0; k < HT_SNAP_THR_PROBES; k++) {
		struct ht__snap_thr_ent *e = &tab[(i + k) & (HT_SNAP_THR_SLOTS - 1)];
		uint32_t v = atomic_load_explicit(&e->key, memory_order_relaxed);
		if (HT_LIKELY(v == key))
			return &e->c;
		if (!v)
			return snap_tab_take(t, e, key);
	}
	return NULL;
}

/* An add to a counter only this thread writes. */
static inline void snap_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

static inline __attribute__((always_inline)) void snap_freed(struct ht__thread *t, uint64_t val)
{
	uint32_t ent = (uint32_t)(val >> SNAP_SIZE_BITS);
	uint64_t size = val & (((uint64_t)1 << SNAP_SIZE_BITS) - 1);
	struct ht__snap_stack *s;
	if (HT_LIKELY(ent < ht__g.snap_cap)) {
		if (HT_LIKELY((s = snap_mine(t, ent)) != NULL)) {
			snap_add(&s->freed_bytes, size);
			snap_add(&s->freed_count, 1);
			return;
		}
		s = ht__g.snap + ent;
	} else { /* a custom heap's (heap, stack) entry */
		s = &ht__g.snap_heap[ent - ht__g.snap_cap].c;
	}
	atomic_fetch_add_explicit(&s->freed_bytes, size, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->freed_count, 1, memory_order_relaxed);
}

void ht__snap_freed(struct ht__thread *t, uint64_t val)
{
	snap_freed(t, val);
}

void ht__snap_free(struct ht__thread *t, const void *p)
{
	uint64_t v;
	if (snap_take(t, (uint64_t)(uintptr_t)p, &v))
		snap_freed(t, v);
}

void ht__snap_alloc(struct ht__thread *t, void *p, uint64_t size, uint32_t bit)
{
	ht__snap_alloc_at(t, p, size, ht__stack_for(t, bit));
}

void ht__snap_alloc_at(struct ht__thread *t, void *p, uint64_t size, uint32_t stack)
{
	if (HT_UNLIKELY(
		stack >= ht__g.snap_cap || stack >= SNAP_STACK_LIMIT || size >> SNAP_SIZE_BITS ||
		!snap_put(t, (uint64_t)(uintptr_t)p, (uint64_t)stack << SNAP_SIZE_BITS | size))) {
		snap_untracked(size);
		return;
	}
	struct ht__snap_stack *s = snap_mine(t, stack);
	if (HT_LIKELY(s != NULL)) {
		snap_add(&s->alloc_bytes, size);
		snap_add(&s->alloc_count, 1);
		return;
	}
	s = ht__g.snap + stack;
	atomic_fetch_add_explicit(&s->alloc_bytes, size, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->alloc_count, 1, memory_order_relaxed);
}

/*
 * Custom heaps (include/heaptrail/heap.h). A block of heap H at address p is
 * in the same address table under the key slot(H) << 48 | p, where slot(H)
 * (1 ..) is H's place in this image's table of handles: a pool carved from
 * a malloc'd block, or two heaps handing out one address, never share a
 * key, and a heap's blocks are found by the key's top bits when it is
 * destroyed. Its packed value's entry is snap_cap + j, j the session
 * region's entry (struct ht__snap_heap) this image claimed for (H, stack),
 * found through a private index keyed slot(H) << 32 | stack. Both private
 * tables are mapped at the first custom heap block; a full one, an address
 * of 48 bits or more, or a full region: the block is counted untracked.
 */
#define SNAP_ADDR_BITS 48
#define SNAP_HANDLES_BITS 14 /* handles an image can have (< 2^16) */
#define SNAP_INDEX_BITS 16   /* (heap, stack) pairs of an image */
#define SNAP_MAP_PROBES 64

struct snap_index {
	_Atomic uint64_t key; /* slot << 32 | stack; 0: empty */
	_Atomic uint32_t ent; /* j + 1; 0 while its claimer fills it in */
	uint32_t pad;
};

static _Atomic uint64_t *_Atomic snap_handles;
static struct snap_index *_Atomic snap_index;

/* Maps a private table of bytes once (racing threads keep one mapping). */
static HT_COLD void *snap_table_map(void *_Atomic *where, size_t bytes)
{
	void *mine = ht__raw_mmap(bytes);
	if (!mine)
		return NULL;
	void *none = NULL;
	if (atomic_compare_exchange_strong(where, &none, mine))
		return mine;
	syscall(SYS_munmap, mine, bytes);
	return none;
}

static inline void *snap_table(void *_Atomic *where, size_t bytes)
{
	void *t = atomic_load_explicit(where, memory_order_acquire);
	return HT_LIKELY(t != NULL) ? t : snap_table_map(where, bytes);
}

/* heap's slot (1 ..), added when add; 0 when not there or the table is full. */
static uint32_t snap_heap_slot(uint64_t heap, int add)
{
	_Atomic uint64_t *h = atomic_load_explicit(&snap_handles, memory_order_acquire);
	if (!h && (!add || !(h = snap_table((void *_Atomic *)&snap_handles,
					    sizeof(*h) << SNAP_HANDLES_BITS))))
		return 0;
	uint64_t mask = ((uint64_t)1 << SNAP_HANDLES_BITS) - 1;
	uint64_t i = snap_hash(heap) >> (64 - SNAP_HANDLES_BITS);
	for (unsigned k = 0; k < SNAP_MAP_PROBES; k++) {
		uint32_t at = (uint32_t)((i + k) & mask);
		uint64_t v = atomic_load_explicit(&h[at], memory_order_relaxed);
		if (!v && !add)
			return 0; /* handles never leave: it is not there */
		if (!v && atomic_compare_exchange_strong(&h[at], &v, heap))
			return at + 1;
		if (v == heap) /* there, or put there by another thread at once */
			return at + 1;
	}
	return 0;
}

/* A new entry of the session's region for (heap, stack): j + 1, 0 when full. */
static uint32_t snap_heap_claim(uint64_t heap, uint32_t stack)
{
	struct ht__shm_header *hdr = ht__g.hdr;
	if (atomic_load_explicit(&hdr->snap_heap_next, memory_order_relaxed) >= ht__g.snap_heap_cap)
		return 0;
	uint32_t j = atomic_fetch_add_explicit(&hdr->snap_heap_next, 1, memory_order_relaxed);
	if (j >= ht__g.snap_heap_cap)
		return 0;
	struct ht__snap_heap *e = ht__g.snap_heap + j;
	e->heap = heap;
	e->stack = stack;
	atomic_store_explicit(&e->ready, 1, memory_order_release);
	return j + 1;
}

/* The region's entry of (heap in slot, stack): j + 1, or 0 (a limit). */
static uint32_t snap_heap_entry(uint64_t heap, uint32_t slot, uint32_t stack)
{
	struct snap_index *x =
	    snap_table((void *_Atomic *)&snap_index, sizeof(*x) << SNAP_INDEX_BITS);
	if (!x)
		return 0;
	uint64_t key = (uint64_t)slot << 32 | stack;
	uint64_t mask = ((uint64_t)1 << SNAP_INDEX_BITS) - 1;
	uint64_t i = snap_hash(key << 4) >> (64 - SNAP_INDEX_BITS);
	for (unsigned k = 0; k < SNAP_MAP_PROBES; k++) {
		struct snap_index *e = &x[(i + k) & mask];
		uint64_t v = atomic_load_explicit(&e->key, memory_order_acquire);
		if (!v && atomic_compare_exchange_strong(&e->key, &v, key)) {
			uint32_t j = snap_heap_claim(heap, stack);
			atomic_store_explicit(&e->ent, j, memory_order_release);
			return j;
		}
		if (v == key) {
			/* Its claimer may still be filling it in: then this block
			   gets an entry of its own (the collector adds them up). */
			uint32_t j = atomic_load_explicit(&e->ent, memory_order_acquire);
			return j ? j : snap_heap_claim(heap, stack);
		}
	}
	return 0;
}

/* The thread's caches (a loop allocates from one heap at one call site),
   emptied when they are another instance's. */
static inline int snap_cached(struct ht__thread *t)
{
	if (HT_LIKELY(t->snap_inst == ht__g.instance))
		return 1;
	t->snap_inst = ht__g.instance;
	t->snap_slot = t->snap_ent = 0;
	return 0;
}

static inline uint32_t heap_slot(struct ht__thread *t, uint64_t heap, int add)
{
	if (snap_cached(t) && t->snap_slot && t->snap_heap == heap)
		return t->snap_slot;
	uint32_t slot = snap_heap_slot(heap, add);
	if (slot) {
		t->snap_heap = heap;
		t->snap_slot = slot;
	}
	return slot;
}

static inline uint32_t heap_entry(struct ht__thread *t, uint64_t heap, uint32_t slot,
				  uint32_t stack)
{
	uint64_t pair = (uint64_t)slot << 32 | stack;
	if (snap_cached(t) && t->snap_ent && t->snap_pair == pair)
		return t->snap_ent;
	uint32_t j = snap_heap_entry(heap, slot, stack);
	if (j) {
		t->snap_pair = pair;
		t->snap_ent = j;
	}
	return j;
}

static inline uint64_t snap_heap_key(uint32_t slot, const void *p)
{
	return (uint64_t)slot << SNAP_ADDR_BITS | (uint64_t)(uintptr_t)p;
}

void ht__snap_heap_alloc(struct ht__thread *t, uint64_t heap, const void *p, uint64_t size,
			 uint32_t bit)
{
	if (!heap) { /* the process heap's handle */
		ht__snap_alloc(t, (void *)p, size, bit);
		return;
	}
	uint32_t stack = ht__stack_for(t, bit);
	uint32_t slot = (uint64_t)(uintptr_t)p >> SNAP_ADDR_BITS ? 0 : heap_slot(t, heap, 1);
	uint32_t j = slot && stack < SNAP_STACK_LIMIT ? heap_entry(t, heap, slot, stack) : 0;
	uint64_t ent = (uint64_t)ht__g.snap_cap + j - 1;
	if (!j || size >> SNAP_SIZE_BITS ||
	    !snap_put(t, snap_heap_key(slot, p), ent << SNAP_SIZE_BITS | size)) {
		snap_untracked(size);
		return;
	}
	struct ht__snap_stack *s = &ht__g.snap_heap[j - 1].c;
	atomic_fetch_add_explicit(&s->alloc_bytes, size, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->alloc_count, 1, memory_order_relaxed);
}

void ht__snap_heap_free(struct ht__thread *t, uint64_t heap, const void *p)
{
	uint64_t v;
	uint32_t slot = heap ? heap_slot(t, heap, 0) : 0;
	if ((!heap || slot) && snap_take(t, heap ? snap_heap_key(slot, p) : (uintptr_t)p, &v))
		ht__snap_freed(t, v);
}

void ht__snap_heap_destroy(uint64_t heap)
{
	/* Every block still in the heap goes with it, as the trace's readers
	   end them at a HEAP_DESTROY: a walk of the table (destroying a heap
	   is rare; its cost follows the table, not the program's calls). */
	uint32_t slot = heap ? snap_heap_slot(heap, 0) : 0;
	if (!slot)
		return;
	for (int w = 0; w < 2; w++) {
		struct snap_table *tab = w ? &snap_shared : &snap_owned;
		uint32_t n = atomic_load_explicit(&tab->nlevels, memory_order_acquire);
		for (uint32_t l = 0; l < n; l++) {
			struct snap_ent *e =
			    atomic_load_explicit(&tab->level[l], memory_order_acquire);
			for (uint64_t i = 0; i < (uint64_t)1 << (SNAP_LEVEL0_BITS + l); i++) {
				uint64_t key =
				    atomic_load_explicit(&e[i].key, memory_order_relaxed);
				if (key >> SNAP_ADDR_BITS != slot)
					continue;
				uint64_t val =
				    atomic_load_explicit(&e[i].val, memory_order_relaxed);
				if (atomic_compare_exchange_strong(&e[i].key, &key, SNAP_TOMB))
					ht__snap_freed(&ht__t, val);
			}
		}
	}
}

void ht__snap_reset(void)
{
	/* A new instance (fork child): the parent's blocks are counted on the
	   parent's stacks, so the child starts an empty table of its own (and
	   an empty index: its stacks are its own). */
	for (int w = 0; w < 2; w++) {
		struct snap_table *tab = w ? &snap_shared : &snap_owned;
		atomic_store(&tab->nlevels, 0);
		for (uint32_t l = 0; l < SNAP_LEVELS; l++) {
			struct snap_ent *e = atomic_exchange(&tab->level[l], NULL);
			if (e)
				syscall(SYS_munmap, e, snap_level_bytes(l));
		}
	}
	/* No owner: a fork child has one thread. */
	atomic_store(&snap_owner, SNAP_NOBODY);
	struct snap_index *x = atomic_exchange(&snap_index, NULL);
	if (x)
		syscall(SYS_munmap, x, sizeof(*x) << SNAP_INDEX_BITS);
}
