/*
 * internal.h - what the files of the session share: the session struct, the
 * per-ring collector state, the process/module/frame/stack tables and the
 * functions that cross files (shm.c, drain.c, translate.c, symbolize.c).
 * Nothing outside src/session/ includes it; the API is session.h.
 */
#ifndef HT_SESSION_INTERNAL_H
#define HT_SESSION_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/protocol.h"
#include "base/vec.h"
#include "session/session.h"
#include "session/symbolize.h"

/*
 * Records the session makes itself (its own waitpid, RSS samples, exits of
 * processes that died unseen). They go through the same merge as ring
 * records, in a queue of their own, so they land in time order too. Types
 * above every protocol type.
 */
#define HT__REC_SELF_RSS 0xf0
/* A range found in (FOUND) or gone from (GONE) /proc/PID/maps (maps.c). */
#define HT__REC_SELF_MAP_FOUND 0xf1
#define HT__REC_SELF_MAP_GONE 0xf2
/* A heap snapshot taken (snapshot.c): h.stack is its number. */
#define HT__REC_SELF_SNAPSHOT 0xf3

/*
 * kind of a PROCESS_EXIT of the session's own making: the image (instance
 * in value) was replaced by exec of a program that is not traced. No exit
 * status is known, and no image follows in the trace.
 */
#define HT__EXIT_UNTRACED_EXEC 0xf0u

struct ht__rec_self_rss {
	struct ht__rec h;
	int32_t pid;
	uint32_t pad;
	uint64_t rss;
};

/* h.func: HT_FN_MAPS_HEAP, HT_FN_MAPS_STACK or HT_FN_MAPS. */
struct ht__rec_self_map {
	struct ht__rec h;
	int32_t pid;
	int32_t tid; /* the thread of a stack, or 0 */
	uint64_t addr;
	uint64_t len;
};

/* One anonymous private writable range of a process, as last read (maps.c). */
struct ht__maprange {
	uint64_t start, end;
	int32_t tid;
	uint8_t func;
};

struct ht__maps {
	struct ht__maprange *v;
	uint32_t n, cap;
	uint64_t next_ns;     /* not read again before */
	uint64_t rss;	      /* the RSS when it was last read; 0: read at the next sample */
	uint32_t stack_tries; /* reads a new stack has waited for its owner */
};

/*
 * A key's 32-bit hash (FNV-1a: keys are short, a path, a pid and instance,
 * a pointer). The session's tables are ht__hindex (base/vec.h) that keep
 * each slot's hash, so a lookup compares a key only when its hash matches.
 */
static inline uint32_t ht__hash_bytes(const void *p, size_t n, uint32_t seed)
{
	const uint8_t *b = p;
	uint32_t h = 2166136261u ^ seed;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 16777619u;
	}
	return h;
}

/* One traced process image (pid + recorder instance); its index is its id. */
struct ht__proc {
	int32_t pid, ppid;
	uint32_t instance;
	uint32_t index; /* process index in the trace */
	uint32_t flags; /* HT_PROCF_* given to the trace */
	uint32_t *mods; /* recorder module index -> trace module id + 1 */
	uint32_t nmods;
	uint64_t rss;		 /* last RSS emitted */
	struct ht__maps maps;	 /* its unseen-mapping state (maps.c) */
	uint64_t gone_ns;	 /* when kill(pid, 0) said ESRCH; 0 before */
	uint64_t image_check_ns; /* when its memory map is next looked at */
	uint64_t unmapped_ns;	 /* first seen without the session mapped; 0: mapped */
	uint64_t mm_fp;		 /* /proc/PID/stat layout of the image seen mapping the
				    session; 0: none yet */
	bool dead;		 /* zombie or gone: its rings can be reclaimed */
	bool replaced;		 /* a later image of the pid exists (exec, pid reuse) */
	bool exited;		 /* its PROCESS_EXIT was written */
	int32_t crash_sig;	 /* the crash signal its recorder reported, 0: none */
	/* Its own exit report, held until it is dead (translate.c,
	   on_exit_rec): exit handlers older than an attach, and stdio's flush,
	   run after it. */
	bool exit_held;
	int32_t held_value; /* the exit code it reported, 8 bits */
};

/* The collector's state of one ring (and of the session's own queue). */
struct ht__slot {
	uint8_t *buf; /* records copied out of the ring, not yet written */
	uint32_t head, tail, cap;
	uint32_t hinted;  /* bytes after head the merge has looked ahead at (merge()) */
	uint64_t last_ts; /* ts of the last record copied */
	uint64_t seen_w;  /* the ring's write_pos at the last drain */
	int32_t pid, tid;
	uint32_t instance;
	uint32_t proc;	    /* process id + 1, 0 until resolved */
	uint64_t stuck_pos; /* write_pos while the writer was seen busy */
	uint64_t stuck_ns;  /* since when it stays busy there, 0: not busy */
	uint32_t clock;	    /* enum ht__clock of its records, from the ring header */
	uint32_t tsc_seg;   /* the clock segment of its last tick (clock.c) */
	bool bound;	    /* pid/tid/instance read from the ring header */
	bool thread_dead;   /* its thread exited without releasing it */
};

/*
 * clock.c: the TSC's conversion to CLOCK_MONOTONIC ns, a continuous line
 * of segments: from tick on, ns + ((t - tick) * mult >> 32).
 */
struct ht__tsc_seg {
	uint64_t tick, ns, mult;
};

struct ht__tsc {
	bool on;		 /* the recorders stamp with the TSC */
	bool pending;		 /* ... and the first slope is not measured yet */
	struct ht__tsc_seg *seg; /* oldest first; the last one is current */
	uint32_t nseg, segcap;
	uint64_t rate_tick, rate_ns;	       /* where the slope is measured from */
	uint64_t next_rate_tick, next_rate_ns; /* the next such point */
	uint64_t start_ns;		       /* the first calibration */
	uint64_t next_ns;		       /* when to recalibrate */
};

struct ht__session {
	struct ht__session_config cfg;
	char *path;
	char *note_path; /* TRACE.lost, the exit notes' file, or NULL */
	uint8_t *map;
	size_t map_size;
	struct ht__shm_header *hdr;
	uint32_t ring_size, ring_count;

	const struct ht__sink *sink;
	void *sink_ctx;
	int sink_err;

	struct ht__slot *slots; /* ring_count + 1: the last is the session's own queue */
	uint32_t *heap;		/* merge heap of slot indices */
	uint64_t next_tick_ns;
	uint64_t full_tick_ns; /* the next tick that looks at processes too */
	uint64_t drain_ns;     /* when the rings were last drained */
	uint64_t drained_max;  /* the most bytes one ring gave that drain */
	double fill_rate;      /* bytes per ns the fastest ring fills (tick_period) */
	bool behind;	       /* a ring was left undrained, or partly (the partial drain) */
	bool room_made;	       /* a ring more than half full drained, or one freed */
	uint64_t merged;       /* records the merge has taken */
	uint64_t merged_to;    /* every record stamped before it is merged */
	uint64_t tick;
	uint64_t now_ns;	   /* CLOCK_MONOTONIC at the start of this tick */
	uint64_t last_ts;	   /* of the last event written, ns since t0 */
	uint64_t lost_freed;	   /* ring.lost of rings already freed */
	uint64_t flush_ns;	   /* when the sink was last asked to flush */
	uint64_t flushed_events;   /* stats.events at that time */
	uint64_t shm_dev, shm_ino; /* the session file, as /proc/PID/maps shows it */
	bool hurry;		   /* a ring was filling up: tick again soon */
	bool rings_scarce;	   /* almost every ring is taken */
	volatile sig_atomic_t stop;
	pid_t root_pid;
	bool finishing;
	uint64_t unborn_since_ns; /* since when the end waits for an unborn child */
	/* Children reaped before any record of theirs was merged (a program
	   shorter than a tick): the image their records make later is dead
	   from the start (translate.c, new_proc()). The newest few, by pid and
	   reap time. */
	struct {
		int32_t pid;
		uint64_t ns;
	} reaped_early[8];
	uint32_t nreaped_early;

	/* processes: by (pid, instance) and the latest image by pid */
	struct ht__proc **procs;
	uint32_t nprocs, procs_cap;
	uint32_t proc_cursor; /* where check_procs() goes on next tick */
	struct ht__hindex proc_by_key, proc_by_pid;

	struct ht__module_ent *mods;
	uint32_t nmods, mods_cap;
	struct ht__hindex mod_tab;

	struct ht__frame_key *frames;
	uint32_t nframes, frames_cap;
	struct ht__hindex frame_ix;

	/* stacks: frame ids of trace stack i at stack_frames[stack_off[i]], stack_len[i] */
	uint32_t *stack_frames;
	uint64_t stack_frames_n;
	size_t stack_frames_cap;
	uint64_t *stack_off;
	uint32_t *stack_len;
	uint32_t nstacks, stacks_cap; /* trace ids 1 .. nstacks */
	uint32_t stack_len_cap;
	struct ht__hindex stack_ix;
	/* The last stack defined, as its record gave it (raw module indices,
	   addresses) with its frame ids and its hash up to each frame, all
	   outermost frame first: the next stack of the same image shares most
	   of its outer frames, whose ids and hash are taken from here. */
	struct ht__session_last_stack {
		const struct ht__proc *proc; /* NULL: nothing to reuse */
		uint32_t n;
		uint32_t mod[HT_MAX_FRAMES];
		uint64_t rel[HT_MAX_FRAMES];
		uint32_t ids[HT_MAX_FRAMES];
		uint64_t hash[HT_MAX_FRAMES]; /* of frames 0 .. k (stack_hash()) */
	} last_stack;
	uint32_t *stack_map;   /* recorder stack id -> trace stack id */
	uint32_t *stack_owner; /* recorder stack id -> its process image + 1 */
	uint32_t stack_map_cap;

	/* heap snapshots (snapshot.c): copies of the stacks' region taken and
	   not yet written, oldest first */
	uint32_t snap_cap;
	volatile sig_atomic_t snap_asked;
	uint32_t snap_seq;	      /* snapshots taken */
	struct ht__proc **snap_exits; /* images whose exit snapshot is yet to take,
					 in the order they exited */
	size_t snap_nexits, snap_exits_cap;
	uint64_t snap_next_ns;
	struct ht__snap_copy *snap_q;
	uint32_t snap_qhead, snap_qn, snap_qcap;

	struct ht__tsc tsc;
	/* reallocs the merge holds back (realloc_order.c) */
	struct ht__held *held;
	uint32_t nheld;
	size_t held_cap;

	struct ht__session_stats stats;
};

uint64_t ht__now_ns(void);

/* shm.c: the shared file. */
int ht__shm_create(struct ht__session *s);
void ht__shm_destroy(struct ht__session *s);
static inline struct ht__ring *ht__ring_at(const struct ht__session *s, uint32_t i)
{
	return (struct ht__ring *)(s->map + s->hdr->header_size +
				   (size_t)i * (HT_RING_HEADER_SIZE + s->ring_size));
}
static inline uint8_t *ht__ring_data(const struct ht__session *s, uint32_t i)
{
	return (uint8_t *)ht__ring_at(s, i) + HT_RING_HEADER_SIZE;
}

/* translate.c: one record (copied out of slot) to trace definitions and events. */
int ht__translate(struct ht__session *s, struct ht__slot *slot, const struct ht__rec *rec);
/* The records of slot from p up to end, whole and in order, each as
   ht__translate() takes it: its allocations and frees go to the sink in runs
   (struct ht__sink's heap_plain), the others one at a time between them. */
int ht__translate_span(struct ht__session *s, struct ht__slot *slot, const uint8_t *p,
		       const uint8_t *end);

/*
 * realloc_order.c: the merge hands each record to ht__order_rec() instead of
 * ht__translate(); a realloc that moved its block is held back until every
 * event stamped before its call returned is merged. ht__order_flush() writes
 * those whose call ended before wm (at the end of each merge).
 */
int ht__order_rec(struct ht__session *s, struct ht__slot *sl, const struct ht__rec *rec);
int ht__order_flush(struct ht__session *s, uint64_t wm);
void ht__order_free(struct ht__session *s);
/* The latest image of pid, or NULL. */
struct ht__proc *ht__proc_by_pid(struct ht__session *s, int32_t pid);
/* Exits for processes that died and were never reported, at the end. */
int ht__translate_finish(struct ht__session *s);
int ht__translate_losses(struct ht__session *s); /* the loss table, at the end */
int ht__losses_reclaim(struct ht__session *s);	 /* its slots of images that are gone */
void ht__translate_free(struct ht__session *s);

/* clock.c (docs/session-protocol.md, "The clock"). ht__clock_init() chooses
   the session's clock and writes it in the header (before RUNNING), and
   takes the first point of the TSC's first slope; ht__clock_ready() takes
   the second (sleeping for what is left of 2 ms) before the first tick is
   converted, if no ht__clock_tick() did; ht__clock_tick() recalibrates
   when due; ht__tsc_to_ns() converts a tick drained from a TSC ring
   (*hint: the segment of the ring's last tick). */
int ht__clock_init(struct ht__session *s);
int ht__clock_ready(struct ht__session *s);
int ht__clock_tick(struct ht__session *s, uint64_t now);
uint64_t ht__tsc_to_ns(const struct ht__tsc *c, uint64_t tick, uint32_t *hint);
void ht__clock_free(struct ht__session *s);

/* drain.c: append a record of the session's own to its queue. */
int ht__self_record(struct ht__session *s, const struct ht__rec *rec);
/* maps.c: read p's /proc/PID/maps when due (rss changed, 50 ms passed) and
   queue the ranges that appeared or went away. 0 or a negative ht_error. */
int ht__maps_check(struct ht__session *s, struct ht__proc *p, uint64_t rss, uint64_t now);
void ht__maps_free(struct ht__maps *m);

/* translate.c: a recorder stack id's trace stack id and owner (0 and NULL
   when not defined yet); an event to the sink. */
void ht__stack_of(const struct ht__session *s, uint32_t rec_id, uint32_t *trace_id,
		  struct ht__proc **owner);
int ht__emit(struct ht__session *s, const struct ht_event *ev);

/* snapshot.c: heap snapshot mode. ht__snap_tick() takes a snapshot when one
   is due or asked (final: always), and one of each image ht__snap_exited()
   was told of since, queued as HT__REC_SELF_SNAPSHOT records at now;
   ht__snap_write() turns that record into events when it is merged. */
int ht__snap_exited(struct ht__session *s, struct ht__proc *p);
int ht__snap_tick(struct ht__session *s, uint64_t now, bool final);
int ht__snap_write(struct ht__session *s, const struct ht__rec *rec);
void ht__snap_free(struct ht__session *s);

/* symbolize.c: resolve every frame of s and hand the symbols to the sink. */
int ht__symbolize(struct ht__session *s, ht__progress_fn progress, void *ctx);
/* A C++ or Rust (legacy and v0) symbol demangled (malloc'd), or NULL. */
char *ht__demangle(const char *name);

#endif
