/*
 * test_aggregate.c - the xperf heap action rules on traces with known
 * contents (fixture.c): totals, grouping by stack / frame / image / handle,
 * sort keys and ties, -range, -lifetime, -size, -pid, -requireFrames before
 * culling, culling (whole stack keeps its bottom frame), realloc chains,
 * frames without symbols, -top and -totals; the totals counted at the
 * allocations agree with those counted from every lifetime.
 */
#include <stdlib.h>
#include <unistd.h>

#include "analysis/aggregate.h"
#include "check.h"
#include "fixture.h"

static char dir[] = "/tmp/ht-test-agg-XXXXXX";
static char basic[300], nosym[300], ties[300], many[300], inl[300], nostack[300];

/* One aggregation: the reader, aggregator and result, kept until done(). */
struct run {
	struct ht_reader *r;
	struct ht__agg *a;
	struct ht__agg_result res;
	char key[2048];
};

static bool run(struct run *x, const char *path, struct ht__query *q)
{
	memset(x, 0, sizeof(*x));
	if (ht__query_prepare(q) < 0 || ht_reader_open(&x->r, path) < 0) {
		fprintf(stderr, "cannot prepare the query or open '%s'\n", path);
		check_failures++;
		return false;
	}
	int rc = ht__agg_new(&x->a, q, x->r);
	if (!rc)
		rc = ht__agg_run(x->a, NULL, NULL);
	if (!rc)
		rc = ht__agg_finish(x->a, &x->res);
	if (rc < 0) {
		fprintf(stderr, "aggregation failed: %s\n", ht_strerror(rc));
		check_failures++;
		return false;
	}
	return true;
}

static void done(struct run *x, struct ht__query *q)
{
	ht__agg_result_release(&x->res);
	ht__agg_free(x->a);
	if (x->r)
		ht_reader_close(x->r);
	ht__query_release(q);
}

/* The key of item i as text: frames joined by ';', or the frame / image key. */
static const char *key(struct run *x, size_t i)
{
	const struct ht__agg_item *it = &x->res.items[i];
	if (x->res.group != HT_GROUP_STACK)
		return it->key;
	size_t o = 0;
	x->key[0] = '\0';
	for (uint32_t f = 0; f < it->nframes; f++)
		o += (size_t)snprintf(x->key + o, sizeof(x->key) - o, "%s%s", f ? ";" : "",
				      ht__agg_frame_text(x->a, it->frames[f]));
	return x->key;
}

/* The item whose key is k, or NULL (and a failure). */
static const struct ht__agg_item *item(struct run *x, const char *k)
{
	for (size_t i = 0; i < x->res.count; i++)
		if (!strcmp(key(x, i), k))
			return &x->res.items[i];
	fprintf(stderr, "no item '%s'\n", k);
	check_failures++;
	return NULL;
}

#define CHECK_COUNTS(c, ob, oc, tb, tc, rc)                                                        \
	do {                                                                                       \
		const struct ht__agg_counts *c_ = (c);                                             \
		if (c_) {                                                                          \
			CHECK_U64(c_->outstanding_bytes, ob);                                      \
			CHECK_U64(c_->outstanding_count, oc);                                      \
			CHECK_U64(c_->total_bytes, tb);                                            \
			CHECK_U64(c_->total_count, tc);                                            \
			CHECK_U64(c_->realloc_count, rc);                                          \
		}                                                                                  \
	} while (0)

static const struct ht__agg_counts *counts(const struct ht__agg_item *it)
{
	return it ? &it->c : NULL;
}

static void q_init(struct ht__query *q, enum ht__group g, enum ht__sort s)
{
	ht__query_init(q);
	q->group = g;
	q->sort = s;
}

static void test_stacks(void)
{
	struct ht__query q;
	struct run x;
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	if (run(&x, basic, &q)) {
		CHECK(x.res.symbols);
		CHECK_COUNTS(&x.res.totals, 5688, 8, 5898, 13, 2);
		CHECK_U64(x.res.total_items, 6);
		CHECK_U64(x.res.count, 6);
		CHECK_COUNTS(&x.res.shown, 5688, 8, 5898, 13, 2);
		/* so: 4646, 1000, 30, 7, 5, 0 */
		CHECK_STR(key(&x, 0), "app!make_node;app!main");
		CHECK_STR(key(&x, 1), "app!Parser::parse(char const*);app!main");
		CHECK_STR(key(&x, 2), "app!grow_buffer;app!main");
		CHECK_STR(key(&x, 3), "");
		CHECK_STR(key(&x, 4), "libc.so.6!malloc"); /* all culled: the bottom frame stays */
		CHECK_STR(key(&x, 5), "libfoo.so!0x1f30;app!load_config;app!main");
		/* Stacks 1 and 6 differ only in make_node's address: one item with symbols. */
		CHECK_COUNTS(counts(&x.res.items[0]), 4646, 4, 4746, 5, 0);
		CHECK_COUNTS(counts(&x.res.items[1]), 1000, 1, 1016, 2, 0);
		/* The realloc chain: 3 blocks, 2 of them from a realloc, the last outstanding. */
		CHECK_COUNTS(counts(&x.res.items[2]), 30, 1, 60, 3, 2);
		CHECK_COUNTS(counts(&x.res.items[5]), 0, 0, 64, 1, 0);
		CHECK_U64(x.res.items[3].nframes, 0);
		CHECK_U64(x.res.items[0].stack, 1); /* the lowest stack id represents */
		/* file:line of the representative frames */
		const struct ht_frame *fr = ht_reader_frame(x.r, x.res.items[0].frames[0]);
		CHECK(fr && fr->file && !strcmp(fr->file, "app.c") && fr->line == 12);
	}
	done(&x, &q);

	/* Sort keys. */
	static const struct {
		enum ht__sort s;
		const char *first, *second;
	} keys[] = {
	    {HT_SORT_SOC, "app!make_node;app!main", "app!Parser::parse(char const*);app!main"},
	    {HT_SORT_ST, "app!make_node;app!main", "app!Parser::parse(char const*);app!main"},
	    {HT_SORT_STC, "app!make_node;app!main", "app!grow_buffer;app!main"},
	    {HT_SORT_SRC, "app!grow_buffer;app!main", "app!make_node;app!main"},
	};
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		q_init(&q, HT_GROUP_STACK, keys[k].s);
		if (run(&x, basic, &q)) {
			CHECK_STR(key(&x, 0), keys[k].first);
			CHECK_STR(key(&x, 1), keys[k].second);
		}
		done(&x, &q);
	}
	/* soc: count 1 ties (Parser 1016, grow 60, none 7, malloc 5) break by total size. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SOC);
	if (run(&x, basic, &q)) {
		CHECK_STR(key(&x, 2), "app!grow_buffer;app!main");
		CHECK_STR(key(&x, 3), "");
		CHECK_STR(key(&x, 4), "libc.so.6!malloc");
	}
	done(&x, &q);
}

static void test_ties(void)
{
	struct ht__query q;
	struct run x;
	q_init(&q, HT_GROUP_FRAME, HT_SORT_SO);
	if (run(&x, ties, &q)) {
		CHECK_U64(x.res.count, 4);
		/* all 8 outstanding bytes: d has the larger total, then key text */
		CHECK_STR(key(&x, 0), "app!d");
		CHECK_STR(key(&x, 1), "app!a");
		CHECK_STR(key(&x, 2), "app!b");
		CHECK_STR(key(&x, 3), "app!c");
	}
	done(&x, &q);
	q_init(&q, HT_GROUP_STACK, HT_SORT_SRC); /* all 0 */
	if (run(&x, ties, &q)) {
		CHECK_STR(key(&x, 0), "app!d");
		CHECK_STR(key(&x, 1), "app!a");
		CHECK_STR(key(&x, 3), "app!c");
	}
	done(&x, &q);
	/* -top 2 cuts the run of a, b, c that tie on both numbers: its texts
	   still decide which one is shown. */
	q_init(&q, HT_GROUP_FRAME, HT_SORT_SO);
	q.top = 2;
	q.top_given = true;
	if (run(&x, ties, &q)) {
		CHECK_U64(x.res.count, 2);
		CHECK_U64(x.res.total_items, 4);
		CHECK_STR(key(&x, 0), "app!d");
		CHECK_STR(key(&x, 1), "app!a");
	}
	done(&x, &q);
}

static void test_frames_images(void)
{
	struct ht__query q;
	struct run x;
	q_init(&q, HT_GROUP_FRAME, HT_SORT_SO);
	if (run(&x, basic, &q)) {
		CHECK_U64(x.res.total_items, 6);
		CHECK_STR(key(&x, 0), "app!make_node");
		CHECK_COUNTS(counts(item(&x, "app!make_node")), 4646, 4, 4746, 5, 0);
		CHECK_COUNTS(counts(item(&x, "app!Parser::parse(char const*)")), 1000, 1, 1016, 2,
			     0);
		CHECK_COUNTS(counts(item(&x, "[no stack]")), 7, 1, 7, 1, 0);
		CHECK_COUNTS(counts(item(&x, "libc.so.6!malloc")), 5, 1, 5, 1, 0);
		CHECK_COUNTS(counts(item(&x, "libfoo.so!0x1f30")), 0, 0, 64, 1, 0);
		CHECK_STR(key(&x, 5), "libfoo.so!0x1f30");
	}
	done(&x, &q);

	q_init(&q, HT_GROUP_IMAGE, HT_SORT_SO);
	if (run(&x, basic, &q)) {
		CHECK_U64(x.res.total_items, 4);
		CHECK_STR(key(&x, 0), "app");
		CHECK_COUNTS(counts(item(&x, "app")), 5676, 6, 5822, 10, 2);
		CHECK_COUNTS(counts(item(&x, "libc.so.6")), 5, 1, 5, 1, 0);
		CHECK_COUNTS(counts(item(&x, "libfoo.so")), 0, 0, 64, 1, 0);
		CHECK_COUNTS(counts(item(&x, "[no stack]")), 7, 1, 7, 1, 0);
	}
	done(&x, &q);
}

static void test_handles(void)
{
	struct ht__query q;
	struct run x;
	q_init(&q, HT_GROUP_HANDLE, HT_SORT_SO);
	if (run(&x, basic, &q)) {
		CHECK_U64(x.res.count, 3);
		CHECK_COUNTS(&x.res.totals, 5688, 8, 5898, 13, 2);
		const struct ht__agg_item *it = x.res.items;
		CHECK(it[0].pid == 100 && it[0].heap == 0);
		CHECK_COUNTS(&it[0].c, 1542, 6, 1736, 10, 2);
		CHECK(it[1].pid == 100 && it[1].heap == 0xabc);
		CHECK_COUNTS(&it[1].c, 50, 1, 50, 1, 0);
		CHECK(it[2].pid == 200 && it[2].heap == 0 && it[2].process == 1);
		CHECK_COUNTS(&it[2].c, 4096, 1, 4112, 2, 0);
	}
	done(&x, &q);

	/* With required frames the rows still merge across stacks. */
	q_init(&q, HT_GROUP_HANDLE, HT_SORT_SO);
	ht__match_list_add(&q.require, "app!make_node");
	if (run(&x, basic, &q)) {
		CHECK_U64(x.res.count, 3);
		CHECK_COUNTS(&x.res.items[0].c, 500, 2, 600, 3, 0); /* A1, A2, B6 */
		CHECK_COUNTS(&x.res.items[1].c, 50, 1, 50, 1, 0);
		CHECK_COUNTS(&x.res.items[2].c, 4096, 1, 4096, 1, 0);
		CHECK_COUNTS(&x.res.totals, 4646, 4, 4746, 5, 0);
	}
	done(&x, &q);
}

static void test_pid(void)
{
	struct ht__query q;
	struct run x;
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	ht__query_add_pid(&q, 200);
	if (run(&x, basic, &q)) {
		CHECK_COUNTS(&x.res.totals, 4096, 1, 4112, 2, 0);
		CHECK_U64(x.res.count, 2);
		CHECK_STR(key(&x, 0), "app!make_node;app!main");
		CHECK_COUNTS(counts(&x.res.items[1]), 0, 0, 16, 1, 0);
	}
	done(&x, &q);
	q_init(&q, HT_GROUP_HANDLE, HT_SORT_SO);
	ht__query_add_pid(&q, 100);
	ht__query_add_pid(&q, 200);
	if (run(&x, basic, &q)) {
		CHECK_COUNTS(&x.res.totals, 5688, 8, 5898, 13, 2);
		CHECK_U64(x.res.count, 3);
	}
	done(&x, &q);
	q_init(&q, HT_GROUP_HANDLE, HT_SORT_SO);
	ht__query_add_pid(&q, 999);
	if (run(&x, basic, &q)) {
		CHECK_COUNTS(&x.res.totals, 0, 0, 0, 0, 0);
		CHECK_U64(x.res.count, 0);
	}
	done(&x, &q);
}

static void totals_of(const char *path, struct ht__query *q, struct ht__agg_counts *out)
{
	struct run x;
	memset(out, 0xff, sizeof(*out));
	if (run(&x, path, q))
		*out = x.res.totals;
	done(&x, q);
}

static void test_range(void)
{
	struct ht__query q;
	struct ht__agg_counts t;
	/* [20, 60): A2, A3, A4; A4's free at exactly 60 is outside: outstanding. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.has_range = true;
	q.range_start = 20 * 1000;
	q.range_end = 60 * 1000;
	totals_of(basic, &q, &t);
	CHECK_COUNTS(&t, 1264, 3, 1264, 3, 0);
	/* [20, 60.001): A4's free is inside. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.has_range = true;
	q.range_start = 20 * 1000;
	q.range_end = 60 * 1000 + 1;
	totals_of(basic, &q, &t);
	CHECK_COUNTS(&t, 1200, 2, 1264, 3, 0);
	/* [10, 20): A1 (at exactly 10 is inside; A2 at 20 is not), freed after: outstanding. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.has_range = true;
	q.range_start = 10 * 1000;
	q.range_end = 20 * 1000;
	totals_of(basic, &q, &t);
	CHECK_COUNTS(&t, 100, 1, 100, 1, 0);
	/* [10.001, 20): nothing. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.has_range = true;
	q.range_start = 10 * 1000 + 1;
	q.range_end = 20 * 1000;
	totals_of(basic, &q, &t);
	CHECK_COUNTS(&t, 0, 0, 0, 0, 0);
	/* [75, 95): the reallocs R2 and R3 (R1 at 70 is outside); R2 freed by R3 inside. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SRC);
	q.has_range = true;
	q.range_start = 75 * 1000;
	q.range_end = 95 * 1000;
	totals_of(basic, &q, &t);
	CHECK_COUNTS(&t, 30, 1, 50, 2, 2);
}

static void test_lifetime_size(void)
{
	struct ht__query q;
	struct ht__agg_counts t;
	/* Lifetimes 10 us: R1, R2, P2; A4 lives 20 us. [10, 20) */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.life_min = 10 * 1000;
	q.life_max = 20 * 1000;
	totals_of(basic, &q, &t);
	CHECK_COUNTS(&t, 0, 0, 46, 3, 1);
	/* [20, 20.001): A4 only. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.life_min = 20 * 1000;
	q.life_max = 20 * 1000 + 1;
	totals_of(basic, &q, &t);
	CHECK_COUNTS(&t, 0, 0, 64, 1, 0);
	/* Unfreed blocks live to the trace's end (200): B7 from 120 = 80, H from 130 = 70. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.life_min = 70 * 1000;
	q.life_max = 80 * 1000 + 1;
	totals_of(basic, &q, &t);
	CHECK_COUNTS(&t, 57, 2, 57, 2, 0);
	/* With a range they live to its end: [100, 150), B5 50, B6 40, B7 30, H 20, P1 10. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.has_range = true;
	q.range_start = 100 * 1000;
	q.range_end = 150 * 1000;
	q.life_min = 30 * 1000;
	q.life_max = 50 * 1000;
	totals_of(basic, &q, &t);
	CHECK_COUNTS(&t, 307, 2, 307, 2, 0);
	/* Sizes [16, 64): R2 20, R3 30, P2 16, H 50; 64 (A4) is out. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.size_min = 16;
	q.size_max = 64;
	totals_of(basic, &q, &t);
	CHECK_COUNTS(&t, 80, 2, 116, 4, 2);
}

static void test_require_cull(void)
{
	struct ht__query q;
	struct run x;
	/* Required frames are tested before culling: libc malloc is culled but still selects. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	ht__match_list_add(&q.require, "libc.so.6!malloc");
	if (run(&x, basic, &q)) {
		CHECK_COUNTS(&x.res.totals, 4651, 5, 4815, 7, 0);
		CHECK_U64(x.res.total_items, 3);
		CHECK_STR(key(&x, 0), "app!make_node;app!main");
		CHECK_STR(key(&x, 1), "libc.so.6!malloc");
		CHECK_STR(key(&x, 2), "libfoo.so!0x1f30;app!load_config;app!main");
	}
	done(&x, &q);

	/* Each frame form, case-insensitive, for require. */
	static const struct {
		const char *spec;
		uint64_t count;
	} req[] = {
	    {"APP!MAKE_NODE", 5},    {"/HOME/U/app!make_node", 5},
	    {"Make_Node", 5},	     {"LIBFOO.SO!", 1},
	    {"libfoo.so!0X1F30", 1}, {"parser::PARSE", 2},
	    {"Parser::*", 2},	     {"app!load_*", 1},
	    {"LIBSTDC++!", 2},	     {"operator new", 2},
	    {"nothing_here", 0},
	};
	for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++) {
		struct ht__agg_counts t;
		q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
		ht__match_list_add(&q.require, req[i].spec);
		totals_of(basic, &q, &t);
		if (t.total_count != req[i].count) {
			fprintf(stderr, "require '%s': %" PRIu64 " blocks, want %" PRIu64 "\n",
				req[i].spec, t.total_count, req[i].count);
			check_failures++;
		}
	}

	/* Culling each form, case-insensitive. */
	static const struct {
		const char *spec, *top; /* the first item under so */
	} cull[] = {
	    {"APP!MAKE_NODE", "app!main"},
	    {"make_NODE", "app!main"},
	    {"/home/U/APP!make_node", "app!main"},
	    {"App!", "app!main"}, /* the whole stack: the bottom frame stays */
	    {"make*", "app!main"},
	};
	for (size_t i = 0; i < sizeof(cull) / sizeof(cull[0]); i++) {
		q_init(&q, HT_GROUP_FRAME, HT_SORT_SO);
		ht__match_list_add(&q.cull, cull[i].spec);
		if (run(&x, basic, &q) && x.res.count)
			CHECK_STR(key(&x, 0), cull[i].top);
		done(&x, &q);
	}
	/* Whole stack culled by the user's list: app!main of stacks 1, 2, 4, 6. */
	q_init(&q, HT_GROUP_FRAME, HT_SORT_SO);
	ht__match_list_add(&q.cull, "app!");
	if (run(&x, basic, &q)) {
		CHECK_COUNTS(counts(item(&x, "app!main")), 5676, 6, 5822, 10, 2);
		CHECK_COUNTS(counts(item(&x, "libfoo.so!0x1f30")), 0, 0, 64, 1, 0);
	}
	done(&x, &q);
	/* Without the default list the hook's frame is the top. */
	q_init(&q, HT_GROUP_FRAME, HT_SORT_SO);
	q.default_cull = false;
	if (run(&x, basic, &q)) {
		CHECK_U64(x.res.total_items, 2);
		CHECK_STR(key(&x, 0), "libheaptrail.so!malloc");
		CHECK_COUNTS(counts(&x.res.items[0]), 5681, 7, 5891, 12, 2);
	}
	done(&x, &q);
}

static void test_symbols(void)
{
	struct ht__query q;
	struct run x;
	/* Offsets: stacks 1 and 6 are two items; culling still uses symbols. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.symbols = 0;
	if (run(&x, basic, &q)) {
		CHECK(!x.res.symbols);
		CHECK_U64(x.res.total_items, 7);
		CHECK_STR(key(&x, 0), "app!0x1000;app!0x1200");
		CHECK_COUNTS(counts(&x.res.items[0]), 4346, 3, 4446, 4, 0);
		CHECK_COUNTS(counts(item(&x, "app!0x1008;app!0x1200")), 300, 1, 300, 1, 0);
	}
	done(&x, &q);
	/* A trace without symbols: offsets, and only the module forms can match. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	ht__match_list_add(&q.cull, "libheaptrail.so!");
	ht__match_list_add(&q.cull, "libc.so.6!");
	ht__match_list_add(&q.cull, "libstdc++.so.6!");
	if (run(&x, nosym, &q)) {
		CHECK(!x.res.symbols);
		CHECK_U64(x.res.total_items, 7);
		CHECK_STR(key(&x, 0), "app!0x1000;app!0x1200");
		CHECK_STR(key(&x, 1), "app!0x1100;app!0x1200");
		CHECK_COUNTS(&x.res.totals, 5688, 8, 5898, 13, 2);
		CHECK(item(&x, "libc.so.6!0x200") != NULL);
	}
	done(&x, &q);
	/* Asking for symbols on a trace without them still prints offsets. */
	q_init(&q, HT_GROUP_FRAME, HT_SORT_SO);
	q.symbols = 1;
	if (run(&x, nosym, &q))
		CHECK_STR(key(&x, 0), "libc.so.6!0x200");
	done(&x, &q);
}

/* Blocks fed by a caller's own lifetime tracker; a stack id the trace does not know. */
static void test_add(void)
{
	struct ht__query q;
	struct run x;
	memset(&x, 0, sizeof(x));
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	if (ht__query_prepare(&q) < 0 || ht_reader_open(&x.r, basic) < 0 ||
	    ht__agg_new(&x.a, &q, x.r) < 0) {
		check_failures++;
		done(&x, &q);
		return;
	}
	struct ht__life l = {0};
	l.free_ts = HT_TS_NEVER;
	l.count = 1;
	l.size = 8;
	l.stack = 0xfffffff0u;
	CHECK_U64(ht__agg_add(x.a, &l, 1000), 0);
	l.size = 16;
	l.stack = 1;
	l.free_ts = 500;
	l.from_realloc = 1;
	CHECK_U64(ht__agg_add(x.a, &l, 1000), 0);
	CHECK_U64(ht__agg_finish(x.a, &x.res), 0);
	CHECK_U64(x.res.count, 2);
	if (x.res.count == 2) {
		CHECK_STR(key(&x, 0), "");
		CHECK_COUNTS(&x.res.items[0].c, 8, 1, 8, 1, 0);
		CHECK_STR(key(&x, 1), "app!make_node;app!main");
		CHECK_COUNTS(&x.res.items[1].c, 0, 0, 16, 1, 1);
	}
	done(&x, &q);
}

static void test_inline(void)
{
	struct ht__query q;
	struct run x;
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	if (run(&x, inl, &q)) {
		CHECK_U64(x.res.count, 1);
		CHECK_STR(key(&x, 0), "app!helper;app!caller;app!main");
		const struct ht_frame *f0 = ht_reader_frame(x.r, x.res.items[0].frames[0]);
		const struct ht_frame *f1 = ht_reader_frame(x.r, x.res.items[0].frames[1]);
		CHECK(f0 && f0->inlined && f0->line == 3);
		CHECK(f1 && !f1->inlined && f1->line == 20);
	}
	done(&x, &q);
	/* Without symbols helper and caller are one address: shown once. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.symbols = 0;
	if (run(&x, inl, &q)) {
		CHECK_STR(key(&x, 0), "app!0x100;app!0x200");
		CHECK_U64(x.res.items[0].nframes, 2);
	}
	done(&x, &q);
	q_init(&q, HT_GROUP_FRAME, HT_SORT_SO);
	if (run(&x, inl, &q))
		CHECK_STR(key(&x, 0), "app!helper");
	done(&x, &q);
	/* Culling the inlined function leaves its caller. */
	q_init(&q, HT_GROUP_FRAME, HT_SORT_SO);
	ht__match_list_add(&q.cull, "helper");
	if (run(&x, inl, &q))
		CHECK_STR(key(&x, 0), "app!caller");
	done(&x, &q);
}

static void test_top_totals(void)
{
	struct ht__query q;
	struct run x;
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.top = 2;
	q.top_given = true;
	if (run(&x, basic, &q)) {
		CHECK_U64(x.res.count, 2);
		CHECK_U64(x.res.total_items, 6);
		CHECK_COUNTS(&x.res.shown, 5646, 5, 5762, 7, 0);
		CHECK_COUNTS(&x.res.totals, 5688, 8, 5898, 13, 2);
	}
	done(&x, &q);
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	q.totals_only = true;
	if (run(&x, basic, &q)) {
		CHECK_U64(x.res.count, 0);
		CHECK_COUNTS(&x.res.totals, 5688, 8, 5898, 13, 2);
	}
	done(&x, &q);
	/* Without top at most HT_QUERY_DEFAULT_TOP items. */
	q_init(&q, HT_GROUP_STACK, HT_SORT_SO);
	if (run(&x, many, &q)) {
		CHECK_U64(x.res.total_items, 10005);
		CHECK_U64(x.res.count, 10000);
		CHECK_STR(key(&x, 0), "app!0x27150");
		CHECK_U64(x.res.items[0].c.outstanding_bytes, 10005);
		CHECK_U64(x.res.items[9999].c.outstanding_bytes, 6);
		size_t out_of_order = 0; /* every item shown in order, largest first */
		for (size_t i = 0; i < x.res.count; i++)
			out_of_order += x.res.items[i].c.outstanding_bytes != 10005 - i;
		CHECK_U64(out_of_order, 0);
		CHECK_U64(x.res.totals.outstanding_bytes, 10005ull * 10006 / 2);
		CHECK_U64(x.res.shown.outstanding_bytes, 10005ull * 10006 / 2 - 15);
	}
	done(&x, &q);
}

/* A trace without stacks (--stacks none): every grouping works, and an
   empty result too (this test also runs built with UBSan: no qsort_r or
   memcpy of NULL arrays). */
static void test_no_stacks(void)
{
	static const enum ht__group groups[] = {HT_GROUP_STACK, HT_GROUP_FRAME, HT_GROUP_IMAGE};
	struct ht__query q;
	struct run x;
	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		q_init(&q, groups[i], HT_SORT_SO);
		if (run(&x, nostack, &q)) {
			CHECK_U64(x.res.count, 1);
			/* By stack, the stackless group has no frames (an empty key). */
			CHECK_COUNTS(counts(item(&x, i ? "[no stack]" : "")), 28, 1, 128, 2, 0);
		}
		done(&x, &q);
	}
	q_init(&q, HT_GROUP_HANDLE, HT_SORT_SO);
	if (run(&x, nostack, &q)) {
		CHECK_U64(x.res.count, 1);
		CHECK_COUNTS(&x.res.totals, 28, 1, 128, 2, 0);
	}
	done(&x, &q);
	/* Nothing selected: no groups, no items. */
	for (int g = 0; g < 2; g++) {
		q_init(&q, g ? HT_GROUP_HANDLE : HT_GROUP_STACK, HT_SORT_SO);
		q.size_min = 1000;
		q.size_max = 2000;
		if (run(&x, nostack, &q)) {
			CHECK_U64(x.res.count, 0);
			CHECK_COUNTS(&x.res.totals, 0, 0, 0, 0, 0);
		}
		done(&x, &q);
	}
}

/*
 * A query that keeps every block whatever its lifetime counts its totals at
 * the allocations and gets only the unfreed blocks from the tracker; with a
 * lifetime bound no block reaches, the same blocks come through every
 * lifetime instead. Both must give the same rows, item by item (and the
 * first the known totals).
 */
static void test_alloc_path(void)
{
	const char *paths[] = {basic, many, nostack};
	for (size_t f = 0; f < sizeof(paths) / sizeof(paths[0]); f++) {
		struct ht__query qa, ql;
		struct run a, l;
		q_init(&qa, HT_GROUP_STACK, HT_SORT_SO);
		q_init(&ql, HT_GROUP_STACK, HT_SORT_SO);
		ql.life_max = UINT64_MAX - 1;
		qa.top = ql.top = 1000000;
		if (run(&a, paths[f], &qa) && run(&l, paths[f], &ql)) {
			if (f == 0)
				CHECK_COUNTS(&a.res.totals, 5688, 8, 5898, 13, 2);
			CHECK(memcmp(&a.res.totals, &l.res.totals, sizeof(a.res.totals)) == 0);
			CHECK_U64(a.res.count, l.res.count);
			for (size_t i = 0; i < a.res.count && i < l.res.count; i++) {
				CHECK_U64(a.res.items[i].stack, l.res.items[i].stack);
				CHECK(memcmp(&a.res.items[i].c, &l.res.items[i].c,
					     sizeof(a.res.items[i].c)) == 0);
			}
		}
		done(&a, &qa);
		done(&l, &ql);
	}
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(basic, sizeof(basic), "%s/basic.htr", dir);
	snprintf(nosym, sizeof(nosym), "%s/nosym.htr", dir);
	snprintf(ties, sizeof(ties), "%s/ties.htr", dir);
	snprintf(many, sizeof(many), "%s/many.htr", dir);
	snprintf(inl, sizeof(inl), "%s/inline.htr", dir);
	snprintf(nostack, sizeof(nostack), "%s/nostack.htr", dir);
	int rc = fixture_write(basic, "basic");
	if (!rc)
		rc = fixture_write(nosym, "nosym");
	if (!rc)
		rc = fixture_write(ties, "ties");
	if (!rc)
		rc = fixture_write(many, "many");
	if (!rc)
		rc = fixture_write(inl, "inline");
	if (!rc)
		rc = fixture_write(nostack, "nostack");
	if (rc < 0) {
		fprintf(stderr, "cannot write the fixtures: %s\n", ht_strerror(rc));
		check_failures++;
	} else {
		test_stacks();
		test_ties();
		test_frames_images();
		test_handles();
		test_pid();
		test_range();
		test_lifetime_size();
		test_require_cull();
		test_symbols();
		test_top_totals();
		test_inline();
		test_add();
		test_no_stacks();
		test_alloc_path();
	}
	unlink(basic);
	unlink(nosym);
	unlink(ties);
	unlink(many);
	unlink(inl);
	unlink(nostack);
	rmdir(dir);
	CHECK_DONE();
}
