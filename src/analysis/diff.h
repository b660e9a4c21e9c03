/*
 * diff.h - two aggregations compared: the rows of a base and a new
 * aggregation (aggregate.h, same grouping) matched by their text - the
 * symbolized frames of a culled stack, a frame, or an image - so that two
 * builds or two machines compare, with base, new and delta of the metric's
 * bytes and count. Rows are sorted by the absolute byte delta, largest first
 * (ties: the absolute count delta, then the text).
 *
 * Example:
 *
 *     struct ht__diff d;
 *     rc = ht__diff_run(&d, base_agg, &base_res, new_agg, &new_res, HT_METRIC_OUTSTANDING);
 *     for (size_t i = 0; i < d.count; i++) puts(d.items[i].key);
 *     ht__diff_release(&d);
 *
 * Both aggregations must have been finished with every row kept (top large
 * enough); they must outlive nothing: the result owns copies of its texts.
 */
#ifndef HT_ANALYSIS_DIFF_H
#define HT_ANALYSIS_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/aggregate.h"
#include "analysis/export.h"
#include "analysis/intern.h"

struct ht__diff_item {
	/* The row's text: a stack's frames innermost first joined by '\n'
	   ("[no stack]" for none), or the frame or image text. */
	const char *key;
	uint64_t base_bytes, new_bytes, base_count, new_count;
	int64_t delta_bytes, delta_count;
};

struct ht__diff {
	enum ht__group group;
	struct ht__diff_item *items;
	size_t count;
	struct ht__diff_item totals; /* key NULL */
	struct ht__intern keys;	     /* owns the texts */
};

/* Returns 0 or HT_ERR_NOMEM. */
int ht__diff_run(struct ht__diff *d, struct ht__agg *base, const struct ht__agg_result *base_res,
		 struct ht__agg *cur, const struct ht__agg_result *cur_res, enum ht__metric m);
void ht__diff_release(struct ht__diff *d);

#endif
