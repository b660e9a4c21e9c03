/*
 * vec.h - the growable array and the hash index the tree outside the
 * recorder uses instead of hand-written "cap * 2" blocks and open-addressing
 * tables (the recorder keeps its own: it may not allocate). Header only, so
 * the session, the CLI and the analysis use it without a library between.
 *
 * Growable arrays, either as a typed struct:
 *
 *     HT_VEC(struct row) rows = {0};
 *     if (ht__vec_push(&rows, r) < 0) return HT_ERR_NOMEM;
 *     for (size_t i = 0; i < rows.len; i++) use(&rows.v[i]);
 *     ht__vec_release(&rows);
 *
 * or on a pointer and a capacity kept elsewhere (a struct's fields):
 *
 *     if (ht__grow((void **)&t->items, &t->cap, t->n + 1, sizeof(*t->items)) < 0) ...
 *
 * Capacities double (from 16 elements), so n pushes cost O(n) copies.
 *
 * Hash index: an open-addressing table of ids (the caller's array indices)
 * with linear probing, kept at most half full. The entries stay in the
 * caller's array; the index only finds them:
 *
 *     struct ht__hindex ix = {0};
 *     uint64_t h = hash_of(key);
 *     uint32_t *slot = ht__hindex_find(&ix, h);
 *     for (; *slot; slot = ht__hindex_next(&ix, slot))
 *         if (same(&items[*slot - 1], key)) return *slot - 1;   // found
 *     // not found: append to items, then
 *     if (ht__hindex_insert(&ix, h, id, rehash_fn, items) < 0) ...
 *
 * Slots hold id + 1 (0 is empty). An id leaves with ht__hindex_remove(), given
 * the slot the lookup found it in; the caller may then reuse the id. Not
 * thread-safe.
 *
 * An index may instead keep each slot's hash (its low 32 bits) beside it:
 * insert with ht__hindex_insert_kept() and remove with
 * ht__hindex_remove_kept(). A lookup then compares the hash before the key
 * (no key that cannot match is looked at), and growing and removing need no
 * callback. The collector's tables work this way (keys that take a string
 * compare or a pointer chase to check):
 *
 *     for (; *slot; slot = ht__hindex_next(&ix, slot))
 *         if (ht__hindex_hash(&ix, slot) == (uint32_t)h && same(...)) ...
 *     ht__hindex_insert_kept(&ix, h, id);
 *
 * An index is one kind or the other all its life. (Separate functions, not a
 * NULL callback: the plain ones stay small enough to inline with their
 * callback, as the collector's frame and stack tables need.)
 */
#ifndef HT_BASE_VEC_H
#define HT_BASE_VEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "heaptrail/trace.h" /* HT_ERR_NOMEM */

/*
 * Makes *p hold at least need elements of size bytes (*cap counts them),
 * doubling. New memory is not cleared. Returns 0 or HT_ERR_NOMEM (*p is
 * unchanged then).
 */
static inline int ht__grow(void **p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 16;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return HT_ERR_NOMEM;
		n *= 2;
	}
	if (n > SIZE_MAX / size)
		return HT_ERR_NOMEM;
	void *q = realloc(*p, n * size);
	if (!q)
		return HT_ERR_NOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* ht__grow(), clearing the new elements. */
static inline int ht__grow_zero(void **p, size_t *cap, size_t need, size_t size)
{
	size_t old = *cap;
	int rc = ht__grow(p, cap, need, size);
	if (rc == 0 && *cap > old)
		memset((char *)*p + old * size, 0, (*cap - old) * size);
	return rc;
}

/*
 * Two arrays that share one capacity (parallel columns): both hold at least
 * need elements afterwards, or HT_ERR_NOMEM (either may have grown then;
 * *cap still fits both).
 */
static inline int ht__grow2(void **a, size_t asize, void **b, size_t bsize, size_t *cap,
			    size_t need)
{
	size_t ca = *cap, cb = *cap;
	if (ht__grow(a, &ca, need, asize) < 0 || ht__grow(b, &cb, need, bsize) < 0)
		return HT_ERR_NOMEM;
	*cap = ca < cb ? ca : cb;
	return 0;
}

/* ht__grow() and ht__grow_zero() for a uint32_t capacity. */
static inline int ht__grow32(void **p, uint32_t *cap, size_t need, size_t size)
{
	size_t c = *cap;
	if (need > UINT32_MAX || ht__grow(p, &c, need, size) < 0)
		return HT_ERR_NOMEM;
	*cap = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
	return 0;
}

static inline int ht__grow32_zero(void **p, uint32_t *cap, size_t need, size_t size)
{
	size_t c = *cap;
	if (need > UINT32_MAX || ht__grow_zero(p, &c, need, size) < 0)
		return HT_ERR_NOMEM;
	*cap = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
	return 0;
}

/* A typed growable array: v[0 .. len), room for cap. Zero-initialize it. */
#define HT_VEC(T)                                                                                  \
	struct {                                                                                   \
		T *v;                                                                              \
		size_t len, cap;                                                                   \
	}

/* Room for n elements in all. 0 or HT_ERR_NOMEM. */
#define ht__vec_reserve(vec, n) ht__grow((void **)&(vec)->v, &(vec)->cap, (n), sizeof(*(vec)->v))

/* Appends x. 0 or HT_ERR_NOMEM. */
#define ht__vec_push(vec, x)                                                                       \
	(ht__vec_reserve((vec), (vec)->len + 1) < 0 ? HT_ERR_NOMEM                                 \
						    : ((vec)->v[(vec)->len++] = (x), 0))

/* Makes len at least n, the new elements zero. 0 or HT_ERR_NOMEM. */
#define ht__vec_grow_zero(vec, n)                                                                  \
	((n) <= (vec)->len ? 0                                                                     \
	 : ht__grow_zero((void **)&(vec)->v, &(vec)->cap, (n), sizeof(*(vec)->v)) < 0              \
	     ? HT_ERR_NOMEM                                                                        \
	     : (memset((vec)->v + (vec)->len, 0, ((n) - (vec)->len) * sizeof(*(vec)->v)),          \
		(vec)->len = (n), 0))

#define ht__vec_release(vec) (free((vec)->v), (vec)->v = NULL, (vec)->len = (vec)->cap = 0)

/* ---- hashing ---- */

/* A full 64-bit mix (murmur3's finalizer). */
static inline uint64_t ht__mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* A string's hash (FNV-1a, mixed). */
static inline uint64_t ht__hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return ht__mix64(h);
}

/* ---- hash index ---- */

struct ht__hindex {
	uint32_t *slots;  /* id + 1, 0 empty */
	uint32_t *hashes; /* each slot's hash when the index keeps them, else NULL */
	size_t cap;	  /* a power of two, or 0 */
	size_t count;
};

/* The hash of entry id, to re-place it when the index grows. */
typedef uint64_t (*ht__hindex_hash_fn)(const void *ctx, uint32_t id);

/* The first slot to look at for hash h (an empty index gives a slot holding 0). */
static inline uint32_t *ht__hindex_find(const struct ht__hindex *ix, uint64_t h)
{
	static uint32_t empty;
	return ix->cap ? &ix->slots[h & (ix->cap - 1)] : &empty;
}

/* The slot after s in the probe sequence. */
static inline uint32_t *ht__hindex_next(const struct ht__hindex *ix, uint32_t *s)
{
	size_t i = (size_t)(s - ix->slots);
	return &ix->slots[(i + 1) & (ix->cap - 1)];
}

/* The hash kept for the id in slot s (an index that keeps them). */
static inline uint32_t ht__hindex_hash(const struct ht__hindex *ix, const uint32_t *s)
{
	return ix->hashes[s - ix->slots];
}

/* A kept index that grows to ncap slots, re-placed from the kept hashes. */
static inline int ht__hindex_regrow_kept(struct ht__hindex *ix, size_t ncap)
{
	uint32_t *ns = calloc(ncap, sizeof(*ns)), *nh = calloc(ncap, sizeof(*nh));
	if (!ns || !nh) {
		free(ns);
		free(nh);
		return HT_ERR_NOMEM;
	}
	for (size_t i = 0; i < ix->cap; i++) {
		if (!ix->slots[i])
			continue;
		size_t j = ix->hashes[i] & (ncap - 1);
		while (ns[j])
			j = (j + 1) & (ncap - 1);
		ns[j] = ix->slots[i];
		nh[j] = ix->hashes[i];
	}
	free(ix->slots);
	free(ix->hashes);
	ix->slots = ns;
	ix->hashes = nh;
	ix->cap = ncap;
	return 0;
}

/* ht__hindex_insert() of an index that keeps its hashes (h's low 32 bits). */
static inline int ht__hindex_insert_kept(struct ht__hindex *ix, uint64_t h, uint32_t id)
{
	/* A keeping index starts small: the collector has many of a few ids. */
	if ((ix->count + 1) * 2 > ix->cap &&
	    ht__hindex_regrow_kept(ix, ix->cap ? ix->cap * 2 : 64) < 0)
		return HT_ERR_NOMEM;
	size_t j = h & (ix->cap - 1);
	while (ix->slots[j])
		j = (j + 1) & (ix->cap - 1);
	ix->slots[j] = id + 1;
	ix->hashes[j] = (uint32_t)h;
	ix->count++;
	return 0;
}

/*
 * Adds id (not in the index yet) under hash h, growing the index (and
 * re-placing every id with hash(ctx, id)) to stay at most half full.
 * Returns 0 or HT_ERR_NOMEM.
 */
static inline int ht__hindex_insert(struct ht__hindex *ix, uint64_t h, uint32_t id,
				    ht__hindex_hash_fn hash, const void *ctx)
{
	if ((ix->count + 1) * 2 > ix->cap) {
		size_t ncap = ix->cap ? ix->cap * 2 : 256;
		uint32_t *ns = calloc(ncap, sizeof(*ns));
		if (!ns)
			return HT_ERR_NOMEM;
		for (size_t i = 0; i < ix->cap; i++) {
			if (!ix->slots[i])
				continue;
			size_t j = hash(ctx, ix->slots[i] - 1) & (ncap - 1);
			while (ns[j])
				j = (j + 1) & (ncap - 1);
			ns[j] = ix->slots[i];
		}
		free(ix->slots);
		ix->slots = ns;
		ix->cap = ncap;
	}
	size_t j = h & (ix->cap - 1);
	while (ix->slots[j])
		j = (j + 1) & (ix->cap - 1);
	ix->slots[j] = id + 1;
	ix->count++;
	return 0;
}

/* ht__hindex_remove() of an index that keeps its hashes. */
static inline void ht__hindex_remove_kept(struct ht__hindex *ix, uint32_t *s)
{
	size_t mask = ix->cap - 1;
	size_t i = (size_t)(s - ix->slots), j = i;
	for (;;) {
		j = (j + 1) & mask;
		uint32_t id = ix->slots[j];
		if (!id)
			break;
		size_t home = ix->hashes[j] & mask;
		if (((j - home) & mask) >= ((j - i) & mask)) {
			ix->slots[i] = id;
			ix->hashes[i] = ix->hashes[j];
			i = j;
		}
	}
	ix->slots[i] = 0;
	ix->count--;
}

/*
 * Removes the id in slot s (found by a lookup). Later ids of the same probe
 * run move back into the gap (backward-shift deletion), so lookups need no
 * tombstones; hash(ctx, id) gives their home slots.
 */
static inline void ht__hindex_remove(struct ht__hindex *ix, uint32_t *s, ht__hindex_hash_fn hash,
				     const void *ctx)
{
	size_t mask = ix->cap - 1;
	size_t i = (size_t)(s - ix->slots), j = i;
	for (;;) {
		j = (j + 1) & mask;
		uint32_t id = ix->slots[j];
		if (!id)
			break;
		size_t home = hash(ctx, id - 1) & mask;
		if (((j - home) & mask) >= ((j - i) & mask)) {
			ix->slots[i] = id;
			i = j;
		}
	}
	ix->slots[i] = 0;
	ix->count--;
}

static inline void ht__hindex_release(struct ht__hindex *ix)
{
	free(ix->slots);
	free(ix->hashes);
	memset(ix, 0, sizeof(*ix));
}

#endif
