/*
 * The shared-memory protocol between the recorder (libheaptrail.so, inside each
 * traced process) and the session (the collector process). Both sides include
 * this header; docs/session-protocol.md explains it in prose. Nothing here is
 * written to disk: the trace format lives in src/format/.
 */
#ifndef HT_BASE_PROTOCOL_H
#define HT_BASE_PROTOCOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The only environment variable: path of the session's shared-memory file. */
#define HT_ENV_SESSION "HEAPTRAIL_SESSION"

#define HT_SHM_MAGIC 0x314d485354524854ULL /* "HTRTSHM1" little-endian */
#define HT_PROTO_VERSION 11
#define HT_SHM_HEADER_SIZE 4096u
#define HT_RING_HEADER_SIZE 256u
/*
 * The recorder's own anonymous memory (unwinding stacks, tables, libunwind's
 * caches) is placed in this window when the kernel lets it (MAP_FIXED_NOREPLACE),
 * so the session tells it from the program's in /proc/PID/maps.
 */
#define HT_OWN_BASE 0x6a0000000000ull
#define HT_OWN_END 0x6b0000000000ull

/* ht__shm_header.flags */
#define HT_SHM_LOSSY 0x1u     /* drop events when a ring is full, count them */
#define HT_SHM_NO_FOLLOW 0x2u /* trace only root_pid; children stay dormant */
#define HT_SHM_SEEDED 0x4u    /* sample_seed was chosen by the user (--sample-seed) */
/* Heap snapshot mode (docs/session-protocol.md, "Heap snapshots"): the
   recorder keeps live heap blocks by stack in the snapshot region instead
   of writing ALLOC/REALLOC/FREE records. */
#define HT_SHM_SNAPSHOT 0x8u
/* Flight recorder sessions: each recorder reports its process's death by a
   crash signal in crash[] (docs/session-protocol.md, "Crashes"). */
#define HT_SHM_CRASHES 0x10u

/*
 * The scale of records' ts (ht__shm_header.clock: what the session asks its
 * recorders to stamp with; ht__ring.clock: what a ring's records carry).
 * docs/session-protocol.md, "The clock".
 */
enum ht__clock {
	HT_CLOCK_MONO = 0, /* CLOCK_MONOTONIC nanoseconds (the vDSO) */
	HT_CLOCK_TSC = 1,  /* raw time-stamp counter ticks: the collector converts them */
};

/* ht__shm_header.state */
enum ht__session_state {
	HT_SESSION_STARTING = 0,
	HT_SESSION_RUNNING = 1,
	HT_SESSION_STOPPING = 2, /* recorders stop emitting and pass through */
	HT_SESSION_DONE = 3,	 /* the session read the loss table for the last
				    time: recorders stop counting what passes */
};

/* Bits of ht__shm_header.stack_mask: which events capture a call stack. */
enum ht__stack_bit {
	HT_STK_ALLOC = 1u << 0, /* malloc family and custom-heap alloc */
	HT_STK_REALLOC = 1u << 1,
	HT_STK_FREE = 1u << 2,
	HT_STK_MMAP = 1u << 3, /* mmap, mremap, brk/sbrk */
	HT_STK_MUNMAP = 1u << 4,
	HT_STK_MPROTECT = 1u << 5,
	HT_STK_HEAP_CREATE = 1u << 6,
	HT_STK_HEAP_DESTROY = 1u << 7,
};
#define HT_STK_DEFAULT (HT_STK_ALLOC | HT_STK_REALLOC | HT_STK_MMAP | HT_STK_MPROTECT)
#define HT_STK_ALL 0xffu

/*
 * The one list of stack kinds: X(--stacks name, HT_STK_ bit, the event type
 * that names the kind in the control API, an event type it also covers or
 * that same type again). `heaptrail record`, `heaptrail start` and the
 * control library all expand it; the HT_EV_ names need heaptrail/trace.h.
 */
#define HT__STACK_KINDS(X)                                                                         \
	X("alloc", HT_STK_ALLOC, HT_EV_ALLOC, HT_EV_ALLOC_FAIL)                                    \
	X("realloc", HT_STK_REALLOC, HT_EV_REALLOC, HT_EV_REALLOC)                                 \
	X("free", HT_STK_FREE, HT_EV_FREE, HT_EV_FREE)                                             \
	X("mmap", HT_STK_MMAP, HT_EV_MMAP, HT_EV_MREMAP)                                           \
	X("munmap", HT_STK_MUNMAP, HT_EV_MUNMAP, HT_EV_MUNMAP)                                     \
	X("mprotect", HT_STK_MPROTECT, HT_EV_MPROTECT, HT_EV_MPROTECT)                             \
	X("heap-create", HT_STK_HEAP_CREATE, HT_EV_HEAP_CREATE, HT_EV_HEAP_CREATE)                 \
	X("heap-destroy", HT_STK_HEAP_DESTROY, HT_EV_HEAP_DESTROY, HT_EV_HEAP_DESTROY)

#define HT_CRASH_SLOTS 16u

/*
 * Offset 0 of the shared file. Written by the collector before it sets
 * state to RUNNING; afterwards recorders only touch the atomics.
 */
struct ht__shm_header {
	uint64_t magic;
	uint32_t version;
	uint32_t header_size; /* HT_SHM_HEADER_SIZE: offset of ring 0 */
	uint32_t ring_size;   /* data bytes per ring, power of two */
	uint32_t ring_count;
	uint32_t flags;	     /* HT_SHM_* */
	uint32_t stack_mask; /* HT_STK_* */
	int32_t collector_pid;
	int32_t root_pid; /* the launched program, for HT_SHM_NO_FOLLOW */
	uint64_t t0_ns;	  /* CLOCK_MONOTONIC at session start */
	_Atomic uint32_t state;
	_Atomic uint32_t next_stack_id;	  /* session-wide stack ids, first is 1 */
	_Atomic uint64_t heartbeat_ns;	  /* collector's CLOCK_MONOTONIC, every tick */
	_Atomic uint32_t ring_hint;	  /* 0; unused: recorders claim the lowest free ring */
	_Atomic uint32_t ring_reach;	  /* no ring from here on was ever claimed (v11) */
	_Atomic uint64_t rings_exhausted; /* events dropped because no ring was free */
	/* Lossless waits (docs/session-protocol.md, "When the ring is full"). */
	_Atomic uint32_t drain_seq; /* futex word: bumped after a drain while waiters > 0 */
	_Atomic uint32_t waiters;   /* recorder threads asleep on drain_seq */
	uint64_t collector_start;   /* start time of collector_pid (field 22 of
				       /proc/PID/stat), 0 when unknown */
	/* Events of a signal handler that interrupted a hook (not recorded:
	   the interrupted hook may be in the middle of a record). */
	_Atomic uint64_t reentered;
	/* How often the program waited for the collector (lossless mode): a
	   writer found its ring full (room_waits), and of those, waited long
	   enough to sleep on drain_seq (room_sleeps). Not losses: counters of
	   whether the collector keeps up (record --stats). */
	_Atomic uint64_t room_waits;
	_Atomic uint64_t room_sleeps;
	/* Sampling (docs/session-protocol.md, "Sampling"): 0 records every
	   allocation; else the mean bytes between sampled allocations. Set
	   before RUNNING, never changed. */
	uint64_t sample_rate;
	/* Seed of the recorders' sampling; with HT_SHM_SEEDED it alone (with
	   each thread's order of arrival) decides which allocations are
	   sampled, so a run can be repeated; else each instance mixes in its
	   own random token. */
	uint64_t sample_seed;
	/* Heap snapshot mode (HT_SHM_SNAPSHOT): the region of snap_cap
	   struct ht__snap_stack at snap_offset, indexed by recorder stack id,
	   and what could not be put there (counted, shown in every snapshot). */
	uint64_t snap_offset;
	uint32_t snap_cap;
	uint32_t pad1;
	_Atomic uint64_t snap_untracked_count; /* allocations not tracked: a limit */
	_Atomic uint64_t snap_untracked_bytes;
	/* Asking for a snapshot: anyone who may open the file (heaptrail
	   snapshot) adds 1 to snap_request; the collector stores the value it
	   served in snap_served after taking snapshot number snap_last. */
	_Atomic uint32_t snap_request;
	_Atomic uint32_t snap_served;
	_Atomic uint32_t snap_last;
	uint32_t pad2;
	/* The clock (docs/session-protocol.md, "The clock"): enum ht__clock,
	   set before RUNNING, never changed. With HT_CLOCK_TSC the collector
	   publishes its current conversion of ticks to CLOCK_MONOTONIC ns,
	   ns = tsc_ns + ((tick - tsc_tick) * tsc_mult >> tsc_shift), rewritten
	   under tsc_seq (odd while it is being written) as it recalibrates. The
	   recorders do not read it: they store raw ticks. */
	uint32_t clock;
	_Atomic uint32_t tsc_seq;
	uint64_t tsc_tick;
	uint64_t tsc_ns;
	uint64_t tsc_mult;
	uint32_t tsc_shift;
	uint32_t pad3;
	/* Crashes (HT_SHM_CRASHES): a recorder dying of a crash signal claims
	   a slot (pid 0 -> -1 by CAS, sig and instance, then its pid with
	   release); the collector reads it and gives it back (pid 0). A crash
	   that finds every slot taken is counted in crashes_unreported. */
	struct ht__shm_crash {
		_Atomic int32_t pid;
		int32_t sig;
		uint32_t instance;
		uint32_t pad;
	} crash[HT_CRASH_SLOTS];
	_Atomic uint64_t crashes_unreported;
	/* Heap snapshot mode, custom heaps (include/heaptrail/heap.h): the
	   region of snap_heap_cap struct ht__snap_heap at snap_heap_offset,
	   claimed in order by the recorders (snap_heap_next: the next free
	   entry; may pass the cap, which is then full). Protocol version 8. */
	uint64_t snap_heap_offset;
	uint32_t snap_heap_cap;
	_Atomic uint32_t snap_heap_next;
	/* Heap snapshot mode, the threads' tables (protocol version 9): ring
	   i's snap_thr_slots struct ht__snap_thr_ent at snap_thr_offset + i *
	   snap_thr_bytes (its snap_used says whether it has any). */
	uint64_t snap_thr_offset;
	uint32_t snap_thr_slots;
	uint32_t snap_thr_bytes;
};

/*
 * Events a process image did not record, by process (docs/session-protocol.md,
 * "Loss by process"): a table of HT_LOSS_SLOTS at HT_SHM_LOSS_OFFSET in the
 * header page, past struct ht__shm_header. A recorder claims a slot the first
 * time its image loses an event (pid 0 -> -1 by CAS, instance, then pid);
 * the session takes the counts of an image that is gone (and frees its
 * slot, pid back to 0) and the rest when it finishes. A process that finds
 * the table full is counted only in the trace-wide counters.
 */
enum ht__loss_cause {
	HT_LOSS_LOSSY = 0,	/* its ring was full in lossy mode */
	HT_LOSS_NO_BUFFER = 1,	/* no ring was free (rings_exhausted) */
	HT_LOSS_IN_HANDLER = 2, /* a signal handler interrupted a hook (reentered) */
	HT_LOSS_UNTRACED = 3,	/* after the recorder stopped: session stopping or
				   collector gone */
	HT_LOSS_CAUSES = 4,
};

struct ht__shm_loss {
	_Atomic int32_t pid; /* 0: free, -1: being claimed */
	uint32_t instance;
	_Atomic uint64_t first_ns;    /* CLOCK_MONOTONIC of its first event not recorded */
	_Atomic uint64_t untraced_ns; /* of its first event after the recorder stopped */
	_Atomic uint64_t n[HT_LOSS_CAUSES];
};

#define HT_SHM_LOSS_OFFSET 2048u
#define HT_LOSS_SLOTS 36u

/*
 * The exit notes (docs/session-protocol.md, "A collector killed"): the
 * session writes at HT_SHM_NOTE_OFFSET of the header page the path of the
 * file next to its trace where each image appends one struct ht__exit_note
 * when it ends (empty: none), and note_uid, the owner that file must have.
 * A collector killed with SIGKILL never reads its loss table: these notes
 * let a later reader of the unfinished trace count what each image did
 * that the trace does not hold.
 */
#define HT_SHM_NOTE_OFFSET 1024u
#define HT_SHM_NOTE_MAX 1016u /* the path with its NUL */
#define HT_NOTE_SUFFIX ".lost"
#define HT_NOTE_MAGIC 0x3145544f4e544855ull /* "UHTNOTE1" little-endian */

struct ht__shm_note {
	uint32_t uid; /* the notes' file must belong to it */
	uint32_t pad;
	char path[HT_SHM_NOTE_MAX];
};

struct ht__exit_note {
	uint64_t magic; /* HT_NOTE_MAGIC */
	int32_t pid;
	uint32_t instance;
	uint64_t t0_ns;		    /* the session's t0_ns: a note of another session is ignored */
	uint64_t events;	    /* heap and memory events it wrote into the rings
				       (records ALLOC .. HEAP_FREE: one trace event each) */
	uint64_t n[HT_LOSS_CAUSES]; /* its loss-table slot at the end (0: no slot) */
	uint64_t first_ns;	    /* of its loss slot, since t0 (0: none) */
	uint64_t untraced_ns;	    /* of its loss slot, since t0 (0: none) */
	uint64_t end_ns;	    /* when it wrote this, since t0 */
	int32_t exit_kind;	    /* HT_EXIT_CODE, HT_EXIT_SIGNAL, or -1: unknown */
	int32_t exit_value;
	uint32_t collector_gone; /* it found the collector's process gone */
	uint32_t pad;
};
_Static_assert(sizeof(struct ht__exit_note) == 104, "exit note size");

/*
 * Heap snapshot mode: what one stack holds, updated by every thread of the
 * instance that owns the stack id with relaxed atomic adds; the collector
 * reads the region when it takes a snapshot. live = allocated - freed.
 */
struct ht__snap_stack {
	_Atomic uint64_t alloc_bytes;
	_Atomic uint64_t alloc_count;
	_Atomic uint64_t freed_bytes;
	_Atomic uint64_t freed_count;
};
#define HT_SNAP_CAP_DEFAULT (1u << 20) /* stack ids with a slot: 32 MiB, sparse */

/*
 * Heap snapshot mode: what one stack holds in one custom heap (a handle of
 * include/heaptrail/heap.h), in the entry a recorder claimed for the pair.
 * The recorder writes heap and stack, then sets ready (release); the
 * collector skips an entry not ready yet (nothing counted there yet). A
 * pair may own two entries (two threads claimed one at once): readers add
 * them up.
 */
struct ht__snap_heap {
	uint64_t heap;
	uint32_t stack;
	_Atomic uint32_t ready;
	struct ht__snap_stack c;
};
#define HT_SNAP_HEAP_CAP (1u << 16) /* (heap, stack) pairs: 3 MiB, sparse */

/*
 * Heap snapshot mode: an entry of one ring's table (docs/session-protocol.md,
 * "The threads' tables"), written only by the thread that owns the ring,
 * with plain stores: per stack (key: id + 1, 0 empty) what that ring's
 * owners allocated and freed. The ring's snap_used is set once an entry is
 * taken; the collector skips a table whose ring's snap_used is 0. A stack's
 * counts are its region entry plus its entries in every table.
 */
struct ht__snap_thr_ent {
	_Atomic uint32_t key;
	uint32_t pad;
	struct ht__snap_stack c;
};
#define HT_SNAP_THR_SLOTS 1024u /* entries per ring's table: 40 KiB, sparse */
#define HT_SNAP_THR_PROBES 16u
static inline uint32_t ht__snap_thr_bytes(uint32_t slots)
{
	return (uint32_t)(((size_t)slots * sizeof(struct ht__snap_thr_ent) + 63) & ~(size_t)63);
}

/* ht__ring.state */
enum ht__ring_state {
	HT_RING_FREE = 0,     /* nobody owns it; a recorder may claim it by CAS */
	HT_RING_OWNED = 1,    /* one thread writes, the collector reads */
	HT_RING_RELEASED = 2, /* the thread is gone; the collector drains it, then frees */
};

/*
 * Ring i starts at header_size + i * (HT_RING_HEADER_SIZE + ring_size); its data
 * follows the header. Positions are byte counters that never wrap; the data
 * offset is pos & (ring_size - 1). One writer (the owning thread), one reader
 * (the collector). The writer's and the reader's fields sit on separate lines.
 */
struct ht__ring {
	_Atomic uint32_t state;
	int32_t pid;
	int32_t tid;
	uint32_t instance;	    /* random token of the recorder instance (pid + exec) */
	_Atomic uint64_t write_pos; /* writer: end of the last committed record */
	_Atomic uint32_t busy;	    /* writer: 1 from taking a timestamp to committing */
	uint32_t clock;		    /* enum ht__clock of its records, written with pid */
	_Atomic uint64_t lost;	    /* writer: records dropped in lossy mode */
	/* writer: heap and memory records (ALLOC .. HEAP_FREE) committed since
	   it claimed the ring; summed into the image's exit note */
	_Atomic uint64_t events;
	/* heap snapshot mode: its table (snap_thr_offset) has entries; never
	   cleared (protocol version 10) */
	_Atomic uint32_t snap_used;
	char pad2[64 - 52];
	_Atomic uint64_t read_pos; /* collector: everything before it is consumed */
	char pad3[HT_RING_HEADER_SIZE - 72];
};

_Static_assert(sizeof(struct ht__ring) == HT_RING_HEADER_SIZE, "ring header size");
_Static_assert(sizeof(struct ht__shm_header) <= HT_SHM_NOTE_OFFSET, "shm header size");
_Static_assert(HT_SHM_NOTE_OFFSET + sizeof(struct ht__shm_note) <= HT_SHM_LOSS_OFFSET,
	       "exit note path size");
_Static_assert(HT_SHM_LOSS_OFFSET + HT_LOSS_SLOTS * sizeof(struct ht__shm_loss) <=
		   HT_SHM_HEADER_SIZE,
	       "loss table size");

/*
 * The rings ever claimed are the first ring_reach (docs/session-protocol.md,
 * "Rings: one writer, one reader, no locks"): a claimer of ring i raises it
 * to i + 1 before it writes there, and whoever looks at every ring looks at
 * the first ht__rings_reached() only (each ring's header is a page of the
 * file: a fault in each process that reads it).
 */
static inline void ht__ring_reached(struct ht__shm_header *h, uint32_t i)
{
	uint32_t n = atomic_load_explicit(&h->ring_reach, memory_order_relaxed);
	while (n <= i && !atomic_compare_exchange_weak(&h->ring_reach, &n, i + 1))
		;
}

static inline uint32_t ht__rings_reached(struct ht__shm_header *h, uint32_t count)
{
	uint32_t n = atomic_load_explicit(&h->ring_reach, memory_order_acquire);
	return n < count ? n : count;
}

static inline struct ht__shm_loss *ht__shm_losses(struct ht__shm_header *h)
{
	return (struct ht__shm_loss *)((char *)h + HT_SHM_LOSS_OFFSET);
}

static inline struct ht__shm_note *ht__shm_note(struct ht__shm_header *h)
{
	return (struct ht__shm_note *)((char *)h + HT_SHM_NOTE_OFFSET);
}

/*
 * Records. Every record starts with this 16-byte header, is 8-byte aligned, and
 * never straddles the end of the ring (a PAD record fills the tail instead).
 * All fields are native-endian: both sides run on the same machine.
 */
struct ht__rec {
	uint8_t type;	/* enum ht__rec_type */
	uint8_t func;	/* enum ht_func (include/heaptrail/trace.h) */
	uint16_t len;	/* whole record, header included, multiple of 8 */
	uint32_t stack; /* session-wide stack id, 0 when not captured */
	uint64_t ts;	/* the ring's clock (CLOCK_MONOTONIC ns, or TSC ticks until the
			   collector converts them), taken after the real call
			   returns (alloc) or before it is made (free, a
			   realloc of a block: ht__rec_realloc.end) */
};

/*
 * The one list of record types: X(NAME, value, "name", minimum length). The
 * session refuses a record shorter than its minimum (a torn or foreign
 * record); the lengths name structs declared below, which is fine since the
 * list is only expanded after them. The HT_REC_ enum and ringdump's names
 * expand it.
 */
#define HT__REC_TYPES(X)                                                                           \
	X(PAD, 0, "pad", sizeof(struct ht__rec))		     /* skip len bytes */          \
	X(ALLOC, 1, "alloc", sizeof(struct ht__rec_alloc))	     /* process heap */            \
	X(ALLOC_FAIL, 2, "alloc_fail", sizeof(struct ht__rec_alloc)) /* addr 0: size requested */  \
	X(REALLOC, 3, "realloc", sizeof(struct ht__rec_realloc))                                   \
	X(FREE, 4, "free", sizeof(struct ht__rec_free))                                            \
	X(MMAP, 5, "mmap", sizeof(struct ht__rec_mmap)) /* HT_RECF_FAILED when MAP_FAILED */       \
	X(MUNMAP, 6, "munmap", sizeof(struct ht__rec_range))                                       \
	X(MREMAP, 7, "mremap", sizeof(struct ht__rec_mremap))                                      \
	X(MPROTECT, 8, "mprotect", sizeof(struct ht__rec_range)) /* with prot */                   \
	X(BRK, 9, "brk", sizeof(struct ht__rec_brk)) /* brk() or sbrk() by the program */          \
	X(HEAP_CREATE, 10, "heap_create", sizeof(struct ht__rec_heap)) /* + name */                \
	X(HEAP_DESTROY, 11, "heap_destroy", sizeof(struct ht__rec_heap))                           \
	X(HEAP_ALLOC, 12, "heap_alloc", sizeof(struct ht__rec_heap_op))                            \
	X(HEAP_REALLOC, 13, "heap_realloc", sizeof(struct ht__rec_heap_op))                        \
	X(HEAP_FREE, 14, "heap_free", sizeof(struct ht__rec_heap_op))                              \
	/* first record of an instance */                                                          \
	X(PROCESS_START, 16, "process_start", sizeof(struct ht__rec_process))                      \
	X(PROCESS_EXIT, 17, "process_exit", sizeof(struct ht__rec_exit))                           \
	X(THREAD_START, 18, "thread_start", sizeof(struct ht__rec_thread))                         \
	X(THREAD_EXIT, 19, "thread_exit", sizeof(struct ht__rec)) /* header only */                \
	X(THREAD_NAME, 20, "thread_name", sizeof(struct ht__rec_thread))                           \
	X(MODULE_LOAD, 21, "module_load", offsetof(struct ht__rec_module, path_len))               \
	X(MODULE_UNLOAD, 22, "module_unload", offsetof(struct ht__rec_module, path_len))           \
	X(STACK, 23, "stack", sizeof(struct ht__rec_stack)) /* defines hdr.stack */

#define HT__REC_ENUM(id, value, name, min_len) HT_REC_##id = value,
enum ht__rec_type { HT__REC_TYPES(HT__REC_ENUM) };
#undef HT__REC_ENUM

/* ht__rec.func carries enum ht_func (values below 0x80); this bit is OR-ed in
   when the call failed (mmap, mremap, realloc, brk). */
#define HT_RECF_FAILED 0x80u

struct ht__rec_alloc {
	struct ht__rec h;
	uint64_t addr; /* 0 for ALLOC_FAIL */
	uint64_t size; /* bytes requested (calloc: n * size) */
};

/*
 * realloc in all its forms: old_addr 0 is realloc(NULL, n); new_addr 0 with
 * size 0 is realloc(p, 0) freeing p; new_addr 0 with size > 0 and
 * HT_RECF_FAILED is a failed realloc that left old_addr allocated.
 */
struct ht__rec_realloc {
	struct ht__rec h;
	uint64_t old_addr;
	uint64_t new_addr;
	uint64_t size;
	/* 0: h.ts is the event's time. Else h.ts was taken before the real
	   call (which frees old_addr after it) and end when it returned (new_addr
	   was allocated before it): the session places the event in between
	   (docs/session-protocol.md, "Time order"). */
	uint64_t end;
};

struct ht__rec_free {
	struct ht__rec h;
	uint64_t addr;
};

struct ht__rec_mmap {
	struct ht__rec h;
	uint64_t addr; /* result; 0 when failed */
	uint64_t len;
	uint32_t prot;
	uint32_t flags;
	int32_t fd;
	uint32_t pad;
	uint64_t offset;
};

struct ht__rec_range { /* munmap, mprotect */
	struct ht__rec h;
	uint64_t addr;
	uint64_t len;
	uint32_t prot;	/* mprotect only */
	int32_t result; /* 0 or -errno */
};

struct ht__rec_mremap {
	struct ht__rec h;
	uint64_t old_addr;
	uint64_t old_len;
	uint64_t new_addr; /* 0 when failed */
	uint64_t new_len;
	uint32_t flags;
	uint32_t pad;
};

struct ht__rec_brk {
	struct ht__rec h;
	uint64_t old_brk;
	uint64_t new_brk; /* equal to old_brk when the call failed */
};

struct ht__rec_heap { /* HEAP_CREATE, HEAP_DESTROY */
	struct ht__rec h;
	uint64_t handle;
	/* HEAP_CREATE: NUL-terminated name follows, padded to 8 */
};

struct ht__rec_heap_op {
	struct ht__rec h;
	uint64_t handle;
	uint64_t addr;	   /* HEAP_REALLOC: new address */
	uint64_t size;	   /* HEAP_FREE: 0 */
	uint64_t old_addr; /* HEAP_REALLOC only, else 0 */
};

/* ht__rec_process.flags */
#define HT_PROC_ROOT 0x1u     /* the program the session launched */
#define HT_PROC_FORK 0x2u     /* started by fork/clone from a traced parent */
#define HT_PROC_EXEC 0x4u     /* a new image in an already traced pid */
#define HT_PROC_ATTACHED 0x8u /* joined after the process started */

struct ht__rec_process {
	struct ht__rec h;
	int32_t pid;
	int32_t ppid;
	uint32_t flags;
	uint32_t instance;
	uint32_t exe_len;  /* bytes of exe path, without NUL */
	uint32_t args_len; /* bytes of the NUL-separated argv (/proc/self/cmdline) */
			   /* exe bytes, then args bytes, then padding to 8 */
};

/* ht__rec_exit.kind */
#define HT_EXIT_CODE 0
#define HT_EXIT_SIGNAL 1

struct ht__rec_exit {
	struct ht__rec h;
	int32_t pid; /* the process that exited: self, or a child reaped by wait */
	uint32_t kind;
	int32_t value; /* exit code or signal number */
	uint32_t pad;
};

struct ht__rec_thread { /* THREAD_START, THREAD_NAME */
	struct ht__rec h;
	int32_t tid;
	uint32_t pad;
	char name[16];
};

struct ht__rec_module {
	struct ht__rec h;
	uint32_t index; /* recorder-local module index, stable for the instance */
	uint32_t path_len;
	uint64_t bias;	/* dlpi_addr: runtime address = ELF vaddr + bias */
	uint64_t start; /* lowest mapped address */
	uint64_t size;	/* bytes from start to the end of the last PT_LOAD */
	uint8_t build_id_len;
	uint8_t build_id[31];
	/* path bytes (no NUL), padded to 8; MODULE_UNLOAD has index only */
};

#define HT_MODULE_UNKNOWN 0xffffffffu /* frame address in no known module */
#define HT_MAX_FRAMES 128

/*
 * Defines stack id h.stack for this instance. Written once, by the thread that
 * first saw the stack, before any record that uses the id. Frames innermost
 * first, the recorder's own frames removed. rel[i] is the ELF virtual address
 * (runtime address minus the module's bias) of the return address, module[i]
 * the recorder-local module index (HT_MODULE_UNKNOWN: rel is the raw address).
 */
struct ht__rec_stack {
	struct ht__rec h;
	uint32_t nframes;
	uint32_t pad;
	/* uint64_t rel[nframes]; uint32_t module[nframes]; padded to 8 */
};

/* Field 3 (the state) of the text of /proc/PID/stat, or NULL. */
static inline const char *ht__proc_stat_state(const char *buf)
{
	const char *p = 0;
	for (const char *q = buf; *q; q++)
		if (*q == ')')
			p = q; /* the last ')': the command name may hold anything */
	return p && p[1] == ' ' && p[2] ? p + 2 : 0;
}

/* Field from + n of that text, p at field from; NULL past its end. */
static inline const char *ht__proc_stat_skip(const char *p, int n)
{
	for (; n > 0; n--) {
		while (*p && *p != ' ')
			p++;
		if (!*p)
			return 0;
		p++;
	}
	return p;
}

/*
 * The state letter and start time (field 22, clock ticks since boot) in the
 * text of /proc/PID/stat (NUL-terminated). Both sides judge liveness with it:
 * the session its traced processes, a waiting recorder the collector (which
 * stores its own start time in collector_start, so a recycled pid does not
 * pass for it). Returns 0 when the text cannot be parsed.
 */
static inline int ht__parse_proc_stat(const char *buf, char *state, uint64_t *start)
{
	const char *p = ht__proc_stat_state(buf);
	if (!p)
		return 0;
	*state = *p;
	if (!(p = ht__proc_stat_skip(p, 22 - 3)))
		return 0;
	uint64_t v = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	*start = v;
	return 1;
}

static inline uint32_t ht__rec_align(uint32_t n)
{
	return (n + 7u) & ~7u;
}

#endif
