/*
 * control.c - the caller's side of include/heaptrail/control.h: starting a
 * session daemon (double fork, then waiting until it reports it is ready),
 * and talking to a running one over its control socket.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control/internal.h"
#include "base/errors.h"
#include "base/paths.h"
#include "base/protocol.h"
#include "session/session.h"

static __thread char last_why[512];

const char *ht__ctl_why(void)
{
	return last_why;
}

bool ht__ctl_name_ok(const char *name)
{
	if (!name || !*name || name[0] == '.' || strlen(name) > HT_SESSION_NAME_MAX)
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
			return false;
	/* "ifeo" names the IFEO session's link in the same directory. */
	return strcmp(name, "ifeo") != 0;
}

/* dir + "/" + name + suffix into out; false when it does not fit. */
static bool join(char *out, size_t n, const char *dir, const char *name, const char *suffix)
{
	int len = snprintf(out, n, "%s/%s%s", dir, name, suffix);
	return len >= 0 && (size_t)len < n;
}

int ht__ctl_paths(struct ht__ctl_paths *p, const char *name, bool create)
{
	memset(p, 0, sizeof(*p));
	int rc = ht__session_default_dir(p->dir, sizeof(p->dir) - 80, create);
	if (rc < 0)
		return rc;
	if (!join(p->ifeo, sizeof(p->ifeo), p->dir, "ifeo", "") ||
	    !join(p->ifeo_lock, sizeof(p->ifeo_lock), p->dir, "ifeo", ".lock"))
		return HT_ERR_INVALID;
	if (!name)
		return 0;
	if (!ht__ctl_name_ok(name))
		return HT_ERR_INVALID;
	if (!join(p->lock, sizeof(p->lock), p->dir, name, ".lock") ||
	    !join(p->shm, sizeof(p->shm), p->dir, name, ".shm") ||
	    !join(p->sock, sizeof(((struct sockaddr_un *)0)->sun_path), p->dir, name, ".ctl"))
		return HT_ERR_INVALID;
	return 0;
}

static int write_all(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return HT_ERR_IO;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Root's sessions started by systemd (the AutoLogger) live where a session
 * without XDG_RUNTIME_DIR lives (session.c's order: /run, /tmp, /dev/shm,
 * the first on a tmpfs); a root login shell has XDG_RUNTIME_DIR set.
 * HEAPTRAIL_ROOT moves them under another root, as it moves the IFEO
 * registry and the AutoLogger's unit (tests: a suite never finds the
 * machine's sessions).
 */
static bool system_sock(const char *name, char *out, size_t n)
{
	if (geteuid() != 0 || !getenv("XDG_RUNTIME_DIR"))
		return false;
	const char *root = getenv("HEAPTRAIL_ROOT");
	const char *dirs[] = {"/run/heaptrail", "/tmp/heaptrail-0", "/dev/shm/heaptrail-0"};
	for (size_t i = 0; i < 3; i++) {
		struct stat st;
		char dir[4096];
		int len = snprintf(dir, sizeof(dir), "%s%s", root ? root : "", dirs[i]);
		if (len < 0 || (size_t)len >= sizeof(dir) || !join(out, n, dir, name, ".ctl"))
			return false;
		if (stat(out, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_uid == 0)
			return true;
	}
	return false;
}

static int connect_to(const char *path, int *fd_out)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ht__error_from_errno(errno);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, path, strlen(path) + 1); /* fits: checked by the callers */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int rc = ht__error_from_errno(errno);
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

int ht__ctl_call(const char *name, const char *request, char *reply, size_t n, int timeout_ms)
{
	last_why[0] = 0;
	struct ht__ctl_paths p;
	int rc = ht__ctl_paths(&p, name, false);
	if (rc < 0)
		return rc;
	int fd;
	char sys[sizeof(((struct sockaddr_un *)0)->sun_path)];
	rc = connect_to(p.sock, &fd);
	if (rc == HT_ERR_NOT_FOUND && system_sock(name, sys, sizeof(sys)))
		rc = connect_to(sys, &fd);
	if (rc < 0)
		return rc;
	char line[HT__CTL_LINE];
	int len = snprintf(line, sizeof(line), "%s\n", request);
	if (len < 0 || (size_t)len >= sizeof(line)) {
		close(fd);
		return HT_ERR_INVALID;
	}
	/* A daemon that refuses us answers and closes before reading: its
	   answer is still there to read when the send fails. */
	write_all(fd, line, (size_t)len);
	size_t got = 0;
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int pr = poll(&pfd, 1, timeout_ms);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			close(fd);
			return HT_ERR_IO;
		}
		ssize_t r = read(fd, line + got, sizeof(line) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (memchr(line, '\n', got) || got == sizeof(line) - 1)
			break;
	}
	close(fd);
	line[got] = 0;
	char *nl = strchr(line, '\n');
	if (!nl)
		return HT_ERR_IO; /* the daemon went away mid-request */
	*nl = 0;
	if (reply && n)
		snprintf(reply, n, "%s", line);
	if (!strncmp(line, "OK", 2))
		return 0;
	int code, at = 0;
	if (sscanf(line, "ERR %d %n", &code, &at) >= 1 && code < 0) {
		snprintf(last_why, sizeof(last_why), "%s", at ? line + at : "");
		return code;
	}
	return HT_ERR_IO;
}

bool ht__ctl_get(const char *reply, const char *key, char *out, size_t n)
{
	size_t klen = strlen(key);
	for (const char *p = reply; (p = strstr(p, key)); p++) {
		if ((p != reply && p[-1] != ' ') || p[klen] != '=')
			continue;
		const char *v = p + klen + 1;
		size_t vlen = !strcmp(key, "file") ? strlen(v) : strcspn(v, " ");
		if (out && n)
			snprintf(out, n, "%.*s", (int)vlen, v);
		return true;
	}
	return false;
}

uint64_t ht__ctl_get_u64(const char *reply, const char *key)
{
	char v[32];
	return ht__ctl_get(reply, key, v, sizeof(v)) ? strtoull(v, NULL, 0) : 0;
}

int ht__ctl_stack_mask(const enum ht_event_type *ev, unsigned n, uint32_t *mask)
{
	if (!ev) {
		*mask = HT_STK_DEFAULT;
		return 0;
	}
	uint32_t m = 0;
	for (unsigned i = 0; i < n; i++) {
		uint32_t bit = 0;
		/* brk is an mmap kind too (HT_STK_MMAP); no other event has a stack. */
		if (ev[i] == HT_EV_BRK)
			bit = HT_STK_MMAP;
#define X(name, b, e, also)                                                                        \
	if (ev[i] == (e) || ev[i] == (also))                                                       \
		bit = (b);
		HT__STACK_KINDS(X)
#undef X
		if (!bit)
			return HT_ERR_FLAGS;
		m |= bit;
	}
	*mask = m;
	return 0;
}

/* ---- handles: which session this process started, by name ---- */

#define MAX_HANDLES 64

static struct {
	ht_trace_handle handle;
	char name[HT_SESSION_NAME_MAX + 1];
} handles[MAX_HANDLES];
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

static void handle_add(ht_trace_handle h, const char *name)
{
	pthread_mutex_lock(&handles_lock);
	for (int i = 0; i < MAX_HANDLES; i++)
		if (!handles[i].handle) {
			handles[i].handle = h;
			snprintf(handles[i].name, sizeof(handles[i].name), "%s", name);
			break;
		}
	pthread_mutex_unlock(&handles_lock);
}

/*
 * The session meant: by handle (its name from our table; the daemon checks
 * the id, so a handle of a session that ended and whose name was reused
 * fails), else by name. The request prefix names the id when known.
 */
static int resolve(ht_trace_handle h, const char *name, char *out, uint64_t *id)
{
	*id = 0;
	if (!h) {
		if (!ht__ctl_name_ok(name))
			return HT_ERR_INVALID;
		snprintf(out, HT_SESSION_NAME_MAX + 1, "%s", name);
		return 0;
	}
	int rc = HT_ERR_NOT_FOUND;
	pthread_mutex_lock(&handles_lock);
	for (int i = 0; i < MAX_HANDLES; i++)
		if (handles[i].handle == h) {
			snprintf(out, HT_SESSION_NAME_MAX + 1, "%s", handles[i].name);
			*id = h;
			rc = 0;
		}
	pthread_mutex_unlock(&handles_lock);
	return rc;
}

static void handle_forget(ht_trace_handle h)
{
	pthread_mutex_lock(&handles_lock);
	for (int i = 0; i < MAX_HANDLES; i++)
		if (handles[i].handle == h)
			handles[i].handle = 0;
	pthread_mutex_unlock(&handles_lock);
}

/* ---- start ---- */

/* The recorder, next to the program or this library (base/paths.h). */
static int find_recorder(char *out, size_t n)
{
	return ht__lib_path("libheaptrail.so", out, n);
}

static int format_pids(char *buf, size_t n, const pid_t *pids, unsigned npids)
{
	size_t off = 0;
	buf[0] = 0;
	for (unsigned i = 0; i < npids; i++) {
		if (pids[i] <= 0)
			return HT_ERR_INVALID;
		int w = snprintf(buf + off, n - off, "%s%d", i ? "," : "", (int)pids[i]);
		if (w < 0 || (size_t)w >= n - off)
			return HT_ERR_INVALID;
		off += (size_t)w;
	}
	return 0;
}

/* ht_start_heap_trace() once its arguments are checked; a is zeroed, ours to fill. */
static int start(ht_trace_handle *handle, struct ht_trace_properties *props,
		 const char *session_name, const pid_t *pids, unsigned npids,
		 const enum ht_event_type *stack_events, unsigned nstack_events,
		 struct ht__daemon_args *a);

int ht_start_heap_trace(ht_trace_handle *handle, struct ht_trace_properties *props,
			const char *session_name, const pid_t *pids, unsigned npids,
			const enum ht_event_type *stack_events, unsigned nstack_events)
{
	if (handle)
		*handle = 0;
	if (!handle || !props || (npids && !pids) || npids > HT__CTL_MAX_PIDS)
		return HT_ERR_INVALID;
	if (props->flags & ~HT_TRACE_FLAGS_ALL)
		return HT_ERR_FLAGS;
	if (!ht__ctl_name_ok(session_name))
		return HT_ERR_INVALID;
	uint32_t size = props->buffer_size, count = props->buffers;
	if ((size && (size < 4096 || (size & (size - 1)) || size > (1u << 30))) || count > 65536)
		return HT_ERR_INVALID;
	if ((props->ring_bytes && props->ring_bytes < (64u << 10)) ||
	    ((props->ring_bytes || props->ring_ns) && props->max_file_size))
		return HT_ERR_INVALID;
	if (props->snapshot_interval_ns &&
	    (!(props->flags & HT_TRACE_SNAPSHOT) || props->snapshot_interval_ns < 10000000ull))
		return HT_ERR_INVALID;
	for (unsigned i = 0; i < npids; i++)
		if (pids[i] <= 0)
			return HT_ERR_INVALID;
	/* IFEO programs record in full before they join: one rate per trace. */
	if (props->sample_rate > (1ull << 40) ||
	    (props->sample_rate && (props->flags & HT_TRACE_IFEO)))
		return HT_ERR_INVALID;
	/* A field this version does not know: refused, never ignored. */
	for (size_t i = 0; i < sizeof(props->reserved) / sizeof(props->reserved[0]); i++)
		if (props->reserved[i])
			return HT_ERR_INVALID;

	/* Large (paths): on the heap, so that threads may start sessions at once. */
	struct ht__daemon_args *args = calloc(1, sizeof(*args));
	if (!args)
		return HT_ERR_NOMEM;
	int rc = start(handle, props, session_name, pids, npids, stack_events, nstack_events, args);
	free(args);
	return rc;
}

static int start(ht_trace_handle *handle, struct ht_trace_properties *props,
		 const char *session_name, const pid_t *pids, unsigned npids,
		 const enum ht_event_type *stack_events, unsigned nstack_events,
		 struct ht__daemon_args *a)
{
	int rc = ht__ctl_stack_mask(stack_events, nstack_events, &a->stack_mask);
	if (rc < 0)
		return rc;
	/* A heap snapshot is kept by the stack that allocated: those are on. */
	if (props->flags & HT_TRACE_SNAPSHOT)
		a->stack_mask |= HT_STK_ALLOC | HT_STK_REALLOC;
	uint32_t size = props->buffer_size, count = props->buffers;
	if ((rc = ht__ctl_paths(&a->paths, session_name, true)) < 0)
		return rc;
	snprintf(a->name, sizeof(a->name), "%s", session_name);
	a->buffer_size = size;
	a->buffers = count;
	a->flags = props->flags;
	a->max_file_size = props->max_file_size;
	a->sample_rate = props->sample_rate;
	a->ring_bytes = props->ring_bytes;
	a->ring_ns = props->ring_ns;
	a->snapshot_interval_ns = props->snapshot_interval_ns;
	if (a->ring_ns && !a->ring_bytes)
		a->ring_bytes = 256ull << 20; /* HT__RING_KEEP_TIME_CAP */
	a->pids = pids;
	a->npids = npids;
	if (props->recorder) {
		if (!realpath(props->recorder, a->recorder))
			return HT_ERR_NOT_FOUND;
	} else if ((rc = find_recorder(a->recorder, sizeof(a->recorder))) < 0) {
		/* Needed now for pids; without, a later update says it is missing. */
		if (npids)
			return rc;
		a->recorder[0] = 0;
	}

	/* The trace path is absolute: the daemon works from "/". */
	char file[4096];
	if (props->file[0])
		snprintf(file, sizeof(file), "%s", props->file);
	else
		snprintf(file, sizeof(file), "%s.htr", session_name);
	if (file[0] != '/') {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)))
			return HT_ERR_IO;
		if ((size_t)snprintf(a->file, sizeof(a->file), "%s/%s", cwd, file) >=
		    sizeof(a->file))
			return HT_ERR_INVALID;
	} else {
		snprintf(a->file, sizeof(a->file), "%s", file);
	}

	int ready[2];
	if (pipe2(ready, O_CLOEXEC) < 0)
		return ht__error_from_errno(errno);
	pid_t mid = fork();
	if (mid < 0) {
		rc = ht__error_from_errno(errno);
		close(ready[0]);
		close(ready[1]);
		return rc;
	}
	if (mid == 0) {
		/* Double fork: the daemon is no child of the caller and has no terminal. */
		close(ready[0]);
		setsid();
		pid_t d = fork();
		if (d < 0) {
			struct ht__ready fail = {HT_ERR_IO, 0, 0, "cannot fork"};
			if (write(ready[1], &fail, sizeof(fail)) < 0)
				_exit(1);
			_exit(1);
		}
		if (d > 0)
			_exit(0);
		ht__daemon_main(a, ready[1]);
	}
	close(ready[1]);
	int st;
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	struct ht__ready res = {HT_ERR_IO, 0, 0, ""};
	last_why[0] = 0;
	size_t got = 0;
	while (got < sizeof(res)) {
		ssize_t r = read(ready[0], (char *)&res + got, sizeof(res) - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(ready[0]);
	res.why[sizeof(res.why) - 1] = 0;
	snprintf(last_why, sizeof(last_why), "%s", got == sizeof(res) ? res.why : "");
	if (got != sizeof(res))
		return res.rc < 0 && got >= sizeof(res.rc) ? res.rc : HT_ERR_IO;
	if (res.rc < 0)
		return res.rc;
	snprintf(props->file, sizeof(props->file), "%s", a->file);
	props->daemon_pid = res.pid;
	*handle = res.id;
	handle_add(res.id, session_name);
	return 0;
}

/* ---- update, stop, query, list ---- */

static int request(ht_trace_handle h, const char *name, const char *verb, const char *args,
		   char *reply, size_t n, int timeout_ms)
{
	char which[HT_SESSION_NAME_MAX + 1];
	uint64_t id;
	int rc = resolve(h, name, which, &id);
	if (rc < 0)
		return rc;
	char *req = malloc(HT__CTL_LINE);
	if (!req)
		return HT_ERR_NOMEM;
	int len = snprintf(req, HT__CTL_LINE, "%s id=%llu%s%s", verb, (unsigned long long)id,
			   args ? " " : "", args ? args : "");
	if (len < 0 || len >= HT__CTL_LINE - 1) {
		free(req);
		return HT_ERR_INVALID;
	}
	rc = ht__ctl_call(which, req, reply, n, timeout_ms);
	free(req);
	return rc;
}

int ht_update_heap_trace(ht_trace_handle handle, const char *session_name, const pid_t *pids,
			 unsigned npids, const enum ht_event_type *stack_events,
			 unsigned nstack_events)
{
	if (npids > HT__CTL_MAX_PIDS || (npids && !pids))
		return HT_ERR_INVALID;
	char *args = malloc(HT__CTL_LINE);
	if (!args)
		return HT_ERR_NOMEM;
	int rc = 0;
	char list[HT__CTL_LINE - 256];
	if ((rc = format_pids(list, sizeof(list), pids, npids)) < 0)
		goto out;
	uint32_t mask = 0;
	if (stack_events && (rc = ht__ctl_stack_mask(stack_events, nstack_events, &mask)) < 0)
		goto out;
	/* No pids array: the set stays as it is (only the stacks change). */
	char pidarg[HT__CTL_LINE - 200];
	if (pids)
		snprintf(pidarg, sizeof(pidarg), "pids=%s", npids ? list : "-");
	else
		snprintf(pidarg, sizeof(pidarg), "pids=keep");
	if (stack_events)
		snprintf(args, HT__CTL_LINE, "%s stacks=0x%x", pidarg, mask);
	else
		snprintf(args, HT__CTL_LINE, "%s", pidarg);
	char reply[HT__CTL_LINE];
	rc = request(handle, session_name, "UPDATE", args, reply, sizeof(reply), 120000);
out:
	free(args);
	return rc;
}

static void fill_props(struct ht_trace_properties *props, const char *reply)
{
	ht__ctl_get(reply, "file", props->file, sizeof(props->file));
	props->events_written = ht__ctl_get_u64(reply, "events");
	props->events_lost = ht__ctl_get_u64(reply, "lost");
	props->buffers_lost = ht__ctl_get_u64(reply, "buffers_lost");
	props->crashes_unreported = ht__ctl_get_u64(reply, "crashes_unreported");
	props->crash_windows = (uint32_t)ht__ctl_get_u64(reply, "crash_windows");
	props->crash_windows_failed = (uint32_t)ht__ctl_get_u64(reply, "crash_windows_failed");
	props->crash_error = (int32_t)ht__ctl_get_u64(reply, "crash_error");
	props->crash_failed_pid = (int32_t)ht__ctl_get_u64(reply, "crash_failed_pid");
	props->symbols_missing = (uint32_t)ht__ctl_get_u64(reply, "symbols_missing");
	props->buffer_size = (uint32_t)ht__ctl_get_u64(reply, "buffer_size");
	props->buffers = (uint32_t)ht__ctl_get_u64(reply, "buffers");
	props->buffers_in_use = (uint32_t)ht__ctl_get_u64(reply, "buffers_used");
	props->flags = (uint32_t)ht__ctl_get_u64(reply, "flags");
	props->max_file_size = ht__ctl_get_u64(reply, "max_size");
	props->daemon_pid = (pid_t)ht__ctl_get_u64(reply, "pid");
}

int ht_stop_heap_trace(ht_trace_handle handle, const char *session_name,
		       struct ht_trace_properties *props)
{
	char reply[HT__CTL_LINE];
	/* Symbolizing a long trace takes a while: no time limit. */
	int rc = request(handle, session_name, "STOP", NULL, reply, sizeof(reply), -1);
	if (rc < 0)
		return rc;
	if (props)
		fill_props(props, reply);
	if (handle)
		handle_forget(handle);
	return 0;
}

int ht_flush_heap_trace(ht_trace_handle handle, const char *session_name, const char *file,
			int force, struct ht_trace_properties *props)
{
	if (!file || !*file || strchr(file, '\n'))
		return HT_ERR_INVALID;
	/* The path is absolute: the daemon works from "/". */
	char args[HT__CTL_LINE - 256], cwd[PATH_MAX] = "";
	if (file[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		return HT_ERR_IO;
	if ((size_t)snprintf(args, sizeof(args), "force=%d file=%s%s%s", force ? 1 : 0, cwd,
			     *cwd ? "/" : "", file) >= sizeof(args))
		return HT_ERR_INVALID;
	char reply[HT__CTL_LINE];
	/* Symbolizing the window's frames may take a while: no time limit. */
	int rc = request(handle, session_name, "FLUSH", args, reply, sizeof(reply), -1);
	if (rc < 0)
		return rc;
	if (props) {
		ht__ctl_get(reply, "file", props->file, sizeof(props->file));
		props->events_written = ht__ctl_get_u64(reply, "events");
	}
	return 0;
}

int ht_query_heap_trace(ht_trace_handle handle, const char *session_name,
			struct ht_trace_properties *props, pid_t *pids, unsigned *npids)
{
	char reply[HT__CTL_LINE];
	int rc = request(handle, session_name, "STATUS", NULL, reply, sizeof(reply), 10000);
	if (rc < 0)
		return rc;
	if (props)
		fill_props(props, reply);
	if (npids) {
		char list[HT__CTL_LINE];
		unsigned n = 0, room = pids ? *npids : 0;
		if (ht__ctl_get(reply, "pids", list, sizeof(list)) && strcmp(list, "-"))
			for (char *p = list; *p;) {
				long v = strtol(p, &p, 10);
				if (n < room)
					pids[n] = (pid_t)v;
				n++;
				if (*p == ',')
					p++;
				else
					break;
			}
		*npids = n;
	}
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* NAME's files in dir, when the lock file has no holder: its daemon died. */
static int remove_dead_one(int dfd, const char *name)
{
	char path[HT_SESSION_NAME_MAX + 8];
	snprintf(path, sizeof(path), "%s.lock", name);
	int fd = openat(dfd, path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	/* The daemon holds its lock from before it makes the other files until
	   after it removed them; a daemon starting meanwhile finds the lock
	   file gone or replaced and takes the new one (daemon.c, take_lock). */
	int removed = 0;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		static const char *const sfx[] = {".ctl", ".shm"};
		for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
			snprintf(path, sizeof(path), "%s%s", name, sfx[i]);
			unlinkat(dfd, path, 0);
		}
		snprintf(path, sizeof(path), "%s.lock", name);
		removed = unlinkat(dfd, path, 0) == 0;
	}
	close(fd);
	return removed;
}

int ht__ctl_remove_dead(const char *name, char *dir, unsigned long n)
{
	struct ht__ctl_paths p;
	int rc = ht__ctl_paths(&p, NULL, false);
	if (rc < 0)
		return rc;
	if (dir)
		snprintf(dir, n, "%s", p.dir);
	if (name && !ht__ctl_name_ok(name))
		return HT_ERR_INVALID;
	DIR *d = opendir(p.dir);
	if (!d)
		return errno == ENOENT ? 0 : ht__error_from_errno(errno);
	int removed = name ? remove_dead_one(dirfd(d), name) : 0;
	for (struct dirent *e; !name && (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		char one[HT_SESSION_NAME_MAX + 1];
		if (len < 6 || strcmp(e->d_name + len - 5, ".lock") ||
		    len - 5 > HT_SESSION_NAME_MAX)
			continue;
		snprintf(one, sizeof(one), "%.*s", (int)(len - 5), e->d_name);
		/* ifeo.lock is the IFEO role's, not a session's. */
		if (ht__ctl_name_ok(one))
			removed += remove_dead_one(dirfd(d), one);
	}
	closedir(d);
	return removed;
}

int ht_list_heap_traces(char (*names)[HT_SESSION_NAME_MAX + 1], unsigned max)
{
	struct ht__ctl_paths p;
	int rc = ht__ctl_paths(&p, NULL, false);
	if (rc < 0)
		return rc;
	DIR *d = opendir(p.dir);
	if (!d)
		return errno == ENOENT ? 0 : ht__error_from_errno(errno);
	unsigned n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 5 || strcmp(e->d_name + len - 4, ".ctl") || len - 4 > HT_SESSION_NAME_MAX)
			continue;
		char name[HT_SESSION_NAME_MAX + 1];
		snprintf(name, sizeof(name), "%.*s", (int)(len - 4), e->d_name);
		if (!ht__ctl_name_ok(name))
			continue;
		/* A socket left by a daemon that died is no session: its files go. */
		if (ht__ctl_call(name, "PING", NULL, 0, 2000) < 0) {
			remove_dead_one(dirfd(d), name);
			continue;
		}
		if (n < max)
			snprintf(names[n], sizeof(names[n]), "%s", name);
		n++;
	}
	closedir(d);
	if (names)
		qsort(names, n < max ? n : max, sizeof(names[0]), cmp_names);
	return (int)n;
}
