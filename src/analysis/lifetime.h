/*
 * lifetime.h - turns the event stream into heap allocation lifetimes: for each
 * block, who allocated it (process, thread, heap, stack), its size, when it was
 * allocated and when it was freed. Every front end (info, analyze, table,
 * timeline, report) builds on this instead of matching frees itself.
 *
 * Memory grows with the number of live blocks, never with the event count.
 * Not thread-safe: one tracker per thread.
 */
#ifndef HT_ANALYSIS_LIFETIME_H
#define HT_ANALYSIS_LIFETIME_H

#include <stdint.h>

#include "heaptrail/trace.h"

#define HT_TS_NEVER UINT64_MAX

/* One heap block from its allocation to its free (or the end of the trace). */
struct ht__life {
	uint64_t heap;
	uint64_t addr;
	/*
	 * Bytes, and how many blocks this one stands for: size and 1, except
	 * in a sampled trace, where the trace pass (pass.h) makes them the
	 * estimates of the allocations the sample stands for (and block_size
	 * keeps the sampled block's own size, for size filters).
	 */
	uint64_t size;
	uint64_t count;
	uint64_t block_size;
	uint64_t alloc_ts;
	uint64_t free_ts; /* HT_TS_NEVER: still live at the end */
	uint32_t process;
	uint32_t stack;
	int32_t tid;
	uint8_t func;	      /* enum ht_func of the allocating call */
	uint8_t from_realloc; /* the block was made by a realloc call */
	uint8_t freed_by_realloc;
	/* Freed before its thread allocated again (set by temporary.h's
	   tracker for the consumers that run one; 0 otherwise). */
	uint8_t temporary;
	/* Never freed: free_ts is when its process image exited or exec'd
	   (ht__life_end_process), the moment the kernel took the memory back. */
	uint8_t at_exit;
};

/*
 * Called once per block: when it is freed (free, realloc that moved or shrank
 * it to 0, heap destroy), when its process image ends (ht__life_end_process,
 * with at_exit set) and, for blocks still live at the end of the trace, from
 * ht__life_finish() with free_ts == HT_TS_NEVER. The struct is only valid
 * during the call.
 */
typedef void (*ht__life_fn)(void *ctx, const struct ht__life *life);

struct ht__life_stats {
	uint64_t unknown_frees; /* frees of blocks never seen allocated (attach, untraced) */
	uint64_t live_count;	/* blocks live now */
	uint64_t live_bytes;
	/* A fork child's frees of blocks its parent held at the fork
	   (ht__life_fork()): neither unknown nor a life. */
	uint64_t inherited_frees;
};

struct ht__life_tracker;

/* New tracker; on_end is called as blocks end. Returns NULL when out of memory. */
struct ht__life_tracker *ht__life_new(ht__life_fn on_end, void *ctx);

/*
 * Event times are multiples of unit_ns (the trace's ts_unit_ns): the
 * tracker keeps a block's time in 4 bytes as a count of units from the
 * first block of its heap page, and a time that does not fit that (any, with
 * the default unit 1 ns, more than 4.3 s after it) in 8 bytes aside. Call
 * before the first event.
 */
void ht__life_ts_unit(struct ht__life_tracker *t, uint64_t unit_ns);

/*
 * Feed one event, in trace order. Events other than alloc, realloc, free and
 * heap destroy are ignored, process exit and exec too: which image an event
 * ends is the trace pass's rule (pass.h), which calls ht__life_end_process().
 * Returns 0 or HT_ERR_NOMEM.
 */
int ht__life_event(struct ht__life_tracker *t, const struct ht_event *ev);

/* ht__life_event()'s allocation (ev->addr not 0) and free of addr, for a
   caller that knows the type (ht__life_heap_event()). */
int ht__life_alloc(struct ht__life_tracker *t, const struct ht_event *ev, int from_realloc);
void ht__life_free_block(struct ht__life_tracker *t, const struct ht_event *ev, uint64_t addr,
			 int by_realloc);

/* ht__life_event() with its commonest cases, malloc's and free's, inline
   (the trace pass's loop: 4 million calls on alloc_loop). */
static inline int ht__life_heap_event(struct ht__life_tracker *t, const struct ht_event *ev)
{
	if (ev->type == HT_EV_ALLOC && ev->addr)
		return ht__life_alloc(t, ev, 0);
	if (ev->type == HT_EV_FREE) {
		if (ev->addr)
			ht__life_free_block(t, ev, ev->addr, 0);
		return 0;
	}
	return ht__life_event(t, ev);
}

struct ht__pass;

/* What ht__life_heap_run() calls for the events a caller takes, with its
   ctx and arg: a consumer's .event (pass.h), called straight. 0 to go on,
   or an error that stops the run. */
typedef int (*ht__life_ev_fn)(void *ctx, struct ht__pass *arg, const struct ht_event *ev);

/*
 * ht__life_heap_event() for each event of ev[0..n) in turn, up to the first
 * whose type is above HT_EV_FREE or whose ts is at or after stop, and after
 * each whose type has its bit (1 << type) in types, fn(ctx, arg, ev): the trace
 * pass's loop over a batch's heap events, with the tracker's registers
 * saved once a run instead of once an event (jq: 3.4 million allocations
 * and as many frees). *max_ts is raised to the latest ts it took. Returns
 * how many events it took (an event whose tracker or fn failed is taken),
 * and in *rc 0 or the first error.
 */
uint32_t ht__life_heap_run(struct ht__life_tracker *t, const struct ht_event *ev, uint32_t n,
			   uint64_t stop, uint64_t *max_ts, uint32_t types, ht__life_ev_fn fn,
			   void *ctx, struct ht__pass *arg, int *rc);

/*
 * Process image process ended at ts (exit, or replaced by exec): every block
 * of it still live ends there, oldest first, with at_exit set: the one rule
 * for memory a process never gave back, the same as for committed ranges
 * (ht__commit_end_process). Returns 0 or HT_ERR_NOMEM.
 */
int ht__life_end_process(struct ht__life_tracker *t, uint32_t process, uint64_t ts);

/* A block by heap and address. */
struct ht__life_addr {
	uint64_t heap, addr;
};

/*
 * Fork children (docs/processes.md). Image child was forked from image
 * parent: it holds a copy of every block the parent held then, which stays
 * the parent's allocation. A free by the child of a block it does not hold
 * itself is one of those when the parent holds the block now, freed it
 * while it had fork children (ht__life_note_free()), held it at its end,
 * or held it of its own parent (a grandchild, and so on): counted in
 * inherited_frees (once a block), neither an unknown free nor a life.
 * Nothing is copied at the fork. Returns 0 or HT_ERR_NOMEM.
 */
int ht__life_fork(struct ht__life_tracker *t, uint32_t parent, uint32_t child);

/* Parent has one more fork child that will start later (its first event,
   ht__life_fork()): from now on its frees are noted, and its blocks kept
   at its end, for that child too. */
void ht__life_fork_expect(struct ht__life_tracker *t, uint32_t parent);

/* A heap event (free, realloc) of the trace, after ht__life_event(): a
   block freed by a process whose fork children may still hold it is noted
   (a set of the addresses it freed, which its heap reuses). 0 or
   HT_ERR_NOMEM. */
int ht__life_note_free(struct ht__life_tracker *t, const struct ht_event *ev);

/* Reports every block still live (free_ts == HT_TS_NEVER), oldest first, and
   empties the tracker; ht__life_stats() keeps counting them as live at the end. */
void ht__life_finish(struct ht__life_tracker *t);

/* Calls fn for every block live now (free_ts == HT_TS_NEVER), in no
   particular order; changes nothing. The flight recorder's state at a
   window's start (docs/modes.md). */
void ht__life_each_live(const struct ht__life_tracker *t, ht__life_fn fn, void *ctx);

/* From now on on_end is called only for blocks never freed: those ended
   with their process image (at_exit) and by ht__life_finish(); a freed
   block is forgotten without a call. */
void ht__life_unfreed_only(struct ht__life_tracker *t);

/*
 * Call before the first event: no reader of the blocks' alloc_ts, nor of the
 * order blocks end in at once (an image's end, a heap destroyed, the
 * finish), so the tracker keeps no times: 4 bytes a live block instead of
 * 8. alloc_ts is then a time at or before the block's allocation (that of
 * the first block of its heap page), and blocks ending at once end in the
 * order of their pages, not sorted.
 */
void ht__life_no_times(struct ht__life_tracker *t);

/*
 * Call before the first event: no reader of the blocks' tid, func or
 * from_realloc, so the tracker tells blocks apart by heap and process only
 * (fewer owners to find per allocation); those three are 0 in every
 * struct ht__life it gives.
 */
void ht__life_no_caller(struct ht__life_tracker *t);

const struct ht__life_stats *ht__life_stats(const struct ht__life_tracker *t);

void ht__life_free(struct ht__life_tracker *t);

#endif
