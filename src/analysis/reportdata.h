/*
 * reportdata.h - what the HTML report (heaptrail report) needs from a trace,
 * computed as a consumer of the trace pass (pass.h), with its trackers: heap
 * block and committed-range lifetimes grouped by site (process, handle,
 * culled stack), memory series over time, and the stacks and frames they use.
 * The CLI turns it into the page's JSON (docs/report.md).
 *
 * Big traces stay bounded: every lifetime is kept exactly until a budget is
 * reached; then the sites with the fewest bytes are "binned" one at a time:
 * their lifetimes become cells counted by (alloc bucket, free bucket), so the
 * top sites keep every lifetime (and zoom exactly) while the rest stays
 * right to a bucket. When the cells outgrow their own budget the buckets
 * double in width. Memory and output grow with the budgets, the number of
 * sites and the series points, never with the event count.
 *
 * Example:
 *
 *     struct ht__report_data d;
 *     struct ht__report_opts o = HT_REPORT_OPTS_INIT;
 *     if ((rc = ht__report_data_run(&d, reader, &o)) < 0) ...;
 *     ... d.heap.sites[i], d.heap_series[j].max[k] ...
 *     ht__report_data_release(&d);
 *
 * Not thread-safe; the reader must outlive the data (frame texts come from it).
 */
#ifndef HT_ANALYSIS_REPORTDATA_H
#define HT_ANALYSIS_REPORTDATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/summary.h"
#include "base/vec.h"
#include "heaptrail/trace.h"

struct ht__heap_names;

struct ht__report_opts {
	uint32_t points;	/* points of each series over the trace */
	uint64_t heap_budget;	/* exact heap lifetimes kept at most */
	uint64_t commit_budget; /* exact committed-range lifetimes kept at most */
	uint32_t buckets;	/* time buckets of binned lifetimes (before doubling) */
	uint64_t cell_budget;	/* binned cells per table at most */
	bool default_cull;	/* cull heaptrail's default frame list (allocators) */
};

#define HT_REPORT_OPTS_INIT                                                                        \
	{                                                                                          \
		2000, 250000, 50000, 500, 200000, true                                             \
	}

/* One lifetime kept exactly. free_ts is HT_TS_NEVER when never freed. */
struct ht__rd_life {
	uint64_t size;
	uint64_t alloc_ts;
	uint64_t free_ts;
	uint8_t realloc; /* made by a realloc call */
	uint8_t piece;	 /* a further piece of a committed range: not counted again */
	uint8_t at_exit; /* free_ts is its process's exit or exec: the program never freed it */
	uint32_t count;	 /* blocks it stands for: 1, or a sampled trace's estimate (pass.h) */
};

/* Binned lifetimes of one site that share an alloc and a free bucket. */
struct ht__rd_cell {
	uint32_t site;
	uint32_t alloc_bucket;
	uint32_t free_bucket; /* UINT32_MAX: never freed */
	uint64_t count;	      /* allocations (pieces not counted) */
	uint64_t blocks;      /* lifetimes, pieces included */
	uint64_t bytes;
	uint64_t reallocs;
};

/* Where blocks come from: a process, a heap handle and a culled stack. */
struct ht__rd_site {
	uint32_t process;
	uint32_t handle; /* index into handles */
	uint32_t stack;	 /* index into the output stacks (0: no frames) */
	uint64_t bytes;	 /* over every lifetime seen, for the budget's choice */
	bool binned;
	struct ht__rd_life *lives; /* in allocation order once the run is done */
	uint32_t nlives, lives_cap;
};

/* The lifetimes of heap blocks or of committed ranges. */
struct ht__rd_table {
	struct ht__rd_site *sites;
	uint32_t nsites, sites_cap;
	uint64_t nexact, budget;
	struct ht__rd_cell *cells;
	size_t ncells, cells_cap;
	uint64_t cell_budget;
	uint64_t bucket_ns;
	uint32_t binned_sites;
	/* Internal: site and cell hash indexes (vec.h). */
	struct ht__hindex site_index;
	struct ht__hindex cell_index;
};

/* A series over time: the largest value and the last value of each point. */
struct ht__rd_series {
	uint32_t process;
	uint32_t handle;
	uint64_t cur;
	uint32_t filled; /* points before this one hold their final values */
	uint64_t *max;
	uint64_t *last;
};

struct ht__report_data {
	struct ht__summary summary; /* what 'heaptrail info' shows */
	uint64_t duration_ns;
	/* A heap snapshot trace: the snapshot the heap data is (0: not one). */
	uint32_t snapshot;
	uint64_t snapshot_ts;
	uint64_t rss_peak, rss_peak_ts; /* of the sum over processes */
	uint64_t *handles;
	uint32_t nhandles;
	struct ht__heap_names *heap_names; /* heap.h's names of custom heaps */
	struct ht__rd_table heap, commit;
	uint32_t points;
	uint64_t point_ns;
	struct ht__rd_series *heap_series, *commit_series, *rss_series;
	uint32_t nheap_series, ncommit_series, nrss_series;
	/* Output stacks: stack i has frames stack_frames[stack_off[i] .. stack_off[i+1])
	   (indices into frame_ids), outermost first; stack 0 is the empty stack. */
	uint32_t nstacks;
	uint32_t *stack_off;
	uint32_t *stack_frames;
	/* The reader's logical frame id of each output frame. */
	uint32_t nframes;
	uint32_t *frame_ids;
	/* Internal. */
	void *priv;
};

/*
 * Reads the trace once (rewinding r), with the summary and the report's
 * data as consumers of one pass (pass.h), and fills *d, which the caller
 * then owns. An unfinished trace is read through once more first, to learn
 * its end (ht__pass_trace_end). Returns 0 or a negative error (the
 * reader's, HT_ERR_NOMEM); *d is released on error.
 */
int ht__report_data_run(struct ht__report_data *d, struct ht_reader *r,
			const struct ht__report_opts *o);

void ht__report_data_release(struct ht__report_data *d);

#endif
