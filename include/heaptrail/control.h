/*
 * heaptrail/control.h - start, change and stop named heap tracing sessions
 * from C: the counterpart of StartHeapTrace / UpdateHeapTrace and stopping a
 * session by name. `heaptrail start/update/stop/sessions` are built on it.
 *
 * A session is a background process (the session daemon) that owns the
 * shared buffers and writes one trace. Processes join it by pid (the
 * recorder is injected with ptrace, docs/attach.md) or, with
 * HT_TRACE_IFEO, by starting a program enabled with `heaptrail ifeo
 * enable` (docs/sessions.md). Sessions are per user: their control socket
 * and buffers are reachable only by the user that started them.
 *
 * Example (examples/suspended.c is a complete program):
 *
 *     struct ht_trace_properties props = HT_TRACE_PROPERTIES_INIT;
 *     ht_trace_handle h;
 *     snprintf(props.file, sizeof props.file, "/tmp/app.htr");
 *     enum ht_event_type stacks[] = { HT_EV_ALLOC, HT_EV_FREE };
 *     int rc = ht_start_heap_trace(&h, &props, "mytrace", &pid, 1, stacks, 2);
 *     if (rc < 0) { fprintf(stderr, "%s\n", ht_strerror(rc)); return 1; }
 *     ... the process runs ...
 *     rc = ht_stop_heap_trace(h, NULL, &props);   // props.events_written ...
 *
 * Every function returns 0 or a negative enum ht_error (heaptrail/trace.h).
 * Thread-safety: the functions may be called from any thread; calls on the
 * same session are serialized by the session daemon. ht_start_heap_trace()
 * forks: call it where fork() is safe.
 */
#ifndef HEAPTRAIL_CONTROL_H
#define HEAPTRAIL_CONTROL_H

#include <stdint.h>
#include <sys/types.h>

#include "heaptrail/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Identifies a session started by this process; 0 is never a valid handle. */
typedef uint64_t ht_trace_handle;

/* Longest session name: letters, digits, '.', '_' and '-', not starting with '.'. */
#define HT_SESSION_NAME_MAX 63

/* ht_trace_properties.flags */
#define HT_TRACE_LOSSY 0x1u /* drop events when a buffer is full and count them */
#define HT_TRACE_IFEO 0x2u  /* programs enabled with `heaptrail ifeo enable` join */
#define HT_TRACE_FORCE 0x4u /* overwrite an existing trace file */
/* Do not add the mappings no hook saw (found in /proc/PID/maps) to the
   committed memory (`start --no-maps`). */
#define HT_TRACE_NO_MAPS 0x8u
/* Heap snapshot mode: live blocks by stack instead of every allocation;
   `heaptrail snapshot NAME` takes one, and one is taken at the stop. */
#define HT_TRACE_SNAPSHOT 0x10u
#define HT_TRACE_FLAGS_ALL 0x1fu

/*
 * What a session is (in, for start) and what it did (out, filled by stop
 * and by query). Initialize with HT_TRACE_PROPERTIES_INIT.
 */
struct ht_trace_properties {
	/* in/out: the trace file. Empty: NAME.htr in the current directory.
	   Start makes it absolute; stop and query return it. */
	char file[4096];
	uint32_t buffer_size;	/* bytes per buffer (one per thread), a power of
				   two >= 4096; 0: 1 MiB */
	uint32_t buffers;	/* number of buffers, 1 .. 65536; 0: 512 */
	uint32_t flags;		/* HT_TRACE_*; unknown bits: HT_ERR_FLAGS */
	uint64_t max_file_size; /* > 0: the session ends by itself (trace
				   finished and symbolized) once the file is
				   this large */
	const char *recorder;	/* libheaptrail.so to inject; NULL: found next to
				   the program (../lib/) or where it is installed */

	/* out */
	uint64_t events_written; /* events in the trace */
	uint64_t events_lost;	 /* events dropped (lossy mode, no free buffer) */
	uint64_t buffers_lost;	 /* of those, dropped because no buffer was free */
	uint32_t buffers_in_use; /* query: buffers owned by a thread right now */
	pid_t daemon_pid;	 /* the session daemon */

	/* in: 0 records every allocation; else sample them, one per this many
	   bytes allocated on average (heap numbers become estimates; mappings
	   are all recorded). At most 1 TiB; not with HT_TRACE_IFEO. */
	uint64_t sample_rate;

	/* in: a flight recorder (docs/modes.md) keeping only the newest
	   ring_bytes of events (>= 64 KiB), or ring_ns of them (ring_bytes 0:
	   at most 256 MiB); ht_flush_heap_trace() writes the window, stop
	   writes it to file. Both 0: every event goes to the trace. */
	uint64_t ring_bytes;
	uint64_t ring_ns;

	/* in: with HT_TRACE_SNAPSHOT, also take a snapshot every this many ns
	   (at least 10 ms); 0: only when asked ('heaptrail snapshot NAME') and
	   at the stop. */
	uint64_t snapshot_interval_ns;

	/* out (stop, query): crashes in a flight-recorder session that found
	   the session's crash table full, so no window was written for them. */
	uint64_t crashes_unreported;

	/* out (stop, query): crash windows of a flight-recorder session written
	   next to the trace (FILE.crash-PID.htr), and those that could not be
	   written: crash_error is the first failure's enum ht_error,
	   crash_failed_pid its process (both 0 while none failed). */
	uint32_t crash_windows;
	uint32_t crash_windows_failed;
	int32_t crash_error;
	int32_t crash_failed_pid;

	/* out (stop): not 0 when frames went unsymbolized because the session
	   could not load libdw (install libdw1, then 'heaptrail symbolize'). */
	uint32_t symbols_missing;
	uint32_t pad;

	/* Room for the fields of later versions, so the struct keeps its size
	   within one soname: must be zero (HT_ERR_INVALID otherwise). */
	uint64_t reserved[4];
};

#define HT_TRACE_PROPERTIES_INIT                                                                   \
	{                                                                                          \
		{0}, 0, 0, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,             \
		{                                                                                  \
			0                                                                          \
		}                                                                                  \
	}

/*
 * Starts session session_name for pids (npids of them, may be 0: processes
 * join later with update, or through IFEO) and returns once every process
 * is traced. stack_events says which events capture a call stack (event
 * types: HT_EV_ALLOC, HT_EV_REALLOC, HT_EV_FREE, HT_EV_MMAP, HT_EV_MUNMAP,
 * HT_EV_MPROTECT, HT_EV_HEAP_CREATE, HT_EV_HEAP_DESTROY; mremap and brk go
 * with mmap); NULL means the default set (alloc, realloc, mmap, mprotect),
 * a non-NULL array with nstack_events 0 means none.
 *
 * *handle is set on success and is 0 on failure. props->file becomes the
 * absolute path of the trace. Errors: HT_ERR_EXISTS (a session of that name
 * runs, or the file exists without HT_TRACE_FORCE, or an IFEO session runs
 * already), HT_ERR_FLAGS (unknown flags or stack event), HT_ERR_NOMEM (the
 * buffers cannot be allocated), HT_ERR_INVALID (name, sizes),
 * HT_ERR_NOT_FOUND (no such process, no recorder), HT_ERR_PERM (no ptrace
 * permission), HT_ERR_IO. Nothing is left running on failure.
 */
int ht_start_heap_trace(ht_trace_handle *handle, struct ht_trace_properties *props,
			const char *session_name, const pid_t *pids, unsigned npids,
			const enum ht_event_type *stack_events, unsigned nstack_events);

/*
 * Replaces the session's set of processes when pids is not NULL (npids 0:
 * none but IFEO joiners) and its stack events when stack_events is not NULL
 * (seen by every recorder from its next event). Processes left out stop
 * being traced and keep running; new ones are attached. The session is named by handle, or by
 * session_name when handle is 0. Errors as for start, and HT_ERR_NOT_FOUND for an unknown session.
 * Every pid is checked before anything changes.
 */
int ht_update_heap_trace(ht_trace_handle handle, const char *session_name, const pid_t *pids,
			 unsigned npids, const enum ht_event_type *stack_events,
			 unsigned nstack_events);

/*
 * Stops the session (by handle, or by name when handle is 0): every process
 * is detached and runs on, the trace is finished and symbolized. When props
 * is not NULL it gets the file, events_written, events_lost and
 * buffers_lost. Returns when the trace is complete.
 */
int ht_stop_heap_trace(ht_trace_handle handle, const char *session_name,
		       struct ht_trace_properties *props);

/*
 * A flight-recorder session (ring_bytes or ring_ns at start; by handle, or
 * by name when handle is 0) writes its window to file now, a new file
 * (replaced atomically when force is not 0), and goes on recording. When
 * props is not NULL, events_written gets the events of the window. Errors:
 * HT_ERR_INVALID (not a flight recorder), HT_ERR_EXISTS (file exists), the
 * write's errors, HT_ERR_NOT_FOUND (no such session).
 */
int ht_flush_heap_trace(ht_trace_handle handle, const char *session_name, const char *file,
			int force, struct ht_trace_properties *props);

/*
 * What a running session is doing: props gets file, buffer_size, buffers,
 * flags, events_written, events_lost, buffers_in_use, daemon_pid; pids
 * (room for *npids, may be NULL) gets the live traced processes and *npids
 * their number (which may exceed the room given).
 */
int ht_query_heap_trace(ht_trace_handle handle, const char *session_name,
			struct ht_trace_properties *props, pid_t *pids, unsigned *npids);

/*
 * Names of the caller's running sessions, sorted: names[0 .. max-1].
 * Returns how many there are (possibly more than max) or a negative error.
 */
int ht_list_heap_traces(char (*names)[HT_SESSION_NAME_MAX + 1], unsigned max);

#ifdef __cplusplus
}
#endif

#endif
