/*
 * timeline.h - memory over time: outstanding heap bytes, committed bytes and
 * resident bytes (RSS) sampled at regular points, in total, per process or per
 * heap handle. The front end feeds it lifetimes (heap blocks, committed
 * ranges) and RSS samples in any order; it keeps one array of deltas per
 * series, so memory grows with points x series, never with events.
 *
 * The value of a series at point t is what was outstanding just before t:
 * the sum over lifetimes with alloc_ts < t <= free_ts, the same rule as the
 * tables (window.h), so that for a table window [T1, T2) with T1 and T2 on
 * points, Impacting Size = value(T2) - value(T1). RSS at t is the last sample
 * of each process taken before t (0 after the process ended).
 *
 * Not thread-safe.
 */
#ifndef HT_ANALYSIS_TIMELINE_H
#define HT_ANALYSIS_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "heaptrail/trace.h"

enum ht__tl_kind { HT_TL_HEAP = 0, HT_TL_COMMIT = 1, HT_TL_RSS = 2, HT_TL__KINDS };

/* How series are split: one per kind, per process and kind, or per heap handle. */
enum ht__tl_by {
	HT_TL_BY_NONE = 0,
	HT_TL_BY_PROCESS = 1,
	HT_TL_BY_HANDLE = 2, /* heap series per (process, handle); commit and rss per process */
};

/* "heap", "commit", "rss"; "?" out of range. */
const char *ht__tl_kind_name(enum ht__tl_kind k);

/* The kind named s, or -1. */
int ht__tl_kind_parse(const char *s);

/* A series: its kind and, depending on the split, its process and handle. */
struct ht__tl_series {
	enum ht__tl_kind kind;
	uint32_t process; /* UINT32_MAX when not split by process */
	uint64_t heap;	  /* valid for heap series split by handle */
	int has_heap;
};

/*
 * Points start, start + interval, ... up to the first point >= end (so the
 * last point covers every event before end). Returns a new point count.
 */
uint64_t ht__timeline_point_count(uint64_t start, uint64_t end, uint64_t interval);

/*
 * An interval of 1, 2 or 5 x 10^k ns that gives at most max_points points
 * over [start, end).
 */
uint64_t ht__timeline_auto_interval(uint64_t start, uint64_t end, uint32_t max_points);

struct ht__timeline;

/*
 * A timeline over [start, end) with the given interval (> 0), for the kinds in
 * kinds_mask (bit 1 << HT_TL_HEAP ...). Returns 0, HT_ERR_INVALID (start >=
 * end, interval 0, too many points: more than 10 million) or HT_ERR_NOMEM.
 */
int ht__timeline_new(struct ht__timeline **out, uint64_t start, uint64_t end, uint64_t interval,
		     unsigned kinds_mask, enum ht__tl_by by);

/*
 * Count size bytes from alloc_ts until free_ts (HT_TS_NEVER: never freed) in
 * the series of kind for this process (and heap, for HT_TL_HEAP). Kinds not in
 * the mask are ignored. Returns 0 or HT_ERR_NOMEM.
 */
int ht__timeline_add(struct ht__timeline *tl, enum ht__tl_kind kind, uint32_t process,
		     uint64_t heap, uint64_t alloc_ts, uint64_t free_ts, uint64_t size);

/*
 * Peak mode (call right after ht__timeline_new): a point holds the highest
 * value the series had since the previous point (its interval's both ends
 * included) instead of the value at the point, so that a spike shorter than
 * the interval still shows. Everything is then fed in time order through
 * ht__timeline_step() and ht__timeline_rss(); ht__timeline_add() returns
 * HT_ERR_INVALID.
 */
void ht__timeline_peak(struct ht__timeline *tl);

/*
 * The series of kind for this process (and heap) changes by delta bytes at
 * ts. In time order in peak mode; any order otherwise. Returns 0 or
 * HT_ERR_NOMEM.
 */
int ht__timeline_step(struct ht__timeline *tl, enum ht__tl_kind kind, uint32_t process,
		      uint64_t heap, uint64_t ts, int64_t delta);

/*
 * An RSS sample: the process's resident bytes are rss from ts on (until its
 * next sample). Report a process's end as a sample of 0. Returns 0 or
 * HT_ERR_NOMEM.
 */
int ht__timeline_rss(struct ht__timeline *tl, uint32_t process, uint64_t ts, uint64_t rss);

/*
 * Turn the deltas into values (once, after the last add) and order the series
 * by kind, then process, then handle.
 */
void ht__timeline_finish(struct ht__timeline *tl);

uint64_t ht__timeline_points(const struct ht__timeline *tl);
/* The time of point i, in ns since the trace start. */
uint64_t ht__timeline_time(const struct ht__timeline *tl, uint64_t i);
uint64_t ht__timeline_interval(const struct ht__timeline *tl);

uint32_t ht__timeline_series_count(const struct ht__timeline *tl);
/* Series i's description; its values (one per point) through *values. */
const struct ht__tl_series *ht__timeline_series(const struct ht__timeline *tl, uint32_t i,
						const int64_t **values);

void ht__timeline_free(struct ht__timeline *tl);

/*
 * Feed tl from trace pass p (pass.h): heap blocks and committed ranges as
 * the pass ends them (an image's end ends what it held, the pass's rule),
 * RSS samples, and an image's RSS dropping to 0 at its end; in peak mode
 * every change in time order (call ht__timeline_peak() first). Only
 * processes q's pids select (q may be NULL). kinds_mask says which
 * trackers the pass needs. The pass may stop at the last point. *out
 * lives until ht__tl_feed_free(), after the pass. Returns 0 or HT_ERR_NOMEM.
 */
struct ht__pass;
struct ht__query;
struct ht__tl_feed;
int ht__timeline_attach(struct ht__timeline *tl, struct ht__pass *p, const struct ht__query *q,
			unsigned kinds_mask, bool peak, struct ht__tl_feed **out);
void ht__tl_feed_free(struct ht__tl_feed *f);

#endif
