/*
 * summary.c - one pass over a trace for 'heaptrail info' (summary.h): feeds
 * the lifetime tracker and the commit map and follows outstanding bytes per
 * process to find the peaks.
 */
#include "analysis/summary.h"

#include <stdlib.h>
#include <string.h>

#include "analysis/commit.h"
#include "analysis/lifetime.h"
#include "analysis/temporary.h"

struct proc_live {
	uint64_t bytes; /* outstanding heap bytes now */
	int ended;	/* exited, or replaced by exec */
};

struct run {
	struct ht_summary *s;
	struct proc_live *live;
	uint32_t nlive;
	uint64_t total_bytes; /* outstanding in processes that still run */
	struct ht_temp_tracker *temp;
	int err;
};

/* Makes s->procs and r->live cover process index p. */
static int reserve(struct run *r, uint32_t p)
{
	if (p < r->nlive)
		return 0;
	uint32_t n = r->nlive ? r->nlive : 16;
	while (n <= p)
		n *= 2;
	struct proc_live *l = realloc(r->live, n * sizeof(*l));
	if (!l)
		return HT_ERR_NOMEM;
	r->live = l;
	struct ht_summary_counts *c = realloc(r->s->procs, n * sizeof(*c));
	if (!c)
		return HT_ERR_NOMEM;
	r->s->procs = c;
	memset(l + r->nlive, 0, (n - r->nlive) * sizeof(*l));
	memset(c + r->nlive, 0, (n - r->nlive) * sizeof(*c));
	r->nlive = n;
	return 0;
}

static void on_life_end(void *ctx, const struct ht_life *l)
{
	struct run *r = ctx;
	if (reserve(r, l->process) < 0) {
		r->err = HT_ERR_NOMEM;
		return;
	}
	struct ht_summary_counts *c = &r->s->procs[l->process];
	if (ht_temp_is(r->temp, l)) {
		c->temporary_count++;
		c->temporary_bytes += l->size;
		r->s->total.temporary_count++;
		r->s->total.temporary_bytes += l->size;
	}
	if (l->free_ts == HT_TS_NEVER) {
		c->leaked_bytes += l->size;
		c->leaked_count++;
		r->s->total.leaked_bytes += l->size;
		r->s->total.leaked_count++;
		return;
	}
	struct proc_live *pl = &r->live[l->process];
	pl->bytes -= l->size;
	if (!pl->ended)
		r->total_bytes -= l->size;
}

/* A block of size was allocated by process p at ts. */
static void grew(struct run *r, uint32_t p, uint64_t size, uint64_t ts)
{
	struct ht_summary_counts *c = &r->s->procs[p], *t = &r->s->total;
	struct proc_live *pl = &r->live[p];
	c->alloc_calls++;
	c->alloc_bytes += size;
	t->alloc_calls++;
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

static void end_process(struct run *r, uint32_t p)
{
	if (p < r->nlive && !r->live[p].ended) {
		r->live[p].ended = 1;
		r->total_bytes -= r->live[p].bytes;
	}
}

void ht_summary_release(struct ht_summary *s)
{
	free(s->procs);
	memset(s, 0, sizeof(*s));
}

int ht_summary_run(struct ht_summary *s, struct ht_reader *reader)
{
	return ht_summary_run_query(s, reader, NULL);
}

int ht_summary_run_query(struct ht_summary *s, struct ht_reader *reader, const struct ht_query *q)
{
	memset(s, 0, sizeof(*s));
	struct run r = {.s = s, .temp = ht_temp_new()};
	struct ht_life_tracker *lt = ht_life_new(on_life_end, &r);
	struct ht_commit_tracker *ct = ht_commit_new(NULL, NULL);
	int rc = HT_ERR_NOMEM;
	if (!lt || !ct || !r.temp)
		goto out;
	if ((rc = ht_reader_rewind(reader)) < 0)
		goto out;
	struct ht_event ev;
	while ((rc = ht_reader_next(reader, &ev)) > 0) {
		if (q && q->pid_count && !ht_query_wants_pid(q, ev.pid))
			continue;
		if (ev.type < HT_EV__COUNT)
			s->events[ev.type]++;
		s->event_count++;
		s->last_ts = ev.ts;
		if ((rc = reserve(&r, ev.process)) < 0)
			break;
		uint64_t unknown = ht_life_stats(lt)->unknown_frees;
		if ((rc = ht_life_event(lt, &ev)) < 0 || (rc = ht_commit_event(ct, &ev)) < 0 ||
		    (rc = ht_temp_event(r.temp, &ev)) < 0)
			break;
		if (r.err) {
			rc = r.err;
			break;
		}
		struct ht_summary_counts *c = &s->procs[ev.process];
		if (ht_life_stats(lt)->unknown_frees != unknown) {
			c->unknown_frees++;
			s->total.unknown_frees++;
		}
		switch (ev.type) {
		case HT_EV_ALLOC:
			if (ev.addr)
				grew(&r, ev.process, ev.size, ev.ts);
			break;
		case HT_EV_REALLOC:
			if (ev.flags & HT_EVF_FAILED)
				break;
			if (ev.addr)
				grew(&r, ev.process, ev.size, ev.ts);
			else if (ev.old_addr) { /* realloc(p, 0) */
				c->free_calls++;
				s->total.free_calls++;
			}
			break;
		case HT_EV_FREE:
			if (ev.addr) {
				c->free_calls++;
				s->total.free_calls++;
			}
			break;
		case HT_EV_PROCESS_EXIT:
			end_process(&r, ev.process);
			break;
		case HT_EV_PROCESS_EXEC:
			/* The earlier image of the same pid ends here. */
			for (uint32_t p = 0; p < ht_reader_process_count(reader) && p < r.nlive;
			     p++) {
				const struct ht_process *pr = ht_reader_process(reader, p);
				if (p != ev.process && pr->pid == ev.pid &&
				    (pr->flags & HT_PROCF_EXECED) && pr->end_ts == ev.ts)
					end_process(&r, p);
			}
			break;
		}
	}
	if (rc < 0)
		goto out;
	ht_life_finish(lt);
	if (r.err) {
		rc = r.err;
		goto out;
	}
	/* Every process the tables know gets an entry, even without events. */
	uint32_t n = ht_reader_process_count(reader);
	if (n && (rc = reserve(&r, n - 1)) < 0)
		goto out;
	if (r.nlive > n) {
		/* Events may name processes the table lacks (a damaged trace). */
		n = 0;
		for (uint32_t p = 0; p < r.nlive; p++)
			if (s->procs[p].alloc_calls || s->procs[p].free_calls || r.live[p].bytes)
				n = p + 1;
		if (n < ht_reader_process_count(reader))
			n = ht_reader_process_count(reader);
	}
	s->nprocs = n;
	for (uint32_t p = 0; p < n; p++) {
		struct ht_commit_stats cs;
		ht_commit_process_stats(ct, p, &cs);
		s->procs[p].commits = cs.commits;
		s->procs[p].commit_bytes = cs.commit_bytes;
		s->procs[p].committed_peak_bytes = cs.peak_bytes;
		s->procs[p].committed_peak_ts = cs.peak_ts;
	}
	const struct ht_commit_stats *cs = ht_commit_stats(ct);
	s->total.commits = cs->commits;
	s->total.commit_bytes = cs->commit_bytes;
	s->total.committed_peak_bytes = cs->peak_bytes;
	s->total.committed_peak_ts = cs->peak_ts;
	rc = 0;
out:
	ht_life_free(lt);
	ht_commit_free(ct);
	ht_temp_free(r.temp);
	free(r.live);
	if (rc < 0)
		ht_summary_release(s);
	return rc;
}

int ht_summary_at_peak(struct ht_query *q, struct ht_reader *r, uint64_t *bytes)
{
	if (q->has_range)
		return HT_ERR_INVALID;
	struct ht_summary s;
	int rc = ht_summary_run_query(&s, r, q);
	if (rc < 0)
		return rc;
	q->has_at = true;
	q->at_ts = s.total.peak_ts;
	if (bytes)
		*bytes = s.total.peak_bytes;
	ht_summary_release(&s);
	return ht_reader_rewind(r);
}
