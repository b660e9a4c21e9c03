/*
 * query.h - the one description of "what to look at" that every analysis
 * front end (analyze, table, timeline, report) fills in from its options:
 * time range, processes, lifetime and size bounds, cull and require frames,
 * grouping, sort key, top N and symbol display. It also holds the rules that
 * decide whether one heap block counts and whether it is outstanding, so that
 * every command counts the same way.
 *
 * Example:
 *
 *     struct ht__query q;
 *     ht__query_init(&q);                    // all processes, whole trace
 *     ht__query_add_pid(&q, 1234);
 *     q.has_range = true; q.range_start = 0; q.range_end = 5000000000;
 *     ht__match_list_add(&q.cull, "libfoo.so!pool_alloc");
 *     if (ht__query_prepare(&q) < 0) ...     // validates, adds the default cull list
 *     ...
 *     ht__query_release(&q);
 *
 * Times are ns since the start of the trace; intervals are [low, high).
 * Ownership: the query owns its pid array and match lists. Not thread-safe.
 */
#ifndef HT_ANALYSIS_QUERY_H
#define HT_ANALYSIS_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/lifetime.h"
#include "analysis/match.h"

/* What the items of a result are. */
enum ht__group {
	HT_GROUP_HANDLE = 0, /* one row per process and heap handle (xperf's default) */
	HT_GROUP_STACK,	     /* the whole stack after culling */
	HT_GROUP_FRAME,	     /* the topmost frame after culling */
	HT_GROUP_IMAGE,	     /* the module (image) of that frame */
};

/* Sort keys, as xperf names them. Ties: then total size, then the key text. */
/*
 * The one list of analyze's sort keys: X(NAME, "key", "title", the field of
 * struct ht__agg_counts it sorts by). The enum, ht__sort_parse(),
 * ht__sort_name(), ht__sort_title() and the aggregation's comparison expand
 * it; a new key is a line here (and its line in analyze's --help).
 */
#define HT__SORT_KEYS(X)                                                                           \
	X(SO, "so", "outstanding size", outstanding_bytes) /* the default */                       \
	X(SOC, "soc", "outstanding count", outstanding_count)                                      \
	X(ST, "st", "total size", total_bytes)                                                     \
	X(STC, "stc", "total count", total_count)                                                  \
	X(SRC, "src", "realloc count", realloc_count)

#define HT__SORT_ENUM(id, key, title, field) HT_SORT_##id,
enum ht__sort { HT__SORT_KEYS(HT__SORT_ENUM) HT__SORT_COUNT };
#undef HT__SORT_ENUM

/* Items shown when top is not given (xperf's limit). */
#define HT_QUERY_DEFAULT_TOP 10000

struct ht__query {
	/* Events in [range_start, range_end) only; whole trace when !has_range. */
	bool has_range;
	uint64_t range_start, range_end;
	/* Blocks whose lifetime is in [life_min, life_max); UINT64_MAX: no bound. */
	uint64_t life_min, life_max;
	/* Blocks whose size is in [size_min, size_max) bytes; UINT64_MAX: no bound. */
	uint64_t size_min, size_max;
	/* Processes to keep, by pid; every process when pid_count is 0. */
	int32_t *pids;
	size_t pid_count, pid_alloc;
	/*
	 * Frames to cull and frames required (tested before culling). The
	 * default cull list is added to cull by ht__query_prepare() unless
	 * default_cull is false.
	 */
	struct ht__match_list cull;
	struct ht__match_list require;
	bool default_cull;
	bool defaults_added; /* set by ht__query_prepare() */
	enum ht__group group;
	enum ht__sort sort;
	/* A heap snapshot trace: which snapshot (pass.h, ht__pass_snapshot); 0: the last. */
	uint32_t snapshot;
	uint64_t top;	  /* items to show; 0: HT_QUERY_DEFAULT_TOP */
	bool top_given;	  /* the user asked for top (so a cut is expected, not reported) */
	bool totals_only; /* only the totals */
	int symbols; /* 1 with symbols, 0 offsets only, -1 (default): when the trace has them */
	/*
	 * One moment instead of a range (--at-peak, --metric peak): with has_at
	 * a block counts when it is live at at_ts (alloc_ts <= at_ts < free_ts)
	 * in a process that has not ended by then, and it is outstanding.
	 * ht__summary_at_peak() (summary.h) sets it to the heap's peak. Not
	 * combined with has_range.
	 */
	bool at_peak; /* asked for the peak: front ends call ht__summary_at_peak() */
	bool has_at;
	uint64_t at_ts;
	/* Only temporary blocks (heaptrack's definition, temporary.h). */
	bool temporary_only;
};

/* Everything, whole trace, HT_GROUP_HANDLE, HT_SORT_SO, default cull list on. */
void ht__query_init(struct ht__query *q);
void ht__query_release(struct ht__query *q);

/* Keep process pid too. Returns 0 or HT_ERR_NOMEM. */
int ht__query_add_pid(struct ht__query *q, int32_t pid);

/* Whether pid passes the -pid filter. */
bool ht__query_wants_pid(const struct ht__query *q, int32_t pid);

/*
 * Check the query (HT_ERR_INVALID when range_end <= range_start, life_max <=
 * life_min or size_max <= size_min) and add the default cull list when asked
 * (once). Returns 0, HT_ERR_INVALID or HT_ERR_NOMEM.
 */
int ht__query_prepare(struct ht__query *q);

/* "so", "soc", "st", "stc", "src" (case-insensitive). Returns 0 or HT_ERR_INVALID. */
int ht__sort_parse(const char *s, enum ht__sort *out);
/* "so" ... for a key. */
const char *ht__sort_name(enum ht__sort s);
/* "outstanding size" ... for a key. */
const char *ht__sort_title(enum ht__sort s);

/*
 * Whether a block counts under the range, lifetime and size rules (not the
 * pid or frame rules), and whether it is outstanding:
 *
 * - with a range, it counts when alloc_ts is in [range_start, range_end), and
 *   it is outstanding when it has no free before range_end;
 *   without one, every block counts and it is outstanding when never freed;
 * - its lifetime is free_ts - alloc_ts when freed in the range, otherwise the
 *   time up to the range's end (trace_end, or range_end when earlier);
 * - lifetime and size must be in [min, max).
 *
 * trace_end is the end of the trace in ns (the last event or the duration).
 * With has_at, the range is [0, at_ts] and only blocks live at at_ts count;
 * with temporary_only, only blocks whose life->temporary is set.
 */
bool ht__query_accepts(const struct ht__query *q, const struct ht__life *life, uint64_t trace_end,
		       bool *outstanding);

#endif
