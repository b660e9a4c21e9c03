/*
 * Heap snapshot mode (HT_SHM_SNAPSHOT, docs/session-protocol.md "Heap
 * snapshots"): instead of ALLOC/REALLOC/FREE records, the recorder keeps the
 * live blocks of this process image in a lock-free address table (address
 * -> stack id, size) and what each stack holds in the session file's
 * snapshot region, which the collector reads when it takes a snapshot.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/*
 * The address table is a list of open-addressing levels, each twice the
 * size of the one before; a new level is made when an insert finds no free
 * slot within SNAP_PROBES of its home in the newest one, so memory follows
 * the peak of live blocks. A slot is EMPTY, TOMB (freed: reusable, but
 * never EMPTY again, so probe chains stay whole) or an address. One address
 * is never inserted and removed at once: malloc hands it out once at a
 * time, and a free is removed before the real free is made, so no slot
 * needs a lock.
 */
#define SNAP_LEVELS 16
#define SNAP_LEVEL0_BITS 12
#define SNAP_PROBES 32
#define SNAP_EMPTY 0u
#define SNAP_TOMB 1u
#define SNAP_SIZE_BITS 36 /* a block of 64 GiB or more is not tracked (counted) */
#define SNAP_STACK_LIMIT (1u << (64 - SNAP_SIZE_BITS))

struct snap_ent {
	_Atomic uint64_t key;
	_Atomic uint64_t val; /* stack << SNAP_SIZE_BITS | size */
};

static struct snap_ent *_Atomic snap_level[SNAP_LEVELS];
static _Atomic uint32_t snap_nlevels;

static inline uint64_t snap_hash(uint64_t p)
{
	return (p >> 4) * 0x9e3779b97f4a7c15ull;
}

static inline size_t snap_level_bytes(uint32_t l)
{
	return ((size_t)1 << (SNAP_LEVEL0_BITS + l)) * sizeof(struct snap_ent);
}

/* Makes level l exist (several threads may race: one mapping wins). */
static HT_COLD int snap_grow(uint32_t l)
{
	if (l >= SNAP_LEVELS)
		return 0;
	if (!atomic_load_explicit(&snap_level[l], memory_order_acquire)) {
		struct snap_ent *mine = ht__raw_mmap(snap_level_bytes(l));
		if (!mine)
			return 0;
		struct snap_ent *none = NULL;
		if (!atomic_compare_exchange_strong(&snap_level[l], &none, mine))
			syscall(SYS_munmap, mine, snap_level_bytes(l));
	}
	uint32_t n = l;
	atomic_compare_exchange_strong(&snap_nlevels, &n, l + 1);
	return 1;
}

static void snap_untracked(uint64_t size)
{
	atomic_fetch_add_explicit(&ht__g.hdr->snap_untracked_count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&ht__g.hdr->snap_untracked_bytes, size, memory_order_relaxed);
}

/* Puts p in the table with val; 0 when every level is full (a limit). */
static int snap_put(uint64_t p, uint64_t val)
{
	uint64_t h = snap_hash(p);
	for (;;) {
		uint32_t n = atomic_load_explicit(&snap_nlevels, memory_order_acquire);
		if (n) {
			uint32_t bits = SNAP_LEVEL0_BITS + n - 1;
			uint64_t mask = ((uint64_t)1 << bits) - 1;
			struct snap_ent *tab =
			    atomic_load_explicit(&snap_level[n - 1], memory_order_acquire);
			uint64_t i = h >> (64 - bits);
			for (unsigned k = 0; k < SNAP_PROBES; k++) {
				struct snap_ent *e = &tab[(i + k) & mask];
				uint64_t key = atomic_load_explicit(&e->key, memory_order_relaxed);
				if (key <= SNAP_TOMB && atomic_compare_exchange_strong_explicit(
							    &e->key, &key, p, memory_order_relaxed,
							    memory_order_relaxed)) {
					atomic_store_explicit(&e->val, val, memory_order_relaxed);
					return 1;
				}
			}
		}
		if (!snap_grow(n))
			return 0;
	}
}

int ht__snap_take(uint64_t p, uint64_t *val)
{
	uint64_t h = snap_hash(p);
	uint32_t n = atomic_load_explicit(&snap_nlevels, memory_order_acquire);
	while (n--) {
		uint32_t bits = SNAP_LEVEL0_BITS + n;
		uint64_t mask = ((uint64_t)1 << bits) - 1;
		struct snap_ent *tab = atomic_load_explicit(&snap_level[n], memory_order_acquire);
		uint64_t i = h >> (64 - bits);
		for (unsigned k = 0; k < SNAP_PROBES; k++) {
			struct snap_ent *e = &tab[(i + k) & mask];
			uint64_t key = atomic_load_explicit(&e->key, memory_order_relaxed);
			if (key == p) {
				*val = atomic_load_explicit(&e->val, memory_order_relaxed);
				atomic_store_explicit(&e->key, SNAP_TOMB, memory_order_release);
				return 1;
			}
			if (key == SNAP_EMPTY)
				break;
		}
	}
	return 0;
}

void ht__snap_put_back(uint64_t p, uint64_t val)
{
	if (!snap_put(p, val)) {
		/* Counted live when it was allocated: now it is lost to the
		   table, so it is freed from its stack and counted untracked. */
		ht__snap_freed(val);
		snap_untracked(val & (((uint64_t)1 << SNAP_SIZE_BITS) - 1));
	}
}

void ht__snap_freed(uint64_t val)
{
	uint32_t stack = (uint32_t)(val >> SNAP_SIZE_BITS);
	struct ht__snap_stack *s = ht__g.snap + stack;
	atomic_fetch_add_explicit(&s->freed_bytes, val & (((uint64_t)1 << SNAP_SIZE_BITS) - 1),
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&s->freed_count, 1, memory_order_relaxed);
}

void ht__snap_alloc(struct ht__thread *t, void *p, uint64_t size, uint32_t bit)
{
	uint32_t stack = ht__stack_for(t, bit);
	if (HT_UNLIKELY(
		stack >= ht__g.snap_cap || stack >= SNAP_STACK_LIMIT || size >> SNAP_SIZE_BITS ||
		!snap_put((uint64_t)(uintptr_t)p, (uint64_t)stack << SNAP_SIZE_BITS | size))) {
		snap_untracked(size);
		return;
	}
	struct ht__snap_stack *s = ht__g.snap + stack;
	atomic_fetch_add_explicit(&s->alloc_bytes, size, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->alloc_count, 1, memory_order_relaxed);
}

void ht__snap_reset(void)
{
	/* A new instance (fork child): the parent's blocks are counted on the
	   parent's stacks, so the child starts an empty table of its own. */
	atomic_store(&snap_nlevels, 0);
	for (uint32_t l = 0; l < SNAP_LEVELS; l++) {
		struct snap_ent *tab = atomic_exchange(&snap_level[l], NULL);
		if (tab)
			syscall(SYS_munmap, tab, snap_level_bytes(l));
	}
}
