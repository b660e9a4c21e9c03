/*
 * table.c - the small open-addressing hash table the session uses to find
 * processes, modules, frames and stacks without allocating per record.
 */
#include <stdlib.h>

#include "session/internal.h"

uint32_t ht__hash_bytes(const void *p, size_t n, uint32_t seed)
{
	/* FNV-1a: keys are short (a path, a few frame ids); good enough spread. */
	const uint8_t *b = p;
	uint32_t h = 2166136261u ^ seed;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 16777619u;
	}
	return h;
}

uint32_t ht__htab_find(const struct ht__htab *t, uint32_t h, ht__htab_eq eq, const void *ctx,
		       const void *key)
{
	if (!t->cap)
		return UINT32_MAX;
	uint32_t mask = t->cap - 1;
	for (uint32_t i = h & mask;; i = (i + 1) & mask) {
		uint32_t v = t->vals[i];
		if (!v)
			return UINT32_MAX;
		if (t->hashes[i] == h && eq(ctx, v - 1, key))
			return v - 1;
	}
}

static void insert_raw(uint32_t *vals, uint32_t *hashes, uint32_t cap, uint32_t h, uint32_t v1)
{
	uint32_t mask = cap - 1, i = h & mask;
	while (vals[i])
		i = (i + 1) & mask;
	vals[i] = v1;
	hashes[i] = h;
}

int ht__htab_put(struct ht__htab *t, uint32_t h, uint32_t val)
{
	/* Grow at 50% load so that probe runs stay short. */
	if ((t->n + 1) * 2 > t->cap) {
		uint32_t ncap = t->cap ? t->cap * 2 : 64;
		uint32_t *nv = calloc(ncap, sizeof(*nv)), *nh = calloc(ncap, sizeof(*nh));
		if (!nv || !nh) {
			free(nv);
			free(nh);
			return HT_ERR_NOMEM;
		}
		for (uint32_t i = 0; i < t->cap; i++)
			if (t->vals[i])
				insert_raw(nv, nh, ncap, t->hashes[i], t->vals[i]);
		free(t->vals);
		free(t->hashes);
		t->vals = nv;
		t->hashes = nh;
		t->cap = ncap;
	}
	insert_raw(t->vals, t->hashes, t->cap, h, val + 1);
	t->n++;
	return 0;
}

int ht__htab_set(struct ht__htab *t, uint32_t h, uint32_t val, ht__htab_eq eq, const void *ctx,
		 const void *key)
{
	if (t->cap) {
		uint32_t mask = t->cap - 1;
		for (uint32_t i = h & mask; t->vals[i]; i = (i + 1) & mask) {
			if (t->hashes[i] == h && eq(ctx, t->vals[i] - 1, key)) {
				t->vals[i] = val + 1;
				return 0;
			}
		}
	}
	return ht__htab_put(t, h, val);
}

void ht__htab_free(struct ht__htab *t)
{
	free(t->vals);
	free(t->hashes);
	t->vals = t->hashes = NULL;
	t->cap = t->n = 0;
}
