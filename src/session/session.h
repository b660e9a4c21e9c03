/*
 * session.h - the collector: creates the shared-memory file the recorders write
 * into (src/base/protocol.h), drains their rings in time order, turns ring
 * records into trace events, tracks processes, modules and stacks, samples RSS
 * and resolves symbols at the end. `heaptrail record` drives it; named
 * background sessions (`heaptrail start/stop`) reuse it.
 *
 * The session does not know the trace file: it hands definitions and events to
 * a sink (struct ht__sink). ht__sink_writer() makes a sink that writes through
 * src/format/writer.h; tests pass their own sink to see the events directly.
 *
 * Typical use (what cmd_record.c does):
 *
 *     struct ht__session *s;
 *     struct ht__session_config cfg = HT__SESSION_CONFIG_INIT;
 *     rc = ht__session_create(&s, &cfg);          // file + header, state RUNNING
 *     // fork; the child gets HT_ENV_SESSION=ht__session_path(s) and execs
 *     ht__session_set_root(s, child_pid);
 *     ht__session_set_sink(s, &sink, ctx);
 *     while ((rc = ht__session_tick(s)) == 0)     // drains, ~every 10 ms
 *         usleep(ht__session_sleep_us(s));
 *     rc = ht__session_finish(s, progress, ctx);  // last drain + symbols
 *     ht__session_stats(s)->...                   // events, lost, duration
 *     ht__session_destroy(s);                     // removes the file
 *
 * Thread-safety: one thread drives a session. ht__session_stop() alone may be
 * called from a signal handler or another thread.
 */
#ifndef HT_SESSION_SESSION_H
#define HT_SESSION_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format/output.h"
#include "format/writer.h"
#include "heaptrail/trace.h"

#define HT__RING_SIZE_DEFAULT (1u << 20)
#define HT__RING_COUNT_DEFAULT 512u
#define HT__TICK_NS 10000000ull	   /* drain period: 10 ms */
#define HT__FLUSH_NS 1000000000ull /* sink flush period: 1 s */

/*
 * Where definitions and events go, in the order a trace writer needs them: a
 * module, frame or stack is always defined before the first event using its
 * id; events come in time order (ts in ns since t0); symbols come last, from
 * ht__session_finish(). Every callback returns 0 or a negative enum ht_error,
 * which stops the session with that error. symbols may be NULL.
 *
 * flush (may be NULL) makes what was handed over so far durable and
 * readable: the session calls it between ticks, at most every HT__FLUSH_NS
 * and only when events came since the last call, so that a collector killed
 * with SIGKILL leaves a trace that reaches about a second before its death.
 * What it has been given then is a whole prefix: in time order, with every
 * definition before its first use. Not more often: each flush closes a
 * chunk, and a chunk starts its address prediction afresh.
 */
struct ht__sink {
	int (*module)(void *ctx, uint32_t id, const char *path, const uint8_t *build_id,
		      uint32_t build_id_len);
	int (*frame)(void *ctx, uint32_t id, uint32_t module, uint64_t rel);
	int (*stack)(void *ctx, uint32_t id, const uint32_t *frames, uint32_t n);
	int (*event)(void *ctx, const struct ht_event *ev, const struct ht_process *proc);
	int (*symbols)(void *ctx, uint32_t frame, const struct ht__symbol *syms, uint32_t n);
	int (*flush)(void *ctx);
	/* The loss fields of struct ht_process for process index `process`,
	   from ht__session_finish() after the symbols (may be NULL). */
	int (*loss)(void *ctx, uint32_t process, const struct ht_process *loss);
	/* Has what was handed over so far written out (may be NULL): called
	   before the collector sleeps, so that a writer compressing on a thread
	   of its own does not hold a finished chunk while the collector is
	   idle (a collector killed then would lose it). */
	int (*settle)(void *ctx);
	/* A hint (may be NULL): allocations or frees of the heap blocks at
	   addr[0 .. n - 1] come a few events from now (the merge looks ahead).
	   Returns whether hints pay now (n may be 0 to ask). */
	bool (*prefetch)(void *ctx, const uint64_t *addr, uint32_t n);
	/* An allocation or free of the process heap (may be NULL: event then
	   takes it as a struct ht_event). */
	int (*heap_event)(void *ctx, const struct ht__heap_event *ev);
	/* Plain allocations and frees ev[0 .. n - 1] (malloc and free, no
	   flags) of one thread, in order (may be NULL: heap_event then takes
	   them one at a time). */
	int (*heap_plain)(void *ctx, uint32_t process, int32_t pid, int32_t tid,
			  const struct ht__heap_plain *ev, uint32_t n);
	/* Every event has been handed over (may be NULL): what is pending may
	   go on its way to the file without the caller waiting for it (a
	   writer compressing on a thread of its own starts on its last
	   chunk). ht__session_finish() calls it before the symbols and no
	   event callback after it. */
	int (*hand_over)(void *ctx);
};

/* A sink writing to w (ctx is the struct ht__writer *). */
const struct ht__sink *ht__sink_writer(void);

struct ht__session;
/*
 * Starts the trace in the output o (opened with format/output.h; its
 * descriptor becomes the writer's and the file takes its name) and makes its
 * writer session s's sink: the one
 * place a trace's metadata is completed. The caller gives what it knows in
 * meta (stack mask, time unit, flags, command); start_realtime_ns (the
 * realtime clock at the session's t0) and hostname are filled here. *out is
 * the writer, to finish or abort after ht__session_run(). 0 or a negative
 * enum ht_error (the session is left without a sink).
 */
int ht__session_open_trace(struct ht__session *s, struct ht__output *o, struct ht__trace_meta meta,
			   struct ht__writer **out);

/* The session's part of a trace's metadata: start_realtime_ns (the realtime
   clock at t0) and hostname (into host, n bytes). */
void ht__session_meta_fill(struct ht__session *s, struct ht__trace_meta *meta, char *host,
			   size_t n);

struct ht__session_config {
	const char *dir;      /* NULL: ht__session_default_dir() */
	const char *name;     /* file name in dir; NULL: a unique "session-PID-XXXXXX" */
	uint32_t ring_size;   /* power of two >= 4096; 0: 1 MiB */
	uint32_t ring_count;  /* 1 .. 65536; 0: 512 */
	uint32_t flags;	      /* HT_SHM_LOSSY, HT_SHM_NO_FOLLOW */
	uint32_t stack_mask;  /* HT_STK_* */
	uint64_t sample_rate; /* ht__shm_header.sample_rate: 0 records every allocation */
	uint64_t sample_seed; /* with HT_SHM_SEEDED in flags: the recorders' seed */
	bool reap_children;   /* waitpid() any child each tick (the launcher, a subreaper) */
	bool sample_rss;      /* emit HT_EV_RSS for live traced processes, when it changes */
	bool end_when_gone;   /* without a root (attach): end once the processes seen
				 have all exited and every ring is back */
	bool sample_maps;     /* with each RSS sample, report the mappings no hook saw
				 (HT_EVF_UNSEEN; docs/session-protocol.md) */
	/* Heap snapshot mode (HT_SHM_SNAPSHOT in flags): a snapshot every
	   snapshot_interval_ns (0: only when asked and at the end), and room for
	   snapshot_stacks stack ids (0: HT_SNAP_CAP_DEFAULT). */
	uint64_t snapshot_interval_ns;
	uint32_t snapshot_stacks;
	/* Stamp with CLOCK_MONOTONIC even where the TSC is invariant (also
	   HEAPTRAIL_CLOCK=monotonic in the collector's environment). */
	bool clock_monotonic;
};

#define HT__SESSION_CONFIG_INIT                                                                    \
	{                                                                                          \
		.stack_mask = HT_STK_DEFAULT, .reap_children = true, .sample_rss = true,           \
		.sample_maps = true                                                                \
	}

/* What the session counted; valid until ht__session_destroy(). */
struct ht__session_stats {
	uint64_t events;	  /* events handed to the sink */
	uint64_t lost;		  /* the sum of the three below */
	uint64_t lost_lossy;	  /* ring.lost of every ring (lossy mode) */
	uint64_t lost_no_buffer;  /* rings_exhausted */
	uint64_t lost_in_handler; /* reentered */
	uint64_t records;	  /* ring records read (PAD excluded) */
	uint64_t corrupt;	  /* rings whose content did not parse (skipped) */
	uint64_t late;		  /* records older than one already written (stamped
				     as that one): 0 unless the watermark was wrong */
	uint64_t room_waits;	  /* the program waited for ring room (header) */
	uint64_t room_sleeps;	  /* ... long enough to sleep until a drain */
	/* Crashes a recorder found no slot to report (HT_SHM_CRASHES). */
	uint64_t crashes_unreported;
	uint64_t duration_ns;	     /* from t0 to the last event or the stop */
	uint32_t clock;		     /* enum ht__clock the recorders stamped with */
	uint32_t clock_calibrations; /* TSC: recalibrations against CLOCK_MONOTONIC */
	uint64_t clock_error_ns;     /* TSC: the largest distance from CLOCK_MONOTONIC
					found at a recalibration (then corrected) */
	uint32_t processes;	     /* process images seen */
	uint32_t modules, frames, stacks;
	uint32_t frames_symbolized; /* frames with at least a function name */
	/* Frames left unsymbolized because libdw cannot be loaded: why, naming
	   the package (the trace can be symbolized later), or NULL. */
	const char *symbols_missing;
	bool root_exited; /* the launched program was reaped by the session */
	int root_status;  /* its wait status (WIFEXITED/WIFSIGNALED) */
};

struct ht__session;

/*
 * Create the session file (mode 0600, its directory 0700 when created here),
 * size it with ftruncate, map it, fill the header and set state RUNNING.
 * Returns 0 or HT_ERR_INVALID (config), HT_ERR_EXISTS (name taken), HT_ERR_PERM,
 * HT_ERR_IO, HT_ERR_NOMEM. On success *out owns the file until destroy.
 */
int ht__session_create(struct ht__session **out, const struct ht__session_config *cfg);

/*
 * The directory where sessions live by default, into out (n bytes): the first
 * of $XDG_RUNTIME_DIR/heaptrail, /run/heaptrail (root), /tmp/heaptrail-UID
 * whose parent is a tmpfs, else /dev/shm/heaptrail-UID, else the first one.
 * With create, it is made (0700) and checked to be ours and private. For
 * commands that look for named sessions. Returns 0 or a negative error.
 */
int ht__session_default_dir(char *out, size_t n, bool create);

/* Whether a process still runs; see ht__pid_state(). */
enum ht__pid_state {
	HT__PID_ALIVE = 0,
	HT__PID_ZOMBIE = 1, /* exited, not reaped yet: it will never write again */
	HT__PID_GONE = 2,   /* no such process */
};

/*
 * The state of pid from kill(pid, 0) and /proc/PID/stat. A process whose
 * /proc entry cannot be read (hidepid, another user) counts as alive.
 * Shared by everything that waits for traced processes to end.
 */
enum ht__pid_state ht__pid_state(pid_t pid);

/*
 * The signal that killed pid, a zombie, by its exit status in /proc/PID/stat
 * (field 52, Linux 3.5); 0 when it exited or that cannot be read. What its
 * waiter's wait() will say, before anyone waits.
 */
int ht__zombie_signal(pid_t pid);

/* True when pid is a zombie or gone. */
static inline bool ht__pid_exited(pid_t pid)
{
	return ht__pid_state(pid) != HT__PID_ALIVE;
}

/* Path of the shared file: the value of HT_ENV_SESSION for recorders. */
const char *ht__session_path(const struct ht__session *s);

/*
 * Exit notes (docs/session-protocol.md, "A collector killed"): creates
 * TRACE.lost next to the trace at trace_path (emptied, mode 0600, never
 * through a symbolic link) and names it in the header, so that every image
 * appends its counts there when it ends. Returns 0, or a negative ht_error
 * when the file cannot be made (the session runs on without notes).
 * ht__session_notes_done() removes it once the trace is finished: the
 * trace holds everything the notes would tell; ht__session_destroy() too
 * (a session that ends without a trace).
 */
int ht__session_notes(struct ht__session *s, const char *trace_path);
void ht__session_notes_done(struct ht__session *s);

/* The shared header (tests and diagnostics). */
struct ht__shm_header *ht__session_header(struct ht__session *s);

/* CLOCK_MONOTONIC ns of the session start (header t0_ns). */
uint64_t ht__session_t0(const struct ht__session *s);

/*
 * The launched program: written to the header (root_pid) and waited for. A
 * session with a root ends when the root and every traced process have
 * exited; a session without one runs until ht__session_stop(), or with
 * end_when_gone until the processes it saw have all exited.
 */
void ht__session_set_root(struct ht__session *s, pid_t pid);

/* Where events go; without a sink they are counted and dropped. */
void ht__session_set_sink(struct ht__session *s, const struct ht__sink *sink, void *ctx);

/*
 * One collector pass: heartbeat, drain rings, reap children, sample RSS,
 * reclaim rings of dead processes, write what is below the watermark.
 * Returns 0 to be called again, 1 when the session is over (root and traced
 * processes gone, or stop asked), or a negative error from the sink; after
 * an error the recorders are told to stop (state STOPPING) and pass through.
 */
int ht__session_tick(struct ht__session *s);

/*
 * Has the merge taken every record stamped before t (CLOCK_MONOTONIC ns)?
 * A flight recorder's window asked for at t is written once it has, so
 * that it holds every event committed before the request, not only what
 * the last ticks merged (docs/modes.md, "When a window is written").
 */
bool ht__session_merged_past(const struct ht__session *s, uint64_t t);

/* Microseconds to sleep until the next tick is due (0 .. 10000). */
unsigned ht__session_sleep_us(const struct ht__session *s);

/*
 * The recorders stop recording now (state STOPPING: they pass through, and
 * count what passes as untraced); the session goes on draining what they
 * wrote. For a detach that must find the program's threads at a safe point:
 * traced, they spend their time in the recorder and waiting for the drain.
 */
void ht__session_stop_recording(struct ht__session *s);

/* Ask the session to end at its next tick. Async-signal-safe. */
void ht__session_stop(struct ht__session *s);

/* Heap snapshot mode: take a snapshot at the next tick (one is always taken
   at the end). Async-signal-safe (SIGUSR2 to `heaptrail record`). */
void ht__session_snapshot(struct ht__session *s);

/*
 * Progress of symbol resolution: done out of total frames. Called from
 * ht__session_finish() every few frames; the caller decides whether to show it.
 */
typedef void (*ht__progress_fn)(void *ctx, uint64_t done, uint64_t total);

/*
 * End the session: state STOPPING, drain every ring to the end, write the
 * remaining events, resolve symbols of every frame (when symbolize) and hand
 * them to the sink. Does not finish the trace: the caller calls
 * ht__writer_finish() with ht__session_stats(). Returns 0 or a sink error.
 */
int ht__session_finish(struct ht__session *s, bool symbolize, ht__progress_fn progress, void *ctx);

const struct ht__session_stats *ht__session_stats(const struct ht__session *s);

/* Unmap and remove the session file and free everything. NULL is fine. */
void ht__session_destroy(struct ht__session *s);

#endif
