/*
 * commit.c - the commit map of commit.h: per process a sorted array of
 * non-overlapping ranges (committed, reserved or other mappings), cut and
 * re-inserted as mapping events arrive, reporting each committed piece when
 * it ends.
 */
#include "analysis/commit.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096ull

enum range_state {
	R_COMMITTED = 1,
	R_RESERVED = 2, /* anonymous private, PROT_NONE */
	R_OTHER = 3,	/* file or shared mapping, or private read-only */
};

struct range {
	uint64_t start;
	uint64_t end;
	uint64_t commit_ts;
	uint32_t stack;
	int32_t tid;
	uint8_t state;
	uint8_t func;
	uint8_t anon;	/* anonymous private: a later mprotect may commit it */
	uint8_t unseen; /* committed by an HT_EVF_UNSEEN mmap (found in the map) */
};

struct pmap {
	int32_t pid; /* from its last mapping event, to find it at an exec */
	struct range *v;
	uint32_t n;
	uint32_t cap;
	int ended; /* process exited or exec'd */
	struct ht__commit_stats st;
};

struct ht__commit_tracker {
	ht__commit_fn on_end;
	void *ctx;
	struct pmap *procs;
	uint32_t nprocs;
	struct ht__commit_stats st;
	struct range *tmp; /* pieces cut out by extract() */
	uint32_t ntmp;
	uint32_t tmp_cap;
	int err;
};

struct ht__commit_tracker *ht__commit_new(ht__commit_fn on_end, void *ctx)
{
	struct ht__commit_tracker *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->on_end = on_end;
	t->ctx = ctx;
	return t;
}

static struct pmap *pmap_get(struct ht__commit_tracker *t, uint32_t process)
{
	/* nprocs is the array's length: every entry past the used ones is zero. */
	if (ht__grow32_zero((void **)&t->procs, &t->nprocs, (size_t)process + 1,
			    sizeof(*t->procs)) < 0)
		return NULL;
	return &t->procs[process];
}

/* Committed bytes of pm change by delta (signed); peaks follow. */
static void account(struct ht__commit_tracker *t, struct pmap *pm, int64_t delta, int64_t ranges,
		    uint64_t ts)
{
	pm->st.committed_bytes += (uint64_t)delta;
	pm->st.ranges += (uint64_t)ranges;
	if (pm->st.committed_bytes > pm->st.peak_bytes) {
		pm->st.peak_bytes = pm->st.committed_bytes;
		pm->st.peak_ts = ts;
	}
	if (pm->ended)
		return;
	t->st.committed_bytes += (uint64_t)delta;
	t->st.ranges += (uint64_t)ranges;
	if (t->st.committed_bytes > t->st.peak_bytes) {
		t->st.peak_bytes = t->st.committed_bytes;
		t->st.peak_ts = ts;
	}
}

static struct ht__commit piece_of(uint32_t process, const struct range *r, uint64_t end_ts,
				  int at_exit)
{
	return (struct ht__commit){
	    .addr = r->start,
	    .size = r->end - r->start,
	    .commit_ts = r->commit_ts,
	    .decommit_ts = end_ts,
	    .process = process,
	    .stack = r->stack,
	    .tid = r->tid,
	    .func = r->func,
	    .at_exit = (uint8_t)at_exit,
	    .unseen = r->unseen,
	};
}

static void report(struct ht__commit_tracker *t, uint32_t process, const struct range *r,
		   uint64_t end_ts, int at_exit)
{
	if (!t->on_end)
		return;
	struct ht__commit c = piece_of(process, r, end_ts, at_exit);
	t->on_end(t->ctx, &c);
}

/* Index of the first range of pm that ends after addr. */
static uint32_t find(const struct pmap *pm, uint64_t addr)
{
	uint32_t lo = 0, hi = pm->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (pm->v[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int tmp_push(struct ht__commit_tracker *t, const struct range *r)
{
	if (ht__grow32((void **)&t->tmp, &t->tmp_cap, (size_t)t->ntmp + 1, sizeof(*t->tmp)) < 0)
		return HT_ERR_NOMEM;
	t->tmp[t->ntmp++] = *r;
	return 0;
}

/*
 * Removes [lo, hi) from pm: ranges that straddle an edge keep their outside
 * part; the inside parts go to t->tmp (in address order) and leave the
 * committed totals. Nothing is reported here: the caller decides.
 */
static int extract(struct ht__commit_tracker *t, uint32_t process, struct pmap *pm, uint64_t lo,
		   uint64_t hi, uint64_t ts)
{
	t->ntmp = 0;
	uint32_t i = find(pm, lo);
	uint32_t j = i;
	struct range left = {0}, right = {0};
	int has_left = 0, has_right = 0;
	for (; j < pm->n && pm->v[j].start < hi; j++) {
		struct range r = pm->v[j];
		if (r.start < lo) {
			left = r;
			left.end = lo;
			has_left = 1;
			r.start = lo;
		}
		if (r.end > hi) {
			right = r;
			right.start = hi;
			has_right = 1;
			r.end = hi;
		}
		if (tmp_push(t, &r) < 0)
			return HT_ERR_NOMEM;
	}
	uint32_t keep = (uint32_t)has_left + (uint32_t)has_right;
	uint32_t gone = j - i;
	/* One range cut in the middle becomes two. */
	if (keep > gone &&
	    ht__grow32((void **)&pm->v, &pm->cap, (size_t)pm->n + 1, sizeof(*pm->v)) < 0)
		return HT_ERR_NOMEM;
	if (pm->n > j) /* (an empty map may have no array at all) */
		memmove(pm->v + i + keep, pm->v + j, (pm->n - j) * sizeof(*pm->v));
	pm->n = pm->n - gone + keep;
	if (has_left)
		pm->v[i++] = left;
	if (has_right)
		pm->v[i] = right;
	/* Committed pieces leave the totals; a cut range counts once per part. */
	for (uint32_t k = 0; k < t->ntmp; k++)
		if (t->tmp[k].state == R_COMMITTED)
			account(t, pm, -(int64_t)(t->tmp[k].end - t->tmp[k].start), -1, ts);
	for (int k = 0; k < has_left + has_right; k++)
		if ((k == 0 && has_left ? left : right).state == R_COMMITTED)
			account(t, pm, 0, 1, ts);
	(void)process;
	return 0;
}

/* Inserts r into pm, where [r.start, r.end) must be free. */
static int insert(struct ht__commit_tracker *t, struct pmap *pm, const struct range *r, uint64_t ts)
{
	if (r->end <= r->start)
		return 0;
	if (ht__grow32((void **)&pm->v, &pm->cap, (size_t)pm->n + 1, sizeof(*pm->v)) < 0)
		return HT_ERR_NOMEM;
	uint32_t i = find(pm, r->start);
	if (pm->n > i)
		memmove(pm->v + i + 1, pm->v + i, (pm->n - i) * sizeof(*pm->v));
	pm->v[i] = *r;
	pm->n++;
	if (r->state == R_COMMITTED)
		account(t, pm, (int64_t)(r->end - r->start), 1, ts);
	return 0;
}

/* Reports the committed pieces in t->tmp as ended at ts. */
static void report_tmp(struct ht__commit_tracker *t, uint32_t process, uint64_t ts)
{
	for (uint32_t k = 0; k < t->ntmp; k++)
		if (t->tmp[k].state == R_COMMITTED)
			report(t, process, &t->tmp[k], ts, 0);
}

static void count_commit(struct ht__commit_tracker *t, struct pmap *pm, uint64_t bytes)
{
	if (!bytes)
		return;
	pm->st.commits++;
	pm->st.commit_bytes += bytes;
	t->st.commits++;
	t->st.commit_bytes += bytes;
}

static struct range new_range(const struct ht_event *ev, uint64_t start, uint64_t end,
			      uint8_t state, uint8_t anon)
{
	return (struct range){.start = start,
			      .end = end,
			      .commit_ts = ev->ts,
			      .stack = ev->stack,
			      .tid = ev->tid,
			      .state = state,
			      .func = ev->func,
			      .anon = anon,
			      .unseen = (ev->flags & HT_EVF_UNSEEN) != 0};
}

static uint64_t page_end(uint64_t addr, uint64_t len)
{
	uint64_t end = addr + ((len + PAGE - 1) & ~(PAGE - 1));
	return end < addr ? UINT64_MAX & ~(PAGE - 1) : end; /* no wrap-around */
}

/*
 * A hooked mmap without MAP_FIXED got memory that was not mapped when it was
 * called: a range found in the map there is this very mapping, read between
 * the call and its record's time stamp (the session's read can come first
 * on a loaded machine). It is not a lifetime of its own: it leaves without
 * a report, and its commit is not counted twice.
 */
static void adopt_found(struct ht__commit_tracker *t, struct pmap *pm, uint64_t lo, uint64_t hi)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < t->ntmp; i++) {
		const struct range *r = &t->tmp[i];
		if (!r->unseen || r->state != R_COMMITTED) {
			t->tmp[k++] = *r;
			continue;
		}
		uint64_t bytes = r->end - r->start;
		uint64_t ops = r->start == lo && r->end == hi; /* a whole found range */
		pm->st.commits -= ops;
		pm->st.commit_bytes -= bytes;
		t->st.commits -= ops;
		t->st.commit_bytes -= bytes;
	}
	t->ntmp = k;
}

static int on_mmap(struct ht__commit_tracker *t, struct pmap *pm, const struct ht_event *ev)
{
	uint64_t lo = ev->addr, hi = page_end(ev->addr, ev->size);
	if (extract(t, ev->process, pm, lo, hi, ev->ts) < 0)
		return HT_ERR_NOMEM;
	if (!(ev->mflags & MAP_FIXED))
		adopt_found(t, pm, lo, hi);
	report_tmp(t, ev->process, ev->ts);
	int anon = (ev->mflags & MAP_ANONYMOUS) && (ev->mflags & MAP_PRIVATE) &&
		   !(ev->mflags & MAP_SHARED);
	uint8_t state = R_OTHER;
	if (anon && (ev->prot & PROT_WRITE))
		state = R_COMMITTED;
	else if (anon && ev->prot == PROT_NONE)
		state = R_RESERVED;
	struct range r = new_range(ev, lo, hi, state, (uint8_t)anon);
	if (state == R_COMMITTED)
		count_commit(t, pm, hi - lo);
	return insert(t, pm, &r, ev->ts);
}

static int on_munmap(struct ht__commit_tracker *t, struct pmap *pm, const struct ht_event *ev)
{
	if (extract(t, ev->process, pm, ev->addr, page_end(ev->addr, ev->size), ev->ts) < 0)
		return HT_ERR_NOMEM;
	report_tmp(t, ev->process, ev->ts);
	return 0;
}

/* A copy of the t->ntmp pieces extract() left in t->tmp, which the inserts
   that follow may reuse: *out (NULL when there are none), freed by the caller. */
static int copy_pieces(const struct ht__commit_tracker *t, struct range **out)
{
	*out = NULL;
	if (!t->ntmp)
		return 0;
	if (!(*out = malloc(t->ntmp * sizeof(**out))))
		return HT_ERR_NOMEM;
	memcpy(*out, t->tmp, t->ntmp * sizeof(**out));
	return 0;
}

/* A range gone from the map: the ranges found there end, hooked ones stay
   (a hooked munmap ended them already, or the map was read too early). */
static int on_gone(struct ht__commit_tracker *t, struct pmap *pm, const struct ht_event *ev)
{
	if (extract(t, ev->process, pm, ev->addr, page_end(ev->addr, ev->size), ev->ts) < 0)
		return HT_ERR_NOMEM;
	uint32_t n = t->ntmp;
	struct range *pieces;
	if (copy_pieces(t, &pieces) < 0)
		return HT_ERR_NOMEM;
	int rc = 0;
	for (uint32_t k = 0; k < n && !rc; k++) {
		if (!pieces[k].unseen)
			rc = insert(t, pm, &pieces[k], ev->ts);
		else if (pieces[k].state == R_COMMITTED)
			report(t, ev->process, &pieces[k], ev->ts, 0);
	}
	free(pieces);
	return rc;
}

static int on_mprotect(struct ht__commit_tracker *t, struct pmap *pm, const struct ht_event *ev)
{
	int to_none = ev->prot == PROT_NONE;
	int to_write = (ev->prot & PROT_WRITE) != 0;
	if (!to_none && !to_write)
		return 0;
	uint64_t lo = ev->addr, hi = page_end(ev->addr, ev->size);
	if (extract(t, ev->process, pm, lo, hi, ev->ts) < 0)
		return HT_ERR_NOMEM;
	uint32_t n = t->ntmp;
	struct range *pieces;
	if (copy_pieces(t, &pieces) < 0)
		return HT_ERR_NOMEM;
	int rc = 0;
	uint64_t at = lo, committed = 0;
	struct range pending = {0}; /* newly committed bytes merge into one range */
	int has_pending = 0;
#define FLUSH_PENDING()                                                                            \
	do {                                                                                       \
		if (has_pending && !rc) {                                                          \
			rc = insert(t, pm, &pending, ev->ts);                                      \
			has_pending = 0;                                                           \
		}                                                                                  \
	} while (0)
#define COMMIT_NEW(s, e)                                                                           \
	do {                                                                                       \
		if (has_pending && pending.end == (s))                                             \
			pending.end = (e);                                                         \
		else {                                                                             \
			FLUSH_PENDING();                                                           \
			pending = new_range(ev, (s), (e), R_COMMITTED, 1);                         \
			has_pending = 1;                                                           \
		}                                                                                  \
		committed += (e) - (s);                                                            \
	} while (0)
	for (uint32_t k = 0; k <= n && !rc; k++) {
		uint64_t gap_end = k < n ? pieces[k].start : hi;
		if (to_write && at < gap_end)
			COMMIT_NEW(at, gap_end); /* unknown to us: committed now */
		if (k == n)
			break;
		struct range r = pieces[k];
		at = r.end;
		if (to_none) {
			if (r.state == R_COMMITTED) {
				report(t, ev->process, &r, ev->ts, 0);
				r.state = R_RESERVED;
			}
			rc = insert(t, pm, &r, ev->ts);
		} else if (r.state == R_RESERVED) {
			COMMIT_NEW(r.start, r.end);
		} else {
			FLUSH_PENDING();
			if (!rc)
				rc = insert(t, pm, &r, ev->ts);
		}
	}
	FLUSH_PENDING();
#undef COMMIT_NEW
#undef FLUSH_PENDING
	free(pieces);
	count_commit(t, pm, committed);
	return rc;
}

static int on_mremap(struct ht__commit_tracker *t, struct pmap *pm, const struct ht_event *ev)
{
	uint64_t old_lo = ev->old_addr, old_hi = page_end(ev->old_addr, ev->old_size);
	uint64_t new_lo = ev->addr, new_hi = page_end(ev->addr, ev->size);
	if (extract(t, ev->process, pm, old_lo, old_hi, ev->ts) < 0)
		return HT_ERR_NOMEM;
	uint32_t n = t->ntmp;
	struct range *pieces = NULL;
	if (n && !(pieces = malloc(n * sizeof(*pieces))))
		return HT_ERR_NOMEM;
	if (n)
		memcpy(pieces, t->tmp, n * sizeof(*pieces));
	int rc = 0;
	/* The state of the old mapping decides the state of what grows. */
	uint8_t grow_state = R_COMMITTED, grow_anon = 1;
	if (n) {
		grow_state = pieces[n - 1].state;
		grow_anon = pieces[n - 1].anon;
	}
	/* Whatever the target covered is replaced (in place: only stale ranges
	   beyond the old end, from events we did not see). */
	if (extract(t, ev->process, pm, new_lo, new_hi, ev->ts) < 0) {
		free(pieces);
		return HT_ERR_NOMEM;
	}
	report_tmp(t, ev->process, ev->ts);
	uint64_t shift = new_lo - old_lo; /* modular: moves down work too */
	uint64_t keep = new_hi - new_lo;
	for (uint32_t k = 0; k < n && !rc; k++) {
		struct range r = pieces[k];
		uint64_t off_s = r.start - old_lo, off_e = r.end - old_lo;
		if (off_s >= keep) { /* cut off by a shrink */
			if (r.state == R_COMMITTED)
				report(t, ev->process, &r, ev->ts, 0);
			continue;
		}
		if (off_e > keep) {
			struct range cut = r;
			cut.start = old_lo + keep;
			if (cut.state == R_COMMITTED)
				report(t, ev->process, &cut, ev->ts, 0);
			r.end = old_lo + keep;
		}
		r.start += shift;
		r.end += shift;
		rc = insert(t, pm, &r, ev->ts);
	}
	if (!rc && (ev->mflags & 4 /* MREMAP_DONTUNMAP */) && new_lo != old_lo) {
		/* The old range stays mapped, emptied: it keeps its state. */
		for (uint32_t k = 0; k < n && !rc; k++) {
			struct range r = pieces[k];
			r.commit_ts = ev->ts;
			r.stack = ev->stack;
			r.func = ev->func;
			if (r.state == R_COMMITTED)
				count_commit(t, pm, r.end - r.start);
			rc = insert(t, pm, &r, ev->ts);
		}
	}
	uint64_t old_len = old_hi - old_lo;
	if (!rc && keep > old_len) {
		struct range g = new_range(ev, new_lo + old_len, new_hi, grow_state, grow_anon);
		if (grow_state == R_COMMITTED)
			count_commit(t, pm, g.end - g.start);
		rc = insert(t, pm, &g, ev->ts);
	}
	free(pieces);
	return rc;
}

static uint64_t page_up(uint64_t a)
{
	return a % PAGE ? (a & ~(PAGE - 1)) + PAGE : a;
}

static int on_brk(struct ht__commit_tracker *t, struct pmap *pm, const struct ht_event *ev)
{
	/* The page holding the old break is mapped already: whole pages only. */
	uint64_t lo = page_up(ev->old_addr < ev->addr ? ev->old_addr : ev->addr);
	uint64_t hi = page_up(ev->old_addr < ev->addr ? ev->addr : ev->old_addr);
	if (hi <= lo)
		return 0;
	if (extract(t, ev->process, pm, lo, hi, ev->ts) < 0)
		return HT_ERR_NOMEM;
	report_tmp(t, ev->process, ev->ts);
	if (ev->addr < ev->old_addr)
		return 0; /* shrink: released */
	struct range r = new_range(ev, lo, hi, R_COMMITTED, 1);
	count_commit(t, pm, hi - lo);
	return insert(t, pm, &r, ev->ts);
}

int ht__commit_event(struct ht__commit_tracker *t, const struct ht_event *ev)
{
	switch (ev->type) {
	case HT_EV_MMAP:
	case HT_EV_MUNMAP:
	case HT_EV_MREMAP:
	case HT_EV_MPROTECT:
	case HT_EV_BRK:
		break;
	default:
		return 0;
	}
	if (ev->flags & HT_EVF_FAILED)
		return 0;
	struct pmap *pm = pmap_get(t, ev->process);
	if (!pm)
		return HT_ERR_NOMEM;
	pm->pid = ev->pid;
	switch (ev->type) {
	case HT_EV_MMAP:
		/* Found in the map: like an mprotect to writable, it commits
		   only what no hooked event accounts for. */
		if (ev->flags & HT_EVF_UNSEEN)
			return on_mprotect(t, pm, ev);
		return ev->addr ? on_mmap(t, pm, ev) : 0;
	case HT_EV_MUNMAP:
		if (ev->flags & HT_EVF_UNSEEN)
			return on_gone(t, pm, ev);
		return on_munmap(t, pm, ev);
	case HT_EV_MREMAP:
		return ev->addr ? on_mremap(t, pm, ev) : 0;
	case HT_EV_MPROTECT:
		return on_mprotect(t, pm, ev);
	case HT_EV_BRK:
		return on_brk(t, pm, ev);
	}
	return 0;
}

struct live_ref {
	uint64_t ts;
	uint32_t process;
	uint32_t index;
};

static int live_cmp(const void *a, const void *b)
{
	const struct live_ref *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->process != y->process)
		return x->process < y->process ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/*
 * Reports the committed ranges of process images [lo, hi) as ended at ts,
 * oldest first so the order does not depend on the maps, and empties them.
 */
static void report_all(struct ht__commit_tracker *t, uint32_t lo, uint32_t hi, uint64_t ts,
		       int at_exit)
{
	size_t n = 0;
	for (uint32_t p = lo; p < hi; p++)
		for (uint32_t i = 0; i < t->procs[p].n; i++)
			n += t->procs[p].v[i].state == R_COMMITTED;
	struct live_ref *refs = n ? malloc(n * sizeof(*refs)) : NULL;
	size_t k = 0;
	for (uint32_t p = lo; p < hi; p++) {
		struct pmap *pm = &t->procs[p];
		for (uint32_t i = 0; i < pm->n; i++) {
			if (pm->v[i].state != R_COMMITTED)
				continue;
			if (refs)
				refs[k++] = (struct live_ref){pm->v[i].commit_ts, p, i};
			else
				report(t, p, &pm->v[i], ts, at_exit); /* no memory to sort */
		}
	}
	if (refs) {
		qsort(refs, k, sizeof(*refs), live_cmp);
		for (size_t i = 0; i < k; i++)
			report(t, refs[i].process, &t->procs[refs[i].process].v[refs[i].index], ts,
			       at_exit);
		free(refs);
	}
	/* Reported once: the maps are empty afterwards. */
	for (uint32_t p = lo; p < hi; p++)
		t->procs[p].n = 0;
}

void ht__commit_end_process(struct ht__commit_tracker *t, uint32_t process, uint64_t ts)
{
	if (process >= t->nprocs || t->procs[process].ended)
		return;
	struct pmap *pm = &t->procs[process];
	t->st.committed_bytes -= pm->st.committed_bytes;
	t->st.ranges -= pm->st.ranges;
	pm->ended = 1;
	report_all(t, process, process + 1, ts, 1);
}

void ht__commit_finish(struct ht__commit_tracker *t)
{
	report_all(t, 0, t->nprocs, HT_TS_NEVER, 0);
}

void ht__commit_each_live(const struct ht__commit_tracker *t, ht__commit_fn fn, void *ctx)
{
	for (uint32_t p = 0; p < t->nprocs; p++) {
		const struct pmap *pm = &t->procs[p];
		for (uint32_t i = 0; i < pm->n && !pm->ended; i++) {
			if (pm->v[i].state != R_COMMITTED)
				continue;
			struct ht__commit c = piece_of(p, &pm->v[i], HT_TS_NEVER, 0);
			fn(ctx, &c);
		}
	}
}

const struct ht__commit_stats *ht__commit_stats(const struct ht__commit_tracker *t)
{
	return &t->st;
}

void ht__commit_process_stats(const struct ht__commit_tracker *t, uint32_t process,
			      struct ht__commit_stats *out)
{
	if (process < t->nprocs)
		*out = t->procs[process].st;
	else
		memset(out, 0, sizeof(*out));
}

void ht__commit_free(struct ht__commit_tracker *t)
{
	if (!t)
		return;
	for (uint32_t p = 0; p < t->nprocs; p++)
		free(t->procs[p].v);
	free(t->procs);
	free(t->tmp);
	free(t);
}

/* ---- commits already counted ---- */

struct ht__commit_key {
	uint64_t ts;
	uint32_t process, stack;
	int32_t tid;
};

static uint64_t key_hash(const struct ht__commit_key *k)
{
	return ht__mix64(k->ts ^ ht__mix64((uint64_t)k->process << 32 | k->stack) ^
			 (uint32_t)k->tid);
}

static uint64_t seen_rehash(const void *ctx, uint32_t id)
{
	const struct ht__commit_seen *s = ctx;
	return key_hash(&s->keys[id]);
}

int ht__commit_seen(struct ht__commit_seen *s, const struct ht__commit *c)
{
	struct ht__commit_key k = {c->commit_ts, c->process, c->stack, c->tid};
	uint64_t h = key_hash(&k);
	for (uint32_t *slot = ht__hindex_find(&s->ix, h); *slot;
	     slot = ht__hindex_next(&s->ix, slot)) {
		const struct ht__commit_key *o = &s->keys[*slot - 1];
		if (o->ts == k.ts && o->process == k.process && o->stack == k.stack &&
		    o->tid == k.tid)
			return 1;
	}
	if (ht__grow((void **)&s->keys, &s->cap, s->len + 1, sizeof(*s->keys)) < 0)
		return HT_ERR_NOMEM;
	s->keys[s->len] = k;
	if (ht__hindex_insert(&s->ix, h, (uint32_t)s->len, seen_rehash, s) < 0)
		return HT_ERR_NOMEM;
	s->len++;
	return 0;
}

void ht__commit_seen_release(struct ht__commit_seen *s)
{
	free(s->keys);
	ht__hindex_release(&s->ix);
	memset(s, 0, sizeof(*s));
}
