/*
 * export.h - heaptrail's profiles in other tools' formats: collapsed stacks
 * (flamegraph.pl, speedscope), pprof (go tool pprof, Pyroscope, Parca),
 * massif (ms_print, massif-visualizer), Chrome trace-event JSON (Perfetto)
 * and SQLite. docs/export.md describes each format and its checks.
 *
 * The stack formats (collapsed, pprof) write what the aggregator (aggregate.h)
 * grouped by culled stack, so their culling, filters and counts are those of
 * 'heaptrail analyze -stacks'. The time formats (massif, perfetto, sqlite)
 * stream the trace once; memory grows with live blocks, not with events.
 *
 * Ownership: nothing is kept after a call returns. Not thread-safe.
 */
#ifndef HT_ANALYSIS_EXPORT_H
#define HT_ANALYSIS_EXPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "analysis/aggregate.h"
#include "analysis/query.h"
#include "heaptrail/trace.h"

/* What a stack's value is. */
enum ht__metric {
	HT_METRIC_OUTSTANDING = 0, /* live at the end of the window (default) */
	HT_METRIC_TOTAL,	   /* every allocation in the window */
	HT_METRIC_PEAK,		   /* live when the heap was largest (query->at_peak) */
};

/* "outstanding", "total", "peak". Returns 0 or HT_ERR_INVALID. */
int ht__metric_parse(const char *s, enum ht__metric *out);
const char *ht__metric_name(enum ht__metric m);

/* The bytes and the count of an aggregated row under metric m. */
uint64_t ht__metric_bytes(const struct ht__agg_counts *c, enum ht__metric m);
uint64_t ht__metric_count(const struct ht__agg_counts *c, enum ht__metric m);

/* Progress of a streaming export: ts of the last event and the duration. */
typedef void (*ht__export_progress_fn)(void *ctx, uint64_t ts, uint64_t duration);

/*
 * Collapsed stacks: one line a stack of res (grouped by HT_GROUP_STACK),
 * root first, frames joined by ';', a space and the metric's bytes; stacks
 * whose value is 0 are left out. Frames lose their "module!" prefix unless
 * modules is set; ';' and line breaks inside a name become '_'. Returns 0 or
 * HT_ERR_IO.
 */
int ht__export_collapsed(FILE *out, struct ht__agg *a, const struct ht__agg_result *res,
			 const struct ht_reader *r, enum ht__metric m, bool modules);

/*
 * pprof: a gzipped profile.proto (src/analysis/profile.proto) with Go's
 * heap sample types alloc_objects, alloc_space, inuse_objects and
 * inuse_space: one sample per row of each side's result (HT_GROUP_STACK),
 * labelled host (the trace's), and the side's exe, build_id and pid when set
 * (one side per process: labels Pyroscope and Parca group by). The base
 * sides' values are negated, as pprof's -diff_base does, so any view sums
 * to cur minus base. The profile's time_nanos and duration_nanos are q's
 * window (cur's query: its -range clipped to the trace, the moment of the
 * peak with has_at, else the whole trace). Returns 0, HT_ERR_IO or
 * HT_ERR_NOMEM.
 */
struct ht__pprof_side {
	struct ht__agg *a;
	const struct ht__agg_result *res;
	const struct ht_reader *r;
	int32_t pid;	      /* 0: no pid label */
	const char *exe;      /* NULL: no label */
	const char *build_id; /* NULL or "": no label */
};
int ht__export_pprof(FILE *out, const struct ht__pprof_side *cur, size_t ncur,
		     const struct ht__pprof_side *base, size_t nbase, enum ht__metric m,
		     const struct ht__query *q);

/*
 * massif: a massif.out file (valgrind's format, read by ms_print and
 * massif-visualizer): about 50 snapshots of the heap's outstanding bytes at
 * even times (ms), plus the snapshot at the peak with the detailed tree of
 * the blocks live then, by culled stack (allocation site first, then its
 * callers; branches under 1% of the peak folded as massif does). q's -pid
 * and culling apply; q is pointed at the peak (ht__summary_at_peak()).
 * Reads the trace twice. Returns 0 or a negative error.
 */
int ht__export_massif(FILE *out, struct ht_reader *r, struct ht__query *q,
		      ht__export_progress_fn progress, void *pctx);

/*
 * Perfetto / chrome://tracing: Chrome trace-event JSON ({"traceEvents":
 * [...]}): per process of q's -pid list, counter events ("ph":"C") named
 * heap, committed and rss (args.bytes), thinned to at most two per counter
 * per 1/20000 of the trace keeping each bucket's highest value; an instant
 * event at each process's start and end; process_name metadata. Times in
 * microseconds. One pass. Returns 0 or a negative error.
 */
int ht__export_perfetto(FILE *out, struct ht_reader *r, const struct ht__query *q,
			ht__export_progress_fn progress, void *pctx);

/*
 * SQLite: a new database at path (a file that does not exist yet, or is
 * empty) with the tables of docs/export.md: one row per heap block
 * (allocations), committed range piece, RSS sample, thread, module load,
 * process, module, frame and stack frame. q's -pid list and -range (by
 * allocation, commit or sample time) choose the rows. Reads the trace once
 * through a pass (pass.h). Returns 0 or a negative error, with a message in
 * why (SQLite's own when it failed).
 */
int ht__export_sqlite(const char *path, struct ht_reader *r, const struct ht__query *q,
		      ht__export_progress_fn progress, void *pctx, char *why, size_t whylen);

/*
 * For the writers (internal): the heap's outstanding bytes per process and
 * in total, as info counts them: the -pid processes of q only, and a process
 * leaves the total when it ends. Zero-initialise, set q and r.
 */
struct ht__heap_sum {
	const struct ht__query *q;
	struct ht_reader *r;
	uint64_t *bytes; /* per process index */
	uint8_t *state;	 /* 0 unknown, 1 counted, 2 not (-pid, or ended) */
	size_t n;
	uint64_t total;
};
/* A block of size made (sign 1) or freed (sign -1) by process p. Returns 1
   when p counts, 0 when not, HT_ERR_NOMEM. */
int ht__heap_sum_add(struct ht__heap_sum *h, uint32_t p, uint64_t size, int sign);
/* Process p ended: its bytes leave the total. Returns 0 or HT_ERR_NOMEM. */
int ht__heap_sum_end(struct ht__heap_sum *h, uint32_t p);
void ht__heap_sum_release(struct ht__heap_sum *h);

#endif
