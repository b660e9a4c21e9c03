/*
 * pass.c - the trace pass of pass.h: one read loop, one lifetime tracker and
 * one commit map shared by every consumer, and the one place that decides
 * which process image an event ended, and ends its memory there.
 */
#include "analysis/pass.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/vec.h"
#include "format/reader_ref.h"

struct slot {
	const struct ht__consumer *c;
	void *ctx;
	uint64_t until;	 /* no .event at or after this time */
	uint32_t events; /* c->events, 0 without c->event: one load per event */
};

struct ht__pass {
	struct ht_reader *r;
	HT_VEC(struct slot) consumers;
	unsigned needs;
	uint32_t events; /* union of the consumers' event masks */
	/* during the run, per event type: the one consumer whose .event takes
	   it, or NULL (none, or several) */
	struct slot *solo[32];
	struct ht__life_tracker *lt;
	struct ht__commit_tracker *ct;
	struct ht__life_stats no_life;
	struct ht__commit_stats no_commit;
	HT_VEC(uint8_t) ended; /* per process index: its end was reported */
	/* The trace has fork children, whose frees of their parent's blocks
	   the tracker recognizes (docs/processes.md): their parents' frees
	   are noted (ht__life_note_free()). */
	bool forks;
	uint64_t end_ts;
	uint64_t nevents;
	uint64_t sample_rate; /* ht_trace_info.sample_rate: 0, or estimates */
	uint64_t ev_count;    /* ht__pass_event_count() */
	uint64_t freed_count; /* count of the last block a tracker ended */
	ht__pass_progress_fn progress;
	void *progress_ctx;
	int err;
	bool ran;
	uint32_t snap_want;		  /* ht__pass_snapshot(): 0 the last */
	uint32_t snap_got;		  /* the one delivered */
	uint64_t snap_ts, snap_next_addr; /* its time; synthetic addresses */
	bool snap_synth;		  /* delivering its blocks (ht__pass_synthetic()) */
};

static uint32_t default_snapshot;

void ht__pass_default_snapshot(uint32_t n)
{
	default_snapshot = n;
}

int ht__pass_new(struct ht__pass **out, struct ht_reader *r)
{
	struct ht__pass *p = calloc(1, sizeof(*p));
	if (!p)
		return HT_ERR_NOMEM;
	p->r = r;
	p->snap_want = default_snapshot;
	*out = p;
	return 0;
}

int ht__pass_add(struct ht__pass *p, const struct ht__consumer *c, void *ctx)
{
	struct slot s = {c, ctx, HT_TS_NEVER, c->event ? c->events : 0};
	if (ht__vec_push(&p->consumers, s) < 0)
		return HT_ERR_NOMEM;
	p->needs |= c->needs;
	if (c->life)
		p->needs |= HT_PASS_NEED_LIFE;
	if (c->commit)
		p->needs |= HT_PASS_NEED_COMMIT;
	if (c->event)
		p->events |= c->events;
	return (int)(p->consumers.len - 1);
}

void ht__pass_stop_at(struct ht__pass *p, int id, uint64_t ts)
{
	if (id >= 0 && (size_t)id < p->consumers.len)
		p->consumers.v[id].until = ts;
}

void ht__pass_snapshot(struct ht__pass *p, uint32_t n)
{
	p->snap_want = n;
}

uint32_t ht__pass_snapshot_taken(const struct ht__pass *p, uint64_t *ts)
{
	if (ts)
		*ts = p->snap_ts;
	return p->snap_got;
}

void ht__pass_progress(struct ht__pass *p, ht__pass_progress_fn fn, void *ctx)
{
	p->progress = fn;
	p->progress_ctx = ctx;
}

struct ht_reader *ht__pass_reader(const struct ht__pass *p)
{
	return p->r;
}

uint64_t ht__pass_end_ts(const struct ht__pass *p)
{
	return p->end_ts;
}

/* The end of the trace grows with the events; the stated duration counts too. */
static void end_ts_from_info(struct ht__pass *p)
{
	const struct ht_trace_info *info = ht_reader_info(p->r);
	if (info && info->duration_ns > p->end_ts)
		p->end_ts = info->duration_ns;
}

const struct ht__life_stats *ht__pass_life_stats(const struct ht__pass *p)
{
	return p->lt ? ht__life_stats(p->lt) : &p->no_life;
}

const struct ht__commit_stats *ht__pass_commit_stats(const struct ht__pass *p)
{
	return p->ct ? ht__commit_stats(p->ct) : &p->no_commit;
}

void ht__pass_commit_process_stats(const struct ht__pass *p, uint32_t process,
				   struct ht__commit_stats *out)
{
	if (p->ct)
		ht__commit_process_stats(p->ct, process, out);
	else
		memset(out, 0, sizeof(*out));
}

uint64_t ht__pass_events(const struct ht__pass *p)
{
	return p->nevents;
}

void ht__pass_free(struct ht__pass *p)
{
	if (!p)
		return;
	ht__life_free(p->lt);
	ht__commit_free(p->ct);
	ht__vec_release(&p->consumers);
	ht__vec_release(&p->ended);
	free(p);
}

uint64_t ht__pass_sample_rate(const struct ht__pass *p)
{
	return p->sample_rate;
}

uint64_t ht__pass_event_count(const struct ht__pass *p)
{
	return p->ev_count;
}

bool ht__pass_synthetic(const struct ht__pass *p)
{
	return p->snap_synth;
}

/* ---- sampled traces: the one place estimates are made ---- */

/* A uniform draw in [0, 1) fixed by a block's address and time (splitmix64). */
static double block_draw(uint64_t addr, uint64_t ts)
{
	uint64_t z = addr ^ ts * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1p-53;
}

/*
 * The blocks a sampled block of size bytes stands for, as a whole number
 * that is right on average: the weight rounded up with the probability of
 * its fraction, the draw fixed by the block (its allocation event and its
 * lifetime round alike, and every run of a command agrees).
 */
static uint64_t est_count(uint64_t size, uint64_t rate, uint64_t addr, uint64_t ts)
{
	double w = ht_sample_weight(size, rate);
	double whole = floor(w);
	return (uint64_t)whole + (block_draw(addr, ts) < w - whole);
}

static uint64_t est_bytes(uint64_t size, uint64_t rate)
{
	return (uint64_t)llround((double)size * ht_sample_weight(size, rate));
}

/* The event as consumers see it: heap sizes made estimates. */
static const struct ht_event *estimate_event(struct ht__pass *p, const struct ht_event *ev,
					     struct ht_event *out)
{
	p->ev_count = 1;
	if (!p->sample_rate)
		return ev;
	switch (ev->type) {
	case HT_EV_ALLOC:
	case HT_EV_REALLOC:
		break;
	case HT_EV_FREE:
		p->ev_count = p->freed_count;
		return ev;
	default:
		return ev;
	}
	*out = *ev;
	if (ev->addr && !(ev->flags & HT_EVF_FAILED)) {
		out->size = est_bytes(ev->size, p->sample_rate);
		p->ev_count = est_count(ev->size, p->sample_rate, ev->addr, ev->ts);
	} else if (!ev->addr && ev->old_addr && !(ev->flags & HT_EVF_FAILED)) {
		p->ev_count = p->freed_count; /* realloc(p, 0): a free */
	}
	out->old_size = est_bytes(ev->old_size, p->sample_rate);
	return out;
}

/* ---- the trackers' callbacks, fanned out ---- */

static void fail(struct ht__pass *p, int rc)
{
	if (rc < 0 && !p->err)
		p->err = rc;
}

static void on_life(void *ctx, const struct ht__life *l)
{
	struct ht__pass *p = ctx;
	struct ht__life est;
	if (p->sample_rate) {
		est = *l;
		est.size = est_bytes(l->size, p->sample_rate);
		est.count = est_count(l->size, p->sample_rate, l->addr, l->alloc_ts);
		l = &est;
	}
	p->freed_count = l->count;
	for (size_t i = 0; i < p->consumers.len && !p->err; i++) {
		struct slot *s = &p->consumers.v[i];
		if (s->c->life)
			fail(p, s->c->life(s->ctx, p, l));
	}
}

static void on_commit(void *ctx, const struct ht__commit *c)
{
	struct ht__pass *p = ctx;
	for (size_t i = 0; i < p->consumers.len && !p->err; i++) {
		struct slot *s = &p->consumers.v[i];
		if (s->c->commit)
			fail(p, s->c->commit(s->ctx, p, c));
	}
}

/* ---- process images ---- */

/* Whether image i of the table is a fork child with a parent image (one
   killed before it ran, HT_PROCF_UNSEEN, has no events). */
static bool fork_child(const struct ht_process *pr, uint32_t i)
{
	return pr && (pr->flags & HT_PROCF_FORK) && !(pr->flags & HT_PROCF_UNSEEN) &&
	       pr->parent != UINT32_MAX && pr->parent != i;
}

/* The table's fork children, told to the tracker before the first event
   (ht__life_fork_expect()). A heap snapshot trace has no frees. */
static void expect_forks(struct ht__pass *p, const struct ht_trace_info *info)
{
	if (!p->lt || (info && (info->flags & HT_TRACEF_SNAPSHOT)))
		return;
	uint32_t n = ht_reader_process_count(p->r);
	for (uint32_t i = 0; i < n; i++) {
		const struct ht_process *pr = ht_reader_process(p->r, i);
		if (fork_child(pr, i) && pr->parent < n) {
			ht__life_fork_expect(p->lt, pr->parent);
			p->forks = true;
		}
	}
}

static void process_start(struct ht__pass *p, uint32_t process, uint64_t ts)
{
	if (p->forks) {
		const struct ht_process *pr = ht_reader_process(p->r, process);
		if (fork_child(pr, process))
			fail(p, ht__life_fork(p->lt, pr->parent, process));
	}
	for (size_t i = 0; i < p->consumers.len && !p->err; i++) {
		struct slot *s = &p->consumers.v[i];
		if (s->c->process_start)
			fail(p, s->c->process_start(s->ctx, p, process, ts));
	}
}

/* Image process ended at ts: said once per image. */
static void process_end(struct ht__pass *p, uint32_t process, uint64_t ts)
{
	if (ht__vec_grow_zero(&p->ended, (size_t)process + 1) < 0) {
		fail(p, HT_ERR_NOMEM);
		return;
	}
	if (p->ended.v[process])
		return;
	p->ended.v[process] = 1;
	/* What the image never gave back ends with it (lifetime.h, commit.h). */
	if (p->lt)
		fail(p, ht__life_end_process(p->lt, process, ts));
	if (p->ct)
		ht__commit_end_process(p->ct, process, ts);
	for (size_t i = 0; i < p->consumers.len && !p->err; i++) {
		struct slot *s = &p->consumers.v[i];
		if (s->c->process_end)
			fail(p, s->c->process_end(s->ctx, p, process, ts));
	}
}

/*
 * The images an event starts and ends. EXIT names the image that ended;
 * EXEC names the new image, and the image it replaced is the earlier one
 * of the same pid that has not ended yet.
 */
static void process_events(struct ht__pass *p, const struct ht_event *ev)
{
	if (ev->type == HT_EV_PROCESS_START) {
		process_start(p, ev->process, ev->ts);
	} else if (ev->type == HT_EV_PROCESS_EXIT) {
		process_end(p, ev->process, ev->ts);
	} else if (ev->type == HT_EV_PROCESS_EXEC) {
		uint32_t n = ht_reader_process_count(p->r);
		for (uint32_t i = 0; i < n && !p->err; i++) {
			const struct ht_process *pr = ht_reader_process(p->r, i);
			if (i == ev->process || !pr || pr->pid != ev->pid ||
			    pr->start_ts > ev->ts || (i < p->ended.len && p->ended.v[i]))
				continue;
			process_end(p, i, ev->ts);
		}
		process_start(p, ev->process, ev->ts);
	}
}

/* ---- the loop ---- */

static void call_slots(struct ht__pass *p, const struct ht_event *ev, uint32_t bit)
{
	for (size_t i = 0; i < p->consumers.len; i++) {
		struct slot *s = &p->consumers.v[i];
		if ((s->events & bit) && ev->ts < s->until && !p->err)
			fail(p, s->c->event(s->ctx, p, ev));
	}
}

/* Inline: most events (a loop's frees) are for no consumer, and the rest
   often for one (analyze's counts: a loop of one cost python 45
   instructions an allocation). */
static inline void call_event(struct ht__pass *p, const struct ht_event *ev)
{
	uint32_t bit = ev->type < 32 ? HT_PASS_EV(ev->type) : 0;
	if (!(p->events & bit))
		return;
	struct slot *s = p->solo[ev->type];
	if (!s)
		call_slots(p, ev, bit);
	else if (ev->ts < s->until && !p->err)
		fail(p, s->c->event(s->ctx, p, ev));
}

/* call_event() for a heap event of an unsampled trace (run_events()):
   its type is below 32, and its one consumer (analyze's counts take the
   allocations) found first. */
static inline void call_heap_event(struct ht__pass *p, const struct ht_event *ev)
{
	struct slot *s = p->solo[ev->type];
	if (s) {
		if (ev->ts < s->until)
			fail(p, s->c->event(s->ctx, p, ev));
	} else if (p->events & HT_PASS_EV(ev->type)) {
		call_slots(p, ev, HT_PASS_EV(ev->type));
	}
}

/* In a trace with fork children, a free or realloc after the tracker took
   it is noted (ht__life_note_free()): a child may free its copy. */
static inline void note_free(struct ht__pass *p, const struct ht_event *ev)
{
	if (p->forks && (ev->type == HT_EV_FREE || ev->type == HT_EV_REALLOC) && !p->err)
		fail(p, ht__life_note_free(p->lt, ev));
}

/* ht__life_heap_run()'s call for a heap event some consumer takes. */
static int heap_event_fn(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	(void)ctx;
	note_free(p, ev);
	call_heap_event(p, ev);
	return p->err;
}

/* ht__life_heap_run()'s call in a trace with fork children when one
   consumer takes every heap event any takes (ctx its slot): a free is
   noted, and the consumer called straight. */
static int note_one_fn(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	const struct slot *one = ctx;
	note_free(p, ev);
	if (p->err || !(one->events >> ev->type & 1))
		return p->err;
	return one->c->event(one->ctx, p, ev);
}

/* p->solo: per event type, the one consumer that takes it, if one. */
static void find_solos(struct ht__pass *p)
{
	for (uint32_t type = 0; type < 32; type++) {
		struct slot *solo = NULL;
		int n = 0;
		for (size_t i = 0; i < p->consumers.len; i++)
			if (p->consumers.v[i].events & HT_PASS_EV(type)) {
				solo = &p->consumers.v[i];
				n++;
			}
		p->solo[type] = n == 1 ? solo : NULL;
	}
}

/* ---- heap snapshots ---- */

/* Which snapshot to deliver: a first read finds the last one (a snapshot
   trace has no allocation events, so it is short). */
static int snap_choose(struct ht__pass *p)
{
	const struct ht_trace_info *info = ht_reader_info(p->r);
	if (!info || !(info->flags & HT_TRACEF_SNAPSHOT) || p->snap_want == HT_PASS_SNAPSHOT_NONE)
		return 0;
	struct ht_event ev;
	uint32_t last = 0;
	bool found = false;
	int rc;
	while ((rc = ht_reader_next(p->r, &ev)) > 0)
		if (ev.type == HT_EV_SNAPSHOT && (ev.flags & HT_EVF_SNAPSHOT_BEGIN)) {
			last = (uint32_t)ev.value;
			found |= last == p->snap_want;
		}
	if (rc < 0 || (rc = ht_reader_rewind(p->r)) < 0)
		return rc;
	if (p->snap_want && !found)
		return HT_ERR_NOT_FOUND;
	p->snap_got = p->snap_want ? p->snap_want : last;
	p->snap_next_addr = 0x1000;
	return 0;
}

int ht__pass_snapshot_count(struct ht_reader *r, uint32_t *n)
{
	const struct ht_trace_info *info = ht_reader_info(r);
	*n = 0;
	if (!info || !(info->flags & HT_TRACEF_SNAPSHOT))
		return 0;
	struct ht_event ev;
	int rc;
	while ((rc = ht_reader_next(r, &ev)) > 0)
		*n += ev.type == HT_EV_SNAPSHOT && (ev.flags & HT_EVF_SNAPSHOT_BEGIN);
	return rc < 0 ? rc : ht_reader_rewind(r);
}

/* One stack's part of the chosen snapshot: its live blocks as ALLOC events. */
static void snap_blocks(struct ht__pass *p, const struct ht_event *sev)
{
	if (sev->flags & HT_EVF_SNAPSHOT_BEGIN) {
		p->snap_ts = sev->ts;
		return;
	}
	uint64_t n = sev->addr, q = n ? sev->size / n : 0, r = n ? sev->size % n : 0;
	/* A custom heap's stack (since format version 6) is its blocks'
	   heap, as the API's own events are. */
	struct ht_event ev = {.type = HT_EV_ALLOC,
			      .func = sev->heap ? HT_FN_HEAP_API : HT_FN_MALLOC,
			      .process = sev->process,
			      .pid = sev->pid,
			      .tid = sev->tid,
			      .ts = sev->ts,
			      .stack = sev->stack,
			      .heap = sev->heap};
	p->snap_synth = true;
	for (uint64_t i = 0; i < n && !p->err; i++) {
		ev.size = q + (i < r);
		ev.addr = p->snap_next_addr;
		p->snap_next_addr += 16 + (ev.size + 15) / 16 * 16;
		if (p->lt)
			fail(p, ht__life_event(p->lt, &ev));
		if (!p->err)
			call_event(p, &ev);
	}
	p->snap_synth = false;
}

/* Whether every consumer's .life says so (HT_PASS_LIFE_UNFREED, HT_PASS_LIFE_NO_TS,
   HT_PASS_LIFE_NO_CALLER). */
static bool every_life(const struct ht__pass *p, unsigned need)
{
	for (size_t i = 0; i < p->consumers.len; i++) {
		const struct ht__consumer *c = p->consumers.v[i].c;
		if (c->life && !(c->needs & need))
			return false;
	}
	return true;
}

/* The time after which no consumer needs events: the highest limit, or never. */
static uint64_t stop_ts(const struct ht__pass *p)
{
	uint64_t stop = 0;
	for (size_t i = 0; i < p->consumers.len; i++)
		if (p->consumers.v[i].until > stop)
			stop = p->consumers.v[i].until;
	return p->consumers.len ? stop : 0;
}

/*
 * The events, a run of the reader's batch at a time (read where the reader
 * decoded them: not copied), until one at or after stop. 0 or the reader's
 * error (the consumers' is in p->err).
 */
static int run_events(struct ht__pass *p, uint64_t stop, uint64_t duration)
{
	const struct ht_event *run;
	struct ht_event est;
	struct ht__life_tracker *lt = p->lt;
	/* A heap event (type up to FREE) is for the tracker and .event only:
	   the commit map, the process images and snapshots take none, and
	   without estimates it is given as it is (python: a third of the
	   pass's own instructions an event). */
	const uint32_t lean_max = p->sample_rate ? 0 : HT_EV_FREE;
	p->ev_count = 1;
	_Static_assert(HT_EV_ALLOC <= HT_EV_FREE && HT_EV_REALLOC <= HT_EV_FREE &&
			   HT_EV_ALLOC_FAIL <= HT_EV_FREE && HT_EV_HEAP_DESTROY > HT_EV_FREE &&
			   HT_EV_MMAP > HT_EV_FREE && HT_EV_SNAPSHOT > HT_EV_FREE &&
			   HT_EV_PROCESS_START > HT_EV_FREE,
		       "the heap events come first");
	/* The heap events' consumers, for ht__life_heap_run() */
	/* A trace with fork children notes their parents' frees too
	   (ht__life_note_free()). */
	const uint32_t heap_types =
	    (p->events & ((2u << HT_EV_FREE) - 1)) |
	    (p->forks ? HT_PASS_EV(HT_EV_FREE) | HT_PASS_EV(HT_EV_REALLOC) : 0);
	/* When one consumer, with no time limit, takes every heap event any
	   consumer takes (analyze's counts), the run calls its .event
	   straight (jq: 20 instructions an allocation less than through
	   heap_event_fn()). */
	const struct slot *one = NULL;
	for (uint32_t type = 0; type <= HT_EV_FREE; type++) {
		const struct slot *s = p->solo[type];
		if (!(p->events >> type & 1))
			continue;
		if (!s || s->until != UINT64_MAX || (one && one != s)) {
			one = NULL;
			break;
		}
		one = s;
	}
	ht__life_ev_fn heap_fn = one ? one->c->event : heap_event_fn;
	void *heap_ctx = one ? one->ctx : NULL;
	if (one && p->forks) {
		heap_fn = note_one_fn;
		heap_ctx = (void *)one;
	}
	int n = 0;
	while (!p->err && (n = ht__reader_next_run(p->r, &run)) > 0) {
		for (const struct ht_event *ev = run, *end = run + n; ev < end && !p->err; ev++) {
			if (lt && ev->type <= lean_max) {
				/* A run of heap events in the tracker's loop, up to
				   the next progress call */
				uint32_t lim = (uint32_t)(end - ev),
					 left = 0x10000 - (p->nevents & 0xffff);
				int rc;
				uint32_t k = ht__life_heap_run(
				    lt, ev, p->progress && lim > left ? left : lim, stop,
				    &p->end_ts, heap_types, heap_fn, heap_ctx, p, &rc);
				fail(p, rc);
				p->nevents += k;
				ev += k;
				if (k && p->progress && !(p->nevents & 0xffff))
					p->progress(p->progress_ctx, ev[-1].ts, duration);
				if (ev == end || p->err)
					break;
			}
			/* The trace goes on at least to here (it may have no footer). */
			if (ev->ts > p->end_ts)
				p->end_ts = ev->ts;
			if (ev->ts >= stop)
				return 0;
			p->nevents++;
			if (ev->type <= lean_max) {
				/* ev_count stays 1 and freed_count is not read
				   (both are for estimates) */
				if (lt)
					fail(p, ht__life_heap_event(lt, ev));
				note_free(p, ev);
				if (!p->err)
					call_heap_event(p, ev);
				if (p->progress && !(p->nevents & 0xffff))
					p->progress(p->progress_ctx, ev->ts, duration);
				continue;
			}
			p->freed_count = 0;
			if (p->lt)
				fail(p, ht__life_event(p->lt, ev));
			if (p->ct && !p->err)
				fail(p, ht__commit_event(p->ct, ev));
			note_free(p, ev);
			if (ev->type >= HT_EV_PROCESS_START && ev->type <= HT_EV_PROCESS_EXIT &&
			    !p->err)
				process_events(p, ev);
			if (!p->err)
				call_event(p, estimate_event(p, ev, &est));
			if (ev->type == HT_EV_SNAPSHOT && (uint32_t)ev->value == p->snap_got &&
			    !p->err)
				snap_blocks(p, ev);
			if (p->progress && !(p->nevents & 0xffff))
				p->progress(p->progress_ctx, ev->ts, duration);
		}
	}
	return n < 0 ? n : 0;
}

int ht__pass_run(struct ht__pass *p)
{
	if (p->ran)
		return HT_ERR_INVALID;
	p->ran = true;
	if ((p->needs & HT_PASS_NEED_LIFE) && !(p->lt = ht__life_new(on_life, p)))
		return HT_ERR_NOMEM;
	if ((p->needs & HT_PASS_NEED_COMMIT) && !(p->ct = ht__commit_new(on_commit, p)))
		return HT_ERR_NOMEM;
	int rc = ht_reader_rewind(p->r);
	if (rc < 0)
		return rc;
	end_ts_from_info(p);
	if ((rc = snap_choose(p)) < 0)
		return rc;
	for (size_t i = 0; i < p->consumers.len && !p->err; i++) {
		struct slot *s = &p->consumers.v[i];
		if (s->c->begin)
			fail(p, s->c->begin(s->ctx, p));
	}
	const struct ht_trace_info *info = ht_reader_info(p->r);
	uint64_t duration = info ? info->duration_ns : 0;
	if (p->lt && info)
		ht__life_ts_unit(p->lt, info->ts_unit_ns);
	p->sample_rate = info ? info->sample_rate : 0;
	/* A sampled trace's frees need their block's count (freed_count). */
	if (p->lt && !p->sample_rate && every_life(p, HT_PASS_LIFE_UNFREED))
		ht__life_unfreed_only(p->lt);
	if (p->lt && !p->sample_rate && every_life(p, HT_PASS_LIFE_NO_TS))
		ht__life_no_times(p->lt);
	if (p->lt && every_life(p, HT_PASS_LIFE_NO_CALLER))
		ht__life_no_caller(p->lt);
	expect_forks(p, info);
	find_solos(p);
	rc = run_events(p, stop_ts(p), duration);
	if (rc < 0)
		return rc;
	/* The footer (read at the end of an unfinished trace) may know more. */
	end_ts_from_info(p);
	if (p->lt && !p->err)
		ht__life_finish(p->lt);
	if (p->ct && !p->err)
		ht__commit_finish(p->ct);
	for (size_t i = 0; i < p->consumers.len && !p->err; i++) {
		struct slot *s = &p->consumers.v[i];
		if (s->c->end)
			fail(p, s->c->end(s->ctx, p));
	}
	return p->err;
}

int ht__pass_trace_end(struct ht_reader *r, uint64_t *end)
{
	const struct ht_trace_info *info = ht_reader_info(r);
	uint64_t last = 0;
	int rc = 0;
	if (!(info->flags & HT_TRACEF_COMPLETE)) {
		struct ht_event ev;
		while ((rc = ht_reader_next(r, &ev)) > 0)
			last = ev.ts;
		if (rc < 0 || (rc = ht_reader_rewind(r)) < 0)
			return rc;
		info = ht_reader_info(r);
	}
	*end = info->duration_ns > last ? info->duration_ns : last;
	return 0;
}
