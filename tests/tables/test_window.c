/*
 * test_window.c - unit tests of the window rules on in-memory lifetimes: the
 * AIFI/AIFO/AOFI/AOFO classification at both edges of [T1, T2), and the
 * grouped tree's Count, Size and Impacting Size, sorting, top and rows.
 */
#include "analysis/window.h"
#include "check.h"

#include <stdlib.h>

static void test_classify(void)
{
	struct ht__window w = {100, 200};
	/* Allocation exactly at T1 is inside; exactly at T2 is outside. */
	CHECK_EQ(ht__window_classify(&w, 100, 150), HT_AIFI);
	CHECK_EQ(ht__window_classify(&w, 100, HT_TS_NEVER), HT_AIFO);
	CHECK_EQ(ht__window_classify(&w, 200, 250), -1);
	CHECK_EQ(ht__window_classify(&w, 200, HT_TS_NEVER), -1);
	CHECK_EQ(ht__window_classify(&w, 199, 199), HT_AIFI);
	CHECK_EQ(ht__window_classify(&w, 199, 200), HT_AIFO);
	/* A free exactly at T2 is outside: still outstanding at the end. */
	CHECK_EQ(ht__window_classify(&w, 150, 200), HT_AIFO);
	CHECK_EQ(ht__window_classify(&w, 150, 199), HT_AIFI);
	CHECK_EQ(ht__window_classify(&w, 50, 200), HT_AOFO);
	CHECK_EQ(ht__window_classify(&w, 50, 199), HT_AOFI);
	CHECK_EQ(ht__window_classify(&w, 99, HT_TS_NEVER), HT_AOFO);
	/* A free exactly at T1 is inside; one before T1 misses the window. */
	CHECK_EQ(ht__window_classify(&w, 50, 100), HT_AOFI);
	CHECK_EQ(ht__window_classify(&w, 50, 99), -1);
	CHECK_EQ(ht__window_classify(&w, 0, 0), -1);
	/* A one-nanosecond window. */
	struct ht__window one = {7, 8};
	CHECK_EQ(ht__window_classify(&one, 7, 7), HT_AIFI);
	CHECK_EQ(ht__window_classify(&one, 7, 8), HT_AIFO);
	CHECK_EQ(ht__window_classify(&one, 6, 7), HT_AOFI);
	CHECK_EQ(ht__window_classify(&one, 6, 8), HT_AOFO);
	CHECK_EQ(ht__window_classify(&one, 8, 9), -1);

	CHECK_STR(ht__wtype_name(HT_AIFI), "AIFI");
	CHECK_STR(ht__wtype_name(HT_AIFO), "AIFO");
	CHECK_STR(ht__wtype_name(HT_AOFI), "AOFI");
	CHECK_STR(ht__wtype_name(HT_AOFO), "AOFO");
	CHECK_STR(ht__wtype_name(4), "?");
	CHECK_STR(ht__wtype_impacting_name(HT_AIFI), "Transient");
	CHECK_STR(ht__wtype_impacting_name(HT_AIFO), "Impacting");
	CHECK_STR(ht__wtype_impacting_name(HT_AOFO), "Impacting");
	CHECK_STR(ht__wtype_impacting_name(HT_AOFI), "Impacting");
}

static void test_keys(void)
{
	CHECK_EQ(ht__wkey_parse("process"), HT_WK_PROCESS);
	CHECK_EQ(ht__wkey_parse("handle"), HT_WK_HANDLE);
	CHECK_EQ(ht__wkey_parse("type"), HT_WK_TYPE);
	CHECK_EQ(ht__wkey_parse("impacting-type"), HT_WK_IMPACTING);
	CHECK_EQ(ht__wkey_parse("impacting"), HT_WK_IMPACTING);
	CHECK_EQ(ht__wkey_parse("stack"), HT_WK_STACK);
	CHECK_EQ(ht__wkey_parse("frame"), HT_WK_FRAME);
	CHECK_EQ(ht__wkey_parse("image"), HT_WK_IMAGE);
	CHECK_EQ(ht__wkey_parse("thread"), HT_WK_THREAD);
	CHECK_EQ(ht__wkey_parse("proces"), -1);
	CHECK_EQ(ht__wkey_parse(""), -1);
	CHECK_STR(ht__wkey_name(HT_WK_IMPACTING), "impacting-type");
}

static struct ht__witem item(uint32_t process, uint32_t stack, uint64_t alloc, uint64_t freed,
			     uint64_t size)
{
	struct ht__witem it = {0};
	it.process = process;
	it.stack = stack;
	it.alloc_ts = alloc;
	it.free_ts = freed;
	it.size = size;
	it.addr = 0x1000 + alloc;
	it.count = 1;
	it.tid = (int32_t)(100 + process);
	return it;
}

static const struct ht__wnode *child(const struct ht__wnode *n, uint64_t value)
{
	for (uint32_t i = 0; i < n->nchildren; i++)
		if (n->children[i]->value == value)
			return n->children[i];
	return NULL;
}

static void test_tree(void)
{
	struct ht__window w = {1000, 2000};
	enum ht__wkey keys[] = {HT_WK_PROCESS, HT_WK_IMPACTING, HT_WK_STACK};
	struct ht__wtree *t = ht__wtree_new(&w, keys, 3, true);
	CHECK(t != NULL);
	if (!t)
		return;
	struct ht__witem items[] = {
	    item(0, 1, 1000, 1500, 10),	       /* AIFI */
	    item(0, 1, 1100, 1999, 20),	       /* AIFI */
	    item(0, 2, 1200, HT_TS_NEVER, 40), /* AIFO */
	    item(0, 2, 1300, 2000, 80),	       /* AIFO: freed at T2 */
	    item(0, 3, 500, 1000, 160),	       /* AOFI: freed at T1 */
	    item(0, 3, 600, HT_TS_NEVER, 320), /* AOFO */
	    item(1, 1, 1999, 2500, 640),       /* AIFO */
	    item(1, 4, 2000, 2100, 1280),      /* outside: allocated at T2 */
	    item(1, 4, 100, 999, 2560),	       /* outside: freed before T1 */
	};
	int in = 0;
	for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
		int rc = ht__wtree_add(t, &items[i]);
		CHECK(rc >= 0);
		in += rc;
	}
	CHECK_EQ(in, 7);
	ht__wtree_sort(t, HT_WSORT_IMPACTING, 0);
	const struct ht__wnode *root = ht__wtree_root(t);
	CHECK_EQ(root->count, 5);
	CHECK_EQ(root->size, 10 + 20 + 40 + 80 + 640);
	CHECK_EQ(root->impacting, 40 + 80 + 640 - 160);
	CHECK_EQ(root->live, 7);
	CHECK_EQ(root->nchildren, 2);

	/* Process 1's +640 sorts before process 0's +0 (40 + 80 - 160). */
	const struct ht__wnode *p1 = root->children[0], *p0 = root->children[1];
	CHECK_EQ(p1->value, 1);
	CHECK_EQ(p0->value, 0);
	CHECK_EQ(p0->count, 4);
	CHECK_EQ(p0->size, 150);
	CHECK_EQ(p0->impacting, -40);
	CHECK_EQ(p1->impacting, 640);

	const struct ht__wnode *tr = child(p0, 0), *imp = child(p0, 1);
	CHECK(tr && imp);
	if (tr && imp) {
		/* Transient: everything allocated and freed inside, no net change. */
		CHECK_EQ(tr->count, 2);
		CHECK_EQ(tr->size, 30);
		CHECK_EQ(tr->impacting, 0);
		CHECK_EQ(tr->nchildren, 1);
		CHECK_EQ(tr->children[0]->value, 1);
		CHECK_EQ(tr->children[0]->nrows, 2);
		CHECK_EQ(tr->children[0]->rows[0].alloc_ts, 1000);
		CHECK_EQ(tr->children[0]->rows[0].type, HT_AIFI);
		CHECK_EQ(tr->children[0]->rows[1].alloc_ts, 1100);
		/* Impacting: AIFO 120 minus AOFI 160, and the AOFO block counted as live only. */
		CHECK_EQ(imp->count, 2);
		CHECK_EQ(imp->size, 120);
		CHECK_EQ(imp->impacting, -40);
		CHECK_EQ(imp->live, 4);
		CHECK_EQ(imp->nchildren, 2);
		CHECK_EQ(imp->children[0]->value, 2); /* +120 before -160 */
		CHECK_EQ(imp->children[0]->impacting, 120);
		CHECK_EQ(imp->children[1]->value, 3);
		CHECK_EQ(imp->children[1]->impacting, -160);
		CHECK_EQ(imp->children[1]->count, 0);
		CHECK_EQ(imp->children[1]->nrows, 2);
		CHECK_EQ(imp->children[1]->rows[0].type, HT_AOFI);
		CHECK_EQ(imp->children[1]->rows[1].type, HT_AOFO);
	}
	ht__wtree_free(t);
}

/* Frames are multi-valued: an item joins each distinct frame of its stack once. */
static void test_frames_sort_top(void)
{
	struct ht__window w = {0, 100};
	enum ht__wkey keys[] = {HT_WK_FRAME};
	struct ht__wtree *t = ht__wtree_new(&w, keys, 1, false);
	CHECK(t != NULL);
	if (!t)
		return;
	static const uint64_t fa[] = {7, 8, 9}, fb[] = {8, 9}, fc[] = {9};
	struct ht__witem a = item(0, 1, 10, 20, 100), b = item(0, 2, 30, HT_TS_NEVER, 5),
			 c = item(0, 3, 40, HT_TS_NEVER, 1);
	a.frames = fa, a.nframes = 3;
	b.frames = fb, b.nframes = 2;
	c.frames = fc, c.nframes = 1;
	CHECK_EQ(ht__wtree_add(t, &a), 1);
	CHECK_EQ(ht__wtree_add(t, &b), 1);
	CHECK_EQ(ht__wtree_add(t, &c), 1);
	CHECK_EQ(ht__wtree_add(t, &c), 1);
	ht__wtree_sort(t, HT_WSORT_COUNT, 2);
	const struct ht__wnode *root = ht__wtree_root(t);
	CHECK_EQ(root->count, 4);
	CHECK_EQ(root->size, 107);
	CHECK_EQ(root->nchildren, 2); /* top 2 of 3 */
	CHECK_EQ(root->children[0]->value, 9);
	CHECK_EQ(root->children[0]->count, 4);
	CHECK_EQ(root->children[0]->size, 107);
	CHECK_EQ(root->children[0]->impacting, 7);
	CHECK_EQ(root->children[1]->value, 8);
	CHECK_EQ(root->children[1]->count, 2);
	CHECK_EQ(root->children[1]->size, 105);
	ht__wtree_free(t);

	/* Sort by size: frame 7 (100 bytes) comes before 8 only by size ties. */
	t = ht__wtree_new(&w, keys, 1, false);
	ht__wtree_add(t, &a);
	ht__wtree_add(t, &c);
	ht__wtree_add(t, &c);
	ht__wtree_add(t, &c);
	ht__wtree_sort(t, HT_WSORT_SIZE, 0);
	root = ht__wtree_root(t);
	CHECK_EQ(root->nchildren, 3);
	CHECK_EQ(root->children[0]->value, 9); /* 103 bytes */
	CHECK_EQ(root->children[1]->value, 7); /* 100, ties with 8 broken by value */
	CHECK_EQ(root->children[2]->value, 8);
	ht__wtree_sort(t, HT_WSORT_IMPACTING, 0);
	CHECK_EQ(root->children[0]->value, 9); /* +3 */
	CHECK_EQ(root->children[0]->impacting, 3);
	CHECK_EQ(root->children[1]->impacting, 0);
	ht__wtree_free(t);
}

/* Many groups force the child index to grow; each keeps its own sums. */
static void test_many_groups(void)
{
	struct ht__window w = {0, 1000000};
	enum ht__wkey keys[] = {HT_WK_THREAD, HT_WK_HANDLE};
	struct ht__wtree *t = ht__wtree_new(&w, keys, 2, false);
	for (int i = 0; i < 3000; i++) {
		struct ht__witem it = item(0, 1, (uint64_t)i, HT_TS_NEVER, 1);
		it.tid = i % 1000;
		it.heap = (uint64_t)(i % 1000 % 3);
		ht__wtree_add(t, &it);
	}
	ht__wtree_sort(t, HT_WSORT_COUNT, 0);
	const struct ht__wnode *root = ht__wtree_root(t);
	CHECK_EQ(root->nchildren, 1000);
	CHECK_EQ(root->count, 3000);
	int bad = 0;
	for (uint32_t i = 0; i < root->nchildren; i++) {
		const struct ht__wnode *c = root->children[i];
		bad += c->count != 3 || c->nchildren != 1;
		/* Every item of tid j went to heap j % 3. */
		bad += c->nchildren == 1 && c->children[0]->value != (c->value & 0xffffffffu) % 3;
	}
	CHECK_EQ(bad, 0);
	ht__wtree_free(t);
}

/* Pieces of one committed range add bytes but count the allocation once. */
static void test_pieces(void)
{
	struct ht__window w = {0, 100};
	enum ht__wkey keys[] = {HT_WK_IMPACTING};
	struct ht__wtree *t = ht__wtree_new(&w, keys, 1, false);
	struct ht__witem a = item(0, 1, 10, 20, 4096), b = item(0, 1, 10, 50, 8192),
			 c = item(0, 1, 10, HT_TS_NEVER, 4096);
	b.piece = c.piece = true;
	ht__wtree_add(t, &a);
	ht__wtree_add(t, &b);
	ht__wtree_add(t, &c);
	ht__wtree_sort(t, HT_WSORT_IMPACTING, 0);
	const struct ht__wnode *root = ht__wtree_root(t);
	CHECK_EQ(root->count, 1);
	CHECK_EQ(root->size, 16384);
	CHECK_EQ(root->impacting, 4096);
	CHECK_EQ(root->live, 3);
	CHECK_EQ(root->nchildren, 2);
	CHECK_EQ(root->children[0]->value, 1); /* Impacting: the piece still committed */
	CHECK_EQ(root->children[0]->count, 0);
	CHECK_EQ(root->children[0]->size, 4096);
	CHECK_EQ(root->children[1]->count, 1);
	CHECK_EQ(root->children[1]->size, 12288);
	ht__wtree_free(t);
}

static void test_invalid(void)
{
	struct ht__window bad = {10, 10};
	CHECK(ht__wtree_new(&bad, NULL, 0, false) == NULL);
	struct ht__window w = {0, 10};
	enum ht__wkey k = HT_WK__COUNT;
	CHECK(ht__wtree_new(&w, &k, 1, false) == NULL);
	struct ht__wtree *t = ht__wtree_new(&w, NULL, 0, true);
	CHECK(t != NULL);
	struct ht__witem a = item(0, 0, 3, 4, 8);
	CHECK_EQ(ht__wtree_add(t, &a), 1);
	ht__wtree_sort(t, HT_WSORT_IMPACTING, 0);
	CHECK_EQ(ht__wtree_root(t)->nrows, 1);
	CHECK_EQ(ht__wtree_root(t)->rows[0].size, 8);
	ht__wtree_free(t);
}

int main(void)
{
	test_classify();
	test_keys();
	test_tree();
	test_frames_sort_top();
	test_many_groups();
	test_pieces();
	test_invalid();
	CHECK_DONE();
}
