/*
 * clock.c - the session's clock (docs/session-protocol.md, "The clock"):
 * whether recorders stamp records with raw TSC ticks or CLOCK_MONOTONIC,
 * and, with the TSC, the calibration against CLOCK_MONOTONIC that turns
 * every tick the collector drains into nanoseconds on one scale for all
 * processes.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "session/internal.h"
#include "base/errors.h"

/* Recalibration: from every 10 ms at the start to every second. */
#define CAL_MIN_NS 10000000ull
#define CAL_MAX_NS 1000000000ull
/* The slope follows CLOCK_MONOTONIC's rate over this window of points. */
#define RATE_POINT_NS 1000000000ull
/* A measured point whose two TSC reads lie further apart (preempted
   between them) is not used: the next tick measures again. */
#define PAIR_MAX_NS 20000ull
/* Behind CLOCK_MONOTONIC by more than this: step forward at once. */
#define STEP_NS 1000000ull
/* The first slope is measured over at least this. */
#define FIRST_NS 2000000ull

#if defined(__x86_64__)
static inline uint64_t tsc_read(void)
{
	unsigned cpu;
	return __builtin_ia32_rdtscp(&cpu);
}
#else
static inline uint64_t tsc_read(void)
{
	return 0;
}
#endif

/* Does this CPU have an invariant TSC that rdtscp reads (x86-64 only)? */
static bool tsc_invariant(void)
{
#if defined(__x86_64__)
	FILE *f = fopen("/proc/cpuinfo", "re");
	if (!f)
		return false;
	char line[8192];
	bool found = false, ok = false;
	while (!found && fgets(line, sizeof line, f)) {
		if (strncmp(line, "flags", 5))
			continue;
		found = true;
		int have = 0;
		for (char *tok = strtok(strchr(line, ':') ? strchr(line, ':') + 1 : line, " \t\n");
		     tok; tok = strtok(NULL, " \t\n"))
			have |= !strcmp(tok, "constant_tsc")  ? 1
				: !strcmp(tok, "nonstop_tsc") ? 2
				: !strcmp(tok, "rdtscp")      ? 4
							      : 0;
		ok = have == 7;
	}
	fclose(f);
	return ok;
#else
	return false;
#endif
}

/* ns at tick t on segment g (before its start: its line drawn backwards). */
static inline uint64_t seg_at(const struct ht__tsc_seg *g, uint64_t t)
{
	if (t >= g->tick)
		return g->ns + (uint64_t)(((unsigned __int128)(t - g->tick) * g->mult) >> 32);
	uint64_t back = (uint64_t)(((unsigned __int128)(g->tick - t) * g->mult) >> 32);
	return back < g->ns ? g->ns - back : 0;
}

uint64_t ht__tsc_to_ns(const struct ht__tsc *c, uint64_t t, uint32_t *hint)
{
	/* A ring's ticks come in order: most fall on the segment of the tick
	   before (after a recalibration every record drained in that tick is
	   older than the newest segment, and a search each cost 80
	   instructions a record). */
	uint32_t k = *hint;
	if (k < c->nseg && c->seg[k].tick <= t && (k + 1 == c->nseg || t < c->seg[k + 1].tick))
		return seg_at(&c->seg[k], t);
	uint32_t lo = 0, hi = c->nseg - 1;
	if (t >= c->seg[hi].tick) {
		*hint = hi;
		return seg_at(&c->seg[hi], t);
	}
	/* An older tick (a writer stopped for a while): its own segment, the
	   last one starting at or before it, or the first drawn backwards. */
	while (lo < hi) {
		uint32_t mid = (lo + hi + 1) / 2;
		if (c->seg[mid].tick <= t)
			lo = mid;
		else
			hi = mid - 1;
	}
	*hint = lo;
	return seg_at(&c->seg[lo], t);
}

/*
 * A TSC reading and CLOCK_MONOTONIC at the same moment: the clock read
 * between two TSC reads, the pair closest together of a few tries. false
 * when even those were more than max_ticks apart.
 */
static bool measure(uint64_t *tick, uint64_t *ns, uint64_t max_ticks)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		uint64_t a = tsc_read(), n = ht__now_ns(), b = tsc_read();
		if (b > a && b - a < best) {
			best = b - a;
			*tick = a + (b - a) / 2;
			*ns = n;
		}
	}
	return best <= max_ticks;
}

/* ns per tick, as a 32.32 fixed-point multiplier, from point a to point b. */
static uint64_t rate_mult(uint64_t ta, uint64_t na, uint64_t tb, uint64_t nb)
{
	return (uint64_t)(((unsigned __int128)(nb - na) << 32) / (tb - ta));
}

static void publish(struct ht__session *s)
{
	const struct ht__tsc_seg *g = &s->tsc.seg[s->tsc.nseg - 1];
	struct ht__shm_header *h = s->hdr;
	uint32_t seq = atomic_load_explicit(&h->tsc_seq, memory_order_relaxed);
	atomic_store_explicit(&h->tsc_seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	h->tsc_tick = g->tick;
	h->tsc_ns = g->ns;
	h->tsc_mult = g->mult;
	h->tsc_shift = 32;
	atomic_store_explicit(&h->tsc_seq, seq + 2, memory_order_release);
}

static int add_segment(struct ht__tsc *c, uint64_t tick, uint64_t ns, uint64_t mult)
{
	if (c->nseg == c->segcap &&
	    ht__grow32((void **)&c->seg, &c->segcap, c->nseg < 64 ? 64 : (size_t)c->nseg + 1,
		       sizeof(*c->seg)) < 0)
		return HT_ERR_NOMEM;
	c->seg[c->nseg++] = (struct ht__tsc_seg){tick, ns, mult};
	return 0;
}

int ht__clock_init(struct ht__session *s)
{
	struct ht__tsc *c = &s->tsc;
	const char *env = getenv("HEAPTRAIL_CLOCK");
	/* Snapshot mode stamps no allocation: the TSC would save nothing, and
	   its calibration costs the start 2 ms. */
	bool mono = s->cfg.clock_monotonic || (env && !strcmp(env, "monotonic")) ||
		    (s->cfg.flags & HT_SHM_SNAPSHOT);
	s->hdr->clock = HT_CLOCK_MONO;
	s->stats.clock = HT_CLOCK_MONO;
	if (mono || !tsc_invariant())
		return 0;
	/* The first slope from two points at least 2 ms apart (a few ppm);
	   the recalibrations then correct it. The first point now, the second
	   when the first ticks are converted (ht__clock_ready), by when the
	   program has usually been starting for longer than that: a sleep here
	   added 2 ms to every recording's start. Until then nothing is
	   converted: the recorders store raw ticks, the collector alone reads
	   them. */
	uint64_t t0 = 0, n0 = 0;
	if (!measure(&t0, &n0, UINT64_MAX - 1))
		return 0;
	c->rate_tick = t0;
	c->rate_ns = n0;
	c->pending = true;
	s->hdr->clock = HT_CLOCK_TSC;
	s->stats.clock = HT_CLOCK_TSC;
	return 0;
}

int ht__clock_ready(struct ht__session *s)
{
	struct ht__tsc *c = &s->tsc;
	if (!c->pending)
		return 0;
	uint64_t t0 = c->rate_tick, n0 = c->rate_ns, t1 = 0, n1 = 0, mult = 0;
	/* A second point that cannot be (never seen with an invariant TSC) is
	   measured again; without a line at all the drain counts every tick
	   it cannot convert as corrupt. */
	for (int tries = 0; tries < 5 && !mult; tries++) {
		uint64_t now = ht__now_ns();
		if (now < n0 + FIRST_NS) {
			uint64_t left = n0 + FIRST_NS - now;
			struct timespec d = {(time_t)(left / 1000000000ull),
					     (long)(left % 1000000000ull)};
			nanosleep(&d, NULL);
		}
		if (!measure(&t1, &n1, UINT64_MAX - 1) || t1 <= t0 || n1 < n0 + FIRST_NS)
			continue;
		mult = rate_mult(t0, n0, t1, n1);
		if (mult > (100ull << 32))
			mult = 0; /* a counter slower than 10 MHz is no clock to trust */
	}
	c->pending = false;
	if (!mult)
		return 0;
	int rc = add_segment(c, t1, n1, mult);
	if (rc < 0)
		return rc;
	c->next_rate_tick = t1;
	c->next_rate_ns = n1;
	c->start_ns = n1;
	c->next_ns = n1 + CAL_MIN_NS;
	c->on = true;
	publish(s);
	return 0;
}

int ht__clock_tick(struct ht__session *s, uint64_t now)
{
	struct ht__tsc *c = &s->tsc;
	if (c->pending && now >= c->rate_ns + FIRST_NS)
		return ht__clock_ready(s);
	if (!c->on || now < c->next_ns)
		return 0;
	const struct ht__tsc_seg *g = &c->seg[c->nseg - 1];
	uint64_t tm = 0, nm = 0;
	if (!measure(&tm, &nm, (uint64_t)(((unsigned __int128)PAIR_MAX_NS << 32) / g->mult)) ||
	    tm <= g->tick || nm <= c->rate_ns)
		return 0;
	/* The slope of CLOCK_MONOTONIC against the TSC over the last few
	   seconds (it follows NTP's frequency changes), and where our line
	   stands against the measured point now. */
	uint64_t rate = rate_mult(c->rate_tick, c->rate_ns, tm, nm);
	uint64_t cur = seg_at(g, tm);
	int64_t err = (int64_t)(nm - cur);
	uint64_t gap = nm - c->start_ns;
	uint64_t interval = gap / 4 < CAL_MIN_NS ? CAL_MIN_NS : gap / 4;
	if (interval > CAL_MAX_NS)
		interval = CAL_MAX_NS;
	uint64_t abs_err = err < 0 ? (uint64_t)-err : (uint64_t)err;
	if (abs_err > s->stats.clock_error_ns)
		s->stats.clock_error_ns = abs_err;
	uint64_t start = cur, mult = rate;
	if (err > (int64_t)STEP_NS) {
		start = nm; /* far behind: step forward, never back */
	} else {
		/* Steer the line to meet CLOCK_MONOTONIC at the next point:
		   err spread over the next interval, within half the rate either
		   way, so the line never stops or runs backwards. */
		__int128 m = (__int128)rate + (__int128)rate * err / (__int128)interval;
		if (m < (__int128)(rate / 2))
			m = rate / 2;
		if (m > (__int128)rate * 2)
			m = (__int128)rate * 2;
		mult = (uint64_t)m;
	}
	int rc = add_segment(c, tm, start, mult);
	if (rc < 0)
		return rc;
	s->stats.clock_calibrations++;
	/* The rate's window: a point kept per second, the rate measured from
	   the one before it (so over one to two seconds). */
	if (nm - c->next_rate_ns >= RATE_POINT_NS) {
		c->rate_tick = c->next_rate_tick;
		c->rate_ns = c->next_rate_ns;
		c->next_rate_tick = tm;
		c->next_rate_ns = nm;
	}
	c->next_ns = nm + interval;
	publish(s);
	return 0;
}

void ht__clock_free(struct ht__session *s)
{
	free(s->tsc.seg);
	s->tsc.seg = NULL;
	s->tsc.nseg = s->tsc.segcap = 0;
}
