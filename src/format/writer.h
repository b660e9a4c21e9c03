/*
 * writer.h - write a heaptrail trace (.htr). The session uses it while it
 * records; tests use it to build traces with known contents. The bytes are in
 * docs/trace-format.md; this module and reader.c are the only code that knows them.
 *
 * Calls: ht__writer_open(), then any mix of definitions and events in time
 * order, then ht__writer_finish() (or ht__writer_abort()). A definition
 * (module, frame, stack) must come before the first event that uses its id.
 * Events are buffered and written as compressed, checksummed chunks, so a
 * writer that dies leaves a file readable up to its last whole chunk.
 *
 * Not thread-safe: one thread drives a writer.
 */
#ifndef HT_FORMAT_WRITER_H
#define HT_FORMAT_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include "heaptrail/trace.h"

struct ht__writer;

/* What is known when recording starts. Strings are copied. */
struct ht__trace_meta {
	uint64_t start_realtime_ns;
	uint32_t stack_mask;
	uint32_t flags; /* HT_TRACEF_LOSSY, HT_TRACEF_ATTACHED */
	uint32_t argc;
	const char *const *argv; /* the recorded command */
	const char *hostname;
	/*
	 * Event timestamps are stored in units of this many ns, rounded down
	 * (readers get multiples of it); 0 or 1 keeps them exact. Timestamp
	 * deltas are the largest part of a compressed heap trace: 100 ns
	 * (HT__TS_UNIT_DEFAULT, what `heaptrail record` uses) makes the python
	 * benchmark's trace a third smaller than exact times.
	 */
	uint32_t ts_unit_ns;
	/* Why the program cannot be traced (ht_trace_info.untraced), or NULL. */
	const char *untraced;
	/* ht_trace_info.sample_rate: 0, or the rate the recorders sampled at. */
	uint64_t sample_rate;
};

/*
 * The time resolution `heaptrail record` uses unless told otherwise: 100 ns,
 * WPA's tick. Finer costs trace size (timing jitter does not compress);
 * docs/trace-format.md has the measurements. The writer itself keeps times
 * exact when ts_unit_ns is 0.
 */
#define HT__TS_UNIT_DEFAULT 100u
#define HT__TS_UNIT_DEFAULT_STR "100ns"

/* One entry of a frame's symbol information, innermost (most inlined) first. */
struct ht__symbol {
	const char *function; /* demangled, NULL when unknown */
	const char *file;     /* NULL when unknown */
	uint32_t line;
};

/*
 * Create the trace at path, mode 0600. Fails with HT_ERR_EXISTS when the file
 * exists (the CLI decides about overwriting before calling).
 */
int ht__writer_open(struct ht__writer **out, const char *path, const struct ht__trace_meta *meta);

/*
 * The same on an open descriptor, written sequentially (a FIFO or device
 * works): the writer owns fd on success and closes it at finish or abort;
 * on failure it stays the caller's. Commands open outputs with
 * format/output.h first.
 */
int ht__writer_open_fd(struct ht__writer **out, int fd, const struct ht__trace_meta *meta);

/* Module id (0, 1, ... in order of definition): path and build-id bytes. */
int ht__writer_module(struct ht__writer *w, uint32_t id, const char *path, const uint8_t *build_id,
		      uint32_t build_id_len);

/* Physical frame id (0, 1, ...): a return address in a module. */
int ht__writer_frame(struct ht__writer *w, uint32_t id, uint32_t module, uint64_t rel);

/* Stack id (> 0): physical frame ids, innermost first. */
int ht__writer_stack(struct ht__writer *w, uint32_t id, const uint32_t *frames, uint32_t n);

/*
 * An event, with ts in ns since trace start and process set to the process
 * index. PROCESS_START and PROCESS_EXEC events carry the process description
 * in *proc (argv copied); pass NULL for every other type. The writer keeps
 * the process table from these events and writes it at finish.
 */
int ht__writer_event(struct ht__writer *w, const struct ht_event *ev,
		     const struct ht_process *proc);

/*
 * An allocation (HT_EV_ALLOC) or a free (HT_EV_FREE) of the process heap
 * with these fields only, every other field of struct ht_event 0: what
 * nearly every event of a heap trace is. ht__writer_heap_event() writes it
 * as ht__writer_event() writes the struct ht_event it stands for, byte for
 * byte, without that struct to build and look through.
 */
struct ht__heap_event {
	uint8_t type;
	uint8_t func;
	uint16_t flags;
	uint32_t process;
	int32_t pid;
	int32_t tid;
	uint64_t ts;
	uint32_t stack;
	uint64_t addr;
	uint64_t size;
};
int ht__writer_heap_event(struct ht__writer *w, const struct ht__heap_event *ev);

/*
 * A plain allocation (HT_EV_ALLOC with func HT_FN_MALLOC) or free
 * (HT_EV_FREE, HT_FN_FREE), no flags: what the collector makes of nearly
 * every record of a ring. The thread is the run's (ht__writer_heap_plain).
 */
struct ht__heap_plain {
	uint64_t ts;
	uint64_t addr;
	uint64_t size; /* 0 for a free */
	uint32_t stack;
	uint32_t type; /* HT_EV_ALLOC or HT_EV_FREE */
};
/* ht__writer_heap_event() of ev[0 .. n - 1], plain events of one thread
   (process, pid, tid), with 32 bytes an event to fill and read instead of
   48, and the thread and the event's kind looked at once per run
   (docs/performance.md, "The collector's merge, session 24"). */
int ht__writer_heap_plain(struct ht__writer *w, uint32_t process, int32_t pid, int32_t tid,
			  const struct ht__heap_plain *ev, uint32_t n);

/*
 * A hint: allocations or frees of the heap blocks at addr[0 .. n - 1] come
 * soon. Loads the parts of the writer's address map where their events
 * will look, so that the lookups do not wait for memory
 * (docs/performance.md, "The address map with many live blocks"). Changes
 * nothing the writer writes. Returns whether hints pay now: false while the
 * map is small enough to stay in the cache (n may be 0 to ask).
 */
bool ht__writer_prefetch(const struct ht__writer *w, const uint64_t *addr, uint32_t n);

/* Symbols of a physical frame, for the final symbol table (after all events). */
int ht__writer_symbols(struct ht__writer *w, uint32_t frame, const struct ht__symbol *syms,
		       uint32_t n);

/*
 * Write what is pending, the tables and the footer, and close the file.
 * duration_ns and events_lost go into the footer; flags add HT_TRACEF_*
 * (HT_TRACEF_SYMBOLS when symbols were written). Frees w.
 */
int ht__writer_finish(struct ht__writer *w, uint64_t duration_ns, uint64_t events_lost,
		      uint32_t flags);
/* The causes of events_lost (struct ht_trace_info), for the final META. */
void ht__writer_set_losses(struct ht__writer *w, uint64_t lossy, uint64_t no_buffer,
			   uint64_t in_handler);
/* A flight-recorder window (docs/modes.md), for the final META; the trace
   gets HT_TRACEF_WINDOW. */
void ht__writer_set_window(struct ht__writer *w, uint64_t start_ns, uint64_t dropped,
			   uint64_t ring_bytes, uint64_t ring_ns);
/*
 * The events process image `process` did not record (the loss fields of
 * struct ht_process), for the LOSSES table written at finish. 0 or
 * HT_ERR_INVALID for a process the writer has not seen.
 */
int ht__writer_process_loss(struct ht__writer *w, uint32_t process, const struct ht_process *loss);
/* A flag of ht__writer_finish(): the trace stays marked incomplete (a
   rewrite of a trace whose collector never finished it). */
#define HT__FINISH_INCOMPLETE 0x80000000u

/*
 * Raw payload bytes after which an events chunk is closed (default 1 MiB,
 * from 256 bytes to 16 MiB). Tests use small chunks to get many of them.
 */
int ht__writer_set_chunk_size(struct ht__writer *w, uint32_t bytes);
/*
 * Raw payload bytes of the events chunks of a group after which the next
 * chunk starts a new group (default HT__GROUP_BYTES, 8 MiB; up to twice
 * that while an eighth of the group's allocations are live and it made
 * fewer than HT__GROUP_ALLOCS; at most HT__GROUP_CHUNKS_V14 chunks a group
 * whatever the bytes). 0: every chunk on its own, as before version 7.
 * Tests and tests/format/recode compare both.
 */
int ht__writer_set_group_size(struct ht__writer *w, uint32_t bytes);

/* Flush the pending chunk so that a reader sees every event written so far. */
int ht__writer_flush(struct ht__writer *w);

/*
 * Compress and write the events chunks on a thread of the writer's own
 * (started with the first chunk, ended by finish or abort): the encoding
 * of the next chunk goes on meanwhile, and waits only for the chunk
 * before it. Off by default (tests/format/recode measures the writer
 * alone); the collector turns it on. Set before the first chunk ends.
 */
void ht__writer_set_async(struct ht__writer *w, bool on);
/* Waits until the chunks handed to that thread are written (0 at once
   without one); the first error. */
int ht__writer_settle(struct ht__writer *w);
/* Ends the pending events chunk and hands it to that thread (compresses
   it here without one), without waiting for it to be written: the
   collector's end does this before the symbols, which then take their
   time while the last chunk compresses. */
int ht__writer_hand_over(struct ht__writer *w);

/* Close without a footer (the file stays readable up to its last chunk). */
void ht__writer_abort(struct ht__writer *w);

#endif
