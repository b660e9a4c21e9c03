/*
 * daemon.c - the session daemon of a named session: one process that owns
 * the session (src/session/session.h) and its trace writer, ticks the
 * collector in its main thread, and serves the control socket in a second
 * thread (docs/control-protocol.md), attaching and detaching processes with
 * the injector (src/inject/inject.h) there so that a slow injection never
 * holds up draining.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control/internal.h"
#include "control/relay.h"
#include "format/output.h"
#include "format/writer.h"
#include "inject/inject.h"
#include "session/live.h"
#include "session/ring_keep.h"
#include "base/protocol.h"
#include "session/session.h"
#include "base/vec.h"

struct member {
	pid_t pid;
	bool attached;
	struct ht__attach att;
};

static struct {
	const struct ht__daemon_args *a;
	uint64_t id;
	struct ht__session *s;
	struct ht__writer *w;
	int listen_fd;
	pthread_mutex_t sess_lock;    /* the session and its stats: main thread ticks */
	pthread_mutex_t members_lock; /* members[], injections */
	struct member *members;	      /* processes attached by pid */
	unsigned nmembers;
	size_t members_cap;
	pid_t removed[HT__CTL_MAX_PIDS]; /* detached by update: no longer listed */
	unsigned nremoved;
	volatile sig_atomic_t stop; /* asked by STOP, a signal, or the size limit */
	int stop_fd;		    /* the STOP client, answered when the trace is done */
	uint32_t stack_mask;
	struct ht__relay *relay;    /* IFEO: buffers of programs that started first */
	struct ht__ring_keep *ring; /* a flight recorder: the window, not a trace */
	struct ht__output out;	    /* with ring: the trace, written at the end */
	struct ht__trace_meta meta; /* with ring: what each window's trace gets */
	unsigned crashes;	    /* windows written for crashes */
	unsigned crashes_failed;    /* ... and not written: */
	int crash_error;	    /* the first one's error */
	int32_t crash_failed_pid;   /* and process */
} D = {.sess_lock = PTHREAD_MUTEX_INITIALIZER,
       .members_lock = PTHREAD_MUTEX_INITIALIZER,
       .stop_fd = -1};

static void on_signal(int sig)
{
	(void)sig;
	D.stop = 1;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void send_line(int fd, const char *line)
{
	size_t n = strlen(line);
	while (n) {
		ssize_t w = send(fd, line, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		line += w;
		n -= (size_t)w;
	}
}

static void reply_err(int fd, int rc, const char *what)
{
	char line[HT__CTL_LINE];
	int n = snprintf(line, sizeof(line), "ERR %d %s\n", rc, what ? what : ht_strerror(rc));
	if (n >= (int)sizeof(line)) /* cut short: still one line */
		line[sizeof(line) - 2] = '\n';
	send_line(fd, line);
}

/* ---- members: processes attached by pid ---- */

static int check_pid(pid_t pid, char *why, size_t n)
{
	if (pid == getpid()) {
		snprintf(why, n, "process %d is the session itself", (int)pid);
		return HT_ERR_INVALID;
	}
	int rc = ht__inject_check(pid);
	if (rc == HT_ERR_NOT_FOUND || (rc == 0 && ht__pid_exited(pid))) {
		snprintf(why, n, "no process %d", (int)pid);
		return HT_ERR_NOT_FOUND;
	}
	if (rc == HT_ERR_PERM) {
		char hint[512];
		ht__inject_perm_hint(pid, hint, sizeof(hint));
		snprintf(why, n, "cannot trace process %d: %s", (int)pid, hint);
	}
	return rc;
}

static struct member *member_of(pid_t pid)
{
	for (unsigned i = 0; i < D.nmembers; i++)
		if (D.members[i].pid == pid)
			return &D.members[i];
	return NULL;
}

/* Attach pid (members_lock held). */
static int member_add(pid_t pid, char *why, size_t n)
{
	struct member *m = member_of(pid);
	if (m && m->attached && !ht__pid_exited(pid))
		return 0;
	if (!D.a->recorder[0]) {
		snprintf(why, n, "cannot find the recorder libheaptrail.so to load into process %d",
			 (int)pid);
		return HT_ERR_NOT_FOUND;
	}
	for (unsigned i = 0; i < D.nremoved; i++)
		if (D.removed[i] == pid)
			D.removed[i--] = D.removed[--D.nremoved];
	if (!m) {
		if (ht__grow((void **)&D.members, &D.members_cap, (size_t)D.nmembers + 1,
			     sizeof(*D.members)) < 0)
			return HT_ERR_NOMEM;
		m = &D.members[D.nmembers++];
		memset(m, 0, sizeof(*m));
		m->pid = pid;
	}
	char w[512] = "";
	int rc =
	    ht__inject_attach(&m->att, pid, D.a->recorder, ht__session_path(D.s), w, sizeof(w));
	m->attached = rc == 0;
	if (rc < 0) {
		if (rc == HT_ERR_PERM) {
			char hint[512];
			ht__inject_perm_hint(pid, hint, sizeof(hint));
			snprintf(why, n, "cannot attach to process %d: %s", (int)pid, hint);
		} else {
			snprintf(why, n, "cannot attach to process %d: %s", (int)pid, w);
		}
		*m = D.members[--D.nmembers];
	}
	return rc;
}

/* Detach member i and drop it (members_lock held). */
static int member_remove(unsigned i, char *why, size_t n)
{
	struct member *m = &D.members[i];
	int rc = 0;
	if (m->attached && !ht__pid_exited(m->pid)) {
		char w[512] = "";
		rc = ht__inject_detach(&m->att, w, sizeof(w));
		if (rc == HT_ERR_NOT_FOUND)
			rc = 0; /* exec'd or gone: nothing to undo */
		if (rc < 0)
			snprintf(why, n, "cannot detach from process %d: %s", (int)m->pid, w);
	}
	if (D.nremoved < HT__CTL_MAX_PIDS)
		D.removed[D.nremoved++] = m->pid;
	D.members[i] = D.members[--D.nmembers];
	return rc;
}

/* ---- requests ---- */

/* The crash windows' fields of the status and stop lines (sess_lock held). */
static void crash_fields(char *out, size_t n)
{
	snprintf(out, n,
		 "crash_windows=%u crash_windows_failed=%u crash_error=%d crash_failed_pid=%d",
		 D.crashes, D.crashes_failed, D.crash_error, (int)D.crash_failed_pid);
}

/* "OK name=... pid=... ... file=PATH", the state of the session. */
static void status_line(char *out, size_t n, const char *verb_extra)
{
	pid_t live[HT__CTL_MAX_PIDS];
	unsigned nlive;
	uint64_t events, lost, unreported;
	uint32_t used;
	pthread_mutex_lock(&D.sess_lock);
	nlive = ht__session_live_pids(D.s, live, HT__CTL_MAX_PIDS);
	events = ht__session_stats(D.s)->events;
	unreported = ht__session_stats(D.s)->crashes_unreported;
	lost = ht__session_lost_now(D.s);
	used = ht__session_rings_in_use(D.s);
	uint64_t exhausted = atomic_load(&ht__session_header(D.s)->rings_exhausted);
	char crashes[160];
	crash_fields(crashes, sizeof(crashes));
	pthread_mutex_unlock(&D.sess_lock);
	if (nlive > HT__CTL_MAX_PIDS)
		nlive = HT__CTL_MAX_PIDS;
	/* Processes attached a moment ago show before their first event is
	   drained; processes detached by update are no longer listed. */
	pthread_mutex_lock(&D.members_lock);
	for (unsigned k = 0; k < nlive; k++)
		for (unsigned i = 0; i < D.nremoved; i++)
			if (live[k] == D.removed[i]) {
				live[k--] = live[--nlive];
				break;
			}
	for (unsigned i = 0; i < D.nmembers && nlive < HT__CTL_MAX_PIDS; i++) {
		bool seen = false;
		for (unsigned k = 0; k < nlive; k++)
			seen |= live[k] == D.members[i].pid;
		if (!seen && D.members[i].attached && !ht__pid_exited(D.members[i].pid))
			live[nlive++] = D.members[i].pid;
	}
	pthread_mutex_unlock(&D.members_lock);
	char pids[HT__CTL_MAX_PIDS * 12 + 2] = "-";
	size_t off = 0;
	for (unsigned i = 0; i < nlive; i++)
		off += (size_t)snprintf(pids + off, sizeof(pids) - off, "%s%d", i ? "," : "",
					(int)live[i]);
	const struct ht__shm_header *h = ht__session_header(D.s);
	snprintf(out, n,
		 "OK%s name=%s id=%llu pid=%d pids=%s events=%llu lost=%llu buffers_lost=%llu "
		 "buffers=%u "
		 "buffer_size=%u buffers_used=%u stacks=0x%x flags=0x%x max_size=%llu "
		 "crashes_unreported=%llu %s file=%s\n",
		 verb_extra, D.a->name, (unsigned long long)D.id, (int)getpid(), pids,
		 (unsigned long long)events, (unsigned long long)lost,
		 (unsigned long long)exhausted, h->ring_count, h->ring_size, used, D.stack_mask,
		 D.a->flags, (unsigned long long)D.a->max_file_size, (unsigned long long)unreported,
		 crashes, D.a->file);
}

static int parse_pid_list(const char *v, pid_t *out, unsigned *n)
{
	*n = 0;
	if (!strcmp(v, "-"))
		return 0;
	while (*v) {
		char *end;
		long p = strtol(v, &end, 10);
		if (end == v || p <= 0 || p > INT32_MAX || (*end && *end != ',') ||
		    *n >= HT__CTL_MAX_PIDS)
			return HT_ERR_INVALID;
		bool dup = false;
		for (unsigned i = 0; i < *n; i++)
			dup |= out[i] == (pid_t)p;
		if (!dup)
			out[(*n)++] = (pid_t)p;
		v = *end ? end + 1 : end;
	}
	return 0;
}

static void do_update(int fd, const char *line)
{
	char v[HT__CTL_LINE];
	pid_t want[HT__CTL_MAX_PIDS];
	unsigned nwant = 0;
	char why[1024] = "";
	bool keep = ht__ctl_get(line, "pids", v, sizeof(v)) && !strcmp(v, "keep");
	if (!keep &&
	    (!ht__ctl_get(line, "pids", v, sizeof(v)) || parse_pid_list(v, want, &nwant) < 0)) {
		reply_err(fd, HT_ERR_INVALID, "invalid process list");
		return;
	}
	uint32_t mask = D.stack_mask;
	if (ht__ctl_get(line, "stacks", v, sizeof(v))) {
		char *end;
		unsigned long m = strtoul(v, &end, 0);
		if (*end || (m & ~(unsigned long)HT_STK_ALL)) {
			reply_err(fd, HT_ERR_FLAGS, NULL);
			return;
		}
		mask = (uint32_t)m;
	}
	pthread_mutex_lock(&D.members_lock);
	if (keep) {
		nwant = 0;
		for (unsigned i = 0; i < D.nmembers && nwant < HT__CTL_MAX_PIDS; i++)
			want[nwant++] = D.members[i].pid;
	}
	/* Every new process is checked before anything changes. */
	for (unsigned i = 0; i < nwant; i++) {
		struct member *m = member_of(want[i]);
		if (m && m->attached && !ht__pid_exited(want[i]))
			continue;
		int rc = check_pid(want[i], why, sizeof(why));
		if (rc < 0) {
			pthread_mutex_unlock(&D.members_lock);
			reply_err(fd, rc, why);
			return;
		}
	}
	int err = 0;
	for (unsigned i = 0; i < D.nmembers;) {
		bool keep = false;
		for (unsigned k = 0; k < nwant; k++)
			keep |= D.members[i].pid == want[k];
		if (keep) {
			i++;
			continue;
		}
		int rc = member_remove(i, why, sizeof(why));
		if (rc < 0 && !err)
			err = rc;
	}
	/* The new mask before new processes start: they read it at attach. */
	D.stack_mask = mask;
	__atomic_store_n(&ht__session_header(D.s)->stack_mask, mask, __ATOMIC_RELAXED);
	for (unsigned k = 0; k < nwant; k++) {
		int rc = member_add(want[k], why, sizeof(why));
		if (rc < 0 && !err)
			err = rc;
	}
	pthread_mutex_unlock(&D.members_lock);
	if (err) {
		reply_err(fd, err, why);
		return;
	}
	char out[HT__CTL_LINE];
	status_line(out, sizeof(out), "");
	send_line(fd, out);
}

/* Reads one request line from fd into buf; false on timeout or close. */
static bool read_line(int fd, char *buf, size_t n)
{
	size_t got = 0;
	uint64_t deadline = mono_ns() + 5000000000ull;
	while (got < n - 1) {
		uint64_t now = mono_ns();
		if (now >= deadline)
			return false;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int pr = poll(&p, 1, (int)((deadline - now) / 1000000) + 1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			return false;
		ssize_t r = read(fd, buf + got, n - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		got += (size_t)r;
		buf[got] = 0;
		char *nl = strchr(buf, '\n');
		if (nl) {
			*nl = 0;
			return true;
		}
	}
	return false;
}

/* Write the window to path (sess_lock held); 0 or an error, with why. */
static int write_window(const char *path, bool force, struct ht__ring_keep_result *res, char *why,
			size_t n)
{
	struct ht__output o;
	int rc = ht__output_open(&o, path, force ? HT__OUT_FORCE : 0, 0600, why, n);
	if (rc < 0)
		return rc;
	if ((rc = ht__ring_keep_write(D.ring, D.s, &o, D.meta, res)) < 0)
		snprintf(why, n, "cannot write '%s': %s", path, ht_strerror(rc));
	return rc;
}

#define FLUSH_WAIT_NS 10000000000ull

static void do_flush(int fd, const char *line)
{
	char file[4096], v[16], why[HT__CTL_LINE] = ""; /* room for file's name */
	if (!D.ring) {
		reply_err(fd, HT_ERR_INVALID,
			  "the session is not a flight recorder (start it with --ring)");
		return;
	}
	if (!ht__ctl_get(line, "file", file, sizeof(file)) || file[0] != '/') {
		reply_err(fd, HT_ERR_INVALID, "flush needs an absolute file=PATH");
		return;
	}
	bool force = ht__ctl_get(line, "force", v, sizeof(v)) && !strcmp(v, "1");
	struct ht__ring_keep_result res;
	/* Every event committed before the request is in the window: the main
	   thread's ticks merge up to it first (at most FLUSH_WAIT_NS, then the
	   window as it is). */
	uint64_t asked = mono_ns();
	pthread_mutex_lock(&D.sess_lock);
	while (!D.stop && !ht__session_merged_past(D.s, asked) &&
	       mono_ns() - asked < FLUSH_WAIT_NS) {
		pthread_mutex_unlock(&D.sess_lock);
		usleep(1000);
		pthread_mutex_lock(&D.sess_lock);
	}
	int rc = write_window(file, force, &res, why, sizeof(why));
	pthread_mutex_unlock(&D.sess_lock);
	if (rc < 0) {
		reply_err(fd, rc, why);
		return;
	}
	char out[HT__CTL_LINE];
	snprintf(out, sizeof(out), "OK events=%llu dropped=%llu window_start=%llu file=%s\n",
		 (unsigned long long)res.events, (unsigned long long)res.dropped,
		 (unsigned long long)res.window_start_ns, file);
	send_line(fd, out);
}

/* After a tick (sess_lock held): a traced process that crashed gets the
   window written next to the trace (docs/modes.md). */
static void crash_window(void)
{
	int sig;
	int32_t pid = D.ring ? ht__ring_keep_take_crash(D.ring, &sig) : 0;
	if (!pid)
		return;
	char tag[32], path[4200], why[HT__CTL_LINE];
	snprintf(tag, sizeof(tag), "crash-%d", (int)pid);
	ht__ring_keep_path(path, sizeof(path), D.a->file, tag);
	struct ht__ring_keep_result res;
	int rc = write_window(path, (D.a->flags & HT_TRACE_FORCE) != 0, &res, why, sizeof(why));
	if (rc == 0)
		D.crashes++;
	else if (!D.crashes_failed++) {
		/* The daemon's stderr is /dev/null: the status and stop lines
		   carry it (docs/control-protocol.md). */
		D.crash_error = rc < 0 ? rc : HT_ERR_IO;
		D.crash_failed_pid = pid;
	}
}

/* One client: returns true when it asked to stop (fd is kept for the answer). */
static bool serve(int fd)
{
	/* The socket is 0600 in a 0700 directory; the peer check holds even
	   if someone loosened those. */
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid()) {
		reply_err(fd, HT_ERR_PERM, "the session belongs to another user");
		return false;
	}
	char line[HT__CTL_LINE];
	if (!read_line(fd, line, sizeof(line)))
		return false;
	if (!strncmp(line, "PING", 4)) {
		send_line(fd, "OK\n");
		return false;
	}
	char v[64];
	if (ht__ctl_get(line, "id", v, sizeof(v)) && strtoull(v, NULL, 10) != 0 &&
	    strtoull(v, NULL, 10) != D.id) {
		reply_err(fd, HT_ERR_NOT_FOUND, "the session of that handle has ended");
		return false;
	}
	if (!strncmp(line, "STATUS", 6)) {
		char out[HT__CTL_LINE];
		status_line(out, sizeof(out), "");
		send_line(fd, out);
	} else if (!strncmp(line, "UPDATE", 6)) {
		do_update(fd, line);
	} else if (!strncmp(line, "FLUSH", 5)) {
		do_flush(fd, line);
	} else if (!strncmp(line, "STOP", 4)) {
		return true;
	} else {
		reply_err(fd, HT_ERR_INVALID, "unknown request");
	}
	return false;
}

static void *control_thread(void *arg)
{
	(void)arg;
	while (!D.stop) {
		struct pollfd p = {.fd = D.listen_fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		int fd = accept4(D.listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		if (serve(fd)) {
			D.stop_fd = fd;
			D.stop = 1;
			break;
		}
		close(fd);
	}
	return NULL;
}

/* ---- start-up and the main loop ---- */

static int err_of(int e)
{
	return e == EEXIST		   ? HT_ERR_EXISTS
	       : e == EACCES || e == EPERM ? HT_ERR_PERM
	       : e == ENOMEM		   ? HT_ERR_NOMEM
	       : e == ENOENT		   ? HT_ERR_NOT_FOUND
					   : HT_ERR_IO;
}

/*
 * A lock file held for the life of the daemon: its name, or the IFEO role.
 * A client removing a dead session's files (control.c, remove_dead_one)
 * holds the old lock file for a moment and then unlinks it: a daemon that
 * opened that one retries on the file now at the path.
 */
static int take_lock(const char *path)
{
	for (int tries = 0;; tries++) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return err_of(errno);
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			struct stat held, now;
			if (fstat(fd, &held) == 0 && stat(path, &now) == 0 &&
			    held.st_ino == now.st_ino && held.st_dev == now.st_dev)
				return fd;
		} else if (errno != EWOULDBLOCK) {
			close(fd);
			return HT_ERR_IO;
		} else if (tries >= 20) {
			close(fd);
			return HT_ERR_EXISTS;
		}
		close(fd);
		usleep(2000);
	}
}

static int listen_on(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_of(errno);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		close(fd);
		return HT_ERR_INVALID;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	unlink(path); /* left by a daemon that died: we hold the name's lock */
	mode_t old = umask(077);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || chmod(path, 0600) < 0 || listen(fd, 16) < 0) {
		rc = err_of(errno);
		close(fd);
		unlink(path);
		return rc;
	}
	return fd;
}

/* Detach what is still attached (the processes run on), then finish the trace. */
static int finish(void)
{
	/* The recording ends now, not when the last detach has found a thread
	   at a safe point (heaptrail record -p: attach.e2e). */
	pthread_mutex_lock(&D.sess_lock);
	ht__session_stop_recording(D.s);
	pthread_mutex_unlock(&D.sess_lock);
	pthread_mutex_lock(&D.members_lock);
	char why[512];
	while (D.nmembers)
		member_remove(D.nmembers - 1, why, sizeof(why));
	pthread_mutex_unlock(&D.members_lock);
	pthread_mutex_lock(&D.sess_lock);
	if (D.relay)
		ht__relay_stop(D.relay);
	int rc = ht__session_finish(D.s, !D.ring, NULL, NULL);
	const struct ht__session_stats *st = ht__session_stats(D.s);
	int frc = 0;
	if (D.ring) {
		/* The window at the end is the trace (docs/modes.md). */
		crash_window();
		struct ht__ring_keep_result res;
		if (rc >= 0)
			frc = ht__ring_keep_write(D.ring, D.s, &D.out, D.meta, &res);
		else
			ht__output_abort(&D.out);
	} else {
		ht__writer_set_losses(D.w, st->lost_lossy, st->lost_no_buffer, st->lost_in_handler);
		frc = ht__writer_finish(D.w, st->duration_ns, st->lost, HT_TRACEF_ATTACHED);
		D.w = NULL;
		if (rc >= 0 && frc >= 0)
			ht__session_notes_done(D.s); /* the trace holds it all */
	}
	pthread_mutex_unlock(&D.sess_lock);
	return rc < 0 ? rc : frc;
}

static void report(int fd, int rc, uint64_t id, const char *why)
{
	struct ht__ready r = {rc, (int32_t)getpid(), id, ""};
	if (why)
		snprintf(r.why, sizeof(r.why), "%s", why);
	if (write(fd, &r, sizeof(r)) < 0) {
		/* The caller is gone; nobody to tell. */
	}
	close(fd);
}

/* A start that fails once the name's lock is ours: the lock file goes too,
   which would read as a daemon that died ('stop NAME': killed?). */
static _Noreturn void start_failed(const struct ht__daemon_args *a, int fd, int rc, const char *why)
{
	unlink(a->paths.lock);
	report(fd, rc, 0, why);
	_exit(1);
}

_Noreturn void ht__daemon_main(const struct ht__daemon_args *a, int ready_fd)
{
	D.a = a;
	D.stack_mask = a->stack_mask;
	int rc;
	/* Nothing of the caller's stays open but the ready pipe, and none of
	   its blocked signals stay blocked. */
	if (ready_fd > 3)
		close_range(3, (unsigned)ready_fd - 1, 0);
	close_range((unsigned)ready_fd + 1, ~0u, 0);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	int null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
	if (chdir("/") < 0) {
		report(ready_fd, HT_ERR_IO, 0, "cannot change to '/'");
		_exit(1);
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);

	int lock_fd = take_lock(a->paths.lock);
	if (lock_fd < 0) {
		report(ready_fd, lock_fd, 0, NULL);
		_exit(1);
	}
	ht__ctl_remove_dead(NULL, NULL, 0); /* other sessions' daemons that died */
	/* From here on a start that fails removes the name's lock file. */
	int ifeo_fd = -1;
	if ((a->flags & HT_TRACE_IFEO) && (ifeo_fd = take_lock(a->paths.ifeo_lock)) < 0)
		start_failed(a, ready_fd, ifeo_fd,
			     ifeo_fd == HT_ERR_EXISTS ? "an IFEO session is running already"
						      : NULL);
	char why[1024] = "";
	for (unsigned i = 0; i < a->npids; i++)
		if ((rc = check_pid(a->pids[i], why, sizeof(why))) < 0)
			start_failed(a, ready_fd, rc, why);
	/* The trace's name gets the file once the writer has started it
	   (format/output.h: a device is written in place, a file replaced
	   atomically and only with HT_TRACE_FORCE). */
	struct ht__output trace_out;
	if ((rc = ht__output_open(&trace_out, a->file,
				  (a->flags & HT_TRACE_FORCE) ? HT__OUT_FORCE : 0, 0600, why,
				  sizeof(why))) < 0)
		start_failed(a, ready_fd, rc, why);

	unlink(a->paths.shm);
	struct ht__session_config cfg = HT__SESSION_CONFIG_INIT;
	char shm_name[HT_SESSION_NAME_MAX + 8];
	snprintf(shm_name, sizeof(shm_name), "%s.shm", a->name);
	cfg.dir = a->paths.dir;
	cfg.name = shm_name;
	cfg.ring_size = a->buffer_size;
	cfg.ring_count = a->buffers;
	cfg.flags = ((a->flags & HT_TRACE_LOSSY) ? HT_SHM_LOSSY : 0) |
		    ((a->flags & HT_TRACE_SNAPSHOT) ? HT_SHM_SNAPSHOT : 0) |
		    (a->ring_bytes ? HT_SHM_CRASHES : 0);
	cfg.stack_mask = a->stack_mask;
	cfg.sample_rate = a->sample_rate;
	cfg.snapshot_interval_ns = a->snapshot_interval_ns;
	cfg.reap_children = false;
	cfg.end_when_gone = false;
	cfg.sample_maps = !(a->flags & HT_TRACE_NO_MAPS);
	if ((rc = ht__session_create(&D.s, &cfg)) < 0) {
		ht__output_abort(&trace_out);
		start_failed(a, ready_fd, rc, "cannot create the session's buffers");
	}
	if (a->flags & HT_TRACE_IFEO) {
		/* Programs that started before us: the trace starts with the oldest. */
		if ((rc = ht__relay_new(&D.relay, ht__session_header(D.s), a->paths.dir)) < 0)
			goto fail_session;
		ht__relay_scan(D.relay);
		uint64_t t0 = ht__relay_min_t0(D.relay);
		if (t0 < ht__session_header(D.s)->t0_ns)
			ht__session_header(D.s)->t0_ns = t0;
	}
	const char *argv[] = {"heaptrail", "start", a->name};
	struct ht__trace_meta meta = {
	    .stack_mask = a->stack_mask,
	    .sample_rate = a->sample_rate,
	    .ts_unit_ns = HT__TS_UNIT_DEFAULT, /* as `heaptrail record` (trace-format.md) */
	    .flags = HT_TRACEF_ATTACHED | ((a->flags & HT_TRACE_LOSSY) ? HT_TRACEF_LOSSY : 0) |
		     ((a->flags & HT_TRACE_SNAPSHOT) ? HT_TRACEF_SNAPSHOT : 0),
	    .argc = 3,
	    .argv = argv};
	why[0] = 0;
	D.meta = meta;
	if (a->ring_bytes) {
		struct ht__ring_keep_config rcfg = {.max_bytes = a->ring_bytes,
						    .max_ns = a->ring_ns};
		if ((rc = ht__ring_keep_new(&D.ring, &rcfg)) < 0)
			goto fail_session;
		ht__session_set_sink(D.s, ht__ring_keep_sink(), D.ring);
		D.out = trace_out; /* written at the end */
	} else if ((rc = ht__session_open_trace(D.s, &trace_out, meta, &D.w)) < 0) {
		snprintf(why, sizeof(why), "cannot write '%.900s': %s", a->file, ht_strerror(rc));
		goto fail_session;
	}
	if ((D.listen_fd = listen_on(a->paths.sock)) < 0) {
		rc = D.listen_fd;
		goto fail_writer;
	}
	if (getrandom(&D.id, sizeof(D.id), 0) != sizeof(D.id) || !D.id)
		D.id = mono_ns() ^ ((uint64_t)getpid() << 32);
	D.id &= 0x7fffffffffffffffull; /* stays positive as text anywhere */
	if (!D.id)
		D.id = 1;

	for (unsigned i = 0; i < a->npids; i++) {
		pthread_mutex_lock(&D.members_lock);
		rc = member_add(a->pids[i], why, sizeof(why));
		pthread_mutex_unlock(&D.members_lock);
		if (rc < 0) {
			pthread_mutex_lock(&D.members_lock);
			while (D.nmembers)
				member_remove(D.nmembers - 1, why, sizeof(why));
			pthread_mutex_unlock(&D.members_lock);
			goto fail_socket;
		}
	}
	if (ifeo_fd >= 0) {
		/* Programs enabled for IFEO find the session through this link. */
		unlink(a->paths.ifeo);
		if (symlink(shm_name, a->paths.ifeo) < 0) {
			rc = err_of(errno);
			goto fail_members;
		}
	}
	pthread_t th;
	if (pthread_create(&th, NULL, control_thread, NULL) != 0) {
		rc = HT_ERR_NOMEM;
		goto fail_ifeo;
	}
	report(ready_fd, 0, D.id, NULL);

	uint64_t next_size_check = 0, started = mono_ns(), next_scan = started + 200000000ull;
	while (!D.stop) {
		pthread_mutex_lock(&D.sess_lock);
		if (D.relay) {
			/* A program that looked for the session just before it existed
			   made a buffer after our first scan: look again, often at first. */
			uint64_t now = mono_ns();
			if (now >= next_scan) {
				ht__relay_scan(D.relay);
				next_scan = now + (now - started < 10000000000ull ? 1000000000ull
										  : 10000000000ull);
			}
			ht__relay_pump(D.relay);
		}
		rc = ht__session_tick(D.s);
		crash_window();
		unsigned us = ht__session_sleep_us(D.s);
		pthread_mutex_unlock(&D.sess_lock);
		if (rc != 0)
			break; /* a write error: finish what can be finished */
		if (a->max_file_size && mono_ns() >= next_size_check) {
			/* The session flushes the trace about once a second, so the
			   size on disk is the trace's to within a second. */
			next_size_check = mono_ns() + 1000000000ull;
			struct stat st;
			if (stat(a->file, &st) == 0 && (uint64_t)st.st_size >= a->max_file_size)
				break;
		}
		if (us)
			usleep(us);
	}
	D.stop = 1;
	pthread_join(th, NULL);
	/* No new process joins from here on. */
	if (ifeo_fd >= 0)
		unlink(a->paths.ifeo);
	unlink(a->paths.sock);
	close(D.listen_fd);
	int frc = finish();
	/* The reply is composed first and sent last: the stopping client may
	   look at the session directory as soon as it reads it, so the shared
	   memory and the name's lock are gone by then. */
	char out[HT__CTL_LINE];
	if (frc >= 0) {
		const struct ht__session_stats *sst = ht__session_stats(D.s);
		char crashes[160];
		crash_fields(crashes, sizeof(crashes));
		snprintf(out, sizeof(out),
			 "OK name=%s id=%llu pid=%d events=%llu lost=%llu "
			 "buffers_lost=%llu buffers=%u "
			 "buffer_size=%u processes=%u frames=%u symbolized=%u symbols_missing=%d "
			 "crashes_unreported=%llu %s file=%s\n",
			 a->name, (unsigned long long)D.id, (int)getpid(),
			 (unsigned long long)sst->events, (unsigned long long)sst->lost,
			 (unsigned long long)atomic_load(&ht__session_header(D.s)->rings_exhausted),
			 ht__session_header(D.s)->ring_count, ht__session_header(D.s)->ring_size,
			 sst->processes, sst->frames, sst->frames_symbolized,
			 sst->symbols_missing != NULL, (unsigned long long)sst->crashes_unreported,
			 crashes, a->file);
	}
	ht__relay_free(D.relay);
	ht__ring_keep_free(D.ring);
	ht__session_destroy(D.s);
	unlink(a->paths.lock);
	if (D.stop_fd >= 0) {
		if (frc < 0)
			reply_err(D.stop_fd, frc, "cannot write the trace");
		else
			send_line(D.stop_fd, out);
		close(D.stop_fd);
	}
	_exit(frc < 0 ? 1 : 0);

fail_ifeo:
	if (ifeo_fd >= 0)
		unlink(a->paths.ifeo);
fail_members:
	pthread_mutex_lock(&D.members_lock);
	while (D.nmembers)
		member_remove(D.nmembers - 1, why, sizeof(why));
	pthread_mutex_unlock(&D.members_lock);
fail_socket:
	close(D.listen_fd);
	unlink(a->paths.sock);
fail_writer:
	ht__writer_abort(D.w);
fail_session:
	ht__ring_keep_free(D.ring);
	ht__output_abort(&trace_out);
	if (D.relay) {
		ht__relay_stop(D.relay);
		ht__relay_free(D.relay);
	}
	ht__session_destroy(D.s);
	unlink(a->paths.lock);
	report(ready_fd, rc, 0, why[0] ? why : NULL);
	_exit(1);
}
