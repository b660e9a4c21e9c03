/*
 * summary.h - what 'heaptrail info' shows, a consumer of the trace pass (pass.h):
 * event counts by kind and, per process image and in total, allocation calls
 * and bytes, peak outstanding heap bytes, leaks at exit, and committed memory
 * (from commit.h).
 *
 * Example:
 *
 *     struct ht__summary s;
 *     int rc = ht__summary_run(&s, reader);   // reads every event
 *     ... s.total.peak_bytes, s.procs[i].leaked_bytes ...
 *     ht__summary_release(&s);
 */
#ifndef HT_ANALYSIS_SUMMARY_H
#define HT_ANALYSIS_SUMMARY_H

#include <stdint.h>

#include "analysis/query.h"
#include "heaptrail/trace.h"

/* The counters of one process image, or of all of them. */
struct ht__summary_counts {
	/* Successful calls of the allocation functions (C++ new included, a
	   realloc counted once per call that returned a block) and their bytes. */
	uint64_t alloc_calls;
	uint64_t alloc_bytes;
	uint64_t free_calls;	/* free() of a non-NULL pointer, realloc(p, 0) */
	uint64_t unknown_frees; /* frees of blocks never seen allocated */
	/* A fork child's frees of blocks its parent held at the fork
	   (docs/processes.md): the parent's allocations, not unknown. */
	uint64_t inherited_frees;
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
	/* Blocks freed before their thread allocated again (temporary.h). */
	uint64_t temporary_count;
	uint64_t temporary_bytes;
};

struct ht__summary {
	uint64_t events[HT_EV__COUNT]; /* by enum ht_event_type */
	uint64_t event_count;
	uint64_t last_ts; /* of the last event */
	struct ht__summary_counts total;
	struct ht__summary_counts *procs; /* by process index, nprocs entries */
	uint32_t nprocs;
	/* Heap snapshot traces: each snapshot's time and totals (every process). */
	struct ht__summary_snap {
		uint32_t number;
		uint64_t ts;
		uint64_t live_bytes, live_count;	   /* held at ts */
		uint64_t alloc_bytes, alloc_count;	   /* allocated since the start */
		uint64_t untracked_bytes, untracked_count; /* not tracked: a limit */
		int32_t exit_pid; /* taken at this process's exit (of it alone); 0 */
		int at_exec;	  /* with exit_pid: that image ended by an exec, not an exit */
	} * snaps;
	uint32_t nsnaps;
	void *priv; /* internal, while a pass fills it */
};

struct ht__pass;

/*
 * Make *s (which the caller then owns, and releases even if the pass fails)
 * filled by pass p (pass.h), with the other consumers of the same read; q as
 * in ht__summary_run_query() (NULL: every process). Returns 0 or HT_ERR_NOMEM.
 */
int ht__summary_attach(struct ht__summary *s, struct ht__pass *p, const struct ht__query *q);

/*
 * A pass of its own: reads the trace from its first event to its end
 * (rewinding r first) and fills *s, which the caller then owns. Returns 0 or a negative error (the
 * reader's, or HT_ERR_NOMEM); *s is released on error.
 */
int ht__summary_run(struct ht__summary *s, struct ht_reader *r);

/* The same over the processes q's -pid list keeps (every one when q is NULL
   or lists none); events of the others are skipped. The committed totals
   (commits, commit_bytes, committed peak) stay those of every process. */
int ht__summary_run_query(struct ht__summary *s, struct ht_reader *r, const struct ht__query *q);

/*
 * Point q at the heap's peak: the moment the outstanding heap bytes of q's
 * processes (summed, a process leaving the sum when it exits, as info's
 * total) were first at their highest. Sets q->has_at and q->at_ts, and
 * *bytes (when not NULL) to the peak. Reads the whole trace and rewinds r
 * after. Returns 0 or a negative error; HT_ERR_INVALID when q has a range.
 */
int ht__summary_at_peak(struct ht__query *q, struct ht_reader *r, uint64_t *bytes);

void ht__summary_release(struct ht__summary *s);

#endif
