/*
 * timeline.c - memory over time as per-series arrays of deltas, summed into
 * values at the end (see timeline.h for the rule of what a point means).
 */
#include "analysis/timeline.h"

#include <stdlib.h>
#include <string.h>

#include "analysis/lifetime.h"
#include "base/vec.h"

#define MAX_POINTS 10000000u

struct series {
	struct ht__tl_series d;
	int64_t *v;	 /* deltas by point, values after finish; peak mode: values as they come */
	int64_t cur;	 /* peak mode: the value now */
	uint64_t filled; /* peak mode: points v[0 .. filled) that have a value */
};

struct ht__timeline {
	uint64_t start, end, interval, npoints;
	unsigned mask;
	enum ht__tl_by by;
	struct series *s;
	uint32_t ns, scap;
	struct ht__hindex index; /* of s */
	uint32_t last;		 /* + 1: the series series_get() found last */
	uint64_t *rss;		 /* last RSS sample per process index */
	uint32_t nrss;
	int finished;
	int peak;
};

static const char *const kind_names[HT_TL__KINDS] = {"heap", "commit", "rss"};

const char *ht__tl_kind_name(enum ht__tl_kind k)
{
	return (unsigned)k < HT_TL__KINDS ? kind_names[k] : "?";
}

int ht__tl_kind_parse(const char *s)
{
	for (int i = 0; s && i < HT_TL__KINDS; i++)
		if (!strcmp(s, kind_names[i]))
			return i;
	return -1;
}

uint64_t ht__timeline_point_count(uint64_t start, uint64_t end, uint64_t interval)
{
	if (start >= end || !interval)
		return 0;
	uint64_t span = end - start;
	return span / interval + (span % interval ? 1 : 0) + 1;
}

uint64_t ht__timeline_auto_interval(uint64_t start, uint64_t end, uint32_t max_points)
{
	if (max_points < 2)
		max_points = 2;
	static const uint64_t steps[] = {1, 2, 5};
	for (uint64_t pow = 1; pow <= UINT64_MAX / 10; pow *= 10)
		for (int i = 0; i < 3; i++) {
			uint64_t iv = steps[i] * pow;
			uint64_t n = ht__timeline_point_count(start, end, iv);
			if (n <= max_points)
				return iv;
		}
	return UINT64_MAX / 10;
}

int ht__timeline_new(struct ht__timeline **out, uint64_t start, uint64_t end, uint64_t interval,
		     unsigned kinds_mask, enum ht__tl_by by)
{
	uint64_t n = ht__timeline_point_count(start, end, interval);
	if (!n || n > MAX_POINTS || (unsigned)by > HT_TL_BY_HANDLE)
		return HT_ERR_INVALID;
	struct ht__timeline *tl = calloc(1, sizeof(*tl));
	if (!tl)
		return HT_ERR_NOMEM;
	tl->start = start;
	tl->end = end;
	tl->interval = interval;
	tl->npoints = n;
	tl->mask = kinds_mask;
	tl->by = by;
	*out = tl;
	return 0;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ull;
	x ^= x >> 29;
	return x;
}

static uint64_t series_hash(const struct ht__tl_series *d)
{
	return mix(mix(((uint64_t)d->kind << 32 | d->process) ^ 0x51ed27ull) ^ d->heap);
}

static uint64_t series_rehash(const void *ctx, uint32_t id)
{
	const struct ht__timeline *tl = ctx;
	return series_hash(&tl->s[id].d);
}

/* Whether series s is the one of key d. */
static inline bool series_is(const struct series *s, const struct ht__tl_series *d)
{
	return s->d.kind == d->kind && s->d.process == d->process && s->d.heap == d->heap;
}

/* The series for a key, created (all zero) when new; NULL when out of memory. */
static struct series *series_get(struct ht__timeline *tl, enum ht__tl_kind kind, uint32_t process,
				 uint64_t heap)
{
	struct ht__tl_series d = {kind, UINT32_MAX, 0, 0};
	if (tl->by != HT_TL_BY_NONE)
		d.process = process;
	if (tl->by == HT_TL_BY_HANDLE && kind == HT_TL_HEAP) {
		d.heap = heap;
		d.has_heap = 1;
	}
	/* The series found last first: a trace's heap events are mostly of one
	   (python's timeline: the lookups were 8 % of its samples). */
	if (tl->last && tl->last <= tl->ns) {
		struct series *s = &tl->s[tl->last - 1];
		if (series_is(s, &d))
			return s;
	}
	uint64_t h = series_hash(&d);
	for (uint32_t *slot = ht__hindex_find(&tl->index, h); *slot;
	     slot = ht__hindex_next(&tl->index, slot)) {
		struct series *s = &tl->s[*slot - 1];
		if (series_is(s, &d)) {
			tl->last = *slot;
			return s;
		}
	}
	if (ht__grow32((void **)&tl->s, &tl->scap, (size_t)tl->ns + 1, sizeof(*tl->s)) < 0)
		return NULL;
	int64_t *v = calloc(tl->npoints, sizeof(*v));
	if (!v)
		return NULL;
	struct series *s = &tl->s[tl->ns];
	s->d = d;
	s->cur = 0;
	s->filled = 0;
	s->v = v;
	if (ht__hindex_insert(&tl->index, h, tl->ns, series_rehash, tl) < 0) {
		free(v);
		return NULL;
	}
	tl->last = ++tl->ns;
	return s;
}

/*
 * Add delta at ts: it counts at every point t > ts, so it goes to the first
 * such point's slot and the prefix sum at finish carries it on.
 */
static void delta_at(struct ht__timeline *tl, struct series *s, uint64_t ts, int64_t delta)
{
	uint64_t b = ts < tl->start ? 0 : (ts - tl->start) / tl->interval + 1;
	if (b < tl->npoints)
		s->v[b] += delta;
}

void ht__timeline_peak(struct ht__timeline *tl)
{
	if (!tl->ns && !tl->finished)
		tl->peak = 1;
}

/*
 * Peak mode, in time order: the series' value changes by delta at ts. Point k
 * covers [t(k-1), t(k)] and keeps the highest value seen in it; point 0 is
 * the value at the start.
 */
static void peak_step(struct ht__timeline *tl, struct series *s, uint64_t ts, int64_t delta)
{
	uint64_t b = ts < tl->start ? 0 : (ts - tl->start) / tl->interval + 1;
	if (b >= tl->npoints)
		return; /* after the last point: changes nothing shown */
	/* Points the series went through unchanged hold its value; a new one starts there. */
	while (s->filled <= b)
		s->v[s->filled++] = s->cur;
	s->cur += delta;
	if (b == 0 || s->cur > s->v[b])
		s->v[b] = s->cur;
}

int ht__timeline_step(struct ht__timeline *tl, enum ht__tl_kind kind, uint32_t process,
		      uint64_t heap, uint64_t ts, int64_t delta)
{
	if ((unsigned)kind >= HT_TL__KINDS || !(tl->mask & (1u << kind)) || tl->finished || !delta)
		return 0;
	struct series *s = series_get(tl, kind, process, heap);
	if (!s)
		return HT_ERR_NOMEM;
	if (tl->peak)
		peak_step(tl, s, ts, delta);
	else
		delta_at(tl, s, ts, delta);
	return 0;
}

int ht__timeline_add(struct ht__timeline *tl, enum ht__tl_kind kind, uint32_t process,
		     uint64_t heap, uint64_t alloc_ts, uint64_t free_ts, uint64_t size)
{
	if ((unsigned)kind >= HT_TL__KINDS || !(tl->mask & (1u << kind)) || tl->finished)
		return 0;
	if (tl->peak)
		return HT_ERR_INVALID; /* needs time order: ht__timeline_step */
	/* A block freed before the first point never shows (one freed at it does). */
	if (free_ts < tl->start)
		return 0;
	struct series *s = series_get(tl, kind, process, heap);
	if (!s)
		return HT_ERR_NOMEM;
	delta_at(tl, s, alloc_ts, (int64_t)size);
	if (free_ts != HT_TS_NEVER)
		delta_at(tl, s, free_ts, -(int64_t)size);
	return 0;
}

int ht__timeline_rss(struct ht__timeline *tl, uint32_t process, uint64_t ts, uint64_t rss)
{
	if (!(tl->mask & (1u << HT_TL_RSS)) || tl->finished || process == UINT32_MAX)
		return 0;
	if (ht__grow32_zero((void **)&tl->rss, &tl->nrss, (size_t)process + 1, sizeof(*tl->rss)) <
	    0)
		return HT_ERR_NOMEM;
	int64_t delta = (int64_t)rss - (int64_t)tl->rss[process];
	tl->rss[process] = rss;
	return ht__timeline_step(tl, HT_TL_RSS, process, 0, ts, delta);
}

static int cmp_series(const void *pa, const void *pb)
{
	const struct ht__tl_series *a = &((const struct series *)pa)->d;
	const struct ht__tl_series *b = &((const struct series *)pb)->d;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	if (a->process != b->process)
		return a->process < b->process ? -1 : 1;
	if (a->heap != b->heap)
		return a->heap < b->heap ? -1 : 1;
	return 0;
}

void ht__timeline_finish(struct ht__timeline *tl)
{
	if (tl->finished)
		return;
	tl->finished = 1;
	/* Every requested kind has a series, even one that stayed empty (total only). */
	if (tl->by == HT_TL_BY_NONE)
		for (int k = 0; k < HT_TL__KINDS; k++)
			if (tl->mask & (1u << k))
				series_get(tl, (enum ht__tl_kind)k, 0, 0);
	for (uint32_t i = 0; i < tl->ns; i++) {
		struct series *s = &tl->s[i];
		if (tl->peak) {
			/* The points after the last change hold the last value. */
			while (s->filled < tl->npoints)
				s->v[s->filled++] = s->cur;
			continue;
		}
		int64_t sum = 0;
		for (uint64_t p = 0; p < tl->npoints; p++) {
			sum += s->v[p];
			s->v[p] = sum;
		}
	}
	if (tl->ns > 1)
		qsort(tl->s, tl->ns, sizeof(tl->s[0]), cmp_series);
	ht__hindex_release(&tl->index);
}

uint64_t ht__timeline_points(const struct ht__timeline *tl)
{
	return tl->npoints;
}

uint64_t ht__timeline_time(const struct ht__timeline *tl, uint64_t i)
{
	return tl->start + i * tl->interval;
}

uint64_t ht__timeline_interval(const struct ht__timeline *tl)
{
	return tl->interval;
}

uint32_t ht__timeline_series_count(const struct ht__timeline *tl)
{
	return tl->ns;
}

const struct ht__tl_series *ht__timeline_series(const struct ht__timeline *tl, uint32_t i,
						const int64_t **values)
{
	if (i >= tl->ns)
		return NULL;
	if (values)
		*values = tl->s[i].v;
	return &tl->s[i].d;
}

void ht__timeline_free(struct ht__timeline *tl)
{
	if (!tl)
		return;
	for (uint32_t i = 0; i < tl->ns; i++)
		free(tl->s[i].v);
	free(tl->s);
	ht__hindex_release(&tl->index);
	free(tl->rss);
	free(tl);
}
