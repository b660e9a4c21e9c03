/*
 * Heap snapshot mode on the collector's side (docs/session-protocol.md,
 * "Heap snapshots"): when a snapshot is asked (heaptrail snapshot, SIGUSR2,
 * the interval), a process exits (a snapshot of it alone) or the session
 * ends, copy the stacks' region the recorders keep (and the custom heaps'
 * entries), queue it in time order with the session's own records, and
 * write it as SNAPSHOT events once every stack it names has been defined.
 */
#include <stdlib.h>
#include <string.h>

#include "base/vec.h"
#include "session/internal.h"

struct ht__snap_copy {
	/* The stacks that ever allocated (of the exited image alone in an exit
	   snapshot), by increasing id, then the custom heaps' (heap, stack)
	   pairs by heap and id: memory follows them, not every stack. */
	size_t n, cap;
	struct ht__snap_entry {
		uint32_t id;
		uint64_t heap; /* 0: the process heap; else a custom heap's handle */
		uint64_t alloc_bytes, alloc_count, live_bytes, live_count;
	} * v;
	uint64_t untracked_count, untracked_bytes;
	const struct ht__proc *exited; /* an exit snapshot: of this image alone */
};

/* The root process (or the first one); NULL before any. */
static struct ht__proc *root_proc(const struct ht__session *s)
{
	for (uint32_t i = 0; i < s->nprocs; i++)
		if (s->procs[i]->flags & HT_PROCF_ROOT)
			return s->procs[i];
	return s->nprocs ? s->procs[0] : NULL;
}

static bool snap_due(struct ht__session *s, uint64_t now, bool final)
{
	if (final || s->snap_asked)
		return true;
	uint32_t req = atomic_load(&s->hdr->snap_request);
	if (req != atomic_load(&s->hdr->snap_served))
		return true;
	return s->cfg.snapshot_interval_ns && now >= s->snap_next_ns;
}

int ht__snap_exited(struct ht__session *s, struct ht__proc *p)
{
	if (!(s->cfg.flags & HT_SHM_SNAPSHOT))
		return 0;
	if (ht__grow((void **)&s->snap_exits, &s->snap_exits_cap, s->snap_nexits + 1,
		     sizeof(*s->snap_exits)) < 0)
		return HT_ERR_NOMEM;
	s->snap_exits[s->snap_nexits++] = p;
	return 0;
}

/* Whether stack id belongs to the exited image (NULL: every image does). */
static bool of_image(struct ht__session *s, uint32_t id, const struct ht__proc *root,
		     const struct ht__proc *exited)
{
	if (!exited)
		return true;
	/* Its stacks are all defined: its exit came after them. */
	uint32_t sid;
	struct ht__proc *owner = (struct ht__proc *)root;
	if (id)
		ht__stack_of(s, id, &sid, &owner);
	return owner == exited;
}

/* Adds one entry's counters to c (not allocated there yet: nothing; with
   freed_too, a region entry whose allocations a thread's table counted may
   hold frees alone, which thr_merge adds to them). */
static int snap_add(struct ht__snap_copy *c, uint32_t id, uint64_t heap,
		    const struct ht__snap_stack *k, bool freed_too)
{
	/* Freed before allocated: both only grow, so live never goes below 0
	   while threads work. */
	uint64_t fb = atomic_load(&k->freed_bytes), fc = atomic_load(&k->freed_count);
	uint64_t ab = atomic_load(&k->alloc_bytes), ac = atomic_load(&k->alloc_count);
	if (!ac && !(freed_too && fc))
		return 0;
	if (ht__grow((void **)&c->v, &c->cap, c->n + 1, sizeof(*c->v)) < 0)
		return HT_ERR_NOMEM;
	c->v[c->n++] = (struct ht__snap_entry){id, heap, ab, ac, ab - fb, ac - fc};
	return 0;
}

static int heap_entry_cmp(const void *a, const void *b)
{
	const struct ht__snap_entry *x = a, *y = b;
	if (x->heap != y->heap)
		return x->heap < y->heap ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* The custom heaps' entries (claimed in any order, a pair maybe twice):
   by heap and stack, each pair once. */
static void heap_entries_sort(struct ht__snap_copy *c, size_t first)
{
	if (c->n - first < 2)
		return;
	qsort(c->v + first, c->n - first, sizeof(*c->v), heap_entry_cmp);
	size_t out = first + 1;
	for (size_t i = first + 1; i < c->n; i++) {
		struct ht__snap_entry *o = &c->v[out - 1];
		if (o->heap == c->v[i].heap && o->id == c->v[i].id) {
			o->alloc_bytes += c->v[i].alloc_bytes;
			o->alloc_count += c->v[i].alloc_count;
			o->live_bytes += c->v[i].live_bytes;
			o->live_count += c->v[i].live_count;
		} else {
			c->v[out++] = c->v[i];
		}
	}
	c->n = out;
}

/*
 * The threads' tables (docs/session-protocol.md, "The threads' tables"): a
 * stack's counts are its region entry plus its entries in every ring's
 * table. Read in three passes so that every freed counter of a stack is
 * read before its allocated ones (live never negative while threads run):
 * the tables' freed (thr_freed_one), the region (freed, then allocated),
 * the tables' allocated (thr_alloc_one). An entry taken between the first
 * pass and the last counts its allocations alone, as if its frees came
 * after.
 */
struct thr_part {
	uint32_t id;
	const struct ht__snap_stack *k;
	uint64_t alloc_bytes, alloc_count, freed_bytes, freed_count;
};

/* Calls fn on each entry of a stack below n of every used table, in the
   same order every time (keys and snap_used are never cleared). */
static int thr_each(struct ht__session *s, uint32_t n,
		    int (*fn)(void *ctx, uint32_t id, const struct ht__snap_stack *k), void *ctx)
{
	const struct ht__shm_header *h = s->hdr;
	uint32_t reached = ht__rings_reached(s->hdr, s->ring_count);
	for (uint32_t r = 0; h->snap_thr_slots && r < reached; r++) {
		if (!atomic_load_explicit(&ht__ring_at(s, r)->snap_used, memory_order_acquire))
			continue;
		const struct ht__snap_thr_ent *tab =
		    (const void *)(s->map + h->snap_thr_offset + (size_t)r * h->snap_thr_bytes);
		for (uint32_t i = 0; i < h->snap_thr_slots; i++) {
			uint32_t key = atomic_load_explicit(&tab[i].key, memory_order_acquire);
			int rc;
			if (key && key - 1 < n && (rc = fn(ctx, key - 1, &tab[i].c)) < 0)
				return rc;
		}
	}
	return 0;
}

static int thr_part_cmp(const void *a, const void *b)
{
	const struct thr_part *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

struct thr_parts {
	struct thr_part *v;
	size_t n, cap;
	const struct thr_part *first; /* thr_alloc: the first pass's */
	size_t nfirst, at;
};

/* The first pass: the freed counters of the entries there now. */
static int thr_freed_one(void *ctx, uint32_t id, const struct ht__snap_stack *k)
{
	struct thr_parts *p = ctx;
	if (ht__grow((void **)&p->v, &p->cap, p->n + 1, sizeof(*p->v)) < 0)
		return HT_ERR_NOMEM;
	p->v[p->n++] = (struct thr_part){.id = id,
					 .k = k,
					 .freed_bytes = atomic_load(&k->freed_bytes),
					 .freed_count = atomic_load(&k->freed_count)};
	return 0;
}

/* The last pass: every entry's allocated counters, with the freed ones of
   the first pass (its entries are the first of these, in order). */
static int thr_alloc_one(void *ctx, uint32_t id, const struct ht__snap_stack *k)
{
	struct thr_parts *p = ctx;
	if (ht__grow((void **)&p->v, &p->cap, p->n + 1, sizeof(*p->v)) < 0)
		return HT_ERR_NOMEM;
	struct thr_part e = {.id = id,
			     .k = k,
			     .alloc_bytes = atomic_load(&k->alloc_bytes),
			     .alloc_count = atomic_load(&k->alloc_count)};
	if (p->at < p->nfirst && p->first[p->at].k == k) {
		e.freed_bytes = p->first[p->at].freed_bytes;
		e.freed_count = p->first[p->at++].freed_count;
	}
	p->v[p->n++] = e;
	return 0;
}

/* c's entries (the region's, by id) with the tables' parts (by id) added. */
static int thr_merge(struct ht__session *s, struct ht__snap_copy *c, const struct thr_part *t,
		     size_t nt, const struct ht__proc *root)
{
	if (!c->n && !nt)
		return 0;
	struct ht__snap_entry *v = malloc((c->n + nt) * sizeof(*v));
	if (!v)
		return HT_ERR_NOMEM;
	size_t n = 0, i = 0, j = 0;
	while (i < c->n || j < nt) {
		struct ht__snap_entry e;
		if (j == nt || (i < c->n && c->v[i].id <= t[j].id)) {
			e = c->v[i++];
		} else {
			if (!of_image(s, t[j].id, root, c->exited)) {
				j++;
				continue;
			}
			e = (struct ht__snap_entry){.id = t[j].id};
		}
		for (; j < nt && t[j].id == e.id; j++) {
			e.alloc_bytes += t[j].alloc_bytes;
			e.alloc_count += t[j].alloc_count;
			e.live_bytes += t[j].alloc_bytes - t[j].freed_bytes;
			e.live_count += t[j].alloc_count - t[j].freed_count;
		}
		if (e.alloc_count)
			v[n++] = e;
	}
	free(c->v);
	c->cap = c->n + nt;
	c->v = v;
	c->n = n;
	return 0;
}

/* Copies the stacks' region into the queue and queues its record; exited:
   an exit snapshot, written with that image's stacks alone. */
static int snap_take(struct ht__session *s, const struct ht__proc *exited)
{
	if (s->snap_qn == s->snap_qcap) {
		/* Not ht__grow: the queue is a ring, unwrapped as it grows. */
		uint32_t ncap = s->snap_qcap ? s->snap_qcap * 2 : 4;
		struct ht__snap_copy *q = malloc(ncap * sizeof(*q));
		if (!q)
			return HT_ERR_NOMEM;
		for (uint32_t i = 0; i < s->snap_qn; i++)
			q[i] = s->snap_q[(s->snap_qhead + i) % (s->snap_qcap ? s->snap_qcap : 1)];
		free(s->snap_q);
		s->snap_q = q;
		s->snap_qcap = ncap;
		s->snap_qhead = 0;
	}
	/* Stamped just before the counters are read: the STACK record of every
	   block they count is older, so it is written before the snapshot. */
	uint64_t ts = ht__now_ns();
	uint32_t n = atomic_load(&s->hdr->next_stack_id);
	if (n > s->snap_cap)
		n = s->snap_cap;
	struct ht__snap_copy c = {.exited = exited};
	const struct ht__proc *root = root_proc(s);
	const struct ht__snap_stack *reg = (const void *)(s->map + s->hdr->snap_offset);
	struct thr_parts freed = {0}, parts = {0};
	int rc = thr_each(s, n, thr_freed_one, &freed);
	for (uint32_t i = 0; i < n && rc >= 0; i++)
		if ((atomic_load(&reg[i].alloc_count) || atomic_load(&reg[i].freed_count)) &&
		    of_image(s, i, root, exited))
			rc = snap_add(&c, i, 0, &reg[i], true);
	parts.first = freed.v;
	parts.nfirst = freed.n;
	if (rc >= 0)
		rc = thr_each(s, n, thr_alloc_one, &parts);
	if (rc >= 0 && parts.n > 1)
		qsort(parts.v, parts.n, sizeof(*parts.v), thr_part_cmp);
	if (rc >= 0)
		rc = thr_merge(s, &c, parts.v, parts.n, root);
	free(freed.v);
	free(parts.v);
	/* Custom heaps: the entries claimed so far; one not ready yet has
	   counted nothing. */
	uint32_t hn = atomic_load(&s->hdr->snap_heap_next);
	if (hn > s->hdr->snap_heap_cap)
		hn = s->hdr->snap_heap_cap;
	const struct ht__snap_heap *hreg = (const void *)(s->map + s->hdr->snap_heap_offset);
	size_t first = c.n;
	for (uint32_t j = 0; j < hn && rc >= 0; j++)
		if (atomic_load_explicit(&hreg[j].ready, memory_order_acquire) &&
		    of_image(s, hreg[j].stack, root, exited))
			rc = snap_add(&c, hreg[j].stack, hreg[j].heap, &hreg[j].c, false);
	if (rc < 0) {
		free(c.v);
		return rc;
	}
	heap_entries_sort(&c, first);
	c.untracked_count = atomic_load(&s->hdr->snap_untracked_count);
	c.untracked_bytes = atomic_load(&s->hdr->snap_untracked_bytes);
	s->snap_q[(s->snap_qhead + s->snap_qn) % s->snap_qcap] = c;
	s->snap_qn++;
	uint32_t seq = ++s->snap_seq;
	struct ht__rec r = {
	    .type = HT__REC_SELF_SNAPSHOT, .len = sizeof(r), .stack = seq, .ts = ts};
	rc = ht__self_record(s, &r);
	if (rc < 0)
		return rc;
	atomic_store(&s->hdr->snap_last, seq);
	return 0;
}

int ht__snap_tick(struct ht__session *s, uint64_t now, bool final)
{
	/* Before the first process there is nothing to show: wait for it, so
	   the trace's snapshots are numbered 1, 2, ... without a gap. */
	if (!(s->cfg.flags & HT_SHM_SNAPSHOT) || !s->nprocs)
		return 0;
	int rc;
	/* Every image that ended since the last tick: its counters stopped
	   moving at its exit, so a snapshot of it now is its final state. */
	for (size_t i = 0; i < s->snap_nexits; i++)
		if ((rc = snap_take(s, s->snap_exits[i])) < 0)
			return rc;
	s->snap_nexits = 0;
	if (!snap_due(s, now, final))
		return 0;
	uint32_t req = atomic_load(&s->hdr->snap_request);
	s->snap_asked = 0;
	if (s->cfg.snapshot_interval_ns)
		while (s->snap_next_ns <= now)
			s->snap_next_ns += s->cfg.snapshot_interval_ns;
	if ((rc = snap_take(s, NULL)) < 0)
		return rc;
	atomic_store(&s->hdr->snap_served, req);
	return 0;
}

int ht__snap_write(struct ht__session *s, const struct ht__rec *rec)
{
	if (!s->snap_qn)
		return 0;
	struct ht__snap_copy c = s->snap_q[s->snap_qhead];
	s->snap_qhead = (s->snap_qhead + 1) % s->snap_qcap;
	s->snap_qn--;
	int rc = 0;
	uint64_t ts = rec->ts >= s->hdr->t0_ns ? rec->ts - s->hdr->t0_ns : 0;
	if (ts < s->last_ts)
		ts = s->last_ts;
	s->last_ts = ts;
	/* The snapshot opens with the root process (or the first one): a trace
	   without any process has nothing to show. */
	struct ht__proc *first = root_proc(s);
	if (!first)
		goto out;
	/* An exit snapshot opens with the image that exited. */
	const struct ht__proc *head = c.exited ? c.exited : first;
	struct ht_event ev = {.type = HT_EV_SNAPSHOT,
			      .flags =
				  HT_EVF_SNAPSHOT_BEGIN | (c.exited ? HT_EVF_SNAPSHOT_EXIT : 0),
			      .process = head->index,
			      .pid = head->pid,
			      .tid = head->pid,
			      .ts = ts,
			      .value = (int32_t)rec->stack};
	/* Blocks under a stack id with no definition (none should be: a STACK
	   record precedes the allocation that counts) are counted untracked. */
	for (size_t k = 0; k < c.n; k++) {
		uint32_t id;
		struct ht__proc *owner;
		if (!c.v[k].id)
			continue;
		ht__stack_of(s, c.v[k].id, &id, &owner);
		if (!owner) {
			c.untracked_count += c.v[k].live_count;
			c.untracked_bytes += c.v[k].live_bytes;
		}
	}
	ev.size = c.untracked_bytes;
	ev.addr = c.untracked_count;
	if ((rc = ht__emit(s, &ev)) < 0)
		goto out;
	ev.flags = 0;
	for (size_t k = 0; k < c.n; k++) {
		const struct ht__snap_entry *e = &c.v[k];
		uint32_t id = 0;
		struct ht__proc *owner = first; /* id 0: no stack captured */
		if (e->id)
			ht__stack_of(s, e->id, &id, &owner);
		if (!owner || (c.exited && owner != c.exited))
			continue;
		ev.process = owner->index;
		ev.pid = ev.tid = owner->pid;
		ev.stack = id;
		ev.heap = e->heap;
		ev.size = e->live_bytes;
		ev.addr = e->live_count;
		ev.old_size = e->alloc_bytes;
		ev.old_addr = e->alloc_count;
		if ((rc = ht__emit(s, &ev)) < 0)
			goto out;
	}
out:
	free(c.v);
	return rc;
}

void ht__snap_free(struct ht__session *s)
{
	for (uint32_t i = 0; i < s->snap_qn; i++)
		free(s->snap_q[(s->snap_qhead + i) % s->snap_qcap].v);
	free(s->snap_q);
	s->snap_q = NULL;
	free(s->snap_exits);
	s->snap_exits = NULL;
	s->snap_nexits = 0;
	s->snap_qn = 0;
}
