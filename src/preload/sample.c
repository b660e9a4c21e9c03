/*
 * Sampling by bytes (--sample-rate, docs/session-protocol.md "Sampling"): the
 * slow path of the decision the hooks inline (internal.h, ht__sample_keep),
 * and the lock-free set of the blocks that were sampled, so that only their
 * frees are recorded.
 */
#define _GNU_SOURCE
#include <math.h>
#include <sys/mman.h>

#include "internal.h"
#include "rec_heap.h"

/*
 * The set: open addressing with linear probing in levels of growing size.
 * A slot holds 0 (never used), 1 (a removed key: probes go on past it) or a
 * key. Inserts go to the newest level and reuse removed slots; when a level
 * is half used, the next one is made (twice as large, at least four times
 * the live keys), so the memory follows the most blocks sampled at once.
 * Lookups look in every level that still holds a key, newest first; older
 * levels empty out as their blocks are freed and then cost one load.
 * Concurrent inserts and removals are compare-and-swaps on one slot: a key
 * is inserted by the thread that allocated the block before the program can
 * hand the block to another thread, so it is never removed while inserted.
 */
#define EMPTY 0u
#define GONE 1u
#define NLEVELS 40
#define FIRST_BITS 12

struct level {
	_Atomic uint64_t *slot;
	uint32_t bits;
	_Atomic uint64_t used; /* slots not EMPTY */
	_Atomic uint64_t live; /* keys */
};

_Atomic uint8_t ht__sample_filter[1u << HT_SAMPLE_FILTER_BITS];

static struct level levels[NLEVELS];
static _Atomic int nlevels;  /* levels[0 .. nlevels-1] are made */
static _Atomic int growing;  /* one thread makes the next level */
static _Atomic int lost_set; /* a key could not be kept: record every free from now on */
static _Atomic uint64_t thread_order;

static inline uint64_t slot_of(uint64_t key, uint32_t bits)
{
	return (key * 0x9e3779b97f4a7c15ull) >> (64 - bits);
}

static inline uint64_t as_key(uint64_t key)
{
	return key > GONE ? key : key + 2; /* 0 and 1 are the slots' own */
}

/* Makes level n (the caller won `growing`). 0 or -1 when out of memory. */
static int make_level(int n, uint64_t live)
{
	if (n >= NLEVELS)
		return -1;
	uint32_t bits = n ? levels[n - 1].bits : FIRST_BITS;
	while ((1ull << bits) < 4 * live && bits < 40)
		bits++;
	if (n && levels[n - 1].bits == bits)
		bits++;
	void *m = ht__own_mmap((size_t)8 << bits, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
	if (m == MAP_FAILED)
		return -1;
	levels[n].slot = m;
	levels[n].bits = bits;
	atomic_store_explicit(&nlevels, n + 1, memory_order_release);
	return 0;
}

/* Live keys in every level. */
static uint64_t live_keys(int n)
{
	uint64_t sum = 0;
	for (int k = 0; k < n; k++)
		sum += atomic_load_explicit(&levels[k].live, memory_order_relaxed);
	return sum;
}

/* The filter's byte of key: one more key (sticking at 255), or one fewer. */
static void filter_add(uint64_t key, int d)
{
	_Atomic uint8_t *b = &ht__sample_filter[ht__sample_filter_slot(key)];
	uint8_t v = atomic_load_explicit(b, memory_order_relaxed);
	while (v != 255 && !atomic_compare_exchange_weak_explicit(
			       b, &v, (uint8_t)(v + d), memory_order_relaxed, memory_order_relaxed))
		;
}

/* A key could not be kept: from now on every free is recorded. */
static void lose_set(void)
{
	atomic_store_explicit(&lost_set, 1, memory_order_relaxed);
	for (size_t i = 0; i < sizeof(ht__sample_filter); i++)
		atomic_store_explicit(&ht__sample_filter[i], 255, memory_order_relaxed);
}

void ht__sample_remember(uint64_t key)
{
	/* Before the set: a free that finds the byte 0 is never of this key. */
	filter_add(key, 1);
	key = as_key(key);
	for (;;) {
		int n = atomic_load_explicit(&nlevels, memory_order_acquire);
		struct level *l = n ? &levels[n - 1] : NULL;
		uint64_t size = l ? 1ull << l->bits : 0;
		if (!l || 2 * atomic_load_explicit(&l->used, memory_order_relaxed) >= size) {
			int no = 0;
			if (atomic_compare_exchange_strong(&growing, &no, 1)) {
				int rc =
				    atomic_load(&nlevels) == n ? make_level(n, live_keys(n)) : 0;
				atomic_store(&growing, 0);
				if (rc == 0)
					continue;
			}
			/* Another thread is making it, or none can be made: the newest
			   level takes keys up to 7/8 full, then frees are all recorded. */
			if (!l ||
			    8 * atomic_load_explicit(&l->used, memory_order_relaxed) >= 7 * size) {
				lose_set();
				return;
			}
		}
		uint64_t mask = size - 1;
		for (uint64_t i = slot_of(key, l->bits), probes = 0; probes <= mask;
		     i = (i + 1) & mask, probes++) {
			uint64_t v = atomic_load_explicit(&l->slot[i], memory_order_relaxed);
			while (v <= GONE) {
				if (atomic_compare_exchange_weak_explicit(&l->slot[i], &v, key,
									  memory_order_relaxed,
									  memory_order_relaxed)) {
					if (v == EMPTY)
						atomic_fetch_add_explicit(&l->used, 1,
									  memory_order_relaxed);
					atomic_fetch_add_explicit(&l->live, 1,
								  memory_order_relaxed);
					return;
				}
			}
		}
		lose_set();
		return;
	}
}

int ht__sample_forget(uint64_t key)
{
	uint64_t raw = key;
	key = as_key(key);
	for (int k = atomic_load_explicit(&nlevels, memory_order_acquire) - 1; k >= 0; k--) {
		struct level *l = &levels[k];
		if (!atomic_load_explicit(&l->live, memory_order_relaxed))
			continue;
		uint64_t mask = (1ull << l->bits) - 1;
		for (uint64_t i = slot_of(key, l->bits), probes = 0; probes <= mask;
		     i = (i + 1) & mask, probes++) {
			uint64_t v = atomic_load_explicit(&l->slot[i], memory_order_relaxed);
			if (v == key) {
				atomic_store_explicit(&l->slot[i], GONE, memory_order_relaxed);
				atomic_fetch_sub_explicit(&l->live, 1, memory_order_relaxed);
				filter_add(raw, -1);
				return 1;
			}
			if (v == EMPTY)
				break;
		}
	}
	return atomic_load_explicit(&lost_set, memory_order_relaxed);
}

/* xorshift64*: a uniform draw in (0, 1]. */
static double uniform(struct ht__thread *t)
{
	uint64_t x = t->sample_rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->sample_rng = x;
	return (double)(((x * 0x2545f4914f6cdd1dull) >> 11) + 1) * 0x1.0p-53;
}

/* Bytes to the next sample: exponential with mean rate, at least 1. */
static int64_t next_distance(struct ht__thread *t)
{
	double d = -log(uniform(t)) * (double)ht__g.sample_rate;
	return d < 1.0 ? 1 : d > 0x1p62 ? (int64_t)1 << 62 : (int64_t)d;
}

/* splitmix64: spreads a seed and a thread's order into a nonzero state. */
static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z ? z : 1;
}

int ht__sample_draw(struct ht__thread *t, uint64_t size)
{
	uint64_t rate = ht__g.sample_rate;
	if (HT_UNLIKELY(!t->sample_rng)) {
		/* The thread's first allocation: its counter starts now. */
		uint64_t seed = ht__g.hdr->sample_seed;
		if (!(ht__g.flags & HT_SHM_SEEDED))
			seed ^= (uint64_t)ht__g.instance << 32 ^ (uint64_t)(uint32_t)t->tid;
		t->sample_rng = mix(seed + mix(atomic_fetch_add(&thread_order, 1)));
		t->sample_left = next_distance(t) - (int64_t)size;
		if (t->sample_left > 0 && size < rate)
			return 0;
	}
	if (t->sample_left <= 0)
		t->sample_left = next_distance(t);
	return 1;
}

void ht__sample_failed(unsigned func, uint64_t size)
{
	struct ht__thread *t = &ht__t;
	int e = errno;
	if (ht__enter(t)) {
		ht__put_alloc(t, func, NULL, size);
		ht__leave(t);
	}
	errno = e;
}

enum ht__sample_realloc ht__sample_realloc(struct ht__thread *t, uint64_t heap, const void *old,
					   const void *p, uint64_t size)
{
	int old_sampled = old && ht__sample_free(ht__sample_key(heap, old));
	if (!p) {
		/* A failure keeps old as it was; realloc(old, 0) freed it. */
		if (old_sampled && size)
			ht__sample_remember(ht__sample_key(heap, old));
		return old_sampled ? HT_SR_REALLOC : HT_SR_NONE;
	}
	int new_sampled = ht__sample_keep(t, ht__sample_key(heap, p), size);
	if (old_sampled)
		return new_sampled ? HT_SR_REALLOC : HT_SR_FREE;
	return new_sampled ? HT_SR_ALLOC : HT_SR_NONE;
}
