/*
 * heaptrail/trace.h - read a heaptrail trace (.htr): its events in time order
 * and its tables of processes, modules, frames (with symbols) and stacks.
 *
 * The byte layout is in docs/trace-format.md and is known only to src/format/;
 * everything else reads traces through this API.
 *
 * Example:
 *
 *     struct ht_reader *r;
 *     struct ht_event ev;
 *     int rc = ht_reader_open(&r, "app.htr");
 *     if (rc < 0) { fprintf(stderr, "%s\n", ht_strerror(rc)); return 1; }
 *     while ((rc = ht_reader_next(r, &ev)) > 0)
 *         if (ev.type == HT_EV_ALLOC) total += ev.size;
 *     ht_reader_close(r);
 *
 * Thread-safety: a reader is used by one thread at a time; separate readers of
 * the same file are independent.
 */
#ifndef HEAPTRAIL_TRACE_H
#define HEAPTRAIL_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: every function returns 0 (or a positive count) or one of these. */
enum ht_error {
	HT_OK = 0,
	HT_ERR_IO = -1,	       /* read/write failed; errno tells more */
	HT_ERR_NOT_TRACE = -2, /* no heaptrail magic at the start */
	HT_ERR_VERSION = -3,   /* a trace version this build cannot read */
	HT_ERR_CORRUPT = -4,   /* a chunk failed its checksum or does not parse */
	HT_ERR_NOMEM = -5,
	HT_ERR_INVALID = -6,   /* invalid argument */
	HT_ERR_EXISTS = -7,    /* already exists (sessions, files) */
	HT_ERR_NOT_FOUND = -8, /* no such session, file or process */
	HT_ERR_PERM = -9,      /* permission denied */
	HT_ERR_FLAGS = -10,    /* invalid flags or event list */
	HT_ERR_NOSPACE = -11,  /* no space left on the device (or disk quota) */
};

/* A message for an error code; never NULL. */
const char *ht_strerror(int err);

/*
 * The function a program called: X(NAME, value, "name"). The names appear in
 * dump and JSON output, so they never change. One list: the enum below,
 * ht_func_name() and every table by function expand it.
 */
#define HT_FUNCS(X)                                                                                \
	X(NONE, 0, "none")                                                                         \
	X(MALLOC, 1, "malloc")                                                                     \
	X(CALLOC, 2, "calloc")                                                                     \
	X(REALLOC, 3, "realloc")                                                                   \
	X(REALLOCARRAY, 4, "reallocarray")                                                         \
	X(FREE, 5, "free")                                                                         \
	X(POSIX_MEMALIGN, 6, "posix_memalign")                                                     \
	X(ALIGNED_ALLOC, 7, "aligned_alloc")                                                       \
	X(MEMALIGN, 8, "memalign")                                                                 \
	X(VALLOC, 9, "valloc")                                                                     \
	X(PVALLOC, 10, "pvalloc")                                                                  \
	X(MMAP, 11, "mmap")                                                                        \
	X(MMAP64, 12, "mmap64")                                                                    \
	X(MUNMAP, 13, "munmap")                                                                    \
	X(MREMAP, 14, "mremap")                                                                    \
	X(MPROTECT, 15, "mprotect")                                                                \
	X(BRK, 16, "brk")                                                                          \
	X(SBRK, 17, "sbrk")                                                                        \
	X(HEAP_API, 18, "heap_api") /* include/heaptrail/heap.h */                                 \
	/* Allocators with their own API (docs/session-protocol.md). */                            \
	X(NEW, 19, "new") /* operator new, every overload */                                       \
	X(NEW_ARRAY, 20, "new[]")                                                                  \
	X(DELETE, 21, "delete")                                                                    \
	X(DELETE_ARRAY, 22, "delete[]")                                                            \
	X(MALLOCX, 23, "mallocx") /* jemalloc */                                                   \
	X(RALLOCX, 24, "rallocx")                                                                  \
	X(XALLOCX, 25, "xallocx")                                                                  \
	X(DALLOCX, 26, "dallocx")                                                                  \
	X(SDALLOCX, 27, "sdallocx")                                                                \
	X(TCMALLOC, 28, "tcmalloc") /* a tc_* function of gperftools' tcmalloc */                  \
	X(MIMALLOC, 29, "mimalloc") /* a mi_* function of mimalloc */                              \
	/* Ranges the session found in /proc/PID/maps (HT_EVF_UNSEEN). */                          \
	X(MAPS_HEAP, 30, "maps_heap")	/* glibc's heap: [heap] or an arena */                     \
	X(MAPS_STACK, 31, "maps_stack") /* a thread's stack (tid: the thread, when known) */       \
	X(MAPS, 32, "maps")		/* unattributed */

#define HT_FUNC_ENUM_(id, value, name) HT_FN_##id = value,
enum ht_func { HT_FUNCS(HT_FUNC_ENUM_) HT_FN__COUNT };
#undef HT_FUNC_ENUM_

/* Name of a function ("malloc", "mmap", ...); "?" when out of range. */
const char *ht_func_name(unsigned func);

/*
 * The fields of struct ht_event, in the order dump prints them. An event
 * type names the ones it always carries (printed even when 0); any other
 * field is printed when it is not 0.
 */
enum ht_event_field {
	HT_FLD_PROCESS = 1u << 0,
	HT_FLD_HEAP = 1u << 1,
	HT_FLD_OLD_ADDR = 1u << 2,
	HT_FLD_OLD_SIZE = 1u << 3,
	HT_FLD_ADDR = 1u << 4,
	HT_FLD_SIZE = 1u << 5,
	HT_FLD_PROT = 1u << 6,
	HT_FLD_MFLAGS = 1u << 7,
	HT_FLD_FD = 1u << 8,
	HT_FLD_MODULE = 1u << 9,
	HT_FLD_VALUE = 1u << 10,
	HT_FLD_NAME = 1u << 11,
};

/*
 * The one list of event types: X(NAME, value, "name", default func, the
 * fields it always carries). The name is what dump and JSON print; an event
 * whose func is the type's default costs no byte for it in a trace (see
 * docs/trace-format.md). Adding a type is a line here plus its producer
 * (docs/architecture.md, "Where a change goes").
 */
#define HT_EVENT_TYPES(X)                                                                          \
	/* heap, addr, size; func says which API */                                                \
	X(ALLOC, 1, "alloc", HT_FN_MALLOC, HT_FLD_ADDR | HT_FLD_SIZE)                              \
	/* heap, size requested; nothing allocated */                                              \
	X(ALLOC_FAIL, 2, "alloc_fail", HT_FN_MALLOC, HT_FLD_SIZE)                                  \
	/* heap, old_addr -> addr, size (see struct ht_event) */                                   \
	X(REALLOC, 3, "realloc", HT_FN_REALLOC, HT_FLD_OLD_ADDR | HT_FLD_ADDR | HT_FLD_SIZE)       \
	/* heap, addr */                                                                           \
	X(FREE, 4, "free", HT_FN_FREE, HT_FLD_ADDR)                                                \
	/* addr, size, prot, mflags, fd; HT_EVF_FAILED */                                          \
	X(MMAP, 5, "mmap", HT_FN_MMAP,                                                             \
	  HT_FLD_ADDR | HT_FLD_SIZE | HT_FLD_PROT | HT_FLD_MFLAGS | HT_FLD_FD)                     \
	/* addr, size */                                                                           \
	X(MUNMAP, 6, "munmap", HT_FN_MUNMAP, HT_FLD_ADDR | HT_FLD_SIZE)                            \
	/* old_addr, old_size -> addr, size, mflags */                                             \
	X(MREMAP, 7, "mremap", HT_FN_MREMAP,                                                       \
	  HT_FLD_OLD_ADDR | HT_FLD_OLD_SIZE | HT_FLD_ADDR | HT_FLD_SIZE | HT_FLD_MFLAGS)           \
	/* addr, size, prot */                                                                     \
	X(MPROTECT, 8, "mprotect", HT_FN_MPROTECT, HT_FLD_ADDR | HT_FLD_SIZE | HT_FLD_PROT)        \
	/* old_addr = old break, addr = new break */                                               \
	X(BRK, 9, "brk", HT_FN_BRK, HT_FLD_OLD_ADDR | HT_FLD_ADDR)                                 \
	/* heap, name */                                                                           \
	X(HEAP_CREATE, 10, "heap_create", HT_FN_NONE, HT_FLD_HEAP | HT_FLD_NAME)                   \
	/* heap */                                                                                 \
	X(HEAP_DESTROY, 11, "heap_destroy", HT_FN_NONE, HT_FLD_HEAP)                               \
	/* a new process (fork, root, attach): process */                                          \
	X(PROCESS_START, 12, "process_start", HT_FN_NONE, HT_FLD_PROCESS)                          \
	/* a traced pid loaded a new image: process is new */                                      \
	X(PROCESS_EXEC, 13, "process_exec", HT_FN_NONE, HT_FLD_PROCESS)                            \
	/* value = exit code, or signal with HT_EVF_SIGNAL, or 0 with HT_EVF_EXEC */               \
	X(PROCESS_EXIT, 14, "process_exit", HT_FN_NONE, HT_FLD_PROCESS)                            \
	/* name */                                                                                 \
	X(THREAD_START, 15, "thread_start", HT_FN_NONE, HT_FLD_NAME)                               \
	X(THREAD_EXIT, 16, "thread_exit", HT_FN_NONE, 0)                                           \
	/* name */                                                                                 \
	X(THREAD_NAME, 17, "thread_name", HT_FN_NONE, HT_FLD_NAME)                                 \
	/* module, addr = start, size, old_addr = bias */                                          \
	X(MODULE_LOAD, 18, "module_load", HT_FN_NONE,                                              \
	  HT_FLD_MODULE | HT_FLD_ADDR | HT_FLD_SIZE | HT_FLD_OLD_ADDR)                             \
	/* module */                                                                               \
	X(MODULE_UNLOAD, 19, "module_unload", HT_FN_NONE, HT_FLD_MODULE)                           \
	/* size = resident bytes, sampled by the session */                                        \
	X(RSS, 20, "rss", HT_FN_NONE, HT_FLD_SIZE)                                                 \
	/* heap snapshot mode (HT_TRACEF_SNAPSHOT): one stack of one process in                    \
	   snapshot value (1, 2, ...): size = live bytes, addr = live blocks,                      \
	   old_size = bytes and old_addr = blocks allocated since it started. A                    \
	   snapshot opens with one of flags HT_EVF_SNAPSHOT_BEGIN, stack 0: size and               \
	   addr = bytes and blocks not tracked (a limit). */                                       \
	X(SNAPSHOT, 21, "snapshot", HT_FN_NONE, HT_FLD_VALUE)

#define HT_EVENT_ENUM_(id, value, name, func, fields) HT_EV_##id = value,
enum ht_event_type { HT_EVENT_TYPES(HT_EVENT_ENUM_) HT_EV__COUNT };
#undef HT_EVENT_ENUM_

/* Name of an event type ("alloc", "mmap", ...), the names dump and JSON use. */
const char *ht_event_name(unsigned type);

/* ht_event.flags */
#define HT_EVF_FAILED 0x1u /* the call failed (mmap, mremap, realloc, brk) */
#define HT_EVF_SIGNAL 0x2u /* PROCESS_EXIT: value is a signal number */
/* PROCESS_EXIT: the image was replaced by exec of a program that is not
   traced (a cleared environment, a setuid program). Its process gets
   HT_PROCF_EXECED and no image follows it; no exit status is known. */
#define HT_EVF_EXEC 0x4u
/* MMAP, MUNMAP: no hook saw it; the session found the range appear in (or
   leave) /proc/PID/maps. func is HT_FN_MAPS_HEAP, _STACK or HT_FN_MAPS. */
#define HT_EVF_UNSEEN 0x8u
/* Made by the flight recorder from the state at a window's start (the
   images, modules, heaps, threads, committed ranges and heap blocks that
   were there before the window's first event; docs/modes.md). */
#define HT_EVF_SYNTHETIC 0x10u
/* SNAPSHOT: the first event of a snapshot (see HT_EV_SNAPSHOT). */
#define HT_EVF_SNAPSHOT_BEGIN 0x20u
/* SNAPSHOT with HT_EVF_SNAPSHOT_BEGIN: taken when process (the event's)
   exited; the snapshot holds that process image's stacks alone. */
#define HT_EVF_SNAPSHOT_EXIT 0x40u

/* The process heap (glibc malloc) handle; custom heaps use their own handles. */
#define HT_HEAP_PROCESS 0

/*
 * One event. Fields not listed for a type are 0.
 *
 * REALLOC: old_addr 0 is realloc(NULL, n): an allocation of size at addr.
 * addr 0 and size 0 is realloc(p, 0): old_addr is freed. HT_EVF_FAILED: the
 * call returned NULL for size > 0 and old_addr stays allocated. Otherwise
 * old_addr is freed and addr is a new allocation of size (possibly the same
 * address).
 */
struct ht_event {
	uint8_t type;	  /* enum ht_event_type */
	uint8_t func;	  /* enum ht_func */
	uint16_t flags;	  /* HT_EVF_* */
	uint32_t process; /* index into the process table (one per pid image) */
	int32_t pid;
	int32_t tid;
	uint64_t ts;	 /* ns since the start of the trace */
	uint32_t stack;	 /* stack id, 0 = none captured */
	uint32_t module; /* MODULE_LOAD/UNLOAD: module id */
	uint64_t heap;	 /* heap handle, HT_HEAP_PROCESS for glibc malloc */
	uint64_t addr;
	uint64_t size;
	uint64_t old_addr;
	uint64_t old_size;
	uint32_t prot;	  /* PROT_* */
	uint32_t mflags;  /* MAP_* / MREMAP_* */
	int32_t fd;	  /* MMAP: the fd, -1 for anonymous */
	int32_t value;	  /* PROCESS_EXIT */
	const char *name; /* THREAD_START/NAME, HEAP_CREATE: valid until the next call */
};

/* One process image: a pid between two execs. */
struct ht_process {
	int32_t pid;
	int32_t ppid;
	uint32_t parent; /* process index of the parent, or UINT32_MAX */
	uint32_t flags;	 /* HT_PROCF_* */
	const char *exe;
	uint32_t argc;
	const char *const *argv;
	uint64_t start_ts; /* ns since trace start */
	uint64_t end_ts;   /* exit or exec or end of trace */
	int32_t exit_code; /* valid with HT_PROCF_EXITED */
	int32_t signal;	   /* valid with HT_PROCF_SIGNALED */
	/*
	 * Events of this image its recorder did not record, by cause (their
	 * sum is its part of the trace's events_lost), and the time of the
	 * first (ns since trace start; 0: none lost).
	 */
	uint64_t lost_lossy, lost_no_buffer, lost_in_handler;
	uint64_t lost_from_ts;
	/*
	 * Events after its recorder stopped recording while it ran (the
	 * session stopped, or its collector went away) until the trace ended,
	 * and when the first came: it is untraced from then (0: never). Not
	 * part of events_lost: they fall after the recording.
	 */
	uint64_t events_untraced;
	uint64_t untraced_from_ts;
};

#define HT_PROCF_ROOT 0x1u     /* the program the session launched */
#define HT_PROCF_FORK 0x2u     /* created by fork/clone */
#define HT_PROCF_EXEC 0x4u     /* replaced an earlier image of the same pid */
#define HT_PROCF_ATTACHED 0x8u /* the trace started after the process did */
#define HT_PROCF_EXITED 0x10u
#define HT_PROCF_SIGNALED 0x20u
#define HT_PROCF_EXECED 0x40u /* this image was replaced by exec */
/* No event of its own: only its parent's wait reported it (a fork child
   killed before it ran, or a child that was never traced). Its exe is
   unknown ("") and its start is the time of that report. */
#define HT_PROCF_UNSEEN 0x80u

struct ht_module {
	const char *path;
	const char *name;     /* file name part of path */
	const char *build_id; /* lowercase hex, "" when none */
};

/*
 * A logical frame: one function at one place. A return address inside inlined
 * code gives several logical frames (the inlined ones first, with inlined = 1).
 */
struct ht_frame {
	uint32_t module;      /* module id, or HT_MODULE_NONE */
	uint32_t line;	      /* 0 when unknown */
	uint64_t rel;	      /* ELF virtual address in the module (raw address when no module) */
	const char *function; /* demangled; NULL when no symbol */
	const char *file;     /* source file, NULL when unknown */
	uint8_t inlined;
};

#define HT_MODULE_NONE 0xffffffffu

/* What the trace says about itself. */
struct ht_trace_info {
	uint32_t version;
	uint64_t start_realtime_ns; /* wall clock at trace start, ns since epoch */
	uint64_t duration_ns;	    /* last event or stop time */
	uint64_t events_lost;
	uint32_t stack_mask; /* which events got stacks (HT_STK_* bits) */
	uint32_t flags;	     /* HT_TRACEF_* */
	uint32_t argc;	     /* command heaptrail recorded (argv of the target) */
	const char *const *argv;
	const char *hostname;
	uint32_t ts_unit_ns; /* event times are multiples of this (1: exact) */
	/*
	 * Why the recorded program could not be traced (statically linked,
	 * set-user-ID run by another user, its allocator inside the
	 * executable), as `heaptrail record` found before running it; "" when
	 * nothing was found.
	 */
	const char *untraced;
	/* events_lost by cause (0 in traces written before they were kept):
	   dropped by a full buffer in lossy mode, found no free buffer (too few
	   --buffers), made by a signal handler that interrupted the recorder. */
	uint64_t lost_lossy, lost_no_buffer, lost_in_handler;
	/*
	 * Sampling (docs/trace-format.md, "Sampled traces"): 0 when every
	 * allocation was recorded; else the mean distance in bytes between
	 * samples (--sample-rate), and the heap numbers the analysis derives
	 * are estimates (ht_sample_weight()).
	 */
	uint64_t sample_rate;
	/* A flight-recorder window (HT_TRACEF_WINDOW, docs/modes.md): the time
	   of its first kept event, the events dropped before it (never part of
	   events_lost), and the ring's limits (bytes, ns; 0: none). All 0 for
	   other traces. */
	uint64_t window_start_ns, window_dropped;
	uint64_t ring_bytes, ring_ns;
};

/*
 * How many allocations of size bytes one sampled allocation of that size
 * stands for at rate (bytes): 1 / (1 - exp(-size/rate)), 1 for size >= rate
 * or rate 0 (the tcmalloc / heapprofd estimate: unbiased for bytes and
 * count). Bytes estimate: size * weight.
 */
double ht_sample_weight(uint64_t size, uint64_t rate);

#define HT_TRACEF_COMPLETE 0x1u	 /* the session finished the trace normally */
#define HT_TRACEF_SYMBOLS 0x2u	 /* symbols were resolved and stored */
#define HT_TRACEF_TRUNCATED 0x4u /* the reader stopped at a damaged or partial chunk */
#define HT_TRACEF_LOSSY 0x8u
#define HT_TRACEF_ATTACHED 0x10u /* some process was joined after it started */
/* The newest events of a flight-recorder session with the state at their
   start (docs/modes.md); window_* in ht_trace_info say which. */
#define HT_TRACEF_WINDOW 0x20u
/* Heap snapshot mode: the heap is in SNAPSHOT events, not in ALLOC/FREE
   (format version 4; an older reader refuses the file). */
#define HT_TRACEF_SNAPSHOT 0x40u

struct ht_reader;

/*
 * Open a trace. On success *out owns the file until ht_reader_close(). A trace
 * that was not finished (no footer) opens too: its tables then fill in while
 * events are read, and ht_reader_info() has HT_TRACEF_COMPLETE clear.
 * While events are read, a finished trace's chunks are decoded ahead on
 * worker threads the reader starts and stops itself (at the end, rewind and
 * close; HT_READER_THREADS=0 in the environment: none), and a large stack
 * table is expanded into logical frames on a thread of its own from the open
 * on (ht_reader_stack() waits for it). A reader is used by one thread at a
 * time.
 */
int ht_reader_open(struct ht_reader **out, const char *path);

/*
 * The next event in time order into *ev. Returns 1 for an event, 0 at the end,
 * or a negative error. A damaged chunk ends the stream: it returns 0 and sets
 * HT_TRACEF_TRUNCATED, and ht_reader_warning() says where.
 */
int ht_reader_next(struct ht_reader *r, struct ht_event *ev);

/* Go back to the first event. */
int ht_reader_rewind(struct ht_reader *r);

/* A warning about the file (truncation, damage), or NULL. */
const char *ht_reader_warning(const struct ht_reader *r);

const struct ht_trace_info *ht_reader_info(const struct ht_reader *r);

uint32_t ht_reader_process_count(const struct ht_reader *r);
const struct ht_process *ht_reader_process(const struct ht_reader *r, uint32_t index);

uint32_t ht_reader_module_count(const struct ht_reader *r);
const struct ht_module *ht_reader_module(const struct ht_reader *r, uint32_t id);

uint32_t ht_reader_frame_count(const struct ht_reader *r);
const struct ht_frame *ht_reader_frame(const struct ht_reader *r, uint32_t id);

/* Number of stack ids; valid ids are 1 .. count - 1. */
uint32_t ht_reader_stack_count(const struct ht_reader *r);

/*
 * The logical frames of a stack, innermost first. Returns the number of frames
 * and points *frames at them (owned by the reader), or 0 for an unknown id.
 */
uint32_t ht_reader_stack(const struct ht_reader *r, uint32_t stack, const uint32_t **frames);

void ht_reader_close(struct ht_reader *r);

#ifdef __cplusplus
}
#endif
#endif
