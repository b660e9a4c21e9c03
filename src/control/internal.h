/*
 * internal.h - what the two halves of the control library share: the files
 * of a named session in the session directory, and the one-line request /
 * one-line reply protocol of its control socket (docs/control-protocol.md).
 */
#ifndef HT_CONTROL_INTERNAL_H
#define HT_CONTROL_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "control/ctl.h"
#include "heaptrail/control.h"

/* Longest request or reply line, newline included. */
#define HT__CTL_LINE 8192

/* The files of session NAME in the session directory. */
struct ht__ctl_paths {
	char dir[PATH_MAX];
	char lock[PATH_MAX]; /* NAME.lock: flock held by the daemon while it lives */
	char sock[PATH_MAX]; /* NAME.ctl: the control socket, mode 0600 */
	char shm[PATH_MAX];  /* NAME.shm: the shared buffers, mode 0600 */
	char ifeo[PATH_MAX]; /* "ifeo": symlink to the IFEO session's NAME.shm */
	char ifeo_lock[PATH_MAX];
};

/*
 * Fill p for name in the caller's default session directory, created when
 * create. Returns 0 or a negative enum ht_error.
 */
int ht__ctl_paths(struct ht__ctl_paths *p, const char *name, bool create);

/*
 * Sends one request line (without newline) to session name and reads the
 * reply line into reply (n bytes, newline removed). Replies "ERR CODE TEXT"
 * become that negative code; "OK ..." returns 0. timeout_ms bounds the
 * wait for the reply (-1: none). HT_ERR_NOT_FOUND when no session of that
 * name runs, HT_ERR_PERM when it is not ours.
 */
int ht__ctl_call(const char *name, const char *request, char *reply, size_t n, int timeout_ms);

/* Value of key in a reply line ("key=value ..."; file= takes the rest of
   the line) into out; false when absent. */
bool ht__ctl_get(const char *reply, const char *key, char *out, size_t n);
uint64_t ht__ctl_get_u64(const char *reply, const char *key);

/* HT_STK_* mask for a list of event types; HT_ERR_FLAGS for a type that
   has no stack. NULL: the default mask. */
int ht__ctl_stack_mask(const enum ht_event_type *ev, unsigned n, uint32_t *mask);

/* What the daemon is told at start. */
struct ht__daemon_args {
	struct ht__ctl_paths paths;
	char name[HT_SESSION_NAME_MAX + 1];
	char file[4096];
	char recorder[PATH_MAX];
	uint32_t buffer_size, buffers, flags, stack_mask;
	uint64_t max_file_size;
	uint64_t sample_rate;	       /* ht_trace_properties.sample_rate */
	uint64_t ring_bytes, ring_ns;  /* a flight recorder (docs/modes.md) when not 0 */
	uint64_t snapshot_interval_ns; /* ht_trace_properties.snapshot_interval_ns */
	const pid_t *pids;
	unsigned npids;
};

/* What the daemon writes to the ready pipe once it serves, or failed. */
struct ht__ready {
	int32_t rc;    /* 0 or a negative enum ht_error */
	int32_t pid;   /* the daemon */
	uint64_t id;   /* the session's id: the handle of ht_start_heap_trace() */
	char why[512]; /* what failed, one lowercase line, or empty */
};

/*
 * The session daemon, in a process of its own (already detached from the
 * caller): takes the name's lock, creates the session, the trace and the
 * control socket, attaches pids, then writes its start result (struct
 * ht__ready) to ready_fd, closes it and
 * serves until stopped. Never returns.
 */
_Noreturn void ht__daemon_main(const struct ht__daemon_args *a, int ready_fd);

#endif
