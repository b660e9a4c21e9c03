/*
 * test_timeline.c - unit tests of the timeline points: which side of a point
 * an allocation or free exactly on it falls, splitting by process and handle,
 * RSS samples, and the automatic interval.
 */
#include "analysis/timeline.h"
#include "analysis/lifetime.h"
#include "check.h"

static const int64_t *values_of(const struct ht__timeline *tl, enum ht__tl_kind kind,
				uint32_t process, uint64_t heap)
{
	for (uint32_t i = 0; i < ht__timeline_series_count(tl); i++) {
		const int64_t *v;
		const struct ht__tl_series *s = ht__timeline_series(tl, i, &v);
		if (s->kind == kind && s->process == process && s->heap == heap)
			return v;
	}
	return NULL;
}

static void test_points(void)
{
	CHECK_EQ(ht__timeline_point_count(0, 100, 10), 11);
	CHECK_EQ(ht__timeline_point_count(0, 101, 10), 12);
	CHECK_EQ(ht__timeline_point_count(0, 1, 10), 2);
	CHECK_EQ(ht__timeline_point_count(5, 5, 10), 0);
	CHECK_EQ(ht__timeline_point_count(0, 5, 0), 0);
	CHECK_EQ(ht__timeline_auto_interval(0, 1000, 11), 100);
	CHECK_EQ(ht__timeline_auto_interval(0, 1000, 1000), 2);
	CHECK_EQ(ht__timeline_auto_interval(0, 3000000001ull, 1000), 5000000);
	CHECK(ht__timeline_point_count(0, 3000000001ull, 5000000) <= 1000);

	struct ht__timeline *tl;
	CHECK_EQ(ht__timeline_new(&tl, 10, 10, 1, 1, HT_TL_BY_NONE), HT_ERR_INVALID);
	CHECK_EQ(ht__timeline_new(&tl, 0, 1000000000000ull, 1, 1, HT_TL_BY_NONE), HT_ERR_INVALID);
}

static void test_total(void)
{
	struct ht__timeline *tl;
	unsigned mask = 1u << HT_TL_HEAP | 1u << HT_TL_COMMIT;
	CHECK_EQ(ht__timeline_new(&tl, 0, 100, 10, mask, HT_TL_BY_NONE), 0);
	ht__timeline_add(tl, HT_TL_HEAP, 0, 0, 5, 25, 100); /* in at 10, 20; out at 30 */
	ht__timeline_add(tl, HT_TL_HEAP, 0, 0, 10, 20,
			 1000); /* alloc on a point: in from 20, free on 20: still in */
	ht__timeline_add(tl, HT_TL_HEAP, 1, 7, 0, HT_TS_NEVER, 10000); /* in from 10 on */
	ht__timeline_add(tl, HT_TL_HEAP, 1, 7, 200, HT_TS_NEVER, 5);   /* after the end */
	ht__timeline_add(tl, HT_TL_COMMIT, 0, 0, 41, 59, 1 << 20);
	ht__timeline_add(tl, HT_TL_RSS, 0, 0, 1, 2, 3); /* not asked for */
	ht__timeline_finish(tl);
	CHECK_EQ(ht__timeline_points(tl), 11);
	CHECK_EQ(ht__timeline_time(tl, 10), 100);
	CHECK_EQ(ht__timeline_series_count(tl), 2);
	const int64_t *h = values_of(tl, HT_TL_HEAP, UINT32_MAX, 0);
	const int64_t *c = values_of(tl, HT_TL_COMMIT, UINT32_MAX, 0);
	CHECK(h && c);
	if (h && c) {
		CHECK_EQ(h[0], 0);
		CHECK_EQ(h[1], 10100);
		CHECK_EQ(h[2], 11100);
		CHECK_EQ(h[3], 10000);
		CHECK_EQ(h[10], 10000);
		CHECK_EQ(c[4], 0);
		CHECK_EQ(c[5], 1 << 20);
		CHECK_EQ(c[6], 0);
	}
	ht__timeline_free(tl);
}

static void test_split(void)
{
	struct ht__timeline *tl;
	unsigned mask = 1u << HT_TL_HEAP | 1u << HT_TL_RSS;
	CHECK_EQ(ht__timeline_new(&tl, 100, 150, 10, mask, HT_TL_BY_HANDLE), 0);
	ht__timeline_add(tl, HT_TL_HEAP, 2, 0, 50, 105, 8);  /* before the start, freed at 105 */
	ht__timeline_add(tl, HT_TL_HEAP, 2, 0, 50, 99, 999); /* gone before the first point */
	ht__timeline_add(tl, HT_TL_HEAP, 2, 0x10, 111, 140, 16);
	ht__timeline_add(tl, HT_TL_HEAP, 3, 0, 120, HT_TS_NEVER, 32);
	ht__timeline_rss(tl, 2, 90, 4096);
	ht__timeline_rss(tl, 2, 125, 8192);
	ht__timeline_rss(tl, 3, 130, 4096);
	ht__timeline_rss(tl, 2, 140, 0); /* ended */
	ht__timeline_finish(tl);
	CHECK_EQ(ht__timeline_points(tl), 6);
	CHECK_EQ(ht__timeline_series_count(tl), 5);
	/* Sorted by kind, process, handle. */
	const struct ht__tl_series *s0 = ht__timeline_series(tl, 0, NULL);
	const struct ht__tl_series *s1 = ht__timeline_series(tl, 1, NULL);
	const struct ht__tl_series *s4 = ht__timeline_series(tl, 4, NULL);
	CHECK(s0->kind == HT_TL_HEAP && s0->process == 2 && s0->heap == 0 && s0->has_heap);
	CHECK(s1->kind == HT_TL_HEAP && s1->process == 2 && s1->heap == 0x10);
	CHECK(s4->kind == HT_TL_RSS && s4->process == 3 && !s4->has_heap);
	const int64_t *a = values_of(tl, HT_TL_HEAP, 2, 0);
	const int64_t *b = values_of(tl, HT_TL_HEAP, 2, 0x10);
	const int64_t *r2 = values_of(tl, HT_TL_RSS, 2, 0);
	const int64_t *r3 = values_of(tl, HT_TL_RSS, 3, 0);
	CHECK(a && b && r2 && r3);
	if (a && b && r2 && r3) {
		static const int64_t ea[] = {8, 0, 0, 0, 0, 0};
		static const int64_t eb[] = {0, 0, 16, 16, 16, 0};
		static const int64_t er2[] = {4096, 4096, 4096, 8192, 8192, 0};
		static const int64_t er3[] = {0, 0, 0, 0, 4096, 4096};
		for (int i = 0; i < 6; i++) {
			CHECK_EQ(a[i], ea[i]);
			CHECK_EQ(b[i], eb[i]);
			CHECK_EQ(r2[i], er2[i]);
			CHECK_EQ(r3[i], er3[i]);
		}
	}
	ht__timeline_free(tl);
}

/* Peak mode: a point keeps the highest value since the previous point, so short spikes show. */
static void test_peak(void)
{
	struct ht__timeline *tl;
	unsigned mask = 1u << HT_TL_HEAP | 1u << HT_TL_RSS;
	CHECK_EQ(ht__timeline_new(&tl, 100, 200, 10, mask, HT_TL_BY_NONE), 0);
	ht__timeline_peak(tl);
	CHECK_EQ(ht__timeline_step(tl, HT_TL_HEAP, 0, 0, 50, 7), 0);	/* before the start */
	CHECK_EQ(ht__timeline_step(tl, HT_TL_HEAP, 0, 0, 105, 100), 0); /* a spike between points */
	CHECK_EQ(ht__timeline_step(tl, HT_TL_HEAP, 0, 0, 108, -100), 0);
	CHECK_EQ(ht__timeline_step(tl, HT_TL_HEAP, 0, 0, 110, 50),
		 0); /* on a point: counts after it */
	CHECK_EQ(ht__timeline_step(tl, HT_TL_HEAP, 0, 0, 125, -50), 0);
	CHECK_EQ(ht__timeline_rss(tl, 0, 115, 4096), 0);
	CHECK_EQ(ht__timeline_rss(tl, 0, 117, 0), 0);
	CHECK_EQ(ht__timeline_step(tl, HT_TL_HEAP, 0, 0, 500, 1000), 0); /* after the last point */
	CHECK_EQ(ht__timeline_add(tl, HT_TL_HEAP, 0, 0, 1, 2, 3), HT_ERR_INVALID);
	ht__timeline_finish(tl);
	CHECK_EQ(ht__timeline_points(tl), 11);
	const int64_t *h = values_of(tl, HT_TL_HEAP, UINT32_MAX, 0);
	const int64_t *r = values_of(tl, HT_TL_RSS, UINT32_MAX, 0);
	CHECK(h && r);
	if (h && r) {
		static const int64_t eh[] = {7, 107, 57, 57, 7, 7, 7, 7, 7, 7, 7};
		static const int64_t er[] = {0, 0, 4096, 0, 0, 0, 0, 0, 0, 0, 0};
		for (int i = 0; i < 11; i++) {
			CHECK_EQ(h[i], eh[i]);
			CHECK_EQ(r[i], er[i]);
		}
	}
	ht__timeline_free(tl);

	/* Without peak mode, steps are order-free deltas: the values at the points. */
	CHECK_EQ(ht__timeline_new(&tl, 100, 200, 10, mask, HT_TL_BY_NONE), 0);
	ht__timeline_step(tl, HT_TL_HEAP, 0, 0, 125, -50);
	ht__timeline_step(tl, HT_TL_HEAP, 0, 0, 105, 100);
	ht__timeline_step(tl, HT_TL_HEAP, 0, 0, 108, -100);
	ht__timeline_step(tl, HT_TL_HEAP, 0, 0, 110, 50);
	ht__timeline_finish(tl);
	h = values_of(tl, HT_TL_HEAP, UINT32_MAX, 0);
	CHECK(h != NULL);
	if (h) {
		static const int64_t eh[] = {0, 0, 50, 0, 0, 0};
		for (int i = 0; i < 6; i++)
			CHECK_EQ(h[i], eh[i]);
	}
	ht__timeline_free(tl);
}

int main(void)
{
	test_points();
	test_total();
	test_split();
	test_peak();
	CHECK_DONE();
}
