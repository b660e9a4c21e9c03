/*
 * ring_keep.h - the flight recorder's keeper (docs/modes.md): a session sink
 * that keeps only the newest events in a bounded FIFO of blocks, applies the
 * events it drops to a model of the state at the window's start (live heap
 * blocks, committed ranges, processes, modules, heaps, threads, RSS), and on
 * request writes the window as a self-consistent trace: that state as a
 * synthetic prefix, then the kept events.
 *
 * Typical use (what cmd_record.c does with --ring):
 *
 *     struct ht__ring_keep *k;
 *     struct ht__ring_keep_config rc = {.max_bytes = 64 << 20};
 *     ht__ring_keep_new(&k, &rc);
 *     ht__session_set_sink(s, ht__ring_keep_sink(), k);
 *     ... ticks; on SIGUSR1 or a crash: ht__ring_keep_write(k, s, &out, meta, &res) ...
 *     ht__ring_keep_free(k);
 *
 * Not thread-safe: the thread driving the session drives its keeper.
 */
#ifndef HT_SESSION_RING_KEEP_H
#define HT_SESSION_RING_KEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/output.h"
#include "format/writer.h"
#include "session/session.h"

/* The smallest --ring: 16 blocks of 4 KiB. */
#define HT__RING_KEEP_MIN (64u << 10)
/* The size limit of a --ring-time window given without --ring. */
#define HT__RING_KEEP_TIME_CAP (256ull << 20)

struct ht__ring_keep_config {
	uint64_t max_bytes; /* the kept events' blocks take at most this (>= HT__RING_KEEP_MIN) */
	uint64_t max_ns;    /* > 0: blocks whose newest event is this much older than the
			       newest event are dropped too */
};

/* The keeper's own accounting (what the tests assert on). */
struct ht__ring_keep_stats {
	uint64_t block_size;	  /* bytes per block */
	uint64_t bytes;		  /* the blocks held now (block_size each) */
	uint64_t peak_bytes;	  /* the most ever held: never above max_bytes */
	uint64_t events;	  /* events in the window now */
	uint64_t dropped;	  /* events dropped before it (applied to the state) */
	uint64_t window_start_ns; /* the first kept event's time once some were dropped, else 0 */
	uint64_t state_blocks;	  /* heap blocks live at the window's start */
	uint64_t state_ranges;	  /* committed ranges at the window's start */
};

/* What one written window holds. */
struct ht__ring_keep_result {
	uint64_t events;    /* kept events written */
	uint64_t synthetic; /* prefix events made from the state */
	uint64_t dropped;
	uint64_t window_start_ns;
};

struct ht__ring_keep;

/* 0, HT_ERR_INVALID (limits) or HT_ERR_NOMEM. */
int ht__ring_keep_new(struct ht__ring_keep **out, const struct ht__ring_keep_config *cfg);

/* The sink; its ctx is the keeper. Definitions stay in the session. */
const struct ht__sink *ht__ring_keep_sink(void);

const struct ht__ring_keep_stats *ht__ring_keep_stats(struct ht__ring_keep *k);

/*
 * A traced process that died by a crash signal (SIGSEGV, SIGBUS, SIGILL,
 * SIGFPE, SIGABRT, SIGTRAP, SIGSYS) since the last call: its pid (and the
 * signal in *sig), once per crash; 0 when none.
 */
int32_t ht__ring_keep_take_crash(struct ht__ring_keep *k, int *sig);

/*
 * Write the window as a trace into o (opened with format/output.h): o is
 * committed on success and aborted on failure, consumed either way. meta is what
 * the full trace would get (start time and host are filled in); the losses
 * so far are the session's. The session and the keeper go on unchanged.
 * 0 or a negative enum ht_error.
 */
int ht__ring_keep_write(struct ht__ring_keep *k, struct ht__session *s, struct ht__output *o,
			struct ht__trace_meta meta, struct ht__ring_keep_result *res);

void ht__ring_keep_free(struct ht__ring_keep *k);

/* Where an extra window goes: output with tag before its .htr
   (app.htr -> app.TAG.htr), or after it ("out" -> "out.TAG"). */
void ht__ring_keep_path(char *out, size_t n, const char *output, const char *tag);

#endif
