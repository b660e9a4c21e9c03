/*
 * test_pass.c - the trace pass (src/analysis/pass.h) on a writer-built trace
 * of two processes and an exec: the order of the callbacks, which image an
 * exec ends, event masks, and stopping once no consumer needs more events.
 */
#include <stdlib.h>
#include <unistd.h>

#include "analysis/pass.h"
#include "check.h"
#include "traces.h"

/* What one consumer saw, in order, as text. */
struct seen {
	char log[4096];
	size_t len;
	int ends;
};

static void logf_(struct seen *s, const char *fmt, uint64_t a, uint64_t b, uint64_t c)
{
	s->len += (size_t)snprintf(s->log + s->len, sizeof(s->log) - s->len, fmt, a, b, c);
}

static int on_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	(void)p;
	logf_(ctx, "ev %" PRIu64 "@%" PRIu64 "%.0" PRIu64 " ", ev->type, ev->ts, 0);
	return 0;
}

static int on_life(void *ctx, struct ht__pass *p, const struct ht__life *l)
{
	(void)p;
	if (l->free_ts == HT_TS_NEVER)
		logf_(ctx, "life %" PRIx64 ":%" PRIu64 "-never%.0" PRIu64 " ", l->addr, l->alloc_ts,
		      0);
	else
		logf_(ctx, "life %" PRIx64 ":%" PRIu64 "-%" PRIu64 " ", l->addr, l->alloc_ts,
		      l->free_ts);
	return 0;
}

static int on_commit(void *ctx, struct ht__pass *p, const struct ht__commit *c)
{
	(void)p;
	logf_(ctx, "commit %" PRIx64 ":%" PRIu64 "-%" PRId64 " ", c->addr, c->commit_ts,
	      c->decommit_ts == HT_TS_NEVER ? -1 : (int64_t)c->decommit_ts);
	return 0;
}

static int on_start(void *ctx, struct ht__pass *p, uint32_t process, uint64_t ts)
{
	(void)p;
	logf_(ctx, "start %" PRIu64 "@%" PRIu64 "%.0" PRIu64 " ", process, ts, 0);
	return 0;
}

static int on_end_proc(void *ctx, struct ht__pass *p, uint32_t process, uint64_t ts)
{
	(void)p;
	logf_(ctx, "end %" PRIu64 "@%" PRIu64 "%.0" PRIu64 " ", process, ts, 0);
	return 0;
}

static int on_end(void *ctx, struct ht__pass *p)
{
	struct seen *s = ctx;
	s->ends++;
	CHECK_U64(ht__pass_end_ts(p), 20000);
	return 0;
}

static const struct ht__consumer everything = {
    .name = "everything",
    .events = HT_PASS_EV(HT_EV_ALLOC) | HT_PASS_EV(HT_EV_FREE),
    .event = on_event,
    .life = on_life,
    .commit = on_commit,
    .process_start = on_start,
    .process_end = on_end_proc,
    .end = on_end,
};

static const struct ht__consumer events_only = {
    .name = "events",
    .events = HT_PASS_ALL_EVENTS,
    .event = on_event,
};

static int fail_at_free(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	(void)ctx;
	(void)p;
	return ev->type == HT_EV_FREE ? HT_ERR_CORRUPT : 0;
}

static const struct ht__consumer failing = {
    .name = "failing",
    .events = HT_PASS_EV(HT_EV_FREE),
    .event = fail_at_free,
};

#define CHECK_LOG(s, want)                                                                         \
	do {                                                                                       \
		if (strcmp((s)->log, want)) {                                                      \
			fprintf(stderr, "%s:%d: log is\n  %s\nwant\n  %s\n", __FILE__, __LINE__,   \
				(s)->log, want);                                                   \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

int main(void)
{
	char dir[] = "/tmp/ht-pass-XXXXXX", path[64];
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/two.htr", dir);
	CHECK_EQ(tr_two(path), 0);
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);

	/* Two consumers on one pass: each sees the whole trace once, in order. */
	struct ht__pass *p;
	struct seen a = {0}, b = {0};
	CHECK_EQ(ht__pass_new(&p, r), 0);
	CHECK_EQ(ht__pass_add(p, &everything, &a), 0);
	CHECK_EQ(ht__pass_add(p, &events_only, &b), 1);
	CHECK_EQ(ht__pass_run(p), 0);
	CHECK_EQ(ht__pass_events(p), 10);
	CHECK_EQ(ht__pass_life_stats(p)->live_count, 1); /* the others ended at their exits */
	CHECK_EQ(ht__pass_run(p), HT_ERR_INVALID);	 /* once */
	ht__pass_free(p);
	CHECK_LOG(&a, "start 0@0 start 1@500 ev 1@1000 ev 1@1500 ev 1@2500 life 3000:2500-3000 "
		      "ev 4@3000 life 2000:1500-5000 commit 10000000:2000-5000 end 1@5000 "
		      "life 1000:1000-6000 end 0@6000 start 2@6000 ev 1@7000 "
		      "life 4000:7000-never ");
	CHECK_EQ(a.ends, 1);
	CHECK_LOG(&b, "ev 12@0 ev 12@500 ev 1@1000 ev 1@1500 ev 5@2000 ev 1@2500 ev 4@3000 "
		      "ev 14@5000 ev 13@6000 ev 1@7000 ");

	/*
	 * A consumer that stops at 2600 gets no event from there, while the
	 * other keeps the pass going to the end.
	 */
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	CHECK_EQ(ht__pass_new(&p, r), 0);
	int id = ht__pass_add(p, &events_only, &b);
	ht__pass_stop_at(p, id, 2600);
	ht__pass_add(p, &everything, &a);
	CHECK_EQ(ht__pass_run(p), 0);
	CHECK_EQ(ht__pass_events(p), 10);
	ht__pass_free(p);
	CHECK_LOG(&b, "ev 12@0 ev 12@500 ev 1@1000 ev 1@1500 ev 5@2000 ev 1@2500 ");

	/* When every consumer stops, the pass stops: what is live then ends as at the end. */
	memset(&a, 0, sizeof(a));
	CHECK_EQ(ht__pass_new(&p, r), 0);
	id = ht__pass_add(p, &everything, &a);
	ht__pass_stop_at(p, id, 2600);
	CHECK_EQ(ht__pass_run(p), 0);
	CHECK_EQ(ht__pass_events(p), 6);
	ht__pass_free(p);
	CHECK_LOG(&a, "start 0@0 start 1@500 ev 1@1000 ev 1@1500 ev 1@2500 "
		      "life 1000:1000-never life 2000:1500-never life 3000:2500-never "
		      "commit 10000000:2000--1 ");

	/* A consumer's error stops the pass and is what it returns. */
	memset(&b, 0, sizeof(b));
	CHECK_EQ(ht__pass_new(&p, r), 0);
	ht__pass_add(p, &failing, NULL);
	ht__pass_add(p, &events_only, &b);
	CHECK_EQ(ht__pass_run(p), HT_ERR_CORRUPT);
	ht__pass_free(p);
	CHECK_LOG(&b, "ev 12@0 ev 12@500 ev 1@1000 ev 1@1500 ev 5@2000 ev 1@2500 ");

	ht_reader_close(r);
	unlink(path);
	rmdir(dir);
	CHECK_DONE();
}
