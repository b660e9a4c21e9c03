/*
 * test_agree.c - 'table', 'timeline' and the report's data give the same
 * numbers for the same window, on a trace where a block and a committed
 * mapping are still held when their process exits while another process
 * goes on (traces.h, tr_two): the one rule for memory at exit (pass.h).
 */
#include <stdlib.h>
#include <unistd.h>

#include "analysis/pass.h"
#include "analysis/reportdata.h"
#include "analysis/timeline.h"
#include "analysis/window.h"
#include "check.h"
#include "traces.h"

/* Impacting Size of the table of kind commit over w, through a pass. */
static int64_t table_impacting(struct ht_reader *r, bool commit, struct ht__window w,
			       uint64_t *count)
{
	struct ht__wstacks *ws;
	struct ht__pass *p;
	struct ht__wfeed *f = NULL;
	CHECK_EQ(ht__wstacks_new(&ws, r, NULL), 0);
	struct ht__wtree *tree = ht__wtree_new(&w, NULL, 0, false);
	CHECK(tree != NULL);
	CHECK_EQ(ht__pass_new(&p, r), 0);
	CHECK_EQ(ht__wtable_attach(p, commit, tree, &w, ws, NULL, NULL, true, &f), 0);
	CHECK_EQ(ht__pass_run(p), 0);
	int64_t imp = ht__wtree_root(tree)->impacting;
	*count = ht__wtree_root(tree)->count;
	ht__pass_free(p);
	ht__wfeed_free(f);
	ht__wtree_free(tree);
	ht__wstacks_free(ws);
	return imp;
}

/* The timeline's value of kind at t2 minus at t1 (points every 1000 ns). */
static int64_t timeline_change(struct ht_reader *r, enum ht__tl_kind kind, uint64_t t1, uint64_t t2,
			       bool peak)
{
	struct ht__timeline *tl;
	struct ht__pass *p;
	struct ht__tl_feed *f = NULL;
	CHECK_EQ(ht__timeline_new(&tl, 0, 20000, 1000, 1u << kind, HT_TL_BY_NONE), 0);
	if (peak)
		ht__timeline_peak(tl);
	CHECK_EQ(ht__pass_new(&p, r), 0);
	CHECK_EQ(ht__timeline_attach(tl, p, NULL, 1u << kind, peak, &f), 0);
	CHECK_EQ(ht__pass_run(p), 0);
	ht__pass_free(p);
	ht__tl_feed_free(f);
	ht__timeline_finish(tl);
	const int64_t *v;
	CHECK_EQ(ht__timeline_series_count(tl), 1);
	ht__timeline_series(tl, 0, &v);
	int64_t d = v[t2 / 1000] - v[t1 / 1000];
	ht__timeline_free(tl);
	return d;
}

/* The same from the report's exact lifetimes, by the window rules of window.h. */
static int64_t report_impacting(const struct ht__rd_table *t, struct ht__window w)
{
	int64_t imp = 0;
	for (uint32_t s = 0; s < t->nsites; s++)
		for (uint32_t i = 0; i < t->sites[s].nlives; i++) {
			const struct ht__rd_life *l = &t->sites[s].lives[i];
			int type = ht__window_classify(&w, l->alloc_ts, l->free_ts);
			if (type == HT_AIFO)
				imp += (int64_t)l->size;
			else if (type == HT_AOFI)
				imp -= (int64_t)l->size;
		}
	return imp;
}

int main(void)
{
	char dir[] = "/tmp/ht-agree-XXXXXX", path[64];
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/two.htr", dir);
	CHECK_EQ(tr_two(path), 0);
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	struct ht__report_data d;
	struct ht__report_opts o = HT_REPORT_OPTS_INIT;
	o.default_cull = false;
	CHECK_EQ(ht__report_data_run(&d, r, &o), 0);
	CHECK_EQ(d.heap.binned_sites + d.commit.binned_sites, 0);

	/*
	 * Windows and what they hold (tr_two): image 1 exits at 5000 holding
	 * 200 heap bytes and 1 MB committed; image 0 is replaced by exec at
	 * 6000 holding 100 bytes; image 2 holds 10 bytes at the end.
	 */
	struct {
		uint64_t t1, t2;
		int64_t heap, commit;
		uint64_t heap_count;
	} want[] = {
	    {0, 4000, 300, 1048576, 3},	     /* before the exit: all outstanding */
	    {4000, 8000, -290, -1048576, 1}, /* the exits inside: what they held goes */
	    {0, 20000, 10, 0, 4},	     /* the whole trace: only image 2's block */
	    /* an exit at T1 is inside (outstanding just before it), an exec at T2 after */
	    {5000, 6000, -200, -1048576, 0},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct ht__window w = {want[i].t1, want[i].t2};
		uint64_t count;
		fprintf(stderr, "window [%" PRIu64 ", %" PRIu64 ")\n", w.start, w.end);
		CHECK_EQ(table_impacting(r, false, w, &count), want[i].heap);
		CHECK_EQ(count, want[i].heap_count);
		CHECK_EQ(timeline_change(r, HT_TL_HEAP, w.start, w.end, false), want[i].heap);
		CHECK_EQ(report_impacting(&d.heap, w), want[i].heap);
		CHECK_EQ(table_impacting(r, true, w, &count), want[i].commit);
		CHECK_EQ(timeline_change(r, HT_TL_COMMIT, w.start, w.end, false), want[i].commit);
		CHECK_EQ(report_impacting(&d.commit, w), want[i].commit);
	}
	/* Peak mode drops what an image held at its exit too. */
	CHECK_EQ(timeline_change(r, HT_TL_HEAP, 0, 20000, true), 10);
	CHECK_EQ(timeline_change(r, HT_TL_COMMIT, 0, 20000, true), 0);
	/* The report's graphs: heap and committed bytes at the last point. */
	uint64_t heap_end = 0, commit_end = 0;
	for (uint32_t i = 0; i < d.nheap_series; i++)
		heap_end += d.heap_series[i].last[d.points - 1];
	for (uint32_t i = 0; i < d.ncommit_series; i++)
		commit_end += d.commit_series[i].last[d.points - 1];
	CHECK_EQ(heap_end, 10);
	CHECK_EQ(commit_end, 0);
	/* info's numbers: the blocks held at exit are leaks there. */
	CHECK_EQ(d.summary.total.leaked_count, 3);
	CHECK_EQ(d.summary.total.leaked_bytes, 310);
	ht__report_data_release(&d);
	ht_reader_close(r);
	unlink(path);
	rmdir(dir);
	CHECK_DONE();
}
