/*
 * test_vec.c - unit tests of base/vec.h: growth of the arrays, and the hash
 * index against a plain array as the reference through inserts, lookups and
 * removals (backward-shift deletion must keep every other key findable), in
 * both kinds: re-hashing through a callback, and keeping each slot's hash.
 */
#include <stdlib.h>

#include "base/vec.h"
#include "check.h"

struct item {
	uint64_t key;
	int live;
};

struct table {
	HT_VEC(struct item) items;
	struct ht__hindex ix;
	uint32_t free_id; /* id + 1 of a removed item to reuse, 0 none */
};

/* A weak hash on purpose: keys collide in runs, so removals shift entries. */
static uint64_t key_hash(uint64_t key)
{
	return key % 7;
}

static uint64_t rehash(const void *ctx, uint32_t id)
{
	return key_hash(((const struct table *)ctx)->items.v[id].key);
}

static uint32_t *find(struct table *t, uint64_t key)
{
	uint32_t *s = ht__hindex_find(&t->ix, key_hash(key));
	for (; *s; s = ht__hindex_next(&t->ix, s))
		if (t->items.v[*s - 1].key == key)
			break;
	return s;
}

static void test_grow(void)
{
	int *p = NULL;
	size_t cap = 0;
	CHECK_EQ(ht__grow((void **)&p, &cap, 1, sizeof(*p)), 0);
	CHECK_U64(cap, 16);
	CHECK_EQ(ht__grow((void **)&p, &cap, 17, sizeof(*p)), 0);
	CHECK_U64(cap, 32);
	CHECK_EQ(ht__grow((void **)&p, &cap, 100, sizeof(*p)), 0);
	CHECK_U64(cap, 128);
	CHECK_EQ(ht__grow((void **)&p, &cap, SIZE_MAX / 2, sizeof(*p)), HT_ERR_NOMEM);
	CHECK_U64(cap, 128);
	free(p);

	HT_VEC(int) v = {0};
	for (int i = 0; i < 1000; i++)
		CHECK_EQ(ht__vec_push(&v, i * 3), 0);
	CHECK_U64(v.len, 1000);
	CHECK_U64(v.cap, 1024);
	long sum = 0;
	for (size_t i = 0; i < v.len; i++)
		sum += v.v[i];
	CHECK_EQ(sum, 3L * 999 * 1000 / 2);
	CHECK_EQ(ht__vec_grow_zero(&v, 1500), 0);
	CHECK_U64(v.len, 1500);
	CHECK_EQ(v.v[999], 2997);
	CHECK_EQ(v.v[1000], 0);
	CHECK_EQ(v.v[1499], 0);
	ht__vec_release(&v);
	CHECK(v.v == NULL && v.len == 0 && v.cap == 0);

	/* Two columns, one capacity. */
	uint64_t *a = NULL;
	uint8_t *b = NULL;
	size_t cap2 = 0;
	for (size_t i = 0; i < 40; i++) {
		CHECK_EQ(ht__grow2((void **)&a, sizeof(*a), (void **)&b, sizeof(*b), &cap2, i + 1),
			 0);
		a[i] = i << 40;
		b[i] = (uint8_t)i;
	}
	CHECK_U64(cap2, 64);
	CHECK_U64(a[39], 39ull << 40);
	CHECK_EQ(b[39], 39);
	free(a);
	free(b);
}

static void test_hindex(void)
{
	struct table t = {0};
	enum { N = 3000 };
	/* Insert keys 0..N-1 (times 5, so runs of equal hashes interleave). */
	for (uint64_t k = 0; k < N; k++) {
		CHECK_EQ(*find(&t, k * 5), 0);
		uint32_t id = (uint32_t)t.items.len;
		CHECK_EQ(ht__vec_push(&t.items, ((struct item){k * 5, 1})), 0);
		CHECK_EQ(ht__hindex_insert(&t.ix, key_hash(k * 5), id, rehash, &t), 0);
	}
	CHECK_U64(t.ix.count, N);
	CHECK(t.ix.cap >= 2 * N);
	/* Remove every third key, then every key must be found or not as it should. */
	for (uint64_t k = 0; k < N; k += 3) {
		uint32_t *s = find(&t, k * 5);
		CHECK(*s != 0);
		if (!*s)
			continue;
		t.items.v[*s - 1].live = 0;
		ht__hindex_remove(&t.ix, s, rehash, &t);
	}
	CHECK_U64(t.ix.count, N - (N + 2) / 3);
	unsigned found = 0, wrong = 0;
	for (uint64_t k = 0; k < N; k++) {
		uint32_t *s = find(&t, k * 5);
		int want = k % 3 != 0;
		found += *s != 0;
		wrong += (*s != 0) != want || (*s && t.items.v[*s - 1].key != k * 5);
	}
	CHECK_EQ(found, N - (N + 2) / 3);
	CHECK_EQ(wrong, 0);
	/* Removed ids come back for new keys; the others stay where they were. */
	for (uint64_t k = 0; k < N; k += 3) {
		uint32_t id = (uint32_t)(k); /* item k was key k * 5, removed */
		CHECK_EQ(t.items.v[id].live, 0);
		t.items.v[id] = (struct item){k * 5 + 1, 1};
		CHECK_EQ(ht__hindex_insert(&t.ix, key_hash(k * 5 + 1), id, rehash, &t), 0);
	}
	CHECK_U64(t.ix.count, N);
	wrong = 0;
	for (uint64_t k = 0; k < N; k++) {
		uint64_t key = k % 3 ? k * 5 : k * 5 + 1;
		uint32_t *s = find(&t, key);
		wrong += !*s || *s - 1 != k;
	}
	CHECK_EQ(wrong, 0);
	/* Removing everything leaves an empty index that finds nothing. */
	for (uint64_t k = 0; k < N; k++) {
		uint32_t *s = find(&t, t.items.v[k].key);
		CHECK(*s != 0);
		if (*s)
			ht__hindex_remove(&t.ix, s, rehash, &t);
	}
	CHECK_U64(t.ix.count, 0);
	unsigned left = 0;
	for (size_t i = 0; i < t.ix.cap; i++)
		left += t.ix.slots[i] != 0;
	CHECK_EQ(left, 0);
	ht__vec_release(&t.items);
	ht__hindex_release(&t.ix);
}

/* A lookup in an index that keeps its hashes: the kept hash first, then the key. */
static uint32_t *find_kept(struct table *t, uint64_t key)
{
	uint64_t h = key_hash(key);
	uint32_t *s = ht__hindex_find(&t->ix, h);
	for (; *s; s = ht__hindex_next(&t->ix, s))
		if (ht__hindex_hash(&t->ix, s) == (uint32_t)h && t->items.v[*s - 1].key == key)
			break;
	return s;
}

/* Every occupied slot keeps the hash of the id it holds. */
static unsigned kept_wrong(const struct table *t)
{
	unsigned wrong = 0;
	for (size_t i = 0; i < t->ix.cap; i++)
		if (t->ix.slots[i])
			wrong += t->ix.hashes[i] != key_hash(t->items.v[t->ix.slots[i] - 1].key);
	return wrong;
}

/*
 * The same history on an index that keeps its hashes (the _kept calls): the same
 * ids found for the same keys as the reference array says, and the kept
 * hashes moving with their ids through growth and backward shifts.
 */
static void test_hindex_kept(void)
{
	struct table t = {0};
	enum { N = 3000 };
	CHECK_EQ(*find_kept(&t, 5), 0);
	for (uint64_t k = 0; k < N; k++) {
		CHECK_EQ(*find_kept(&t, k * 5), 0);
		uint32_t id = (uint32_t)t.items.len;
		CHECK_EQ(ht__vec_push(&t.items, ((struct item){k * 5, 1})), 0);
		CHECK_EQ(ht__hindex_insert_kept(&t.ix, key_hash(k * 5), id), 0);
		if (k == 0)
			CHECK_U64(t.ix.cap, 64);
	}
	CHECK(t.ix.hashes != NULL);
	CHECK_U64(t.ix.count, N);
	CHECK_U64(t.ix.cap, 8192);
	CHECK_EQ(kept_wrong(&t), 0);
	for (uint64_t k = 0; k < N; k += 3) {
		uint32_t *s = find_kept(&t, k * 5);
		CHECK(*s != 0);
		if (!*s)
			continue;
		t.items.v[*s - 1].live = 0;
		ht__hindex_remove_kept(&t.ix, s);
	}
	CHECK_U64(t.ix.count, N - (N + 2) / 3);
	CHECK_EQ(kept_wrong(&t), 0);
	unsigned found = 0, wrong = 0;
	for (uint64_t k = 0; k < N; k++) {
		uint32_t *s = find_kept(&t, k * 5);
		found += *s != 0;
		wrong += (*s != 0) != (k % 3 != 0) || (*s && *s - 1 != k);
	}
	CHECK_EQ(found, N - (N + 2) / 3);
	CHECK_EQ(wrong, 0);
	for (uint64_t k = 0; k < N; k += 3) {
		t.items.v[k] = (struct item){k * 5 + 1, 1};
		CHECK_EQ(ht__hindex_insert_kept(&t.ix, key_hash(k * 5 + 1), (uint32_t)k), 0);
	}
	wrong = 0;
	for (uint64_t k = 0; k < N; k++) {
		uint32_t *s = find_kept(&t, k % 3 ? k * 5 : k * 5 + 1);
		wrong += !*s || *s - 1 != k;
	}
	CHECK_EQ(wrong, 0);
	CHECK_EQ(kept_wrong(&t), 0);
	for (uint64_t k = 0; k < N; k++) {
		uint32_t *s = find_kept(&t, t.items.v[k].key);
		CHECK(*s != 0);
		if (*s)
			ht__hindex_remove_kept(&t.ix, s);
	}
	CHECK_U64(t.ix.count, 0);
	unsigned left = 0;
	for (size_t i = 0; i < t.ix.cap; i++)
		left += t.ix.slots[i] != 0;
	CHECK_EQ(left, 0);
	ht__vec_release(&t.items);
	ht__hindex_release(&t.ix);
	CHECK(t.ix.slots == NULL && t.ix.hashes == NULL && t.ix.cap == 0);
}

int main(void)
{
	test_grow();
	test_hindex();
	test_hindex_kept();
	CHECK_DONE();
}
