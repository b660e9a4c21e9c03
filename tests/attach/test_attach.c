/*
 * test_attach.c - `heaptrail record -p` end to end: attaches to the programs
 * of this folder while they run (a busy 8-thread allocator, processes blocked
 * in read(), two at once), checks the traces event by event through the
 * reader API, checks that the processes run on correctly after the detach,
 * and that a missing ptrace permission is one clear line with the target
 * untouched. Every process started here is killed and reaped, also on
 * failure, and the temporary directory is removed.
 *
 * Usage: test_attach HEAPTRAIL PROGRAM_DIR
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heaptrail/trace.h"

#include "check.h"

static const char *heaptrail, *progdir;
static char tmp[128];

/* ---- processes: every child is remembered until reaped ---- */

#define MAX_KIDS 32
static pid_t kids[MAX_KIDS];

static void kid_add(pid_t pid)
{
	for (int i = 0; i < MAX_KIDS; i++)
		if (!kids[i]) {
			kids[i] = pid;
			return;
		}
}

static void kid_forget(pid_t pid)
{
	for (int i = 0; i < MAX_KIDS; i++)
		if (kids[i] == pid)
			kids[i] = 0;
}

static void kill_all(void)
{
	for (int i = 0; i < MAX_KIDS; i++)
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
			kids[i] = 0;
		}
}

/* Waits for pid for up to ms; returns its status, or -1 (then it is killed). */
static int wait_for(pid_t pid, int ms)
{
	int st;
	for (int i = 0; i < ms; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid) {
			kid_forget(pid);
			return st;
		}
		usleep(1000);
	}
	fprintf(stderr, "process %d did not end within %d ms\n", (int)pid, ms);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	kid_forget(pid);
	return -1;
}

static void remove_tmp(void)
{
	DIR *d = opendir(tmp);
	struct dirent *e;
	char path[512];
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", tmp, e->d_name);
			unlink(path);
		}
	if (d)
		closedir(d);
	rmdir(tmp);
}

static void cleanup(void)
{
	kill_all();
	remove_tmp();
}

/*
 * Starts argv with the given stdin, stdout and stderr (-1: /dev/null). The
 * child dies with us. With as_nobody it runs as uid/gid 65534.
 */
static pid_t spawn(const char *const *argv, int in, int out, int err, bool as_nobody)
{
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (dup2(in >= 0 ? in : null, 0) < 0 || dup2(out >= 0 ? out : null, 1) < 0 ||
		    dup2(err >= 0 ? err : null, 2) < 0)
			_exit(120);
		if (chdir(tmp) < 0)
			_exit(120);
		if (as_nobody && (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0))
			_exit(122);
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* after setuid, which clears it */
		execv(argv[0], (char *const *)argv);
		_exit(121);
	}
	kid_add(pid);
	return pid;
}

/* One line from fd into buf (without the newline) within ms; false on timeout or EOF. */
static bool read_line(int fd, char *buf, size_t n, int ms)
{
	size_t k = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		long left =
		    ms - ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return false;
		char c;
		if (read(fd, &c, 1) != 1)
			return false;
		if (c == '\n') {
			buf[k] = 0;
			return true;
		}
		if (k + 1 < n)
			buf[k++] = c;
	}
}

static char *slurp(const char *path)
{
	static char buf[16384];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? 0 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

static long tracer_of(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	const char *s = strstr(slurp(path), "TracerPid:");
	return s ? atol(s + 10) : -1;
}

static bool maps_have(pid_t pid, const char *what)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	char line[1024];
	bool found = false;
	while (f && fgets(line, sizeof(line), f))
		found |= strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return found;
}

/* Waits until pid sits in read(2) (syscall 0), so the attach meets it there. */
static bool wait_in_read(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	for (int i = 0; i < 5000; i++) {
		if (!strncmp(slurp(path), "0 ", 2))
			return true;
		usleep(1000);
	}
	return false;
}

/* Starts `heaptrail record ARGS` with stderr on a pipe; waits for its
   "tracing" line. Returns its pid; *errfd is the pipe. */
static pid_t start_record(const char *const *args, int *errfd)
{
	const char *argv[16] = {heaptrail, "record"};
	int n = 2;
	while (*args && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		exit(1);
	pid_t pid = spawn(argv, -1, -1, p[1], false);
	close(p[1]);
	*errfd = p[0];
	char line[512];
	bool ok = read_line(p[0], line, sizeof(line), 20000);
	if (!ok || !strstr(line, "tracing")) {
		fprintf(stderr, "heaptrail record did not start tracing: '%s'\n",
			ok ? line : "(nothing)");
		check_failures++;
	}
	return pid;
}

struct waiter {
	pid_t pid;
	int in, out;	  /* its stdin (we write), its stdout (we read) */
	uint64_t kept[8]; /* address of the kept block after each line */
	uint64_t fn[8];	  /* what its GOT said malloc was then (waiter only) */
	int lines;
};

static void program_start(struct waiter *w, const char *name, const char *count, const char *module)
{
	char prog[512];
	snprintf(prog, sizeof(prog), "%s/%s", progdir, name);
	const char *argv[] = {prog, count, module, NULL};
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		exit(1);
	w->pid = spawn(argv, in[0], out[1], -1, false);
	close(in[0]);
	close(out[1]);
	w->in = in[1];
	w->out = out[0];
	w->lines = 0;
	char line[256];
	CHECK(read_line(w->out, line, sizeof(line), 5000));
	unsigned long addr = 0, fn = 0;
	CHECK(sscanf(line, "kept %lx %*d %lx", &addr, &fn) >= 1);
	w->kept[0] = addr;
	w->fn[0] = fn;
	CHECK(wait_in_read(w->pid));
}

static void waiter_start(struct waiter *w, const char *count, const char *module)
{
	program_start(w, "waiter", count, module);
}

/* Sends text (one line); the waiter answers with its new kept block. */
static bool waiter_send(struct waiter *w, const char *text)
{
	char line[256];
	ssize_t len = (ssize_t)strlen(text);
	if (write(w->in, text, (size_t)len) != len || !read_line(w->out, line, sizeof(line), 5000))
		return false;
	int n = 0;
	unsigned long addr, fn = 0;
	if (sscanf(line, "kept %lx %d %lx", &addr, &n, &fn) < 2 || n != w->lines + 1 || n >= 8)
		return false;
	w->lines = n;
	w->kept[n] = addr;
	w->fn[n] = fn;
	return true;
}

static bool waiter_poke(struct waiter *w)
{
	return waiter_send(w, "go\n");
}

/* Closes its stdin: it exits 0. */
static int waiter_end(struct waiter *w)
{
	close(w->in);
	int st = wait_for(w->pid, 5000);
	close(w->out);
	return st;
}

static struct ht_reader *open_trace(const char *path)
{
	struct ht_reader *r = NULL;
	int rc = ht_reader_open(&r, path);
	if (rc < 0) {
		fprintf(stderr, "cannot open '%s': %s\n", path, ht_strerror(rc));
		check_failures++;
		return NULL;
	}
	return r;
}

static const struct ht_process *process_of(struct ht_reader *r, pid_t pid)
{
	for (uint32_t i = 0; i < ht_reader_process_count(r); i++)
		if (ht_reader_process(r, i)->pid == pid)
			return ht_reader_process(r, i);
	return NULL;
}

/* ---- the busy allocator ---- */

#define NTHREADS 8
/* The sizes hold an iteration modulo this (busy.c: 4096 x 4096); a slow run
   gets past it (qa: 17.5 million iterations on a loaded machine). */
#define BUSY_WRAP (4096ull * 4096ull)

struct busy_thread {
	int32_t tid;
	int k;	   /* thread index from the sizes, -1 before the first group */
	int phase; /* 0: next is malloc(LO), 1: malloc(HI), 2: inside, 3: free(p) */
	uint64_t i, lo, p, q;
	bool mapped, unmapped;
	uint64_t first, last, groups, mmaps;
	unsigned errors;
};

static struct busy_thread *busy_thread_of(struct busy_thread *t, int *n, int32_t tid)
{
	for (int i = 0; i < *n; i++)
		if (t[i].tid == tid)
			return &t[i];
	if (*n == 64)
		return NULL;
	memset(&t[*n], 0, sizeof(t[*n]));
	t[*n].tid = tid;
	t[*n].k = -1;
	return &t[(*n)++];
}

static void busy_error(struct busy_thread *t, const char *what, const struct ht_event *ev)
{
	if (t->errors++ < 5)
		fprintf(stderr, "busy thread %d: %s at event %s size %llu (group %llu)\n",
			(int)t->tid, what, ht_event_name(ev->type), (unsigned long long)ev->size,
			(unsigned long long)t->groups);
}

/*
 * Follows one thread's events through the groups of busy.c: every group
 * after the first must be the next iteration, with nothing missing or extra.
 */
static void busy_step(struct busy_thread *t, const struct ht_event *ev)
{
	bool is_lo = ev->type == HT_EV_ALLOC && ev->size >= 64 && ev->size < 64 + 8 * 4096;
	if (t->phase == 0 && t->groups == 0 && !t->lo && !is_lo)
		return; /* before the first whole group */
	switch (t->phase) {
	case 0:
		if (!is_lo)
			return busy_error(t, "expected malloc(LO)", ev);
		t->lo = ev->size;
		t->p = ev->addr;
		t->phase = 1;
		return;
	case 1: {
		uint64_t hi = ev->size - 40000;
		if (ev->type != HT_EV_ALLOC || ev->size < 40000 || hi >= 8 * 4096 ||
		    hi % 8 != (t->lo - 64) % 8)
			return busy_error(t, "expected malloc(HI)", ev);
		int k = (int)((t->lo - 64) % 8);
		uint64_t i = (hi / 8) * 4096 + (t->lo - 64) / 8; /* modulo BUSY_WRAP */
		if (t->k >= 0 && k != t->k)
			busy_error(t, "thread index changed", ev);
		if (t->groups && i != (t->last + 1) % BUSY_WRAP)
			busy_error(t, "iteration missing", ev);
		if (t->groups)
			i = t->last + 1; /* counted on past the wrap */
		t->k = k;
		t->i = i;
		t->q = ev->addr;
		t->mapped = t->unmapped = false;
		t->phase = 2;
		return;
	}
	case 2:
		if (ev->type == HT_EV_MMAP && !t->mapped &&
		    ev->size == 4096u * (unsigned)(t->k + 1)) {
			t->mapped = true;
			return;
		}
		if (ev->type == HT_EV_MUNMAP && t->mapped && !t->unmapped &&
		    ev->size == 4096u * (unsigned)(t->k + 1)) {
			t->unmapped = true;
			return;
		}
		if (ev->type != HT_EV_FREE || ev->addr != t->q)
			return busy_error(t, "expected free(q)", ev);
		if (t->mapped != (t->i % 1024 == 512) || t->mapped != t->unmapped)
			busy_error(t, "mmap/munmap of the iteration wrong", ev);
		t->phase = 3;
		return;
	case 3:
		if (ev->type != HT_EV_FREE || ev->addr != t->p)
			return busy_error(t, "expected free(p)", ev);
		if (!t->groups)
			t->first = t->i;
		t->last = t->i;
		t->groups++;
		t->mmaps += t->mapped;
		t->phase = 0;
		return;
	}
}

static volatile uint64_t *busy_counters(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

/*
 * One attach to the running busy program for duration: every worker's
 * traced iterations are whole and consecutive, bracketed by the program's
 * own counters, and the program keeps going after the detach.
 */
static void busy_round(pid_t pid, volatile uint64_t *c, const char *duration, const char *name)
{
	char trace[256], errpath[256], pidarg[32];
	snprintf(trace, sizeof(trace), "%s/%s.htr", tmp, name);
	snprintf(errpath, sizeof(errpath), "%s/%s.err", tmp, name);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)pid);
	uint64_t before[NTHREADS], after[NTHREADS];
	for (int k = 0; k < NTHREADS; k++)
		before[k] = c[k];
	const char *rec[] = {heaptrail,	   "record", "-q", "-p",  pidarg,
			     "--duration", duration, "-o", trace, NULL};
	int errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	pid_t hp = spawn(rec, -1, -1, errfd, false);
	close(errfd);
	int st = wait_for(hp, 60000);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fprintf(stderr, "heaptrail record -p said: %s\n", slurp(errpath));
	usleep(50000);
	for (int k = 0; k < NTHREADS; k++)
		after[k] = c[k];
	CHECK_EQ(tracer_of(pid), 0);

	struct ht_reader *r = open_trace(trace);
	if (r) {
		CHECK(ht_reader_info(r)->flags & HT_TRACEF_ATTACHED);
		CHECK(ht_reader_info(r)->flags & HT_TRACEF_COMPLETE);
		CHECK_EQ(ht_reader_info(r)->events_lost, 0);
		static struct busy_thread th[64];
		int nth = 0, starts = 0, names = 0;
		struct ht_event ev;
		while (ht_reader_next(r, &ev) > 0) {
			if (ev.pid != pid)
				continue;
			starts += ev.type == HT_EV_PROCESS_START;
			/* Workers are busy0..busy7; the main thread is "busy" and may
			   show up too when it was the thread borrowed. */
			names += ev.type == HT_EV_THREAD_START && ev.name &&
				 !strncmp(ev.name, "busy", 4) && ev.name[4] >= '0' &&
				 ev.name[4] <= '7' && !ev.name[5];
			if (ev.type < HT_EV_ALLOC || ev.type > HT_EV_MPROTECT)
				continue;
			/* A thread's stack found in its map is no call of the thread. */
			if (ev.flags & HT_EVF_UNSEEN)
				continue;
			struct busy_thread *t = busy_thread_of(th, &nth, ev.tid);
			if (t)
				busy_step(t, &ev);
		}
		CHECK_EQ(starts, 1);
		CHECK_EQ(names, NTHREADS); /* a THREAD_START with its name from each worker */
		const struct ht_process *p = process_of(r, pid);
		CHECK(p && (p->flags & HT_PROCF_ATTACHED));
		int workers = 0;
		unsigned seen = 0;
		for (int i = 0; i < nth; i++) {
			struct busy_thread *t = &th[i];
			if (t->k < 0)
				continue;
			workers++;
			seen |= 1u << t->k;
			/* The first iteration in full: the one nearest the counter before. */
			uint64_t first = before[t->k] - before[t->k] % BUSY_WRAP + t->first;
			if (first + BUSY_WRAP / 2 < before[t->k])
				first += BUSY_WRAP;
			t->last += first - t->first;
			t->first = first;
			CHECK_EQ(t->errors, 0);
			CHECK(t->groups >= 100);
			/* Exact: every iteration from the first traced to the last is there. */
			CHECK_EQ(t->groups, t->last - t->first + 1);
			uint64_t want_mmaps = 0;
			for (uint64_t i = t->first; i <= t->last; i++)
				want_mmaps += i % 1024 == 512;
			CHECK_EQ(t->mmaps, want_mmaps);
			/* The program's own counters bracket the traced interval. */
			CHECK(t->first >= before[t->k]);
			CHECK(t->last < after[t->k]);
			if (t->errors || t->first < before[t->k] || t->last >= after[t->k])
				fprintf(stderr,
					"%s: thread %d: iterations %llu..%llu traced, counter %llu "
					"before, %llu after\n",
					name, t->k, (unsigned long long)t->first,
					(unsigned long long)t->last,
					(unsigned long long)before[t->k],
					(unsigned long long)after[t->k]);
		}
		CHECK_EQ(workers, NTHREADS);
		CHECK_EQ(seen, (1u << NTHREADS) - 1);
		ht_reader_close(r);
	}

	/* Detached: every thread keeps allocating, and no session is mapped in it. */
	usleep(200000);
	for (int k = 0; k < NTHREADS; k++)
		CHECK(c[k] > after[k]);
	CHECK(!maps_have(pid, "/heaptrail/session"));
}

static void test_busy(void)
{
	char prog[512], counters_path[256];
	snprintf(prog, sizeof(prog), "%s/busy", progdir);
	snprintf(counters_path, sizeof(counters_path), "%s/counters", tmp);
	const char *argv[] = {prog, counters_path, "8", NULL};
	pid_t pid = spawn(argv, -1, -1, -1, false);
	volatile uint64_t *c = NULL;
	for (int i = 0; i < 5000 && !c; i++) {
		usleep(1000);
		struct stat st;
		if (stat(counters_path, &st) == 0 && st.st_size == 4096)
			c = busy_counters(counters_path);
	}
	CHECK(c != NULL);
	if (!c)
		return;
	/* Busy: every thread has allocated for a while. */
	for (int i = 0; i < 5000; i++) {
		int ready = 0;
		for (int k = 0; k < NTHREADS; k++)
			ready += c[k] > 1000;
		if (ready == NTHREADS)
			break;
		usleep(1000);
	}
	busy_round(pid, c, "1", "busy1");
	/* Attached again: a fresh recorder, the same exact trace. */
	busy_round(pid, c, "500ms", "busy2");
	/* Its own checks passed all along: it ends with its normal status. */
	kill(pid, SIGTERM);
	int st = wait_for(pid, 10000);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	munmap((void *)c, 4096);
}

/* ---- processes blocked in read() ---- */

struct waiter_counts {
	int big_allocs, big_frees, kept_allocs, unknown_free, exits;
	uint64_t kept_addr;
};

/* Counts the events of w's pid: its 12345-byte blocks, its kept block, and
   whether the block it had before the attach is freed without an allocation. */
static void count_waiter(struct ht_reader *r, const struct waiter *w, struct waiter_counts *out)
{
	memset(out, 0, sizeof(*out));
	ht_reader_rewind(r);
	struct ht_event ev;
	bool seen_before = false;
	uint64_t big[64];
	int nbig = 0;
	while (ht_reader_next(r, &ev) > 0) {
		if (ev.pid != w->pid)
			continue;
		if (ev.type == HT_EV_PROCESS_EXIT)
			out->exits++;
		if (ev.type == HT_EV_ALLOC && ev.size == 12345) {
			out->big_allocs++;
			if (nbig < 64)
				big[nbig++] = ev.addr;
		}
		if (ev.type == HT_EV_FREE)
			for (int i = 0; i < nbig; i++)
				if (big[i] == ev.addr) {
					out->big_frees++;
					big[i] = 0;
					break;
				}
		if (ev.type == HT_EV_ALLOC && ev.size == 777) {
			out->kept_allocs++;
			out->kept_addr = ev.addr;
		}
		if ((ev.type == HT_EV_ALLOC || ev.type == HT_EV_FREE) && ev.addr == w->kept[0] &&
		    !seen_before) {
			seen_before = true;
			out->unknown_free = ev.type == HT_EV_FREE;
		}
	}
}

/* heaptrail info's "frees of unknown" of the whole trace, or -1. */
static long info_unknown_frees(const char *trace, bool *attached_note)
{
	char out[256];
	snprintf(out, sizeof(out), "%s/info.txt", tmp);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	const char *argv[] = {heaptrail, "info", trace, NULL};
	pid_t pid = spawn(argv, -1, fd, -1, false);
	close(fd);
	int st = wait_for(pid, 30000);
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	const char *text = slurp(out);
	*attached_note = strstr(text, "attached") != NULL;
	const char *total = strstr(text, "\ntotal:");
	const char *line = total ? strstr(total, "frees of unknown") : NULL;
	return line ? atol(line + strlen("frees of unknown")) : -1;
}

static void test_blocked_in_read(void)
{
	struct waiter w;
	waiter_start(&w, "5", NULL);
	char trace[256], pidarg[32];
	snprintf(trace, sizeof(trace), "%s/wait.htr", tmp);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)w.pid);
	const char *args[] = {"-p", pidarg, "-o", trace, NULL};
	int errfd;
	pid_t hp = start_record(args, &errfd);
	/* Put back into its read(): it still waits there, then wakes for our line. */
	CHECK(wait_in_read(w.pid));
	/* A second session is refused while this one traces it. */
	char errpath[256], other[256];
	snprintf(errpath, sizeof(errpath), "%s/second.err", tmp);
	snprintf(other, sizeof(other), "%s/second.htr", tmp);
	int efd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	const char *second[] = {heaptrail, "record", "-p", pidarg, "-o", other, NULL};
	int st = wait_for(spawn(second, -1, -1, efd, false), 20000);
	close(efd);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1);
	CHECK(strstr(slurp(errpath), "another heaptrail session traces it already"));
	CHECK(access(other, F_OK) != 0);
	CHECK(waiter_poke(&w));
	kill(hp, SIGINT);
	st = wait_for(hp, 30000);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(errfd);
	CHECK_EQ(tracer_of(w.pid), 0);
	/* After the detach: it handles a second line as before and exits 0. */
	CHECK(waiter_poke(&w));
	/* Its GOT said malloc was our hook while attached, and is as before now. */
	CHECK(w.fn[0] != 0);
	CHECK(w.fn[1] != w.fn[0]);
	CHECK_EQ(w.fn[2], w.fn[0]);
	st = waiter_end(&w);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);

	struct ht_reader *r = open_trace(trace);
	if (!r)
		return;
	CHECK(ht_reader_info(r)->flags & HT_TRACEF_ATTACHED);
	const struct ht_process *p = process_of(r, w.pid);
	CHECK(p && (p->flags & HT_PROCF_ATTACHED) && !(p->flags & HT_PROCF_ROOT));
	struct waiter_counts n;
	count_waiter(r, &w, &n);
	CHECK_EQ(n.big_allocs, 5);
	CHECK_EQ(n.big_frees, 5);
	CHECK_EQ(n.kept_allocs, 1);
	CHECK_EQ(n.kept_addr, w.kept[1]);
	CHECK_EQ(n.unknown_free, 1); /* the block from before the attach */
	CHECK_EQ(n.exits, 0);
	ht_reader_close(r);
	bool note = false;
	CHECK_EQ(info_unknown_frees(trace, &note), 1);
	CHECK(note);
}

static void test_two_processes(void)
{
	struct waiter a, b;
	waiter_start(&a, "5", NULL);
	waiter_start(&b, "7", NULL);
	char trace[256], pidarg[64];
	snprintf(trace, sizeof(trace), "%s/two.htr", tmp);
	snprintf(pidarg, sizeof(pidarg), "%d,%d", (int)a.pid, (int)b.pid);
	const char *args[] = {"-p", pidarg, "-o", trace, NULL};
	int errfd;
	pid_t hp = start_record(args, &errfd);
	CHECK(waiter_poke(&a));
	CHECK(waiter_poke(&b));
	/* One ends while traced: its exit is in the trace; the other goes on. */
	int st = waiter_end(&a);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(waiter_poke(&b));
	kill(hp, SIGTERM);
	st = wait_for(hp, 30000);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(errfd);
	CHECK(waiter_poke(&b));
	st = waiter_end(&b);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);

	struct ht_reader *r = open_trace(trace);
	if (!r)
		return;
	const struct ht_process *pa = process_of(r, a.pid), *pb = process_of(r, b.pid);
	CHECK(pa && (pa->flags & HT_PROCF_ATTACHED));
	CHECK(pb && (pb->flags & HT_PROCF_ATTACHED));
	CHECK(pa && (pa->flags & HT_PROCF_EXITED) && pa->exit_code == 0);
	struct waiter_counts n;
	count_waiter(r, &a, &n);
	CHECK_EQ(n.big_allocs, 5);
	CHECK_EQ(n.big_frees, 5);
	CHECK_EQ(n.unknown_free, 1);
	CHECK_EQ(n.exits, 1);
	count_waiter(r, &b, &n);
	CHECK_EQ(n.big_allocs, 14);
	CHECK_EQ(n.big_frees, 14);
	CHECK_EQ(n.kept_allocs, 2);
	CHECK_EQ(n.unknown_free, 1);
	CHECK_EQ(n.exits, 0);
	ht_reader_close(r);
}

/*
 * A module loaded after the attach, by a bare name that only the calling
 * program's RUNPATH finds: it loads, and its own mallocs are traced with
 * stacks in it.
 */
static void test_dlopen_later(void)
{
	struct waiter w;
	waiter_start(&w, "1", "libattachdyn.so");
	CHECK(!maps_have(w.pid, "libattachdyn"));
	char trace[256], pidarg[32];
	snprintf(trace, sizeof(trace), "%s/dl.htr", tmp);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)w.pid);
	const char *args[] = {"-p", pidarg, "-o", trace, NULL};
	int errfd;
	pid_t hp = start_record(args, &errfd);
	CHECK(waiter_poke(&w));
	kill(hp, SIGINT);
	int st = wait_for(hp, 30000);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(errfd);
	CHECK(maps_have(w.pid, "libattachdyn"));
	CHECK(waiter_poke(&w));
	st = waiter_end(&w);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);

	struct ht_reader *r = open_trace(trace);
	if (!r)
		return;
	struct ht_event ev;
	int allocs = 0, in_module = 0;
	while (ht_reader_next(r, &ev) > 0) {
		if (ev.pid != w.pid || ev.type != HT_EV_ALLOC || ev.size != 23456)
			continue;
		allocs++;
		const uint32_t *frames;
		if (ht_reader_stack(r, ev.stack, &frames) > 0) {
			const struct ht_frame *f = ht_reader_frame(r, frames[0]);
			const struct ht_module *m = f && f->module != HT_MODULE_NONE
							? ht_reader_module(r, f->module)
							: NULL;
			in_module += m && !strcmp(m->name, "libattachdyn.so");
		}
	}
	CHECK_EQ(allocs, 3);
	CHECK_EQ(in_module, 3);
	ht_reader_close(r);
}

/*
 * A non-PIE program whose malloc is a PLT entry of its own: the hooks must
 * call the function behind it, not the entry (which leads back to them).
 */
static void test_canonical_plt(void)
{
	struct waiter w;
	program_start(&w, "nopie", NULL, NULL);
	char trace[256], pidarg[32];
	snprintf(trace, sizeof(trace), "%s/nopie.htr", tmp);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)w.pid);
	const char *args[] = {"-p", pidarg, "-o", trace, NULL};
	int errfd;
	pid_t hp = start_record(args, &errfd);
	CHECK(waiter_poke(&w));
	kill(hp, SIGINT);
	int st = wait_for(hp, 30000);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(errfd);
	CHECK(waiter_poke(&w));
	st = waiter_end(&w);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct ht_reader *r = open_trace(trace);
	if (!r)
		return;
	struct ht_event ev;
	int allocs = 0, frees = 0;
	while (ht_reader_next(r, &ev) > 0) {
		allocs += ev.pid == w.pid && ev.type == HT_EV_ALLOC && ev.size == 4321;
		frees += ev.pid == w.pid && ev.type == HT_EV_FREE;
	}
	CHECK_EQ(allocs, 4);
	CHECK_EQ(frees, 4);
	ht_reader_close(r);
}

/*
 * Children are not followed in attach mode: a child forked while attached
 * allocates untraced and exits normally; its parent goes on being traced.
 */
static void test_fork_child(void)
{
	struct waiter w;
	waiter_start(&w, "2", NULL);
	char trace[256], pidarg[32];
	snprintf(trace, sizeof(trace), "%s/fork.htr", tmp);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)w.pid);
	const char *args[] = {"-p", pidarg, "-o", trace, NULL};
	int errfd;
	pid_t hp = start_record(args, &errfd);
	CHECK(waiter_send(&w, "fork\n"));
	CHECK(waiter_send(&w, "Fork\n"));
	CHECK(waiter_poke(&w));
	kill(hp, SIGINT);
	int st = wait_for(hp, 30000);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(errfd);
	CHECK(waiter_send(&w, "fork\n"));
	st = waiter_end(&w);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct ht_reader *r = open_trace(trace);
	if (!r)
		return;
	struct ht_event ev;
	int child = 0, mine = 0;
	while (ht_reader_next(r, &ev) > 0) {
		child += ev.type == HT_EV_ALLOC && ev.size == 999;
		mine += ev.pid == w.pid && ev.type == HT_EV_ALLOC && ev.size == 12345;
	}
	CHECK_EQ(child, 0);
	CHECK_EQ(mine, 6);
	CHECK_EQ(ht_reader_process_count(r), 1);
	ht_reader_close(r);
}

/* A process that exits ends the recording by itself. */
static void test_target_exits(void)
{
	struct waiter w;
	waiter_start(&w, "1", NULL);
	char trace[256], pidarg[32];
	snprintf(trace, sizeof(trace), "%s/exit.htr", tmp);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)w.pid);
	const char *args[] = {"-p", pidarg, "-o", trace, NULL};
	int errfd;
	pid_t hp = start_record(args, &errfd);
	CHECK(waiter_poke(&w));
	int st = waiter_end(&w);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	st = wait_for(hp, 20000);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(errfd);
	struct ht_reader *r = open_trace(trace);
	if (!r)
		return;
	const struct ht_process *p = process_of(r, w.pid);
	CHECK(p && (p->flags & HT_PROCF_EXITED) && p->exit_code == 0);
	ht_reader_close(r);
}

/* Without ptrace permission: one clear line, non-zero exit, the target untouched. */
static void test_no_permission(void)
{
	/* Not root: init (pid 1, root's) is a process we may not trace. */
	if (geteuid() != 0) {
		char errpath[256];
		snprintf(errpath, sizeof(errpath), "%s/perm1.err", tmp);
		int errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		const char *argv[] = {heaptrail, "record", "-p", "1", NULL};
		int st = wait_for(spawn(argv, -1, -1, errfd, false), 20000);
		close(errfd);
		CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
		const char *err = slurp(errpath);
		const char *nl = strchr(err, '\n');
		CHECK(nl && nl[1] == 0 && strstr(err, "permission denied"));
		return;
	}
	struct waiter w;
	waiter_start(&w, "2", NULL);
	char trace[256], pidarg[32], errpath[256];
	snprintf(trace, sizeof(trace), "%s/perm.htr", tmp);
	snprintf(errpath, sizeof(errpath), "%s/perm.err", tmp);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)w.pid);
	int errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0666);
	const char *argv[] = {heaptrail, "record", "-p", pidarg, "-o", trace, NULL};
	pid_t hp = spawn(argv, -1, -1, errfd, true);
	close(errfd);
	int st = wait_for(hp, 20000);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 122);
	const char *err = slurp(errpath);
	const char *nl = strchr(err, '\n');
	CHECK(nl && nl[1] == 0); /* exactly one line */
	CHECK(strstr(err, "cannot attach to process") && strstr(err, pidarg));
	CHECK(strstr(err, "permission denied"));
	CHECK(strstr(err, "root") || strstr(err, "same user") || strstr(err, "ptrace_scope"));
	if (check_failures)
		fprintf(stderr, "heaptrail said: %s", err);
	CHECK(access(trace, F_OK) != 0);
	/* Untouched: never traced, no recorder in it, and it works. */
	CHECK_EQ(tracer_of(w.pid), 0);
	CHECK(!maps_have(w.pid, "libheaptrail"));
	CHECK(wait_in_read(w.pid));
	CHECK(waiter_poke(&w));
	CHECK(w.fn[0] != 0 && w.fn[1] == w.fn[0]);
	st = waiter_end(&w);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Mistakes on the command line: a message and exit status 2, nothing started. */
static void test_bad_arguments(void)
{
	static const char *const cases[][6] = {
	    {"record", "-p", "0", NULL},
	    {"record", "-p", "12x", NULL},
	    {"record", "-p", "2147483647", NULL},
	    {"record", "--duration", "1", "--", "/bin/true", NULL},
	    {"record", "-p", "1", "--duration", "soon", NULL},
	    {"record", "-p", "1", "/bin/true", NULL},
	};
	static const char *const want[] = {"invalid process id",    "invalid process id",
					   "no process 2147483647", "--duration goes with -p",
					   "invalid duration",	    "not both"};
	char errpath[256];
	snprintf(errpath, sizeof(errpath), "%s/args.err", tmp);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *argv[8] = {heaptrail};
		for (int k = 0; cases[i][k]; k++)
			argv[k + 1] = cases[i][k];
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		pid_t pid = spawn(argv, -1, -1, fd, false);
		close(fd);
		int st = wait_for(pid, 10000);
		CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 2);
		const char *err = slurp(errpath);
		if (!strstr(err, want[i])) {
			fprintf(stderr, "case %zu: wanted '%s' in: %s\n", i, want[i], err);
			check_failures++;
		}
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: test_attach HEAPTRAIL PROGRAM_DIR\n");
		return 2;
	}
	/* Absolute: the programs run in the temporary directory. */
	heaptrail = realpath(argv[1], NULL);
	progdir = realpath(argv[2], NULL);
	if (!heaptrail || !progdir) {
		fprintf(stderr, "test_attach: cannot find '%s' or '%s'\n", argv[1], argv[2]);
		return 2;
	}
	/* heaptrail is our child, not the targets' parent: without root, Yama
	   ptrace_scope 1 or more forbids every attach here. */
	FILE *yama = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
	int scope = 0;
	if (yama) {
		if (fscanf(yama, "%d", &scope) != 1)
			scope = 0;
		fclose(yama);
	}
	if (geteuid() != 0 && scope >= 1) {
		printf("skip: kernel.yama.ptrace_scope is %d and we are not root\n", scope);
		return 77;
	}
	snprintf(tmp, sizeof(tmp), "/tmp/htattach.XXXXXX");
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	atexit(cleanup);
	signal(SIGPIPE, SIG_IGN);
	/* A line per case as it ends, with its time: a run that ctest stops at
	   its timeout still says which case it was in. */
	setvbuf(stdout, NULL, _IOLBF, 0);

	struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
	    {"bad arguments", test_bad_arguments},
	    {"no permission", test_no_permission},
	    {"blocked in read", test_blocked_in_read},
	    {"two processes", test_two_processes},
	    {"target exits", test_target_exits},
	    {"dlopen after attach", test_dlopen_later},
	    {"non-PIE program, canonical PLT", test_canonical_plt},
	    {"fork while attached", test_fork_child},
	    {"busy 8 threads", test_busy},
	};
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		int before = check_failures;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		printf("case: %s\n", tests[i].name);
		tests[i].fn();
		kill_all();
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("%s: %s (%.1f s)\n", before == check_failures ? "ok" : "FAIL", tests[i].name,
		       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	}
	return check_failures ? 1 : 0;
}
