/*
 * summary.h - what 'heaptrail info' shows, computed in one pass over a trace:
 * event counts by kind and, per process image and in total, allocation calls
 * and bytes, peak outstanding heap bytes, leaks at exit, and committed memory
 * (from commit.h).
 *
 * Example:
 *
 *     struct ht_summary s;
 *     int rc = ht_summary_run(&s, reader);   // reads every event
 *     ... s.total.peak_bytes, s.procs[i].leaked_bytes ...
 *     ht_summary_release(&s);
 */
#ifndef HT_ANALYSIS_SUMMARY_H
#define HT_ANALYSIS_SUMMARY_H

#include <stdint.h>

#include "heaptrail/trace.h"

/* The counters of one process image, or of all of them. */
struct ht_summary_counts {
	/* Successful calls of the allocation functions (C++ new included, a
	   realloc counted once per call that returned a block) and their bytes. */
	uint64_t alloc_calls;
	uint64_t alloc_bytes;
	uint64_t free_calls;	/* free() of a non-NULL pointer, realloc(p, 0) */
	uint64_t unknown_frees; /* frees of blocks never seen allocated */
	/* Outstanding heap bytes: highest, and when first reached. In the total
	   a process stops counting when it exits. */
	uint64_t peak_bytes;
	uint64_t peak_ts;
	/* Blocks never freed (live at exit or at the end of the trace). */
	uint64_t leaked_bytes;
	uint64_t leaked_count;
	/* Committed memory (commit.h): operations that committed bytes, the
	   bytes they committed, and the peak of committed bytes. */
	uint64_t commits;
	uint64_t commit_bytes;
	uint64_t committed_peak_bytes;
	uint64_t committed_peak_ts;
};

struct ht_summary {
	uint64_t events[HT_EV__COUNT]; /* by enum ht_event_type */
	uint64_t event_count;
	uint64_t last_ts; /* of the last event */
	struct ht_summary_counts total;
	struct ht_summary_counts *procs; /* by process index, nprocs entries */
	uint32_t nprocs;
};

/*
 * Reads the trace from its first event to its end (rewinding r first) and
 * fills *s, which the caller then owns. Returns 0 or a negative error (the
 * reader's, or HT_ERR_NOMEM); *s is released on error.
 */
int ht_summary_run(struct ht_summary *s, struct ht_reader *r);

void ht_summary_release(struct ht_summary *s);

#endif
