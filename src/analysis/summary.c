/*
 * summary.c - what 'heaptrail info' shows (summary.h), as a consumer of the
 * trace pass: counts events, follows outstanding bytes per process to find
 * the peaks, and takes the committed numbers from the pass's commit map.
 */
#include "analysis/summary.h"

#include <stdlib.h>
#include <string.h>

#include "analysis/pass.h"
#include "analysis/temporary.h"
#include "base/vec.h"

struct proc_live {
	uint64_t bytes; /* outstanding heap bytes now */
	int ended;	/* exited, or replaced by exec */
};

struct run {
	struct ht__summary *s;
	struct proc_live *live;
	uint32_t nlive;		    /* entries of live and s->procs, all valid */
	size_t live_cap, procs_cap; /* their capacities (vec.h) */
	size_t snaps_cap;
	uint64_t total_bytes;	  /* outstanding in processes that still run */
	uint64_t unknown_frees;	  /* the lifetime tracker's count after the last event */
	uint64_t inherited_frees; /* and its count of a fork child's frees of its parent's */
	struct ht__temp_tracker *temp;
	const struct ht__query *q; /* only its -pid processes; NULL: all */
	struct ht_reader *reader;
};

static bool wanted(const struct run *r, uint32_t process)
{
	if (!r->q || !r->q->pid_count)
		return true;
	const struct ht_process *pr = ht_reader_process(r->reader, process);
	return pr && ht__query_wants_pid(r->q, pr->pid);
}

/* Makes s->procs and r->live cover process index p. */
static int reserve(struct run *r, uint32_t p)
{
	if (p < r->nlive)
		return 0;
	size_t need = (size_t)p + 1;
	if (ht__grow_zero((void **)&r->live, &r->live_cap, need, sizeof(*r->live)) < 0 ||
	    ht__grow_zero((void **)&r->s->procs, &r->procs_cap, need, sizeof(*r->s->procs)) < 0)
		return HT_ERR_NOMEM;
	r->nlive = (uint32_t)(r->live_cap < r->procs_cap ? r->live_cap : r->procs_cap);
	return 0;
}

static int on_life_end(void *ctx, struct ht__pass *p, const struct ht__life *l)
{
	(void)p;
	struct run *r = ctx;
	if (!wanted(r, l->process))
		return 0;
	if (reserve(r, l->process) < 0)
		return HT_ERR_NOMEM;
	struct ht__summary_counts *c = &r->s->procs[l->process];
	if (ht__temp_is(r->temp, l)) {
		c->temporary_count += l->count;
		c->temporary_bytes += l->size;
		r->s->total.temporary_count += l->count;
		r->s->total.temporary_bytes += l->size;
	}
	/* Never freed: live at the end, or taken back by the kernel at its exit. */
	if (l->free_ts == HT_TS_NEVER || l->at_exit) {
		c->leaked_bytes += l->size;
		c->leaked_count += l->count;
		r->s->total.leaked_bytes += l->size;
		r->s->total.leaked_count += l->count;
		return 0;
	}
	struct proc_live *pl = &r->live[l->process];
	pl->bytes -= l->size;
	if (!pl->ended)
		r->total_bytes -= l->size;
	return 0;
}

/* count blocks of size bytes in all were allocated by process p at ts. */
static void grew(struct run *r, uint32_t p, uint64_t size, uint64_t count, uint64_t ts)
{
	struct ht__summary_counts *c = &r->s->procs[p], *t = &r->s->total;
	struct proc_live *pl = &r->live[p];
	c->alloc_calls += count;
	c->alloc_bytes += size;
	t->alloc_calls += count;
	t->alloc_bytes += size;
	pl->bytes += size;
	if (pl->bytes > c->peak_bytes) {
		c->peak_bytes = pl->bytes;
		c->peak_ts = ts;
	}
	if (pl->ended)
		return;
	r->total_bytes += size;
	if (r->total_bytes > t->peak_bytes) {
		t->peak_bytes = r->total_bytes;
		t->peak_ts = ts;
	}
}

/* The pass says when an image ends (exit, or replaced by exec). */
static int end_process(void *ctx, struct ht__pass *p, uint32_t process, uint64_t ts)
{
	(void)p;
	(void)ts;
	struct run *r = ctx;
	if (wanted(r, process) && process < r->nlive && !r->live[process].ended) {
		r->live[process].ended = 1;
		r->total_bytes -= r->live[process].bytes;
	}
	return 0;
}

void ht__summary_release(struct ht__summary *s)
{
	struct run *r = s->priv;
	if (r) {
		free(r->live);
		ht__temp_free(r->temp);
	}
	free(r);
	free(s->procs);
	free(s->snaps);
	memset(s, 0, sizeof(*s));
}

static int on_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	struct run *r = ctx;
	struct ht__summary *s = r->s;
	uint64_t unknown = ht__pass_life_stats(p)->unknown_frees;
	uint64_t inherited = ht__pass_life_stats(p)->inherited_frees;
	bool begins_snapshot = ev->type == HT_EV_SNAPSHOT && (ev->flags & HT_EVF_SNAPSHOT_BEGIN);
	bool unwanted = r->q && r->q->pid_count && !ht__query_wants_pid(r->q, ev->pid);
	/* A snapshot's opening event is the trace's, whatever process it names:
	   listed, but not counted as that process's event. */
	if (unwanted && !begins_snapshot) {
		r->unknown_frees = unknown;
		r->inherited_frees = inherited;
		return 0;
	}
	if (ev->type == HT_EV_SNAPSHOT) {
		if (begins_snapshot) {
			if (ht__grow((void **)&s->snaps, &r->snaps_cap, (size_t)s->nsnaps + 1,
				     sizeof(*s->snaps)) < 0)
				return HT_ERR_NOMEM;
			s->snaps[s->nsnaps++] = (struct ht__summary_snap){
			    .number = (uint32_t)ev->value,
			    .ts = ev->ts,
			    .untracked_bytes = ev->size,
			    .untracked_count = ev->addr,
			    .exit_pid = (ev->flags & HT_EVF_SNAPSHOT_EXIT) ? ev->pid : 0};
			/* The image's end (the snapshot opens with it) was an exec. */
			const struct ht_process *img =
			    ht_reader_process(ht__pass_reader(p), ev->process);
			s->snaps[s->nsnaps - 1].at_exec = (ev->flags & HT_EVF_SNAPSHOT_EXIT) &&
							  img && (img->flags & HT_PROCF_EXECED);
			if (unwanted) {
				r->unknown_frees = unknown;
				r->inherited_frees = inherited;
				return 0;
			}
		} else if (s->nsnaps) {
			struct ht__summary_snap *sn = &s->snaps[s->nsnaps - 1];
			sn->live_bytes += ev->size;
			sn->live_count += ev->addr;
			sn->alloc_bytes += ev->old_size;
			sn->alloc_count += ev->old_addr;
		}
	}
	/* Allocations are noted after the blocks they end were judged (pass order). */
	if ((ev->type == HT_EV_ALLOC || ev->type == HT_EV_REALLOC) &&
	    ht__temp_event(r->temp, ev) < 0)
		return HT_ERR_NOMEM;
	if (!ht__pass_synthetic(p)) { /* a snapshot's blocks are not the trace's */
		if (ev->type < HT_EV__COUNT)
			s->events[ev->type]++;
		s->event_count++;
	}
	s->last_ts = ev->ts;
	int rc = reserve(r, ev->process);
	if (rc < 0)
		return rc;
	struct ht__summary_counts *c = &s->procs[ev->process];
	if (unknown != r->unknown_frees) {
		r->unknown_frees = unknown;
		c->unknown_frees++;
		s->total.unknown_frees++;
	}
	if (inherited != r->inherited_frees) {
		r->inherited_frees = inherited;
		c->inherited_frees++;
		s->total.inherited_frees++;
	}
	switch (ev->type) {
	case HT_EV_ALLOC:
		if (ev->addr)
			grew(r, ev->process, ev->size, ht__pass_event_count(p), ev->ts);
		break;
	case HT_EV_REALLOC:
		if (ev->flags & HT_EVF_FAILED)
			break;
		if (ev->addr)
			grew(r, ev->process, ev->size, ht__pass_event_count(p), ev->ts);
		else if (ev->old_addr) { /* realloc(p, 0) */
			c->free_calls += ht__pass_event_count(p);
			s->total.free_calls += ht__pass_event_count(p);
		}
		break;
	case HT_EV_FREE:
		if (ev->addr) {
			c->free_calls += ht__pass_event_count(p);
			s->total.free_calls += ht__pass_event_count(p);
		}
		break;
	}
	return 0;
}

static int on_end(void *ctx, struct ht__pass *p)
{
	struct run *r = ctx;
	struct ht__summary *s = r->s;
	struct ht_reader *reader = ht__pass_reader(p);
	/* Every process the tables know gets an entry, even without events. */
	uint32_t n = ht_reader_process_count(reader);
	int rc;
	if (n && (rc = reserve(r, n - 1)) < 0)
		return rc;
	if (r->nlive > n) {
		/* Events may name processes the table lacks (a damaged trace). */
		n = 0;
		for (uint32_t i = 0; i < r->nlive; i++)
			if (s->procs[i].alloc_calls || s->procs[i].free_calls || r->live[i].bytes)
				n = i + 1;
		if (n < ht_reader_process_count(reader))
			n = ht_reader_process_count(reader);
	}
	s->nprocs = n;
	for (uint32_t i = 0; i < n; i++) {
		struct ht__commit_stats cs;
		ht__pass_commit_process_stats(p, i, &cs);
		s->procs[i].commits = cs.commits;
		s->procs[i].commit_bytes = cs.commit_bytes;
		s->procs[i].committed_peak_bytes = cs.peak_bytes;
		s->procs[i].committed_peak_ts = cs.peak_ts;
	}
	const struct ht__commit_stats *cs = ht__pass_commit_stats(p);
	s->total.commits = cs->commits;
	s->total.commit_bytes = cs->commit_bytes;
	s->total.committed_peak_bytes = cs->peak_bytes;
	s->total.committed_peak_ts = cs->peak_ts;
	return 0;
}

static const struct ht__consumer summary_consumer = {
    .name = "summary",
    .events = HT_PASS_ALL_EVENTS,
    .needs = HT_PASS_NEED_COMMIT,
    .event = on_event,
    .life = on_life_end,
    .process_end = end_process,
    .end = on_end,
};

int ht__summary_attach(struct ht__summary *s, struct ht__pass *p, const struct ht__query *q)
{
	memset(s, 0, sizeof(*s));
	struct run *r = calloc(1, sizeof(*r));
	if (!r)
		return HT_ERR_NOMEM;
	r->s = s;
	r->q = q;
	r->reader = ht__pass_reader(p);
	s->priv = r;
	if (!(r->temp = ht__temp_new())) {
		ht__summary_release(s);
		return HT_ERR_NOMEM;
	}
	int id = ht__pass_add(p, &summary_consumer, r);
	if (id < 0) {
		ht__summary_release(s);
		return id;
	}
	return 0;
}

int ht__summary_run(struct ht__summary *s, struct ht_reader *reader)
{
	return ht__summary_run_query(s, reader, NULL);
}

int ht__summary_run_query(struct ht__summary *s, struct ht_reader *reader,
			  const struct ht__query *q)
{
	struct ht__pass *p;
	int rc = ht__pass_new(&p, reader);
	if (rc < 0) {
		memset(s, 0, sizeof(*s));
		return rc;
	}
	if ((rc = ht__summary_attach(s, p, q)) == 0 && (rc = ht__pass_run(p)) < 0)
		ht__summary_release(s);
	ht__pass_free(p);
	return rc;
}

int ht__summary_at_peak(struct ht__query *q, struct ht_reader *r, uint64_t *bytes)
{
	if (q->has_range)
		return HT_ERR_INVALID;
	struct ht__summary s;
	int rc = ht__summary_run_query(&s, r, q);
	if (rc < 0)
		return rc;
	q->has_at = true;
	q->at_ts = s.total.peak_ts;
	if (bytes)
		*bytes = s.total.peak_bytes;
	ht__summary_release(&s);
	return ht_reader_rewind(r);
}
