/*
 * commit.h - committed memory from mapping events, the Linux counterpart of
 * VirtualAlloc commit/decommit (DESIGN.md): an address-range map per process
 * that follows mmap, munmap, mremap, mprotect and brk, and reports the
 * lifetime of every committed range. 'heaptrail info' takes committed peaks
 * from it and 'heaptrail table commit' its lifetimes.
 *
 * The rules:
 *   - mmap with PROT_WRITE and MAP_PRIVATE|MAP_ANONYMOUS commits its range;
 *     an anonymous private PROT_NONE mapping is reserved; other mappings
 *     (files, shared memory, read-only) are tracked but never committed.
 *   - mprotect to a writable protection commits the reserved parts of the
 *     range and the parts no mapping event told us about (mapped before the
 *     trace, or by code we do not see); file and shared parts stay as they
 *     are. mprotect to PROT_NONE decommits the committed parts (they become
 *     reserved). Other protections change nothing.
 *   - munmap decommits and forgets its range, splitting ranges it cuts.
 *   - mremap moves the pieces of the old range to the new address, keeping
 *     their commit time and stack; what it cuts off decommits; what it grows
 *     is a new committed range when the old mapping was committed (or
 *     unknown), reserved when it was reserved.
 *   - brk growth by the program commits [old break, new break); a shrink
 *     decommits what it releases.
 *   - A mapping over a range that is still mapped (MAP_FIXED, or an mremap
 *     target) first decommits what was there.
 *   - Ranges the session found in /proc/PID/maps (HT_EVF_UNSEEN): an mmap
 *     commits, like an mprotect to writable, only the parts no hooked event
 *     accounts for (gaps and reserved parts); a munmap ends only the ranges
 *     such mmaps committed. A hooked event over a found range replaces it,
 *     except a hooked mmap without MAP_FIXED: it cannot replace a mapping,
 *     so the found range was this one, read from the map before its record
 *     was stamped; it is dropped without a lifetime or a second commit.
 *   - Failed calls (HT_EVF_FAILED) change nothing. Lengths are rounded up to
 *     4 KiB pages.
 *
 * A piece of a committed range that ends is reported as its own lifetime: a
 * munmap of the middle of a committed range reports the middle (with the
 * range's commit time and stack) and leaves two ranges, each reported when it
 * ends. Sizes of the reported lifetimes therefore add up to the committed
 * bytes, and a range's identity is (process, addr) at the time it ends.
 *
 * Process exit and exec (ht__commit_end_process, called by the trace pass,
 * pass.h): the image's committed ranges end there, with at_exit set, because
 * the kernel released them, and stop counting in the committed totals; heap
 * blocks follow the same rule (ht__life_end_process). Ranges still committed
 * at the end of the trace are reported by ht__commit_finish() with
 * decommit_ts == HT_TS_NEVER.
 *
 * Memory grows with the number of live ranges. Each process keeps a sorted
 * array of ranges, so one operation costs O(log n) plus a move of the tail:
 * fine for the thousands of mappings programs make, not for millions.
 * Not thread-safe: one tracker per thread.
 *
 * Example:
 *
 *     static void on_commit(void *ctx, const struct ht__commit *c) { ... }
 *     struct ht__commit_tracker *ct = ht__commit_new(on_commit, ctx);
 *     while (ht_reader_next(r, &ev) > 0)   // or better, a consumer of pass.h
 *         if (ht__commit_event(ct, &ev) < 0) ...;
 *     ht__commit_finish(ct);   // reports ranges still committed
 *     ht__commit_free(ct);
 */
#ifndef HT_ANALYSIS_COMMIT_H
#define HT_ANALYSIS_COMMIT_H

#include <stdint.h>

#include "analysis/lifetime.h" /* HT_TS_NEVER */
#include "base/vec.h"
#include "heaptrail/trace.h"

/* One committed range from its commit to its decommit (or the end). */
struct ht__commit {
	uint64_t addr;
	uint64_t size;
	uint64_t commit_ts;
	uint64_t decommit_ts; /* HT_TS_NEVER: still committed at the end */
	uint32_t process;
	uint32_t stack; /* stack of the event that committed it */
	int32_t tid;
	uint8_t func;	 /* enum ht_func of the committing call (mmap, mprotect, brk, ...) */
	uint8_t at_exit; /* decommit_ts is its process image's exit or exec */
	uint8_t unseen;	 /* committed by an HT_EVF_UNSEEN mmap (found in /proc/PID/maps) */
};

/* Called once per ended piece; the struct is only valid during the call. */
typedef void (*ht__commit_fn)(void *ctx, const struct ht__commit *c);

struct ht__commit_stats {
	uint64_t committed_bytes; /* now (processes that ended count 0) */
	uint64_t peak_bytes;	  /* highest committed_bytes so far */
	uint64_t peak_ts;	  /* when it was first reached */
	uint64_t commits;	  /* operations that committed new bytes */
	uint64_t commit_bytes;	  /* bytes newly committed, summed over them */
	uint64_t ranges;	  /* committed ranges live now */
};

struct ht__commit_tracker;

/* New tracker; on_end (may be NULL) is called as pieces end. NULL when out of memory. */
struct ht__commit_tracker *ht__commit_new(ht__commit_fn on_end, void *ctx);

/*
 * Feed one event, in trace order. MMAP, MUNMAP, MREMAP, MPROTECT and BRK
 * matter; every other event is ignored (process ends come through
 * ht__commit_end_process()). Returns 0 or HT_ERR_NOMEM.
 */
int ht__commit_event(struct ht__commit_tracker *t, const struct ht_event *ev);

/*
 * Process image process ended at ts: its committed ranges end there, oldest
 * first, with at_exit set, and its bytes leave the totals (its own stats
 * keep what it had at its end). Said twice, the second call does nothing.
 */
void ht__commit_end_process(struct ht__commit_tracker *t, uint32_t process, uint64_t ts);

/* Reports every range still committed (decommit_ts == HT_TS_NEVER), oldest first. */
void ht__commit_finish(struct ht__commit_tracker *t);

/*
 * Calls fn for every range committed now (decommit_ts == HT_TS_NEVER), of
 * the processes that have not ended, in no particular order; changes
 * nothing. The flight recorder's state at a window's start (docs/modes.md).
 */
void ht__commit_each_live(const struct ht__commit_tracker *t, ht__commit_fn fn, void *ctx);

/* Totals over all processes. */
const struct ht__commit_stats *ht__commit_stats(const struct ht__commit_tracker *t);

/*
 * The same for one process index; a process never seen has all zeros. For a
 * process that ended, committed_bytes is what it had at its end.
 */
void ht__commit_process_stats(const struct ht__commit_tracker *t, uint32_t process,
			      struct ht__commit_stats *out);

void ht__commit_free(struct ht__commit_tracker *t);

/*
 * The commits already counted. A range decommitted in pieces gives several
 * lifetimes of one commit (same process, thread, commit time and stack):
 * the tables and the report count every piece's bytes but the commit once
 * in Count, and this set says which piece is a further one.
 */
struct ht__commit_seen {
	struct ht__commit_key *keys;
	size_t len, cap;
	struct ht__hindex ix;
};

/* 1 when c's commit was seen before, 0 when new (now remembered), or HT_ERR_NOMEM. */
int ht__commit_seen(struct ht__commit_seen *s, const struct ht__commit *c);

void ht__commit_seen_release(struct ht__commit_seen *s);

#endif
