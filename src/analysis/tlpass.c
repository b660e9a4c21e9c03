/*
 * tlpass.c - the timeline (timeline.h) as a consumer of the trace pass:
 * heap blocks and committed ranges as they end, RSS samples, and in peak
 * mode every change in time order. The process-exit rule is the pass's:
 * what an image held ends when it ends, in every mode.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/pass.h"
#include "analysis/query.h"
#include "analysis/timeline.h"
#include "base/vec.h"

struct ht__tl_feed {
	struct ht__timeline *tl;
	const struct ht__query *q;
	struct ht_reader *r;
	bool peak;
	uint64_t last;		    /* the last point: nothing at or after it changes a point */
	uint64_t live_prev, freed;  /* peak: live heap bytes after the last event, freed since */
	HT_VEC(uint64_t) committed; /* peak: per image, committed bytes already fed */
	struct ht__consumer c;	    /* tl_consumer, cut to the kinds asked for */
};

static bool wanted(const struct ht__tl_feed *f, uint32_t process)
{
	if (!f->q || !f->q->pid_count)
		return true;
	const struct ht_process *p = ht_reader_process(f->r, process);
	return p && ht__query_wants_pid(f->q, p->pid);
}

static int on_life(void *ctx, struct ht__pass *p, const struct ht__life *l)
{
	(void)p;
	struct ht__tl_feed *f = ctx;
	if (!f->peak)
		return wanted(f, l->process)
			   ? ht__timeline_add(f->tl, HT_TL_HEAP, l->process, l->heap, l->alloc_ts,
					      l->free_ts, l->size)
			   : 0;
	/* In time order: the free now; blocks never freed stay counted. */
	if (l->free_ts == HT_TS_NEVER)
		return 0;
	f->freed += l->size;
	if (l->free_ts >= f->last || !wanted(f, l->process))
		return 0;
	return ht__timeline_step(f->tl, HT_TL_HEAP, l->process, l->heap, l->free_ts,
				 -(int64_t)l->size);
}

static int on_commit(void *ctx, struct ht__pass *p, const struct ht__commit *c)
{
	(void)p;
	struct ht__tl_feed *f = ctx;
	if (f->peak || !wanted(f, c->process))
		return 0;
	return ht__timeline_add(f->tl, HT_TL_COMMIT, c->process, 0, c->commit_ts, c->decommit_ts,
				c->size);
}

/* Peak mode: the committed bytes of an image are now; feed the change. */
static int commit_now(struct ht__tl_feed *f, uint32_t process, uint64_t ts, uint64_t now)
{
	if (ht__vec_grow_zero(&f->committed, (size_t)process + 1) < 0)
		return HT_ERR_NOMEM;
	int64_t delta = (int64_t)(now - f->committed.v[process]);
	f->committed.v[process] = now;
	if (!delta || !wanted(f, process))
		return 0;
	return ht__timeline_step(f->tl, HT_TL_COMMIT, process, 0, ts, delta);
}

static int on_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	struct ht__tl_feed *f = ctx;
	if (ev->type == HT_EV_RSS)
		return wanted(f, ev->process)
			   ? ht__timeline_rss(f->tl, ev->process, ev->ts, ev->size)
			   : 0;
	if (!f->peak)
		return 0;
	if (ev->type == HT_EV_MMAP || ev->type == HT_EV_MUNMAP || ev->type == HT_EV_MREMAP ||
	    ev->type == HT_EV_MPROTECT || ev->type == HT_EV_BRK) {
		if (!f->c.commit)
			return 0;
		struct ht__commit_stats st;
		ht__pass_commit_process_stats(p, ev->process, &st);
		return commit_now(f, ev->process, ev->ts, st.committed_bytes);
	}
	/* A heap event: what it allocated is the change of the live bytes plus its frees. */
	uint64_t live = ht__pass_life_stats(p)->live_bytes;
	int64_t allocated = (int64_t)(live - f->live_prev) + (int64_t)f->freed;
	f->live_prev = live;
	f->freed = 0;
	if (!allocated || !wanted(f, ev->process))
		return 0;
	return ht__timeline_step(f->tl, HT_TL_HEAP, ev->process, ev->heap, ev->ts, allocated);
}

/* An image ended: its resident bytes stop counting, and in peak mode its committed bytes. */
static int on_process_end(void *ctx, struct ht__pass *p, uint32_t process, uint64_t ts)
{
	(void)p;
	struct ht__tl_feed *f = ctx;
	if (ts >= f->last)
		return 0;
	int rc = wanted(f, process) ? ht__timeline_rss(f->tl, process, ts, 0) : 0;
	if (rc == 0 && f->peak && f->c.commit)
		rc = commit_now(f, process, ts, 0);
	return rc;
}

/* Peak mode needs every event in time order; otherwise only RSS samples. */
static const struct ht__consumer tl_consumer = {
    .name = "timeline",
    .events = HT_PASS_EV(HT_EV_ALLOC) | HT_PASS_EV(HT_EV_REALLOC) | HT_PASS_EV(HT_EV_FREE) |
	      HT_PASS_EV(HT_EV_HEAP_DESTROY) | HT_PASS_EV(HT_EV_MMAP) | HT_PASS_EV(HT_EV_MUNMAP) |
	      HT_PASS_EV(HT_EV_MREMAP) | HT_PASS_EV(HT_EV_MPROTECT) | HT_PASS_EV(HT_EV_BRK) |
	      HT_PASS_EV(HT_EV_RSS),
    .event = on_event,
    .life = on_life,
    .commit = on_commit,
    .process_end = on_process_end,
};

int ht__timeline_attach(struct ht__timeline *tl, struct ht__pass *p, const struct ht__query *q,
			unsigned kinds_mask, bool peak, struct ht__tl_feed **out)
{
	struct ht__tl_feed *f = calloc(1, sizeof(*f));
	if (!f)
		return HT_ERR_NOMEM;
	f->tl = tl;
	f->q = q;
	f->r = ht__pass_reader(p);
	f->peak = peak;
	f->last = ht__timeline_time(tl, ht__timeline_points(tl) - 1);
	/* The trackers only for the kinds asked for. */
	f->c = tl_consumer;
	if (!(kinds_mask & (1u << HT_TL_HEAP)))
		f->c.life = NULL;
	if (!(kinds_mask & (1u << HT_TL_COMMIT)))
		f->c.commit = NULL;
	/* Peak mode steps at the frees and reads no block's alloc_ts; the
	   blocks ending at once (an image's end) only lower the value, in any
	   order: the tracker can keep no times. */
	if (peak && (kinds_mask & (1u << HT_TL_HEAP)))
		f->c.needs |= HT_PASS_NEED_LIFE | HT_PASS_LIFE_NO_TS;
	if (peak && (kinds_mask & (1u << HT_TL_COMMIT)))
		f->c.needs |= HT_PASS_NEED_COMMIT;
	int id = ht__pass_add(p, &f->c, f);
	if (id < 0) {
		free(f);
		return id;
	}
	ht__pass_stop_at(p, id, f->last);
	*out = f;
	return 0;
}

void ht__tl_feed_free(struct ht__tl_feed *f)
{
	if (!f)
		return;
	ht__vec_release(&f->committed);
	free(f);
}
