/*
 * pass.h - the one trace pass: a driver that reads a trace once, keeps the
 * heap lifetime tracker (lifetime.h) and the commit map (commit.h) for
 * everyone, and feeds any number of consumers through tables of callbacks,
 * the way Linux perf's session feeds its tools (struct perf_tool). Every
 * front end is a consumer: the aggregation of 'analyze', the summary of
 * 'info', the tables, the timeline, the report data, and the exports.
 *
 * Order of the callbacks for one event, in trace order:
 *   1. the trackers see it: .life for every heap block it frees (free,
 *      realloc, heap destroy), .commit for every committed piece it ends;
 *   2. for every process image it ends (EXIT, or the image an EXEC
 *      replaced: found by pid, the one rule for that in the tree): .life and
 *      .commit for every block and committed range the image still held,
 *      ended at that moment with at_exit set (the kernel took the memory
 *      back then: the one rule for lifetimes at exit, for heap blocks and
 *      mappings alike), then .process_end; .process_start for an image it
 *      starts (PROCESS_START, EXEC);
 *   3. .event, when the consumer asked for the event's type.
 * At the end of the trace (or once every consumer said it needs no more
 * events, see ht__pass_stop_at()) the blocks and ranges still live are given
 * to .life and .commit with free_ts / decommit_ts == HT_TS_NEVER, oldest
 * first, then every .end is called, in the order the consumers were added.
 *
 * Adding an output: write a consumer (a static const struct ht__consumer
 * and a context), ht__pass_add() it next to the others; nothing else reads
 * the trace. docs/architecture.md shows where the consumers live.
 *
 * Example:
 *
 *     static int count_frees(void *ctx, struct ht__pass *p, const struct ht__life *l)
 *     { if (l->free_ts != HT_TS_NEVER) ++*(uint64_t *)ctx; return 0; }
 *     static const struct ht__consumer frees = {.name = "frees", .life = count_frees};
 *
 *     struct ht__pass *p;
 *     uint64_t n = 0;
 *     if ((rc = ht__pass_new(&p, reader)) < 0) ...;
 *     ht__pass_add(p, &frees, &n);
 *     ht__pass_add(p, ht__agg_consumer(), agg);    // and as many more as needed
 *     rc = ht__pass_run(p);                        // reads every event once
 *     ht__pass_free(p);
 *
 * Not thread-safe; the reader must outlive the pass.
 */
#ifndef HT_ANALYSIS_PASS_H
#define HT_ANALYSIS_PASS_H

#include <stdbool.h>
#include <stdint.h>

#include "analysis/commit.h"
#include "analysis/lifetime.h"
#include "heaptrail/trace.h"

struct ht__pass;

/* Bit of an event type in ht__consumer.events. */
#define HT_PASS_EV(type) (1u << (type))
_Static_assert(HT_EV__COUNT <= 32, "ht__consumer.events has a bit for each event type");
#define HT_PASS_ALL_EVENTS 0xffffffffu

/*
 * A consumer: every callback may be NULL. Each returns 0 to go on or a
 * negative error (enum ht_error), which stops the pass: ht__pass_run()
 * returns the first error. ctx is the pointer given to ht__pass_add().
 */
struct ht__consumer {
	const char *name; /* for messages */
	/* Event types .event is called for (HT_PASS_EV bits); 0 with no .event. */
	uint32_t events;
	/* Set when the consumer needs the trackers' numbers (ht__pass_life_stats(),
	   ht__pass_commit_stats()) without a .life or .commit callback. */
	unsigned needs; /* HT_PASS_NEED_* */
	/* Before the first event; the reader is at the start of the trace. */
	int (*begin)(void *ctx, struct ht__pass *p);
	int (*event)(void *ctx, struct ht__pass *p, const struct ht_event *ev);
	/* A heap block ended (lifetime.h); only valid during the call. */
	int (*life)(void *ctx, struct ht__pass *p, const struct ht__life *l);
	/* A piece of a committed range ended (commit.h); only valid during the call. */
	int (*commit)(void *ctx, struct ht__pass *p, const struct ht__commit *c);
	/* A process image (index into the reader's process table) started or ended at ts. */
	int (*process_start)(void *ctx, struct ht__pass *p, uint32_t process, uint64_t ts);
	int (*process_end)(void *ctx, struct ht__pass *p, uint32_t process, uint64_t ts);
	/* After the last callback of the trace; ht__pass_end_ts() is final. */
	int (*end)(void *ctx, struct ht__pass *p);
};

#define HT_PASS_NEED_LIFE 0x1u	 /* keep the lifetime tracker */
#define HT_PASS_NEED_COMMIT 0x2u /* keep the commit map */
/* The consumer's .life is only for blocks never freed (free_ts HT_TS_NEVER,
   or at_exit set), and ignores the others: when every .life says so (and
   the trace is not sampled), the tracker makes no call for a freed block. */
#define HT_PASS_LIFE_UNFREED 0x4u
/* The consumer's .life reads no alloc_ts and takes blocks ending at once in
   any order: when every .life says so (and the trace is not sampled: its
   estimates draw by alloc_ts), the tracker keeps no times
   (ht__life_no_times(): jq's analyze 14 MB less). */
#define HT_PASS_LIFE_NO_TS 0x8u
/* The consumer's .life reads no tid, func or from_realloc: when every .life
   says so, the tracker tells blocks apart by heap and process only
   (ht__life_no_caller(): those three are 0). */
#define HT_PASS_LIFE_NO_CALLER 0x10u

/* A pass over reader r. Returns 0 or HT_ERR_NOMEM. */
int ht__pass_new(struct ht__pass **out, struct ht_reader *r);

/*
 * Register a consumer (c must outlive the pass; ctx is its state). Returns
 * the consumer's id (>= 0), for ht__pass_stop_at(), or HT_ERR_NOMEM.
 */
int ht__pass_add(struct ht__pass *p, const struct ht__consumer *c, void *ctx);

/*
 * Consumer id needs no event at or after ts (its window ends there). Once
 * every consumer has such a limit the pass stops reading at the highest; the
 * blocks and ranges live then are ended as at the end of the trace (which
 * changes nothing for a window that ended before). Until the pass stops, a
 * consumer past its limit still gets .life, .commit and .process_* calls
 * (for ends after its window) but no .event.
 */
void ht__pass_stop_at(struct ht__pass *p, int id, uint64_t ts);

/*
 * Heap snapshot traces (HT_TRACEF_SNAPSHOT) hold no allocation events, only
 * snapshots (HT_EV_SNAPSHOT): the pass delivers one of them, number n (0:
 * the last, the default), as synthetic blocks: at the snapshot's time, for
 * each stack of each process, live-count ALLOC events (sizes differing by at
 * most 1, summing to its live bytes) go to the lifetime tracker and to
 * .event, so every consumer sees the snapshot as the blocks live at the end
 * of the trace. ht__pass_run() returns HT_ERR_NOT_FOUND when there is no
 * snapshot n. No effect on other traces.
 */
void ht__pass_snapshot(struct ht__pass *p, uint32_t n);
#define HT_PASS_SNAPSHOT_NONE UINT32_MAX /* none: the events as stored (dump) */

/* The n every pass made from now on starts with (the commands' --snapshot N). */
void ht__pass_default_snapshot(uint32_t n);

/* How many snapshots trace r holds (0: not a heap snapshot trace); reads
   it through and rewinds. 0 or a reader error. */
int ht__pass_snapshot_count(struct ht_reader *r, uint32_t *n);

/* The snapshot delivered (after ht__pass_run(): its number, 0 for none) and
   its time. */
uint32_t ht__pass_snapshot_taken(const struct ht__pass *p, uint64_t *ts);

/* Progress: called about every 65536 events with the ts of the last event
   and the trace's duration (0 when unknown). */
typedef void (*ht__pass_progress_fn)(void *ctx, uint64_t ts, uint64_t duration);
void ht__pass_progress(struct ht__pass *p, ht__pass_progress_fn fn, void *ctx);

/*
 * Rewind the reader and read the trace once, calling the consumers as the
 * top of this file says. Can be called once. Returns 0, a negative error of
 * the reader, HT_ERR_NOMEM, or the first error a consumer returned.
 */
int ht__pass_run(struct ht__pass *p);

/* ---- for consumers, during the run ---- */

struct ht_reader *ht__pass_reader(const struct ht__pass *p);

/*
 * The end of the trace as known so far: the latest event time or the
 * duration the trace states, whichever is later; final in .end.
 */
uint64_t ht__pass_end_ts(const struct ht__pass *p);

/* The lifetime tracker's numbers (zeros when no consumer needs it). */
const struct ht__life_stats *ht__pass_life_stats(const struct ht__pass *p);

/* The commit map's totals, and one process image's (zeros when no consumer needs it). */
const struct ht__commit_stats *ht__pass_commit_stats(const struct ht__pass *p);
void ht__pass_commit_process_stats(const struct ht__pass *p, uint32_t process,
				   struct ht__commit_stats *out);

/*
 * Sampled traces (ht_trace_info.sample_rate, docs/trace-format.md): the
 * pass hands every consumer estimates, here and nowhere else. A heap
 * event's size and old_size, and each life's size, are the bytes the
 * sampled blocks stand for; a life's count is how many blocks. 0 when
 * the trace recorded every allocation (and nothing is scaled).
 */
uint64_t ht__pass_sample_rate(const struct ht__pass *p);

/*
 * During .event: how many allocations the event stands for (an allocation
 * or realloc: the new block's; a free: the freed block's); 1 when not
 * sampled. Counting calls, add this instead of 1.
 */
uint64_t ht__pass_event_count(const struct ht__pass *p);

/* Whether the event .event is given is one of a heap snapshot's synthetic
   blocks (ht__pass_snapshot()), which the trace does not hold: counting
   the trace's events, leave it out. */
bool ht__pass_synthetic(const struct ht__pass *p);

/* Events read so far. */
uint64_t ht__pass_events(const struct ht__pass *p);

void ht__pass_free(struct ht__pass *p);

/*
 * The end of the trace before any pass, for consumers that size their
 * output by it (points of a series, a whole-trace window): the duration a
 * finished trace states; an unfinished trace (no footer) is read through
 * once to find its last event, then rewound. Returns 0 or a reader error.
 */
int ht__pass_trace_end(struct ht_reader *r, uint64_t *end);

#endif
