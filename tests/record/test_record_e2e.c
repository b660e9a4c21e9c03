/*
 * test_record_e2e.c - `heaptrail record` end to end: records the programs of
 * this folder (rec_basic, rec_fork) through the real recorder and checks the
 * trace through the reader API: exact counts, sizes, processes, exit codes
 * and symbols. Also the command's own behaviour: exit status passthrough,
 * a missing program, an existing output file, bad options, and that no
 * session file is left behind.
 *
 * Usage: test_record_e2e HEAPTRAIL PROGRAM_DIR
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heaptrail/trace.h"

#include "check.h"

static const char *heaptrail, *progdir;
static char tmp[64], rtdir[128], errfile[128];
static pid_t last_pid; /* of the last heaptrail run */

/* Run heaptrail with args (NULL-terminated) in dir; stderr to errfile. Returns
   the exit status, or -1. */
static int run(const char *dir, ...)
{
	const char *argv[32];
	int n = 0;
	va_list ap;
	argv[n++] = heaptrail;
	va_start(ap, dir);
	const char *a;
	while ((a = va_arg(ap, const char *)) && n < 31)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 2) < 0 || chdir(dir) < 0)
			_exit(120);
		setenv("XDG_RUNTIME_DIR", rtdir, 1);
		execv(heaptrail, (char **)argv);
		_exit(121);
	}
	int status;
	last_pid = pid;
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Start heaptrail in the background (stderr to errfile); returns its pid. */
static pid_t start(const char *dir, const char *const *args)
{
	pid_t pid = fork();
	if (pid == 0) {
		const char *argv[32];
		int n = 0;
		argv[n++] = heaptrail;
		while (*args && n < 31)
			argv[n++] = *args++;
		argv[n] = NULL;
		int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 2) < 0 || chdir(dir) < 0)
			_exit(120);
		setenv("XDG_RUNTIME_DIR", rtdir, 1);
		execv(heaptrail, (char **)argv);
		_exit(121);
	}
	return pid;
}

static char *slurp(const char *path)
{
	static char buf[8192];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? 0 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/*
 * Session files of heaptrail process pid ("session-PID-*") in every place a
 * session may live (session.c picks the first on a tmpfs).
 */
static int session_files(pid_t pid)
{
	char dirs[4][256], prefix[64];
	snprintf(dirs[0], sizeof(dirs[0]), "%s/heaptrail", rtdir);
	snprintf(dirs[1], sizeof(dirs[1]), "/run/heaptrail");
	snprintf(dirs[2], sizeof(dirs[2]), "/tmp/heaptrail-%u", (unsigned)geteuid());
	snprintf(dirs[3], sizeof(dirs[3]), "/dev/shm/heaptrail-%u", (unsigned)geteuid());
	snprintf(prefix, sizeof(prefix), "session-%d-", (int)pid);
	int n = 0;
	for (int i = 0; i < 4; i++) {
		DIR *dir = opendir(dirs[i]);
		struct dirent *e;
		while (dir && (e = readdir(dir)))
			n += !strncmp(e->d_name, prefix, strlen(prefix));
		if (dir)
			closedir(dir);
	}
	return n;
}

/* The session file must be gone after every run. */
static void check_no_session_left(void)
{
	CHECK_EQ(session_files(last_pid), 0);
}

struct ev_list {
	struct ht_event *v;
	size_t n;
};

static struct ht_reader *open_trace(const char *path, struct ev_list *out)
{
	struct ht_reader *r;
	int rc = ht_reader_open(&r, path);
	if (rc < 0) {
		fprintf(stderr, "cannot open '%s': %s\n", path, ht_strerror(rc));
		check_failures++;
		return NULL;
	}
	size_t cap = 1024;
	out->v = malloc(cap * sizeof(*out->v));
	out->n = 0;
	struct ht_event ev;
	uint64_t last = 0;
	int order_ok = 1;
	while ((rc = ht_reader_next(r, &ev)) > 0) {
		if (out->n == cap)
			out->v = realloc(out->v, (cap *= 2) * sizeof(*out->v));
		if (ev.ts < last)
			order_ok = 0;
		last = ev.ts;
		ev.name = NULL;
		out->v[out->n++] = ev;
	}
	CHECK_EQ(rc, 0);
	CHECK(order_ok);
	const struct ht_trace_info *info = ht_reader_info(r);
	CHECK(info->flags & HT_TRACEF_COMPLETE);
	CHECK(!(info->flags & HT_TRACEF_TRUNCATED));
	return r;
}

/* Does any logical frame of stack id name function fn (in file ending file)? */
static bool stack_has(struct ht_reader *r, uint32_t stack, const char *fn, const char *file)
{
	const uint32_t *frames;
	uint32_t n = ht_reader_stack(r, stack, &frames);
	for (uint32_t i = 0; i < n; i++) {
		const struct ht_frame *f = ht_reader_frame(r, frames[i]);
		if (!f || !f->function || strcmp(f->function, fn))
			continue;
		if (!file)
			return true;
		size_t lf = f->file ? strlen(f->file) : 0, l = strlen(file);
		if (lf >= l && !strcmp(f->file + lf - l, file))
			return true;
	}
	return false;
}

static void test_basic(void)
{
	char out[256], prog[256];
	snprintf(out, sizeof(out), "%s/basic.htr", tmp);
	snprintf(prog, sizeof(prog), "%s/rec_basic", progdir);
	CHECK_EQ(run(tmp, "record", "-o", out, "--", prog, "3", NULL), 3);
	CHECK(strstr(slurp(errfile), "heaptrail: wrote '") != NULL);
	check_no_session_left();
	struct ev_list e;
	struct ht_reader *r = open_trace(out, &e);
	if (!r)
		return;
	CHECK_EQ(ht_reader_process_count(r), 1);
	const struct ht_process *p = ht_reader_process(r, 0);
	CHECK(p->flags & HT_PROCF_ROOT);
	CHECK(p->flags & HT_PROCF_EXITED);
	CHECK_EQ(p->exit_code, 3);
	CHECK(p->exe && strstr(p->exe, "rec_basic"));
	CHECK_EQ(ht_reader_info(r)->events_lost, 0);
	CHECK(ht_reader_info(r)->flags & HT_TRACEF_SYMBOLS);
	CHECK_EQ(ht_reader_info(r)->stack_mask, 0x2b); /* alloc,realloc,mmap,mprotect */

	uint64_t addr[12] = {0};
	int seen[12] = {0}, freed = 0, callocs = 0, reallocs = 0, exits = 0, symbolized = 0;
	uint64_t r1 = 0;
	for (size_t i = 0; i < e.n; i++) {
		struct ht_event *ev = &e.v[i];
		if (ev->type == HT_EV_ALLOC && ev->size >= 1000 && ev->size < 1012 &&
		    ev->func == HT_FN_MALLOC) {
			int k = (int)(ev->size - 1000);
			seen[k]++;
			addr[k] = ev->addr;
			CHECK(ev->stack != 0);
			if (stack_has(r, ev->stack, "make_block", "rec_basic.c") &&
			    stack_has(r, ev->stack, "main", "rec_basic.c"))
				symbolized++;
		}
		if (ev->type == HT_EV_FREE)
			for (int k = 0; k < 12; k += 2)
				if (addr[k] && ev->addr == addr[k]) {
					freed++;
					addr[k] = 0;
				}
		if (ev->type == HT_EV_ALLOC && ev->func == HT_FN_CALLOC && ev->size == 999)
			callocs++;
		if (ev->type == HT_EV_REALLOC && ev->old_addr == 0 && ev->size == 777) {
			reallocs++;
			r1 = ev->addr;
		}
		if (ev->type == HT_EV_REALLOC && r1 && ev->old_addr == r1 && ev->size == 7777)
			reallocs++;
		if (ev->type == HT_EV_PROCESS_EXIT) {
			exits++;
			CHECK_EQ(ev->value, 3);
			CHECK_EQ(ev->flags & HT_EVF_SIGNAL, 0);
			CHECK_EQ(i, e.n - 1 - (e.v[e.n - 1].type != HT_EV_PROCESS_EXIT));
		}
	}
	for (int k = 0; k < 12; k++)
		CHECK_EQ(seen[k], 1);
	CHECK_EQ(freed, 6);
	CHECK_EQ(callocs, 1);
	CHECK_EQ(reallocs, 2);
	CHECK_EQ(exits, 1);
	CHECK_EQ(symbolized, 12);
	CHECK_EQ(e.v[0].type, HT_EV_PROCESS_START);
	free(e.v);
	ht_reader_close(r);
}

static void test_abort_and_stacks_none(void)
{
	char out[256], prog[256];
	snprintf(out, sizeof(out), "%s/abort.htr", tmp);
	snprintf(prog, sizeof(prog), "%s/rec_basic", progdir);
	CHECK_EQ(run(tmp, "record", "-q", "--stacks", "none", "-o", out, "--", prog, "abort", NULL),
		 128 + SIGABRT);
	CHECK_EQ(strlen(slurp(errfile)), 0); /* -q */
	check_no_session_left();
	struct ev_list e;
	struct ht_reader *r = open_trace(out, &e);
	if (!r)
		return;
	CHECK_EQ(ht_reader_info(r)->stack_mask, 0);
	int exits = 0, allocs = 0;
	for (size_t i = 0; i < e.n; i++) {
		if (e.v[i].type == HT_EV_ALLOC && e.v[i].size >= 1000 && e.v[i].size < 1012) {
			allocs++;
			CHECK_EQ(e.v[i].stack, 0);
		}
		if (e.v[i].type == HT_EV_PROCESS_EXIT) {
			exits++;
			CHECK(e.v[i].flags & HT_EVF_SIGNAL);
			CHECK_EQ(e.v[i].value, SIGABRT);
		}
	}
	CHECK_EQ(allocs, 12);
	CHECK_EQ(exits, 1);
	const struct ht_process *p = ht_reader_process(r, 0);
	CHECK(p && (p->flags & HT_PROCF_SIGNALED) && p->signal == SIGABRT);
	free(e.v);
	ht_reader_close(r);
}

static void test_fork_tree(void)
{
	char out[256], prog[256];
	snprintf(out, sizeof(out), "%s/fork.htr", tmp);
	snprintf(prog, sizeof(prog), "%s/rec_fork", progdir);
	CHECK_EQ(run(tmp, "record", "-o", out, "--", prog, NULL), 0);
	check_no_session_left();
	struct ev_list e;
	struct ht_reader *r = open_trace(out, &e);
	if (!r)
		return;
	CHECK_EQ(ht_reader_process_count(r), 3);
	int count[5] = {0}; /* sizes 2000 + k */
	uint32_t proc_of[5] = {9, 9, 9, 9, 9};
	for (size_t i = 0; i < e.n; i++) {
		struct ht_event *ev = &e.v[i];
		if (ev->type == HT_EV_ALLOC && ev->size > 2000 && ev->size <= 2004) {
			int k = (int)(ev->size - 2000);
			count[k]++;
			if (proc_of[k] == 9)
				proc_of[k] = ev->process;
			CHECK_EQ(ev->process, proc_of[k]);
		}
	}
	CHECK_EQ(count[1], 5);
	CHECK_EQ(count[2], 7);
	CHECK_EQ(count[3], 1);
	CHECK_EQ(count[4], 3);
	CHECK_EQ(proc_of[1], proc_of[3]);
	const struct ht_process *root = ht_reader_process(r, proc_of[1]);
	const struct ht_process *child = ht_reader_process(r, proc_of[2]);
	const struct ht_process *grand = ht_reader_process(r, proc_of[4]);
	CHECK(root && child && grand);
	if (root && child && grand) {
		CHECK(root->flags & HT_PROCF_ROOT);
		CHECK_EQ(root->exit_code, 0);
		CHECK(child->flags & HT_PROCF_FORK);
		CHECK_EQ(child->parent, proc_of[1]);
		CHECK_EQ(child->ppid, root->pid);
		CHECK(child->flags & HT_PROCF_EXITED);
		CHECK_EQ(child->exit_code, 4);
		CHECK(grand->flags & HT_PROCF_FORK);
		/* The parent link holds even when the child exits before the
		   grandchild first runs (the orphan is then the subreaper's). */
		CHECK_EQ(grand->ppid, child->pid);
		CHECK_EQ(grand->parent, proc_of[2]);
		CHECK(grand->flags & HT_PROCF_EXITED);
		CHECK_EQ(grand->exit_code, 5);
		/* the orphan outlived its parent and was still collected */
		CHECK(grand->end_ts > child->end_ts);
	}
	free(e.v);
	ht_reader_close(r);
}

static void test_errors(void)
{
	char out[256], prog[256];
	/* a missing program: 127, one clear line, no trace */
	snprintf(out, sizeof(out), "%s/missing.htr", tmp);
	CHECK_EQ(run(tmp, "record", "-o", out, "--", "/nonexistent/prog", NULL), 127);
	CHECK(strstr(slurp(errfile),
		     "cannot run '/nonexistent/prog': No such file or directory\n") != NULL);
	CHECK(!exists(out));
	CHECK_EQ(run(tmp, "record", "-o", out, "--", "heaptrail-no-such-command-xyz", NULL), 127);
	CHECK(strstr(slurp(errfile),
		     "cannot run 'heaptrail-no-such-command-xyz': command not found\n") != NULL);
	CHECK(!exists(out));
	check_no_session_left();

	/* an existing -o file is kept unless --force */
	snprintf(out, sizeof(out), "%s/exists.htr", tmp);
	snprintf(prog, sizeof(prog), "%s/rec_basic", progdir);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, "keep", 4) == 4);
	close(fd);
	CHECK_EQ(run(tmp, "record", "-o", out, "--", prog, NULL), 2);
	CHECK(strstr(slurp(errfile), "exists") != NULL);
	CHECK(!strcmp(slurp(out), "keep"));
	CHECK_EQ(run(tmp, "record", "-q", "--force", "-o", out, "--", prog, "7", NULL), 7);
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, out), 0);
	if (r)
		ht_reader_close(r);

	/* bad --stacks names the valid ones */
	CHECK_EQ(run(tmp, "record", "--stacks", "alloc,bogus", "--", prog, NULL), 2);
	CHECK(strstr(slurp(errfile), "'bogus'") && strstr(slurp(errfile), "heap-destroy"));
	CHECK_EQ(run(tmp, "record", "--buffer-size", "3000", "--", prog, NULL), 2);
	check_no_session_left();
}

/* Whether the child of pid is a program named comm blocked in a sleep
   system call: started under the recorder, past its constructor. */
static bool child_sleeping(pid_t pid, const char *comm)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	FILE *f = fopen(path, "r");
	int child = 0;
	if (f) {
		if (fscanf(f, "%d", &child) != 1)
			child = 0;
		fclose(f);
	}
	if (child <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/comm", child);
	char *c = slurp(path);
	if (strncmp(c, comm, strlen(comm)) || c[strlen(comm)] != '\n')
		return false;
	snprintf(path, sizeof(path), "/proc/%d/syscall", child);
	long nr = strtol(slurp(path), NULL, 10);
	return nr == SYS_clock_nanosleep || nr == SYS_nanosleep;
}

/* A SIGTERM sent to heaptrail goes to the program; heaptrail exits 128+15. */
static void test_signal_forwarding(void)
{
	char out[256];
	snprintf(out, sizeof(out), "%s/term.htr", tmp);
	const char *args[] = {"record", "-q", "-o", out, "--", "sleep", "10", NULL};
	pid_t pid = start(tmp, args);
	last_pid = pid;
	/* while it runs, the file exists (wait for it: the machine may be busy) */
	for (int i = 0; i < 100 && session_files(pid) == 0; i++)
		usleep(50000);
	CHECK_EQ(session_files(pid), 1);
	/* Wait for the program to sleep (a fixed pause was not enough on a
	   loaded machine: killed before exec, it never was in the trace). */
	for (int i = 0; i < 600 && !child_sleeping(pid, "sleep"); i++)
		usleep(50000);
	CHECK(child_sleeping(pid, "sleep"));
	CHECK(kill(pid, SIGTERM) == 0);
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 128 + SIGTERM);
	check_no_session_left();
	struct ev_list e;
	struct ht_reader *r = open_trace(out, &e);
	if (!r)
		return;
	const struct ht_process *p = ht_reader_process(r, 0);
	CHECK(p && (p->flags & HT_PROCF_SIGNALED) && p->signal == SIGTERM);
	free(e.v);
	ht_reader_close(r);
}

/* An exec in the traced pid: a second image with the EXEC flag. */
static void test_exec(void)
{
	char out[256], cmd[512];
	snprintf(out, sizeof(out), "%s/exec.htr", tmp);
	snprintf(cmd, sizeof(cmd), "exec %s/rec_basic 9", progdir);
	CHECK_EQ(run(tmp, "record", "-q", "-o", out, "--", "/bin/sh", "-c", cmd, NULL), 9);
	struct ev_list e;
	struct ht_reader *r = open_trace(out, &e);
	if (!r)
		return;
	CHECK_EQ(ht_reader_process_count(r), 2);
	const struct ht_process *sh = ht_reader_process(r, 0), *prog = ht_reader_process(r, 1);
	CHECK(sh && prog);
	if (sh && prog) {
		CHECK_EQ(sh->pid, prog->pid);
		CHECK(sh->flags & HT_PROCF_EXECED);
		CHECK(prog->flags & HT_PROCF_EXEC);
		CHECK(prog->exe && strstr(prog->exe, "rec_basic"));
		CHECK_EQ(prog->exit_code, 9);
	}
	int allocs = 0, execs = 0;
	for (size_t i = 0; i < e.n; i++) {
		if (e.v[i].type == HT_EV_ALLOC && e.v[i].size >= 1000 && e.v[i].size < 1012) {
			allocs++;
			CHECK_EQ(e.v[i].process, 1);
		}
		execs += e.v[i].type == HT_EV_PROCESS_EXEC;
	}
	CHECK_EQ(allocs, 12);
	CHECK_EQ(execs, 1);
	free(e.v);
	ht_reader_close(r);
}

/* --no-follow: the children run untraced, only the root is in the trace. */
static void test_no_follow(void)
{
	char out[256], prog[256];
	snprintf(out, sizeof(out), "%s/nofollow.htr", tmp);
	snprintf(prog, sizeof(prog), "%s/rec_fork", progdir);
	CHECK_EQ(run(tmp, "record", "-q", "--no-follow", "-o", out, "--", prog, NULL), 0);
	check_no_session_left();
	struct ev_list e;
	struct ht_reader *r = open_trace(out, &e);
	if (!r)
		return;
	CHECK_EQ(ht_reader_process_count(r), 1);
	int count[5] = {0};
	for (size_t i = 0; i < e.n; i++)
		if (e.v[i].type == HT_EV_ALLOC && e.v[i].size > 2000 && e.v[i].size <= 2004)
			count[e.v[i].size - 2000]++;
	CHECK_EQ(count[1], 5);
	CHECK_EQ(count[2], 0);
	CHECK_EQ(count[3], 1);
	CHECK_EQ(count[4], 0);
	free(e.v);
	ht_reader_close(r);
}

/*
 * --lossy with two 4 KiB buffers: events are dropped rather than waited for,
 * and every dropped one is counted: the footer, the message and the events
 * kept add up.
 */
static void test_lossy(void)
{
	char out[256], prog[256];
	const long n = 200000;
	snprintf(out, sizeof(out), "%s/lossy.htr", tmp);
	snprintf(prog, sizeof(prog), "%s/rec_many", progdir);
	CHECK_EQ(run(tmp, "record", "--lossy", "--buffer-size", "4K", "--buffers", "2", "-o", out,
		     "--", prog, "200000", NULL),
		 0);
	unsigned long long evs = 0, lost = 0;
	CHECK(sscanf(strstr(slurp(errfile), "heaptrail: wrote") ?: "",
		     "heaptrail: wrote '%*[^']' (%llu events, %llu lost)", &evs, &lost) == 2);
	struct ev_list e;
	struct ht_reader *r = open_trace(out, &e);
	if (!r)
		return;
	const struct ht_trace_info *info = ht_reader_info(r);
	CHECK(info->flags & HT_TRACEF_LOSSY);
	CHECK_EQ(info->events_lost, lost);
	CHECK(lost > 0);
	CHECK_EQ(e.n, evs);
	long kept = 0;
	for (size_t i = 0; i < e.n; i++)
		kept +=
		    (e.v[i].type == HT_EV_ALLOC && e.v[i].size == 48) || e.v[i].type == HT_EV_FREE;
	/* every malloc(48)/free pair is either kept or counted lost */
	CHECK(kept <= 2 * n);
	CHECK(kept + (long)lost >= 2 * n);
	free(e.v);
	ht_reader_close(r);
}

/*
 * Inlined code: the frame of malloc's return address in outer_fn() resolves
 * to inner_alloc (inlined, at the malloc call, line 12) then outer_fn (at
 * the place inner_alloc was inlined, line 17).
 */
static void test_inline_symbols(void)
{
	char out[256], prog[256];
	snprintf(out, sizeof(out), "%s/inline.htr", tmp);
	snprintf(prog, sizeof(prog), "%s/rec_inline", progdir);
	CHECK_EQ(run(tmp, "record", "-q", "-o", out, "--", prog, NULL), 0);
	struct ev_list e;
	struct ht_reader *r = open_trace(out, &e);
	if (!r)
		return;
	int allocs = 0, good = 0;
	for (size_t i = 0; i < e.n; i++) {
		if (e.v[i].type != HT_EV_ALLOC || e.v[i].size != 4321)
			continue;
		allocs++;
		const uint32_t *frames;
		uint32_t n = ht_reader_stack(r, e.v[i].stack, &frames);
		for (uint32_t k = 0; k + 1 < n; k++) {
			const struct ht_frame *a = ht_reader_frame(r, frames[k]);
			const struct ht_frame *b = ht_reader_frame(r, frames[k + 1]);
			if (!a || !b || !a->function || !b->function ||
			    strcmp(a->function, "inner_alloc"))
				continue;
			CHECK_EQ(a->inlined, 1);
			CHECK_EQ(a->line, 12);
			CHECK(a->file && strstr(a->file, "rec_inline.c"));
			CHECK(!strcmp(b->function, "outer_fn"));
			CHECK_EQ(b->inlined, 0);
			CHECK_EQ(b->line, 17);
			CHECK_EQ(a->rel, b->rel); /* one return address, two logical frames */
			good++;
			break;
		}
	}
	CHECK_EQ(allocs, 4);
	CHECK_EQ(good, 4);
	free(e.v);
	ht_reader_close(r);
}

/*
 * Four threads allocating at once into small rings (4 KiB: they fill in
 * microseconds, so writers wait for the collector and the ends of the rings
 * are padded all the time): lossless means every event is there, once, in
 * time order, attributed to the thread that made it.
 */
static void test_threads_lossless(void)
{
	char out[256], prog[256];
	const long per = 20000;
	snprintf(out, sizeof(out), "%s/threads.htr", tmp);
	snprintf(prog, sizeof(prog), "%s/rec_threads", progdir);
	CHECK_EQ(run(tmp, "record", "-q", "--buffer-size", "4K", "-o", out, "--", prog, "4",
		     "20000", NULL),
		 0);
	struct ev_list e;
	struct ht_reader *r = open_trace(out, &e); /* checks time order */
	if (!r)
		return;
	CHECK_EQ(ht_reader_info(r)->events_lost, 0);
	long allocs[4] = {0}, frees = 0;
	int32_t tid[4] = {0};
	uint64_t live[4] = {0};
	for (size_t i = 0; i < e.n; i++) {
		struct ht_event *ev = &e.v[i];
		if (ev->type == HT_EV_ALLOC && ev->size >= 100 && ev->size < 104) {
			int k = (int)(ev->size - 100);
			allocs[k]++;
			if (!tid[k])
				tid[k] = ev->tid;
			CHECK_EQ(ev->tid, tid[k]);
			CHECK_EQ(live[k], 0); /* each block is freed before the next */
			live[k] = ev->addr;
		} else if (ev->type == HT_EV_FREE) {
			for (int k = 0; k < 4; k++)
				if (live[k] && ev->addr == live[k] && ev->tid == tid[k]) {
					live[k] = 0;
					frees++;
				}
		}
	}
	for (int k = 0; k < 4; k++)
		CHECK_EQ(allocs[k], per);
	CHECK_EQ(frees, 4 * per);
	CHECK(tid[0] != tid[1] && tid[1] != tid[2] && tid[2] != tid[3]);
	free(e.v);
	ht_reader_close(r);
}

/*
 * 200 threads in turn with 4 rings: rings come back when threads end (even
 * a ring a thread took again while exiting), so no event is lost and no
 * thread waits long.
 */
static void test_ring_reuse(void)
{
	char out[256], prog[256];
	snprintf(out, sizeof(out), "%s/seq.htr", tmp);
	snprintf(prog, sizeof(prog), "%s/rec_seqthreads", progdir);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	CHECK_EQ(run(tmp, "record", "-q", "--buffers", "4", "-o", out, "--", prog, "200", NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	/* a thread waits at most a few ticks for a ring, never the 2 s timeout */
	CHECK(b.tv_sec - a.tv_sec < 15);
	struct ev_list e;
	struct ht_reader *r = open_trace(out, &e);
	if (!r)
		return;
	CHECK_EQ(ht_reader_info(r)->events_lost, 0);
	int allocs = 0, starts = 0;
	for (size_t i = 0; i < e.n; i++) {
		allocs += e.v[i].type == HT_EV_ALLOC && e.v[i].size == 777;
		starts += e.v[i].type == HT_EV_THREAD_START && e.v[i].tid != e.v[i].pid;
	}
	CHECK_EQ(allocs, 200);
	CHECK(starts >= 200);
	free(e.v);
	ht_reader_close(r);
}

/* A script without "#!" runs with sh, as a shell would run it. */
static void test_script(void)
{
	char out[256], script[256];
	snprintf(out, sizeof(out), "%s/script.htr", tmp);
	snprintf(script, sizeof(script), "%s/script", tmp);
	int fd = open(script, O_WRONLY | O_CREAT | O_TRUNC, 0700);
	CHECK(fd >= 0 && write(fd, "exit 4\n", 7) == 7);
	close(fd);
	CHECK_EQ(run(tmp, "record", "-q", "-o", out, "--", script, NULL), 4);
	CHECK(exists(out));
}

/* Without -o: PROGRAM.PID.htr in the current directory. */
static void test_default_name(void)
{
	char dir[256], prog[256];
	snprintf(dir, sizeof(dir), "%s/cwd", tmp);
	mkdir(dir, 0700);
	snprintf(prog, sizeof(prog), "%s/rec_basic", progdir);
	CHECK_EQ(run(dir, "record", "-q", "--", prog, NULL), 0);
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *e;
	char name[256] = "";
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			n++;
			snprintf(name, sizeof(name), "%s", e->d_name);
		}
	if (d)
		closedir(d);
	CHECK_EQ(n, 1);
	int pid = 0;
	char rest[16] = "";
	CHECK(sscanf(name, "rec_basic.%d.%15s", &pid, rest) == 2 && pid > 0 &&
	      !strcmp(rest, "htr"));
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
	rmdir(dir);
}

static void rm_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char p[512];
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		struct stat st;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			rm_tree(p);
		else
			unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(path);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: test_record_e2e HEAPTRAIL PROGRAM_DIR\n");
		return 2;
	}
	heaptrail = argv[1];
	progdir = argv[2];
	snprintf(tmp, sizeof(tmp), "/tmp/ht-rec-XXXXXX");
	if (!mkdtemp(tmp))
		return 2;
	snprintf(rtdir, sizeof(rtdir), "%s/rt", tmp);
	snprintf(errfile, sizeof(errfile), "%s/stderr", tmp);
	mkdir(rtdir, 0700);
	test_basic();
	test_abort_and_stacks_none();
	test_fork_tree();
	test_errors();
	test_default_name();
	test_signal_forwarding();
	test_exec();
	test_no_follow();
	test_lossy();
	test_inline_symbols();
	test_script();
	test_threads_lossless();
	test_ring_reuse();
	if (check_failures) {
		fprintf(stderr, "%d check(s) failed; files kept in %s\n", check_failures, tmp);
		return 1;
	}
	rm_tree(tmp);
	return 0;
}
