/*
 * test_merge_property.c - a property test of the merge's time order
 * (docs/session-protocol.md, "Time order"): seeded random histories of
 * threads over a model allocator whose blocks pass between threads, stamped
 * as the recorder stamps them, fed through rings to the session on a
 * simulated clock with its ticks at random points; the events written are
 * replayed and must hold no allocation of a live block and no free of an
 * unknown one, every event once in its thread's order, times in order.
 *
 * Usage: test_merge_property [--seed N] [--seeds COUNT] [--verbose]
 * (the default runs the seeds 1 to 2000; a failure prints its seed).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fake_producer.h"
#include "session/session.h"

#include "check.h"

/* ---- the session's clock, simulated (-Wl,--wrap=ht__now_ns) ---- */

uint64_t __real_ht__now_ns(void);
uint64_t __wrap_ht__now_ns(void);
static uint64_t sim_base; /* CLOCK_MONOTONIC ns of simulated time 0 */
static uint64_t sim_now;  /* simulated ns since sim_base */
static bool sim_on;

uint64_t __wrap_ht__now_ns(void)
{
	return sim_on ? sim_base + sim_now : __real_ht__now_ns();
}

/* ---- random numbers, one stream per seed ---- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* In [lo, hi]. */
static uint64_t rnd_in(uint64_t lo, uint64_t hi)
{
	return lo + rnd() % (hi - lo + 1);
}

static bool chance(unsigned percent)
{
	return rnd() % 100 < percent;
}

/* ---- threads that exist, for the rings' tids (the session asks /proc) ---- */

#define MAXT 8	  /* rings */
#define MAXTHR 16 /* threads: one that ended gives its ring to a new one */
static int32_t tids[MAXTHR];
static int hold_pipe[2];

static void *idle_thread(void *arg)
{
	int32_t *tid = arg;
	__atomic_store_n(tid, (int32_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	char c;
	while (read(hold_pipe[0], &c, 1) < 0)
		;
	return NULL;
}

/* ---- the model ---- */

enum kind { K_MALLOC, K_FROMNULL, K_FREE, K_TOZERO, K_MOVE, K_INPLACE, K_FAIL };
enum step { S_OP, S_TAKE, S_ROOM, S_BUSY, S_STAMP, S_CALL, S_RELEASE, S_COMMIT, S_END, S_DONE };

/* What each kind does, in the recorder's order (src/preload/rec_heap.h):
   an allocation stamped after the real call, a free before it, a realloc
   of a block begun before the call and ended after it. */
static const uint8_t steps[][7] = {
    [K_MALLOC] = {S_TAKE, S_ROOM, S_BUSY, S_STAMP, S_COMMIT, S_DONE},
    [K_FROMNULL] = {S_TAKE, S_ROOM, S_BUSY, S_STAMP, S_COMMIT, S_DONE},
    [K_FREE] = {S_ROOM, S_BUSY, S_STAMP, S_COMMIT, S_RELEASE, S_DONE},
    [K_TOZERO] = {S_ROOM, S_BUSY, S_STAMP, S_COMMIT, S_RELEASE, S_DONE},
    [K_MOVE] = {S_ROOM, S_BUSY, S_STAMP, S_TAKE, S_RELEASE, S_END, S_DONE},
    [K_INPLACE] = {S_ROOM, S_BUSY, S_STAMP, S_CALL, S_END, S_DONE},
    [K_FAIL] = {S_ROOM, S_BUSY, S_STAMP, S_CALL, S_END, S_DONE},
};

/* An event as the thread's ring says it (times in simulated ns). */
struct want {
	uint8_t type; /* HT_EV_* */
	bool failed;
	uint64_t addr, old_addr, size;
	uint64_t ts, end; /* end: a realloc's, 0 when stamped after */
};

struct thr {
	int32_t tid;
	uint32_t ring; /* UINT32_MAX until it claims one */
	uint32_t ops_left, ops_total;
	enum kind kind;
	uint32_t step;	  /* index into steps[kind] */
	uint64_t at;	  /* when its next step comes, UINT64_MAX when done */
	uint64_t busy_at; /* a store of busy = 1 still in the store buffer until then */
	uint64_t old, nw, size, ts;
	struct want *want;
	uint32_t nwant, wcap, got; /* got: how many of want were written */
};

#define ADDR(i) (0x100000ull + (uint64_t)(i)*0x40)
#define IDX(a) (((a)-0x100000ull) / 0x40)

struct sim {
	uint32_t seed;
	struct fake f;
	struct ht__session *s;
	uint32_t nthr, ring_size;
	struct thr th[MAXTHR];
	uint32_t respawn; /* percent of threads that end when done, a new one after them */
	/* The allocator: free addresses (the last freed on top), live ones
	   handed over (no call on them under way). */
	uint64_t *freeb, *avail;
	uint32_t nfree, navail, naddr, cap;
	uint32_t lifo;		 /* percent of allocations that take the last freed */
	uint32_t long_pct;	 /* percent of steps preempted for up to 3 ms */
	uint32_t mid_pct;	 /* ... for up to 20 us */
	uint32_t late_busy_pct;	 /* busy = 1 seen after the stamp, ... */
	uint64_t late_busy_max;	 /* ... up to this late (under the watermark's 1 ms) */
	uint64_t gap_lo, gap_hi; /* between ticks */
	/* The replay, and the order written: thread, its event's index, time. */
	uint8_t *live;
	struct {
		uint32_t k, i;
		uint64_t ts;
	} out[64];
	uint32_t nout;
	bool loose_ts; /* a crafted case checks the times itself */
	uint64_t last_ts;
	uint32_t events;
	int errors;
	char first_error[256];
	bool verbose;
};

static void fail(struct sim *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct sim *m, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (!m->errors++)
		vsnprintf(m->first_error, sizeof(m->first_error), fmt, ap);
	else if (m->verbose)
		vfprintf(stderr, fmt, ap);
	va_end(ap);
}

static uint64_t grow_addr(struct sim *m)
{
	if (m->naddr == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 256;
		m->freeb = realloc(m->freeb, m->cap * sizeof(*m->freeb));
		m->avail = realloc(m->avail, m->cap * sizeof(*m->avail));
		m->live = realloc(m->live, m->cap);
		memset(m->live + m->naddr, 0, m->cap - m->naddr);
		if (!m->freeb || !m->avail || !m->live)
			abort();
	}
	return ADDR(m->naddr++);
}

/* The allocator gives a block: the last freed, another free one, or new. */
static uint64_t take_block(struct sim *m)
{
	if (!m->nfree || chance(3))
		return grow_addr(m);
	uint32_t i = chance(m->lifo) ? m->nfree - 1 : (uint32_t)(rnd() % m->nfree);
	uint64_t a = m->freeb[i];
	memmove(m->freeb + i, m->freeb + i + 1, (m->nfree - i - 1) * sizeof(*m->freeb));
	m->nfree--;
	return a;
}

static uint64_t take_avail(struct sim *m)
{
	uint32_t i = (uint32_t)(rnd() % m->navail);
	uint64_t a = m->avail[i];
	m->avail[i] = m->avail[--m->navail];
	return a;
}

/* How long a thread takes to its next step: mostly nothing, sometimes it
   is preempted. */
static uint64_t delay(struct sim *m)
{
	uint32_t r = (uint32_t)(rnd() % 100);
	if (r < m->long_pct)
		return rnd_in(50000, 3000000);
	if (r < m->long_pct + m->mid_pct)
		return rnd_in(300, 20000);
	return rnd_in(1, 300);
}

static uint32_t rec_len(enum kind k)
{
	switch (k) {
	case K_MALLOC:
		return sizeof(struct ht__rec_alloc);
	case K_FREE:
		return sizeof(struct ht__rec_free);
	default:
		return sizeof(struct ht__rec_realloc);
	}
}

/* As fake_put() decides: would len bytes fit now? */
static bool room_for(struct sim *m, uint32_t ring, uint32_t len)
{
	struct ht__ring *r = fake_ring(&m->f, ring);
	uint64_t w = atomic_load_explicit(&r->write_pos, memory_order_relaxed);
	uint64_t rd = atomic_load_explicit(&r->read_pos, memory_order_acquire);
	uint32_t size = m->ring_size, off = (uint32_t)(w & (size - 1));
	uint32_t pad = (off + len > size || size - off - len == 8) ? size - off : 0;
	return w + pad + len - rd <= size;
}

static void add_want(struct thr *t, const struct want *w)
{
	if (t->nwant == t->wcap) {
		t->wcap = t->wcap ? 2 * t->wcap : 64;
		t->want = realloc(t->want, t->wcap * sizeof(*t->want));
		if (!t->want)
			abort();
	}
	t->want[t->nwant++] = *w;
}

static void start_op(struct sim *m, struct thr *t)
{
	t->step = 0;
	if (!t->ops_left) {
		t->at = UINT64_MAX;
		return;
	}
	t->ops_left--;
	uint32_t r = (uint32_t)(rnd() % 100);
	enum kind k = r < 30   ? K_MALLOC
		      : r < 35 ? K_FROMNULL
		      : r < 62 ? K_FREE
		      : r < 66 ? K_TOZERO
		      : r < 88 ? K_MOVE
		      : r < 96 ? K_INPLACE
			       : K_FAIL;
	if (k != K_MALLOC && k != K_FROMNULL && !m->navail)
		k = K_MALLOC;
	t->kind = k;
	t->old = k == K_MALLOC || k == K_FROMNULL ? 0 : take_avail(m);
	t->nw = 0;
	t->size = k == K_FREE || k == K_TOZERO ? 0 : rnd_in(1, 4096);
}

static void put_busy(struct sim *m, struct thr *t, int v)
{
	atomic_store(&fake_ring(&m->f, t->ring)->busy, v);
}

/* Runs the thread's next step at m's time now. */
static void step(struct sim *m, struct thr *t, uint64_t now)
{
	if (t->ring == UINT32_MAX) {
		/* A new thread claims the lowest free ring (the collector frees a
		   released one once it has merged all of it). */
		for (uint32_t i = 0; i < MAXT && t->ring == UINT32_MAX; i++)
			if (fake_claim(&m->f, i, getpid(), t->tid, 5) == 0)
				t->ring = i;
		t->at = now + (t->ring == UINT32_MAX ? rnd_in(10000, 500000) : delay(m));
		return;
	}
	enum step st = (enum step)steps[t->kind][t->step];
	struct want w = {0};
	switch (st) {
	case S_OP:
	case S_DONE:
		break;
	case S_TAKE:
		t->nw = take_block(m);
		break;
	case S_ROOM:
		if (!room_for(m, t->ring, rec_len(t->kind))) {
			t->at = now + rnd_in(1000, 200000); /* waits for the collector */
			return;
		}
		break;
	case S_BUSY:
		if (chance(m->late_busy_pct))
			t->busy_at = now + rnd_in(1, m->late_busy_max);
		else
			put_busy(m, t, 1);
		break;
	case S_STAMP:
		t->ts = now;
		break;
	case S_CALL:
		if (t->kind == K_INPLACE)
			t->nw = t->old;
		break;
	case S_RELEASE:
		m->freeb[m->nfree++] = t->old;
		break;
	case S_COMMIT:
	case S_END: {
		uint64_t end = st == S_END ? now : 0;
		if (t->busy_at) { /* in program order, before the record's stores */
			put_busy(m, t, 1);
			t->busy_at = 0;
		}
		uint64_t ts = sim_base + t->ts, e = end ? sim_base + end : 0;
		int rc;
		w.ts = t->ts;
		w.end = end;
		w.old_addr = t->old;
		w.addr = t->nw;
		w.size = t->size;
		switch (t->kind) {
		case K_MALLOC:
			w.type = HT_EV_ALLOC;
			w.old_addr = 0;
			rc = fake_alloc(&m->f, t->ring, ts, t->nw, t->size, 0);
			break;
		case K_FREE:
			w.type = HT_EV_FREE;
			w.addr = t->old;
			w.old_addr = 0;
			rc = fake_free(&m->f, t->ring, ts, t->old);
			break;
		default: {
			w.type = HT_EV_REALLOC;
			w.failed = t->kind == K_FAIL;
			struct ht__rec_realloc a = {
			    .h = {.type = HT_REC_REALLOC,
				  .func = 3 | (w.failed ? HT_RECF_FAILED : 0),
				  .len = sizeof(a),
				  .ts = ts},
			    .old_addr = t->old,
			    .new_addr = t->nw,
			    .size = t->size,
			    .end = e};
			rc = fake_put(&m->f, t->ring, &a, sizeof(a));
			break;
		}
		}
		if (rc != 0)
			fail(m, "the ring had no room for a record its room was taken for\n");
		add_want(t, &w);
		put_busy(m, t, 0);
		/* The program may hand the block to another thread now. */
		if (t->nw)
			m->avail[m->navail++] = t->nw;
		else if (t->kind == K_FAIL)
			m->avail[m->navail++] = t->old;
		break;
	}
	}
	if (steps[t->kind][++t->step] == S_DONE) {
		start_op(m, t);
		if (t->at == UINT64_MAX && m->nthr < MAXTHR && chance(m->respawn)) {
			/* It exits: its ring goes back, a new thread comes. */
			atomic_store_explicit(&fake_ring(&m->f, t->ring)->state, HT_RING_RELEASED,
					      memory_order_release);
			struct thr *n = &m->th[m->nthr];
			n->tid = tids[m->nthr++];
			n->ring = UINT32_MAX;
			n->ops_left = n->ops_total = t->ops_total;
			start_op(m, n);
			n->at = now + delay(m);
		}
	}
	if (t->at != UINT64_MAX)
		t->at = now + delay(m);
}

/* ---- the sink: the replay ---- */

static void check_event(struct sim *m, uint8_t type, int32_t tid, uint64_t ts, uint64_t addr,
			uint64_t old_addr, uint64_t size, bool failed)
{
	uint32_t n = m->events++;
	if (n && ts < m->last_ts)
		fail(m, "event %u: time %" PRIu64 " before the last written, %" PRIu64 "\n", n, ts,
		     m->last_ts);
	m->last_ts = ts;
	uint32_t k = 0;
	while (k < m->nthr && m->th[k].tid != tid)
		k++;
	if (k == m->nthr) {
		fail(m, "event %u: a thread %d of no ring\n", n, (int)tid);
		return;
	}
	struct thr *t = &m->th[k];
	if (t->got == t->nwant) {
		fail(m, "event %u: thread %u wrote %u events, one more came\n", n, k, t->nwant);
		return;
	}
	const struct want *w = &t->want[t->got++];
	if (m->nout < sizeof(m->out) / sizeof(m->out[0])) {
		m->out[m->nout].k = k;
		m->out[m->nout].i = t->got - 1;
		m->out[m->nout++].ts = ts;
	}
	uint64_t t0 = ht__session_t0(m->s), lo = sim_base + w->ts - t0;
	uint64_t hi = w->end ? sim_base + w->end - t0 : lo;
	bool moved = w->end && old_addr && addr && old_addr != addr;
	if (w->type != type || w->addr != addr || w->old_addr != old_addr || w->size != size ||
	    w->failed != failed)
		fail(m, "event %u: thread %u's event %u is not the one its ring holds\n", n, k,
		     t->got - 1);
	else if (!m->loose_ts && (moved ? ts < lo || ts > hi : ts != lo))
		fail(m,
		     "event %u: thread %u's event %u at %" PRIu64 ", stamped %" PRIu64 "-%" PRIu64
		     "\n",
		     n, k, t->got - 1, ts, lo, hi);
	if (m->verbose)
		fprintf(stderr, "  %6u t%u %s %" PRIu64 " %#" PRIx64 " <- %#" PRIx64 "\n", n, k,
			type == HT_EV_ALLOC  ? "alloc"
			: type == HT_EV_FREE ? "free"
					     : "realloc",
			ts, addr, old_addr);
	/* The replay. */
	uint64_t take = 0, give = 0;
	if (type == HT_EV_ALLOC)
		give = addr;
	else if (type == HT_EV_FREE)
		take = addr;
	else if (!failed && old_addr != addr)
		take = old_addr, give = addr;
	else if (old_addr && !m->live[IDX(old_addr)])
		fail(m, "event %u: realloc of %#" PRIx64 ", which is not live\n", n, old_addr);
	if (take) {
		if (!m->live[IDX(take)])
			fail(m, "event %u: thread %u frees %#" PRIx64 ", which is not live\n", n, k,
			     take);
		m->live[IDX(take)] = 0;
	}
	if (give) {
		if (m->live[IDX(give)])
			fail(m, "event %u: thread %u allocates %#" PRIx64 ", which is live\n", n, k,
			     give);
		m->live[IDX(give)] = 1;
	}
}

static int p_event(void *ctx, const struct ht_event *ev, const struct ht_process *p)
{
	(void)p;
	struct sim *m = ctx;
	if (ev->type != HT_EV_ALLOC && ev->type != HT_EV_FREE && ev->type != HT_EV_REALLOC)
		return 0;
	check_event(m, ev->type, ev->tid, ev->ts, ev->addr, ev->old_addr, ev->size,
		    (ev->flags & HT_EVF_FAILED) != 0);
	return 0;
}

static int p_heap_event(void *ctx, const struct ht__heap_event *ev)
{
	check_event(ctx, ev->type, ev->tid, ev->ts, ev->addr, 0, ev->size,
		    (ev->flags & HT_EVF_FAILED) != 0);
	return 0;
}

static int p_heap_plain(void *ctx, uint32_t process, int32_t pid, int32_t tid,
			const struct ht__heap_plain *ev, uint32_t n)
{
	(void)process;
	(void)pid;
	for (uint32_t i = 0; i < n; i++)
		check_event(ctx, (uint8_t)ev[i].type, tid, ev[i].ts, ev[i].addr, 0, ev[i].size,
			    false);
	return 0;
}

static const struct ht__sink prop_sink = {
    .event = p_event, .heap_event = p_heap_event, .heap_plain = p_heap_plain};

/* ---- one seed ---- */

static char tmpdir[64];

/* A session of MAXT rings of m->ring_size for m->nthr threads, their rings
   claimed, the process started at simulated time 1. */
static void sim_open(struct sim *m)
{
	struct ht__session_config cfg = HT__SESSION_CONFIG_INIT;
	cfg.dir = tmpdir;
	cfg.ring_size = m->ring_size;
	cfg.ring_count = MAXT;
	cfg.sample_rss = false;
	sim_on = false;
	int rc = ht__session_create(&m->s, &cfg);
	if (rc < 0) {
		fprintf(stderr, "session_create: %s\n", ht_strerror(rc));
		exit(1);
	}
	ht__session_set_sink(m->s, &prop_sink, m);
	if (fake_open(&m->f, ht__session_path(m->s)) != 0) {
		fprintf(stderr, "fake_open failed\n");
		exit(1);
	}
	sim_base = __real_ht__now_ns();
	sim_now = 0;
	sim_on = true;
	int32_t pid = getpid();
	for (uint32_t k = 0; k < m->nthr; k++) {
		struct thr *t = &m->th[k];
		t->ring = k;
		if (!t->tid)
			t->tid = tids[k];
		CHECK(fake_claim(&m->f, k, pid, t->tid, 5) == 0);
	}
	CHECK(fake_process(&m->f, 0, sim_base + 1, pid, 1, HT_PROC_ROOT, 5, "/bin/model") == 0);
}

/* The session's end at the simulated time now: what it wrote is checked. */
static void sim_finish(struct sim *m, uint64_t late)
{
	int rc;
	if ((rc = ht__session_finish(m->s, false, NULL, NULL)) != 0)
		fail(m, "finish: %d\n", rc);
	const struct ht__session_stats *st = ht__session_stats(m->s);
	if (st->lost || st->corrupt || st->late != late)
		fail(m, "lost %" PRIu64 ", corrupt %" PRIu64 ", late %" PRIu64 "\n", st->lost,
		     st->corrupt, st->late);
}

static void sim_close(struct sim *m)
{
	sim_on = false;
	munmap(m->f.map, m->f.size);
	ht__session_destroy(m->s);
	for (uint32_t k = 0; k < m->nthr; k++)
		free(m->th[k].want);
	free(m->freeb);
	free(m->avail);
	free(m->live);
	free(m);
}

/* Runs seed; returns the number of errors (the first in m->first_error). */
static int run_seed(uint32_t seed, bool verbose, uint32_t *nevents)
{
	struct sim *m = calloc(1, sizeof(*m));
	if (!m)
		abort();
	m->seed = seed;
	m->verbose = verbose;
	rng_state = seed * 0x2545f4914f6cdd1dull;
	/* The shape of this history. */
	bool big = seed % 64 == 0; /* the partial drain and the merge's budget */
	m->nthr = big				? (uint32_t)rnd_in(1, MAXT)
		  : (uint32_t)rnd_in(1, 8) <= 2 ? 2
						: (uint32_t)rnd_in(1, MAXT);
	m->ring_size = big ? 256u << 10 : chance(80) ? 4096 : 16384;
	uint32_t ops = big ? (uint32_t)rnd_in(20000, 40000) / m->nthr : (uint32_t)rnd_in(10, 200);
	m->lifo = (uint32_t)rnd_in(50, 95);
	/* A big history's threads run on mostly: a tick then finds a ring's
	   worth of records, more than a drain takes of it. */
	m->long_pct = big || chance(30) ? 0 : (uint32_t)rnd_in(1, 5);
	m->mid_pct = (uint32_t)rnd_in(0, big ? 2 : 30);
	m->late_busy_pct = chance(50) ? 0 : (uint32_t)rnd_in(1, 30);
	m->late_busy_max = chance(80) ? 50000 : 900000;
	m->respawn = chance(50) ? 0 : (uint32_t)rnd_in(10, 100);
	m->gap_lo = big ? 5000000 : rnd_in(5000, 200000);
	m->gap_hi = big ? 30000000 : m->gap_lo + rnd_in(0, 2000000);
	/* A few live blocks to start with: frees and reallocs from the first. */
	uint32_t prelive = (uint32_t)rnd_in(0, 8);

	sim_open(m);
	int rc;
	for (uint32_t k = 0; k < m->nthr; k++)
		m->th[k].ops_left = m->th[k].ops_total = ops;
	for (uint32_t i = 0; i < prelive; i++) {
		struct thr *t = &m->th[i % m->nthr];
		struct want w = {.type = HT_EV_ALLOC, .ts = 2 + i, .size = 8};
		w.addr = grow_addr(m);
		CHECK(fake_alloc(&m->f, t->ring, sim_base + w.ts, w.addr, 8, 0) == 0);
		add_want(t, &w);
		m->avail[m->navail++] = w.addr;
	}
	for (uint32_t k = 0; k < m->nthr; k++) {
		start_op(m, &m->th[k]);
		m->th[k].at = rnd_in(100, 2000);
	}
	uint64_t next_tick = rnd_in(m->gap_lo, m->gap_hi), now = 0;
	for (;;) {
		struct thr *next = NULL;
		uint64_t tn = UINT64_MAX;
		for (uint32_t k = 0; k < m->nthr; k++) {
			struct thr *t = &m->th[k];
			uint64_t at = t->busy_at && t->busy_at < t->at ? t->busy_at : t->at;
			if (at < tn)
				tn = at, next = t;
		}
		if (!next)
			break;
		if (next_tick <= tn) {
			now = sim_now = next_tick;
			if ((rc = ht__session_tick(m->s)) != 0)
				fail(m, "tick: %d\n", rc);
			/* A long pause of the collector now and then. */
			next_tick = now + (chance(2) ? rnd_in(2000000, 8000000)
						     : rnd_in(m->gap_lo, m->gap_hi));
			continue;
		}
		now = sim_now = tn;
		if (next->busy_at && next->busy_at < next->at) {
			/* The busy store leaves the store buffer. */
			put_busy(m, next, 1);
			next->busy_at = 0;
		} else {
			step(m, next, now);
		}
	}
	/* The threads are done: a few more ticks, then the end. */
	for (int i = 0; i < 3; i++) {
		now = sim_now = now + 1500000;
		if ((rc = ht__session_tick(m->s)) != 0)
			fail(m, "tick: %d\n", rc);
	}
	sim_now = now + 1000000;
	sim_finish(m, 0);
	for (uint32_t k = 0; k < m->nthr; k++)
		if (m->th[k].got != m->th[k].nwant)
			fail(m, "thread %u: %u of its %u events written\n", k, m->th[k].got,
			     m->th[k].nwant);
	if (m->errors && verbose) {
		for (uint32_t k = 0; k < m->nthr; k++) {
			fprintf(stderr, "thread %u (tid %d):\n", k, (int)m->th[k].tid);
			for (uint32_t i = 0; i < m->th[k].nwant; i++) {
				const struct want *w = &m->th[k].want[i];
				fprintf(stderr,
					"  %4u type %u %#" PRIx64 " <- %#" PRIx64 " ts %" PRIu64
					" end %" PRIu64 "%s\n",
					i, w->type, w->addr, w->old_addr, w->ts, w->end,
					w->failed ? " failed" : "");
			}
		}
	}
	*nevents = m->events;
	int errors = m->errors;
	if (errors)
		fprintf(stderr, "seed %u: %d error(s), the first: %s", seed, errors,
			m->first_error);
	sim_close(m);
	return errors;
}

/* ---- crafted cases: records put by hand at given simulated times ---- */

static struct sim *craft_open(uint32_t nthr, uint32_t ring_size)
{
	struct sim *m = calloc(1, sizeof(*m));
	if (!m)
		abort();
	m->nthr = nthr;
	m->ring_size = ring_size;
	sim_open(m);
	return m;
}

/* Address i of the model (known to the replay). */
static uint64_t blk(struct sim *m, uint32_t i)
{
	while (m->naddr <= i)
		grow_addr(m);
	return ADDR(i);
}

static void c_alloc(struct sim *m, uint32_t k, uint64_t ts, uint64_t addr)
{
	struct want w = {.type = HT_EV_ALLOC, .addr = addr, .size = 16, .ts = ts};
	CHECK(fake_alloc(&m->f, k, sim_base + ts, addr, 16, 0) == 0);
	add_want(&m->th[k], &w);
}

static void c_free(struct sim *m, uint32_t k, uint64_t ts, uint64_t addr)
{
	struct want w = {.type = HT_EV_FREE, .addr = addr, .ts = ts};
	CHECK(fake_free(&m->f, k, sim_base + ts, addr) == 0);
	add_want(&m->th[k], &w);
}

/* A realloc begun at ts whose call returned at end. */
static void c_realloc(struct sim *m, uint32_t k, uint64_t ts, uint64_t end, uint64_t old,
		      uint64_t nw)
{
	struct want w = {
	    .type = HT_EV_REALLOC, .addr = nw, .old_addr = old, .size = 32, .ts = ts, .end = end};
	CHECK(fake_realloc(&m->f, k, sim_base + ts, sim_base + end, old, nw, 32) == 0);
	add_want(&m->th[k], &w);
}

static void c_tick(struct sim *m, uint64_t now)
{
	sim_now = now;
	CHECK_EQ(ht__session_tick(m->s), 0);
}

/* The n-th event written is thread k's i-th, at simulated time ts. */
static void c_expect(struct sim *m, uint32_t n, uint32_t k, uint32_t i, uint64_t ts)
{
	CHECK(n < m->nout);
	if (n >= m->nout)
		return;
	CHECK_EQ(m->out[n].k, k);
	CHECK_EQ(m->out[n].i, i);
	CHECK_U64(m->out[n].ts, sim_base + ts - ht__session_t0(m->s));
}

static void craft_close(struct sim *m, const char *name, uint64_t late)
{
	sim_now += 1000000;
	sim_finish(m, late);
	for (uint32_t k = 0; k < m->nthr; k++)
		if (m->th[k].got != m->th[k].nwant)
			fail(m, "thread %u: %u of its %u events written\n", k, m->th[k].got,
			     m->th[k].nwant);
	if (m->errors) {
		fprintf(stderr, "%s: %d error(s), the first: %s", name, m->errors, m->first_error);
		check_failures++;
	}
	sim_close(m);
}

#define MS 1000000ull

/*
 * The triggers that write a held realloc (src/session/realloc_order.c) and
 * where each puts it: R turns X into N, begun at 1000 and returned at end.
 */
static void test_triggers(void)
{
	/* The end of its process image: the exit goes after it, however far
	   its end (10 s here); without the exit it would wait for its end. */
	struct sim *m = craft_open(2, 4096);
	uint64_t X = blk(m, 0), N = blk(m, 1), Y = blk(m, 2);
	c_alloc(m, 0, 100, X);
	c_realloc(m, 1, 1000, 10000 * MS, X, N);
	CHECK(fake_exit(&m->f, 0, sim_base + 2000, getpid(), 0) == 0);
	c_tick(m, 5 * MS);
	CHECK_EQ(m->th[1].got, 1);
	c_expect(m, 1, 1, 0, 1000);
	craft_close(m, "the image's end", 0);

	/* An event stamped at its end, or after: it goes first, after the
	   frees of N stamped before (N's owner freed it at 2000, the call took
	   it after), stamped no earlier than the last event written. */
	m = craft_open(4, 4096);
	X = blk(m, 0), N = blk(m, 1), Y = blk(m, 2);
	c_alloc(m, 0, 100, X);
	c_alloc(m, 2, 200, N);
	c_realloc(m, 1, 1000, 3000, X, N);
	c_free(m, 2, 2000, N);
	c_alloc(m, 3, 3000, Y);
	c_tick(m, 5 * MS);
	c_expect(m, 0, 0, 0, 100);
	c_expect(m, 1, 2, 0, 200);
	c_expect(m, 2, 2, 1, 2000);
	c_expect(m, 3, 1, 0, 2000);
	c_expect(m, 4, 3, 0, 3000);
	craft_close(m, "an event at its end", 0);

	/* The watermark: held while it is at or below its end, written at the
	   tick whose watermark passed it. */
	m = craft_open(2, 4096);
	X = blk(m, 0), N = blk(m, 1);
	c_alloc(m, 0, 100, X);
	c_realloc(m, 1, 1000, 1500, X, N);
	c_tick(m, MS + 1500);
	CHECK_EQ(m->th[1].got, 0);
	c_tick(m, MS + 1501);
	CHECK_EQ(m->th[1].got, 1);
	c_expect(m, 1, 1, 0, 1000);
	craft_close(m, "the watermark", 0);

	/* The other's old block: R2 (ring 2) takes X, which R freed; R goes
	   just before R2, after the free of N stamped past R2's begin. */
	m = craft_open(4, 4096);
	X = blk(m, 0), N = blk(m, 1), Y = blk(m, 2);
	c_alloc(m, 0, 100, X);
	c_alloc(m, 3, 200, N);
	c_alloc(m, 2, 300, Y);
	c_realloc(m, 1, 1000, 5000, X, N);
	c_realloc(m, 2, 2000, 6000, Y, X);
	c_free(m, 3, 3000, N);
	c_tick(m, 10 * MS);
	c_expect(m, 3, 3, 1, 3000);
	c_expect(m, 4, 1, 0, 3000);
	c_expect(m, 5, 2, 1, 3000);
	craft_close(m, "a chain", 0);
}

/*
 * The merge's budget (128 KiB a pass) cuts the merge at the next record's
 * stamp: a held realloc due before it goes then, one that is not stays
 * held past the cut, behind a free of its new block stamped after the cut.
 * Four rings of 256 KiB, each drained 64 KiB a pass (the partial drain).
 */
static void test_budget_cut(void)
{
	struct sim *m = craft_open(4, 256 << 10);
	uint64_t X = blk(m, 0), N = blk(m, 1), Y = blk(m, 2), Z = blk(m, 3);
	uint32_t next = 4, before = 0;
	c_alloc(m, 2, 5, X);
	c_alloc(m, 3, 6, N);
	c_alloc(m, 2, 7, Y);
	bool r1 = false, r2 = false, fr = false;
	for (uint32_t i = 0; i < 3000; i++)
		for (uint32_t k = 0; k < 4; k++) {
			uint64_t ts = 10 + 4 * i + k;
			if (k >= 2 && i >= 2500)
				continue;
			if (k == 2 && ts > 3900 && !r2) {
				c_realloc(m, 2, 3900, 4050, Y, Z); /* due at the cut */
				c_realloc(m, 2, 4060, 4500, X, N); /* held past it */
				r2 = r1 = true;
			}
			if (k == 2 && ts > 3900 && ts < 4510)
				continue; /* inside those calls */
			if (k == 3 && ts > 4300 && !fr) {
				c_free(m, 3, 4300, N);
				fr = true;
			}
			c_alloc(m, k, ts, blk(m, next++));
		}
	CHECK(r1 && fr);
	for (uint32_t k = 0; k < 4; k++)
		before += m->th[k].nwant;
	c_tick(m, 20 * MS);
	CHECK(m->events > 4000 && m->events < before); /* cut by the budget */
	for (int i = 0; i < 20 && m->events < before; i++)
		c_tick(m, 20 * MS + 1000 * (uint64_t)i);
	CHECK_EQ(m->events, before);
	craft_close(m, "the budget's cut", 0);
}

/*
 * A writer left behind (busy for over a second, its thread not readable:
 * taken as stopped) inside a realloc: the others go on, and its record,
 * when it comes, is written stamped as the last event written (never
 * earlier), before the first event stamped after its end.
 */
static void test_left_behind(void)
{
	struct sim *m = calloc(1, sizeof(*m));
	if (!m)
		abort();
	m->nthr = 2;
	m->ring_size = 4096;
	m->th[1].tid = 0x3ffffff0; /* no thread: its state cannot be read */
	sim_open(m);
	uint64_t X = blk(m, 0), Q = blk(m, 1), N = blk(m, 2), A = blk(m, 3), B = blk(m, 4),
		 C = blk(m, 5), D = blk(m, 6);
	c_alloc(m, 0, 100, X);
	c_alloc(m, 1, 500, Q);
	atomic_store(&fake_ring(&m->f, 1)->busy, 1); /* in realloc(Q) from 1000 */
	c_alloc(m, 0, 2000, A);
	c_tick(m, 10 * MS); /* the watermark stops at ring 1's last record */
	CHECK_EQ(m->events, 1);
	c_tick(m, 500 * MS);
	CHECK_EQ(m->events, 1);
	c_alloc(m, 0, 1100 * MS, B);
	c_tick(m, 1200 * MS);
	CHECK_EQ(m->events, 4);
	c_realloc(m, 1, 1000, 1250 * MS, Q, N);
	c_alloc(m, 1, 1260 * MS, C);
	atomic_store(&fake_ring(&m->f, 1)->busy, 0);
	c_alloc(m, 0, 1300 * MS, D);
	c_tick(m, 1400 * MS);
	CHECK_EQ(m->events, 7);
	c_expect(m, 3, 0, 2, 1100 * MS);
	c_expect(m, 4, 1, 1, 1100 * MS);
	c_expect(m, 5, 1, 2, 1260 * MS);
	c_expect(m, 6, 0, 3, 1300 * MS);
	craft_close(m, "a writer left behind", 0);
}

int main(int argc, char **argv)
{
	uint32_t first = 1, count = 2000;
	bool verbose = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			first = (uint32_t)strtoul(argv[++i], NULL, 0);
			count = 1;
		} else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) {
			count = (uint32_t)strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--verbose")) {
			verbose = true;
		} else {
			fprintf(stderr, "usage: %s [--seed N] [--seeds COUNT] [--verbose]\n",
				argv[0]);
			return 2;
		}
	}
	/* The rings' threads exist (the session looks at their state). */
	if (pipe(hold_pipe) < 0)
		return 1;
	pthread_t th[MAXTHR];
	for (int k = 0; k < MAXTHR; k++)
		if (pthread_create(&th[k], NULL, idle_thread, &tids[k]) != 0)
			return 1;
	for (int k = 0; k < MAXTHR; k++)
		while (!__atomic_load_n(&tids[k], __ATOMIC_ACQUIRE))
			usleep(100);
	setenv("HEAPTRAIL_CLOCK", "monotonic", 1);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/ht-mprop-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_triggers();
	test_budget_cut();
	test_left_behind();
	uint32_t failed = 0;
	uint64_t events = 0;
	for (uint32_t seed = first; seed - first < count; seed++) {
		uint32_t n = 0;
		if (run_seed(seed, verbose, &n)) {
			failed++;
			fprintf(stderr, "  rerun: %s --seed %u --verbose\n", argv[0], seed);
		}
		events += n;
	}
	if (write(hold_pipe[1], "xxxxxxxxxxxxxxxx", MAXTHR) < 0)
		return 1;
	for (int k = 0; k < MAXTHR; k++)
		pthread_join(th[k], NULL);
	rmdir(tmpdir);
	printf("%u seeds from %u, %" PRIu64 " events, %u failed\n", count, first, events, failed);
	if (check_failures)
		fprintf(stderr, "%d check(s) failed\n", check_failures);
	return failed || check_failures ? 1 : 0;
}
