/*
 * aggregate.h - the xperf heap actions' aggregation: stream a trace once,
 * count each heap block that passes a query (struct ht__query) and group the
 * counts by process and heap handle, by culled stack, by the topmost frame
 * after culling, or by that frame's module (image); then sort and cut.
 *
 * It is a consumer of the trace pass (pass.h): ht__agg_attach() puts it on
 * a pass shared with other consumers, ht__agg_run() runs a pass of its own.
 * Blocks are counted per stack id while the trace streams (an array index per
 * block), and the -requireFrames test, culling and frame text are worked out
 * once per distinct stack at the end, so the cost per event stays flat and
 * memory grows with live blocks and distinct stacks, never with events.
 *
 * Example:
 *
 *     struct ht__agg *a;
 *     struct ht__agg_result res;
 *     rc = ht__agg_new(&a, &query, reader);      // query already ht__query_prepare()d
 *     rc = ht__agg_run(a, NULL, NULL);           // reads every event once
 *     rc = ht__agg_finish(a, &res);              // grouped, sorted, cut to top
 *     for (size_t i = 0; i < res.count; i++) use(&res.items[i]);
 *     ht__agg_result_release(&res);
 *     ht__agg_free(a);
 *
 * Ownership: the query and the reader must outlive the aggregator, and the
 * aggregator the result. Not thread-safe.
 */
#ifndef HT_ANALYSIS_AGGREGATE_H
#define HT_ANALYSIS_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/lifetime.h"
#include "analysis/pass.h"
#include "analysis/query.h"
#include "heaptrail/trace.h"

/* The five metrics of xperf's heap actions. */
struct ht__agg_counts {
	uint64_t outstanding_bytes;
	uint64_t outstanding_count;
	uint64_t total_bytes; /* every allocation counted, freed or not */
	uint64_t total_count;
	uint64_t realloc_count; /* allocations that came from a realloc */
};

/* One row of a result. */
struct ht__agg_item {
	struct ht__agg_counts c;
	/*
	 * HT_GROUP_STACK: the culled stack, innermost first; HT_GROUP_FRAME:
	 * the one frame; HT_GROUP_IMAGE: that frame too (its module is the
	 * key). nframes is 0 for blocks recorded without a stack. These are the
	 * frames of the lowest stack id in the group (file:line may differ
	 * between the merged stacks); without symbols an inlined frame that
	 * prints like its caller is left out. Owned by the aggregator.
	 */
	const uint32_t *frames;
	uint32_t nframes;
	uint32_t stack; /* that representative stack id */
	/*
	 * HT_GROUP_FRAME: the frame text; HT_GROUP_IMAGE: the module's file
	 * name ("?" outside any module); "[no stack]" when nframes is 0; NULL
	 * for the other groups. Owned by the aggregator.
	 */
	const char *key;
	/* HT_GROUP_HANDLE */
	uint32_t process; /* process index */
	int32_t pid;
	uint64_t heap;
};

struct ht__agg_result {
	enum ht__group group;
	enum ht__sort sort;
	bool symbols;		      /* frames are shown with symbols */
	struct ht__agg_counts totals; /* every block counted, whatever top cut */
	struct ht__agg_counts shown;  /* sums over the items kept */
	struct ht__agg_item *items;   /* sorted, at most top (none with totals_only) */
	size_t count;
	/* items before the cut (only items[0 .. count) are kept) */
	size_t total_items;
};

struct ht__agg;

/* Progress: ts of the last event read, and the trace's duration (0: unknown). */
typedef ht__pass_progress_fn ht__agg_progress_fn;

/*
 * A new aggregator for query q over reader r. q must have gone through
 * ht__query_prepare(). Returns 0 or HT_ERR_NOMEM.
 */
int ht__agg_new(struct ht__agg **out, const struct ht__query *q, struct ht_reader *r);

/*
 * Make the aggregator a consumer of pass p (pass.h): it counts the heap
 * blocks the pass ends, and lets the pass stop at the end of q's -range.
 * Returns 0 or HT_ERR_NOMEM.
 */
int ht__agg_attach(struct ht__agg *a, struct ht__pass *p);

/*
 * A pass of its own with just the aggregator: reads the trace once.
 * progress, when not NULL, is called about every 65536 events. Returns 0 or
 * a negative error of the reader or HT_ERR_NOMEM.
 */
int ht__agg_run(struct ht__agg *a, ht__agg_progress_fn progress, void *ctx);

/*
 * Count one ended block (as ht__life_fn gives them). For front ends that drive
 * their own lifetime tracker; end_ts is the end of the trace as known so far
 * (for blocks never freed, the time their lifetime runs to).
 */
int ht__agg_add(struct ht__agg *a, const struct ht__life *life, uint64_t end_ts);

/*
 * Apply the required frames and culling, group, sort by q->sort (ties: then
 * total size, then the key text; handle rows are in pid, process and handle
 * order), cut to top and fill *res. Can be called once.
 * Returns 0 or HT_ERR_NOMEM.
 */
int ht__agg_finish(struct ht__agg *a, struct ht__agg_result *res);

void ht__agg_result_release(struct ht__agg_result *res);
void ht__agg_free(struct ht__agg *a);

/* The text of frame id as the result shows it (cached; owned by a). */
const char *ht__agg_frame_text(struct ht__agg *a, uint32_t frame);

#endif
