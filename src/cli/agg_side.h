/*
 * agg_side.h - one trace opened and aggregated under a query, for the
 * commands that read one or two of them the same way (export, diff):
 * opening with the usual messages, progress, warnings about damage and lost
 * events, and the aggregator's result.
 */
#ifndef HT_CLI_AGG_SIDE_H
#define HT_CLI_AGG_SIDE_H

#include <stdbool.h>

#include "analysis/aggregate.h"
#include "analysis/heapnames.h"
#include "analysis/query.h"
#include "heaptrail/trace.h"

struct agg_side {
	const char *path;
	struct ht_reader *r;
	struct ht__query q; /* filled in by the caller (ht__query_init first) */
	struct ht__agg *agg;
	struct ht__agg_result res;
	/* Set by the caller to also collect the heaps' names (heapnames.h). */
	bool want_heap_names;
	struct ht__heap_names *heap_names;
};

/*
 * Opens s->path, prepares s->q (finding the peak when q.at_peak), reads the
 * trace once with progress under verb ("exporting") and finishes the
 * aggregation into s->res. Dies on error.
 */
void agg_side_run(struct agg_side *s, const char *verb);

/*
 * Warns when q's -range starts at or after the end of r's finished trace
 * (nothing can be in it: "-range 100s 200s" of a 50 ms trace), saying where
 * the trace ends. agg_side_run() calls it; so do the exports with passes
 * of their own.
 */
void agg_side_range_check(const struct ht__query *q, struct ht_reader *r, const char *path);

void agg_side_release(struct agg_side *s);

#endif
