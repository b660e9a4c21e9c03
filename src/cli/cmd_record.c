/*
 * cmd_record.c - `heaptrail record -- CMD ARGS`: runs a program under the
 * recorder (LD_PRELOAD=libheaptrail.so) with a session collecting its events
 * and those of its traced descendants, and writes the trace. With -p it
 * attaches to running processes instead (docs/attach.md).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <alloca.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/leakgate.h"
#include "cli/opt.h"
#include "format/output.h"
#include "format/writer.h"
#include "inject/inject.h"
#include "base/paths.h"
#include "base/protocol.h"
#include "session/ring_keep.h"
#include "session/session.h"

static const char usage_text[] =
    "usage: heaptrail record [options] -- CMD [ARGS...]\n"
    "   or: heaptrail record [options] -p PID[,PID...] [--duration T]\n"
    "\n"
    "Run CMD with heap tracing and write the trace (.htr), or trace running\n"
    "processes from now until Ctrl-C, T, or their exit; they run on untouched.\n"
    "\n"
    "  -o FILE             write the trace to FILE (default: PROGRAM.PID.htr)\n"
    "  -p, --pid PID,...   attach to these running processes (needs ptrace\n"
    "                      permission: same user, or root)\n"
    "  --duration T        with -p: stop after T (s, ms, us or ns; default unit s)\n"
    "  --stacks LIST       events that capture a call stack, comma-separated:\n"
    "                      alloc,realloc,free,mmap,munmap,mprotect,heap-create,\n"
    "                      heap-destroy, or none or all\n"
    "                      (default: alloc,realloc,mmap,mprotect)\n"
    "  --sample-rate SIZE  record only a sample of the allocations, one per SIZE\n"
    "                      bytes on average (like 512KiB): heap numbers become\n"
    "                      estimates; mappings are still all recorded\n"
    "  --sample-seed N     with --sample-rate: sample the same allocations on\n"
    "                      every run of a deterministic program (default: random)\n"
    "  --time-resolution T store event times in units of T (s, ms, us or ns;\n"
    "                      default unit ns): 1ns keeps them exact; at most 1us\n"
    "                      (default " HT__TS_UNIT_DEFAULT_STR ", smaller traces)\n"
    "  --no-follow         trace only CMD, not the processes it starts\n"
    "  --clock auto|monotonic  what the recorder stamps events with: auto (the\n"
    "                      default) reads the CPU's time-stamp counter where it\n"
    "                      is invariant, calibrated against CLOCK_MONOTONIC;\n"
    "                      monotonic reads CLOCK_MONOTONIC for every event\n"
    "                      (slower; for machines whose TSC cannot be trusted)\n"
    "  --no-maps           do not add the mappings no hook saw (found in\n"
    "                      /proc/PID/maps) to the committed memory\n"
    "  --snapshot          heap snapshot mode: keep live blocks by stack in the\n"
    "                      process instead of tracing each allocation; a snapshot\n"
    "                      is stored at the end, when 'heaptrail snapshot' (or\n"
    "                      SIGUSR2 to heaptrail) asks, and every --snapshot-interval\n"
    "  --snapshot-interval T  with --snapshot: also take one every T (s, ms; default\n"
    "                      unit s)\n"
    "  --lossy             drop events (and count them) when a buffer is full,\n"
    "                      instead of making the program wait\n"
    "  --ring SIZE         flight recorder: keep only the newest SIZE of events\n"
    "                      (at least 64K) and the state at their start; the\n"
    "                      trace is that window (docs/modes.md). SIGUSR1 writes\n"
    "                      the window now to FILE with .N before .htr; a traced\n"
    "                      process crashing writes it to FILE with .crash-PID\n"
    "  --ring-time T       flight recorder keeping the last T of events (s, ms;\n"
    "                      with --ring, whichever is less; alone, at most 256M)\n"
    "  --buffer-size SIZE  bytes per thread buffer, a power of two (default 1M)\n"
    "  --buffers N         number of thread buffers (default 512)\n"
    "  --force             replace FILE if it exists (atomically; a device or FIFO\n"
    "                      is written in place; docs/outputs.md)\n"
    "  --stats             at the end, print how often the program waited for\n"
    "                      the collector (a full buffer) and what it drained\n"
    "  -q, --quiet         print nothing but errors\n"
    "  -h, --help          show this help\n"
    "\n"
    "leak gate (for CI; 'heaptrail check' runs it on a trace already made):\n" LEAK_GATE_HELP "\n"
    "heaptrail exits with the exit status of CMD (128+N when a signal N killed it);\n"
    "when CMD succeeded but the leak gate failed, with --error-exitcode; when CMD\n"
    "succeeded but the trace could not be written (a full disk), with 2.\n"
    "\n"
    "examples:\n"
    "  heaptrail record -o app.htr -- ./app --input data.txt\n"
    "  heaptrail record --fail-on-leak -- ./unit_tests\n"
    "  heaptrail record -p 1234 --duration 30s -o server.htr\n";

static const struct {
	const char *name;
	uint32_t bit;
} stack_names[] = {
#define X(name, bit, ev, also) {name, bit},
    HT__STACK_KINDS(X)
#undef X
};

static uint32_t parse_stacks(const char *list)
{
	if (!strcmp(list, "none"))
		return 0;
	if (!strcmp(list, "all"))
		return HT_STK_ALL;
	uint32_t mask = 0;
	if (!*list)
		die("empty --stacks list; use 'none' for no stacks");
	char *copy = strdup(list), *save = NULL;
	if (!copy)
		die("out of memory");
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t i;
		for (i = 0; i < sizeof(stack_names) / sizeof(stack_names[0]); i++)
			if (!strcmp(tok, stack_names[i].name))
				break;
		if (i == sizeof(stack_names) / sizeof(stack_names[0]))
			die("unknown stack event '%s'; valid: alloc, realloc, free, mmap, munmap, "
			    "mprotect, heap-create, heap-destroy, none, all",
			    tok);
		mask |= stack_names[i].bit;
	}
	free(copy);
	return mask;
}

/*
 * Find cmd the way execvp would (a name with a slash is used as it is), so
 * that a typo is reported before anything starts. Returns 0 with the path,
 * or the errno that a shell would report (ENOENT, EACCES).
 */
static int resolve_command(const char *cmd, char *out, size_t n)
{
	struct stat st;
	if (strchr(cmd, '/')) {
		if (stat(cmd, &st) < 0)
			return errno;
		if (S_ISDIR(st.st_mode) || access(cmd, X_OK) < 0)
			return EACCES;
		snprintf(out, n, "%s", cmd);
		return 0;
	}
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	int err = ENOENT;
	while (*path) {
		const char *end = strchrnul(path, ':');
		int len = (int)(end - path);
		snprintf(out, n, "%.*s%s%s", len, path, len ? "/" : "", cmd);
		if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode)) {
			if (access(out, X_OK) == 0)
				return 0;
			err = EACCES;
		}
		path = *end ? end + 1 : end;
	}
	return err;
}

/* The recorder: lib/heaptrail/ installed, lib/ in the build tree (base/paths.h). */
static void find_recorder(char *out, size_t n)
{
	if (ht__lib_path("libheaptrail.so", out, n) < 0)
		die("cannot find the recorder '%s'; is heaptrail installed completely?", out);
}

static volatile pid_t child_pid;
static volatile sig_atomic_t child_gone, stop_signals;

/*
 * Signals meant for the program go to it. A signal from the terminal
 * (Ctrl-C, Ctrl-\) reaches the whole foreground process group, the program
 * included, so it is not sent a second time; the kernel marks those with
 * SI_KERNEL. Either way we keep running until the program ends, to save its
 * trace. Once the program is gone and only its traced descendants keep the
 * session open (a daemon, say), such a signal ends the recording instead.
 */
static void forward_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (child_gone)
		stop_signals = 1; /* only traced descendants remain: end the trace */
	else if (child_pid > 0 && si->si_code != SI_KERNEL)
		kill(child_pid, sig);
}

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void install_forwarding(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = forward_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaction(forwarded[i], &sa, NULL);
}

/*
 * The forwarded signals are blocked from the start of `record` until their
 * handlers are in and, launching, child_pid is set, so that one arriving in
 * between is forwarded (or ends an attach) instead of killing us with the
 * session's file left behind; *old is the mask to go back to.
 */
static void block_forwarded(sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaddset(&set, forwarded[i]);
	sigprocmask(SIG_BLOCK, &set, old);
}

/* The signal mask the program starts with: the one heaptrail was given. */
static sigset_t start_mask;

/*
 * SIGPIPE as heaptrail was given it, for the program. heaptrail itself
 * ignores it: a program killed before it execs closes the pipe heaptrail
 * writes its go-ahead to, and that must not kill the recording.
 */
static struct sigaction start_pipe;

/* In the child between fork and exec: async-signal-safe calls only. */
static _Noreturn void run_child(int go_fd, int err_fd, const char *path, char **argv, char **envp)
{
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaction(forwarded[i], &dfl, NULL);
	sigaction(SIGPIPE, &start_pipe, NULL);
	sigprocmask(SIG_SETMASK, &start_mask, NULL);
	char b;
	/* Wait until the trace file exists: its name may hold our pid. */
	if (read(go_fd, &b, 1) != 1)
		_exit(127);
	execve(path, argv, envp);
	int e = errno;
	if (e == ENOEXEC) {
		/* A script without "#!": run it with sh, as execvp and shells do. */
		int n = 0;
		while (argv[n])
			n++;
		char **sh = alloca((size_t)(n + 2) * sizeof(*sh));
		sh[0] = "sh";
		sh[1] = (char *)path;
		for (int i = 1; i <= n; i++)
			sh[i + 1] = argv[i];
		execve("/bin/sh", sh, envp);
		e = errno;
	}
	if (write(err_fd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

/* The child's environment: ours plus LD_PRELOAD (ours first) and the session. */
static char **child_env(const char *recorder, const char *session)
{
	extern char **environ;
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 3, sizeof(*env));
	if (!env)
		die("out of memory");
	size_t k = 0;
	const char *old_preload = getenv("LD_PRELOAD");
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) &&
		    strncmp(environ[i], HT_ENV_SESSION "=", sizeof(HT_ENV_SESSION)))
			env[k++] = environ[i];
	if (asprintf(&env[k++], "LD_PRELOAD=%s%s%s", recorder,
		     old_preload && *old_preload ? ":" : "", old_preload ? old_preload : "") < 0 ||
	    asprintf(&env[k++], "%s=%s", HT_ENV_SESSION, session) < 0)
		die("out of memory");
	env[k] = NULL;
	return env;
}

struct progress_state {
	uint64_t start_ns;
	bool shown;
	bool quiet;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void show_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct progress_state *p = ctx;
	if (p->quiet || !progress_wanted() || mono_ns() - p->start_ns < 1000000000ull)
		return;
	fprintf(stderr, "\rheaptrail: resolving symbols: %llu/%llu frames",
		(unsigned long long)done, (unsigned long long)total);
	if (done == total)
		fputc('\n', stderr);
	p->shown = done != total;
}

struct options {
	const char *output;
	uint32_t stack_mask;
	uint32_t flags;
	uint32_t ring_size, ring_count;
	bool force, quiet, stats;
	const char *pids;     /* -p: comma-separated */
	uint64_t duration_ns; /* --duration, 0: until stopped */
	uint32_t ts_unit_ns;  /* --time-resolution */
	uint64_t sample_rate; /* --sample-rate, 0: every allocation */
	uint64_t sample_seed; /* --sample-seed, with HT_SHM_SEEDED in flags */
	struct leak_gate gate;
	bool no_maps;		      /* --no-maps */
	bool clock_monotonic;	      /* --clock monotonic */
	uint64_t ring_bytes, ring_ns; /* --ring, --ring-time (0: not a flight recorder) */
	uint64_t snapshot_interval_ns;
};

static int parse_options(int argc, char **argv, struct options *o)
{
	enum {
		R_STACKS = CLI_LONG,
		R_BUFSIZE,
		R_BUFFERS,
		R_DURATION,
		R_TSRES,
		R_SAMPLE,
		R_SEED,
		R_NOFOLLOW,
		R_NOMAPS,
		R_LOSSY,
		R_FORCE,
		R_STATS,
		R_RING,
		R_RINGTIME,
		R_SNAPSHOT,
		R_SNAPINT,
		R_CLOCK
	};
	static const struct cli_opt opts[] = {
	    {"output", 'o', required_argument},
	    {"pid", 'p', required_argument},
	    {"stacks", R_STACKS, required_argument},
	    {"buffer-size", R_BUFSIZE, required_argument},
	    {"buffers", R_BUFFERS, required_argument},
	    {"duration", R_DURATION, required_argument},
	    {"time-resolution", R_TSRES, required_argument},
	    {"sample-rate", R_SAMPLE, required_argument},
	    {"sample-seed", R_SEED, required_argument},
	    {"no-follow", R_NOFOLLOW, no_argument},
	    {"no-maps", R_NOMAPS, no_argument},
	    {"clock", R_CLOCK, required_argument},
	    {"lossy", R_LOSSY, no_argument},
	    {"snapshot", R_SNAPSHOT, no_argument},
	    {"snapshot-interval", R_SNAPINT, required_argument},
	    {"force", R_FORCE, no_argument},
	    {"stats", R_STATS, no_argument},
	    {"ring", R_RING, required_argument},
	    {"ring-time", R_RINGTIME, required_argument},
	    {"quiet", 'q', no_argument},
	    LEAK_GATE_OPTIONS,
	    {NULL, 0, 0},
	};
	o->stack_mask = HT_STK_DEFAULT;
	o->ts_unit_ns = HT__TS_UNIT_DEFAULT;
	leak_gate_init(&o->gate);
	struct cli_parser p;
	/* The options end at the program: its own options are its own. */
	cli_init(&p, "record", usage_text, opts, argc, argv, true);
	for (int c; (c = cli_next(&p)) != -1;) {
		const char *val = p.val;
		if (leak_gate_option(&o->gate, &p, c))
			continue;
		switch (c) {
		case 'o':
			o->output = val;
			output_not_dash(val, "-o", true);
			break;
		case R_STACKS:
			o->stack_mask = parse_stacks(val);
			break;
		case R_BUFSIZE: {
			uint64_t v;
			if (parse_size(val, &v) < 0 || v < 4096 || v > (1u << 30) || (v & (v - 1)))
				die("invalid buffer size '%s': a power of two from 4K to 1G", val);
			o->ring_size = (uint32_t)v;
			break;
		}
		case R_BUFFERS: {
			char *end;
			long v = strtol(val, &end, 10);
			if (*end || v < 1 || v > 65536)
				die("invalid buffer count '%s': 1 to 65536", val);
			o->ring_count = (uint32_t)v;
			break;
		}
		case 'p':
			o->pids = val;
			break;
		case R_DURATION:
			if (parse_time_ns(val, 1000000000ull, &o->duration_ns) < 0 ||
			    !o->duration_ns)
				die("invalid duration '%s': a positive time like 10, 2.5s or 500ms",
				    val);
			break;
		case R_TSRES: {
			uint64_t v;
			if (parse_time_ns(val, 1, &v) < 0 || v < 1 || v > 1000)
				die("invalid time resolution '%s': 1ns to 1us, like 1ns, 100ns or "
				    "1us",
				    val);
			o->ts_unit_ns = (uint32_t)v;
			break;
		}
		case R_SAMPLE:
			o->sample_rate = parse_sample_rate(val);
			break;
		case R_SEED: {
			char *end;
			errno = 0;
			o->sample_seed = strtoull(val, &end, 0);
			if (errno || !*val || *end || *val == '-')
				die("invalid sample seed '%s': a number like 1 or 0x2a", val);
			o->flags |= HT_SHM_SEEDED;
			break;
		}
		case R_NOFOLLOW:
			o->flags |= HT_SHM_NO_FOLLOW;
			break;
		case R_NOMAPS:
			o->no_maps = true;
			break;
		case R_CLOCK:
			if (strcmp(val, "auto") && strcmp(val, "monotonic"))
				die("invalid clock '%s': auto or monotonic", val);
			o->clock_monotonic = !strcmp(val, "monotonic");
			break;
		case R_LOSSY:
			o->flags |= HT_SHM_LOSSY;
			break;
		case R_FORCE:
			o->force = true;
			break;
		case R_STATS:
			o->stats = true;
			break;
		case R_RING:
			if (parse_size(val, &o->ring_bytes) < 0 ||
			    o->ring_bytes < HT__RING_KEEP_MIN)
				die("invalid ring size '%s': at least 64K, like 64M or 1G", val);
			break;
		case R_RINGTIME:
			if (parse_time_ns(val, 1000000000ull, &o->ring_ns) < 0 || !o->ring_ns)
				die("invalid ring time '%s': a positive time like 30s or 500ms",
				    val);
			break;
		case R_SNAPSHOT:
			o->flags |= HT_SHM_SNAPSHOT;
			break;
		case R_SNAPINT:
			if (parse_time_ns(val, 1000000000ull, &o->snapshot_interval_ns) < 0 ||
			    o->snapshot_interval_ns < 10000000ull)
				die("invalid snapshot interval '%s': a time of 10ms or more, like "
				    "1s "
				    "or 500ms",
				    val);
			break;
		case 'q':
			o->quiet = true;
			break;
		}
	}
	int i = cli_operand_index(&p);
	if (o->pids && i < argc)
		die("give either -p PID or a command to run, not both");
	if ((o->flags & HT_SHM_SEEDED) && !o->sample_rate)
		die("--sample-seed goes with --sample-rate");
	if (o->snapshot_interval_ns && !(o->flags & HT_SHM_SNAPSHOT))
		die("--snapshot-interval goes with --snapshot");
	/* A snapshot is kept by the stack that allocated: those stacks are on. */
	if (o->flags & HT_SHM_SNAPSHOT)
		o->stack_mask |= HT_STK_ALLOC | HT_STK_REALLOC;
	if ((o->flags & HT_SHM_SNAPSHOT) && (o->ring_bytes || o->ring_ns))
		die("--snapshot and --ring are two modes: choose one");
	if ((o->flags & HT_SHM_SNAPSHOT) && o->sample_rate)
		die("--snapshot and --sample-rate are two modes: choose one");
	if (o->duration_ns && !o->pids)
		die("--duration goes with -p; a launched command is traced until it ends");
	if (o->gate.enabled && o->pids)
		die("--fail-on-leak checks a program record starts; for -p, run 'heaptrail check' "
		    "on the trace");
	if (o->ring_ns && !o->ring_bytes)
		o->ring_bytes = HT__RING_KEEP_TIME_CAP;
	if (i >= argc && !o->pids) {
		fputs(usage_text, stderr);
		exit(2);
	}
	return i;
}

/* A signal that asks the recording for something (a snapshot, a window):
   its handler only marks the request; interrupted calls go on. */
static void on_request_signal(int sig, void (*handler)(int))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

/* SIGUSR2: a snapshot now (heap snapshot mode). */
static struct ht__session *volatile snap_session;

static void ask_snapshot(int sig)
{
	(void)sig;
	if (snap_session)
		ht__session_snapshot(snap_session);
}

static void snapshot_on_sigusr2(struct ht__session *s)
{
	snap_session = s;
	on_request_signal(SIGUSR2, ask_snapshot);
}

/* SIGCHLD: nothing to mark; its handler only ends the tick's sleep early
   (sleeps are never restarted), so the recording ends when the program
   does rather than up to a tick later. */
static void wake_on_child(int sig)
{
	(void)sig;
}

static int exit_status_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

/* ---- the flight recorder (--ring, docs/modes.md) ---- */

static volatile sig_atomic_t flush_asked;

static void ask_flush(int sig)
{
	(void)sig;
	flush_asked = 1;
}

struct ring_ctl {
	struct ht__ring_keep *k;
	const char *output;
	struct ht__trace_meta meta;
	unsigned flushes;
	uint64_t flush_at; /* a window asked for then (mono_ns), not written yet */
	bool force, quiet;
	pid_t root;		     /* the launched program: its crash ends the recording anyway */
	uint64_t crashes_unreported; /* already warned about */
};

/* The session's events go to a ring keeper instead of a trace; SIGUSR1 asks
   for the window. 0 or a negative ht_error. */
static int ring_start(struct ring_ctl *r, struct ht__session *s, const struct options *o,
		      const char *output, struct ht__trace_meta meta, pid_t root)
{
	struct ht__ring_keep_config cfg = {.max_bytes = o->ring_bytes, .max_ns = o->ring_ns};
	int rc = ht__ring_keep_new(&r->k, &cfg);
	if (rc < 0)
		return rc;
	r->output = output;
	r->meta = meta;
	r->force = o->force;
	r->quiet = o->quiet;
	r->root = root;
	ht__session_set_sink(s, ht__ring_keep_sink(), r->k);
	on_request_signal(SIGUSR1, ask_flush);
	return 0;
}

/* Write the window to path (opened here unless o is given). 0 or an error, said. */
static int ring_dump(struct ring_ctl *r, struct ht__session *s, const char *path,
		     struct ht__output *o)
{
	struct ht__output own;
	char why[1024];
	if (!o) {
		if (ht__output_open(&own, path, r->force ? HT__OUT_FORCE : 0, 0600, why,
				    sizeof(why)) < 0) {
			error_msg("cannot write the flight recorder's window: %s", why);
			return HT_ERR_EXISTS;
		}
		o = &own;
	}
	struct ht__ring_keep_result res;
	int rc = ht__ring_keep_write(r->k, s, o, r->meta, &res);
	if (rc < 0)
		error_msg("cannot write '%s': %s", path, ht_strerror(rc));
	else if (!r->quiet)
		fprintf(stderr,
			"heaptrail: wrote the flight recorder's window to '%s' (%llu events; %llu "
			"earlier events dropped)\n",
			path, (unsigned long long)res.events, (unsigned long long)res.dropped);
	return rc;
}

/* Between ticks: a window asked for with SIGUSR1, once the merge has taken
   every event committed before it, or one a crash calls for. */
static void ring_poll(struct ring_ctl *r, struct ht__session *s)
{
	char path[PATH_MAX], tag[32];
	if (flush_asked) {
		flush_asked = 0;
		if (!r->flush_at)
			r->flush_at = mono_ns();
	}
	if (r->flush_at && ht__session_merged_past(s, r->flush_at)) {
		r->flush_at = 0;
		snprintf(tag, sizeof(tag), "%u", ++r->flushes);
		ht__ring_keep_path(path, sizeof(path), r->output, tag);
		ring_dump(r, s, path, NULL);
	}
	int sig;
	int32_t pid = ht__ring_keep_take_crash(r->k, &sig);
	if (pid && pid != r->root) {
		if (!r->quiet)
			fprintf(stderr, "heaptrail: process %d died of signal %d\n", (int)pid, sig);
		snprintf(tag, sizeof(tag), "crash-%d", (int)pid);
		ht__ring_keep_path(path, sizeof(path), r->output, tag);
		ring_dump(r, s, path, NULL);
	}
	uint64_t unreported = ht__session_stats(s)->crashes_unreported;
	if (unreported > r->crashes_unreported) {
		r->crashes_unreported = unreported;
		warn_crashes_unreported(unreported);
	}
}

/* ---- -p: attaching to running processes ---- */

#define MAX_ATTACH 64

static volatile sig_atomic_t stop_asked;

static void ask_stop(int sig)
{
	(void)sig;
	stop_asked = 1;
}

/* Between the steps of an injection: keep draining the processes attached. */
static void tick_while_injecting(void *ctx)
{
	ht__session_tick(ctx);
}

/* /proc/PID/cmdline as an argv (for the trace header); argc 0 when unreadable. */
static char **target_argv(pid_t pid, uint32_t *argc)
{
	static char buf[16384];
	static char *argv[256];
	char name[64];
	snprintf(name, sizeof(name), "/proc/%d/cmdline", (int)pid);
	*argc = 0;
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return argv;
	buf[n] = 0;
	for (ssize_t i = 0; i < n && *argc < 255; i += (ssize_t)strlen(buf + i) + 1)
		argv[(*argc)++] = buf + i;
	argv[*argc] = NULL;
	return argv;
}

static _Noreturn void die_no_ptrace(pid_t pid)
{
	char hint[512];
	ht__inject_perm_hint(pid, hint, sizeof(hint));
	die("cannot attach to process %d: permission denied: %s", (int)pid, hint);
}

/* record --stats: whether the collector kept up (docs/performance.md). */
static void say_stats(const struct ht__session_stats *st)
{
	fprintf(stderr,
		"heaptrail: stats: %llu records drained; the program waited for the collector "
		"%llu times (a full buffer), %llu of them asleep until a drain\n",
		(unsigned long long)st->records, (unsigned long long)st->room_waits,
		(unsigned long long)st->room_sleeps);
	if (st->clock == HT_CLOCK_TSC)
		fprintf(
		    stderr,
		    "heaptrail: stats: clock: tsc, calibrated against CLOCK_MONOTONIC %u times, "
		    "at most %llu ns apart before a correction\n",
		    st->clock_calibrations + 1, (unsigned long long)st->clock_error_ns);
	else
		fputs("heaptrail: stats: clock: monotonic\n", stderr);
}

/* Frames the symbol cache did not know went unsymbolized: libdw is missing. */
static void say_no_symbols(const char *output, const struct ht__session_stats *st)
{
	if (st->symbols_missing)
		warn_no_symbols(st->symbols_missing, output);
}

/* The closing line of a recording, and why events were lost if any were. */
static void say_written(const char *output, const struct ht__session_stats *st)
{
	fprintf(stderr, "heaptrail: wrote '%s' (%llu events, %llu lost)\n", output,
		(unsigned long long)st->events, (unsigned long long)st->lost);
	if (st->lost) {
		char why[600];
		describe_loss(why, sizeof(why), st->lost, st->lost_lossy, st->lost_no_buffer,
			      st->lost_in_handler);
		warning("%s", why);
	}
}

static int record_attach(const struct options *o)
{
	pid_t pids[MAX_ATTACH];
	int npids = parse_pid_option(o->pids, pids, 0, MAX_ATTACH);
	char recorder[PATH_MAX];
	find_recorder(recorder, sizeof(recorder));

	/* Every process is checked before any is touched. */
	for (int i = 0; i < npids; i++) {
		if (pids[i] == getpid())
			die("cannot attach to heaptrail itself (process %d)", (int)pids[i]);
		int rc = ht__inject_check(pids[i]);
		if (rc == HT_ERR_NOT_FOUND || (rc == 0 && ht__pid_exited(pids[i])))
			die("no process %d", (int)pids[i]);
		if (rc < 0)
			die_no_ptrace(pids[i]);
	}
	char defname[PATH_MAX];
	const char *output = o->output;
	if (!output) {
		char comm[64] = "process", name[64];
		snprintf(name, sizeof(name), "/proc/%d/comm", (int)pids[0]);
		int fd = open(name, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : read(fd, comm, sizeof(comm) - 1);
		if (fd >= 0)
			close(fd);
		if (n > 0)
			comm[strcspn(comm, "\n/")] = 0;
		snprintf(defname, sizeof(defname), "%s.%d.htr", comm[0] ? comm : "process",
			 (int)pids[0]);
		output = defname;
	}
	struct ht__output out;
	char why[1024];
	if (ht__output_open(&out, output, o->force ? HT__OUT_FORCE : 0, 0600, why, sizeof(why)) < 0)
		die("%s", why);

	struct ht__session_config cfg = HT__SESSION_CONFIG_INIT;
	cfg.ring_size = o->ring_size;
	cfg.ring_count = o->ring_count;
	cfg.flags = (o->flags & (HT_SHM_LOSSY | HT_SHM_SEEDED | HT_SHM_SNAPSHOT)) |
		    (o->ring_bytes ? HT_SHM_CRASHES : 0);
	cfg.snapshot_interval_ns = o->snapshot_interval_ns;
	cfg.sample_maps = !o->no_maps;
	cfg.clock_monotonic = o->clock_monotonic;
	cfg.stack_mask = o->stack_mask;
	cfg.sample_rate = o->sample_rate;
	cfg.sample_seed = o->sample_seed;
	cfg.reap_children = false;
	struct ht__session *s;
	int rc = ht__session_create(&s, &cfg);
	if (rc < 0)
		ht__output_abort(&out);
	if (rc < 0)
		die("cannot create the session's shared memory: %s%s", ht_strerror(rc),
		    rc == HT_ERR_NOMEM ? "; use fewer or smaller buffers (--buffers, --buffer-size)"
				       : "");
	uint32_t targc;
	char **targv = target_argv(pids[0], &targc);
	struct ht__trace_meta meta = {
	    .stack_mask = o->stack_mask,
	    .ts_unit_ns = o->ts_unit_ns,
	    .sample_rate = o->sample_rate,
	    .flags = HT_TRACEF_ATTACHED | ((o->flags & HT_SHM_LOSSY) ? HT_TRACEF_LOSSY : 0) |
		     ((o->flags & HT_SHM_SNAPSHOT) ? HT_TRACEF_SNAPSHOT : 0),
	    .argc = targc,
	    .argv = (const char *const *)targv};
	struct ht__writer *w = NULL;
	struct ring_ctl ring = {0};
	rc = o->ring_bytes ? ring_start(&ring, s, o, output, meta, 0)
			   : ht__session_open_trace(s, &out, meta, &w);
	if (rc < 0) {
		ht__output_abort(&out);
		ht__session_destroy(s);
		die("cannot write '%s': %s", output, ht_strerror(rc));
	}

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = ask_stop;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaction(forwarded[i], &sa, NULL);
	sigprocmask(SIG_SETMASK, &start_mask, NULL); /* blocked in cmd_record() */

	ht__inject_set_idle(tick_while_injecting, s);
	static struct ht__attach att[MAX_ATTACH];
	bool attached[MAX_ATTACH] = {false};
	int failures = 0, live = 0;
	for (int i = 0; i < npids && !stop_asked; i++) {
		char why[512];
		rc = ht__inject_attach(&att[i], pids[i], recorder, ht__session_path(s), why,
				       sizeof(why));
		if (rc == HT_ERR_PERM) {
			char hint[512];
			ht__inject_perm_hint(pids[i], hint, sizeof(hint));
			error_msg("cannot attach to process %d: permission denied: %s",
				  (int)pids[i], hint);
		} else if (rc < 0) {
			error_msg("cannot attach to process %d: %s", (int)pids[i], why);
		}
		attached[i] = rc == 0;
		failures += rc < 0;
		live += rc == 0;
	}
	if (!live) {
		ht__writer_abort(w);
		ht__output_abort(&out);
		ht__ring_keep_free(ring.k);
		ht__session_destroy(s);
		return 1;
	}
	if (!o->quiet)
		fprintf(stderr, "heaptrail: tracing %d process%s into '%s'; Ctrl-C to stop\n", live,
			live == 1 ? "" : "es", output);

	snapshot_on_sigusr2(s);
	uint64_t deadline = o->duration_ns ? mono_ns() + o->duration_ns : 0;
	while ((rc = ht__session_tick(s)) == 0 && !stop_asked) {
		if (deadline && mono_ns() >= deadline)
			break;
		bool any = false;
		for (int i = 0; i < npids; i++)
			any |= attached[i] && !ht__pid_exited(pids[i]);
		if (!any)
			break;
		if (ring.k)
			ring_poll(&ring, s);
		unsigned us = ht__session_sleep_us(s);
		if (us)
			usleep(us);
	}
	if (rc < 0)
		warning("writing '%s' failed: %s; the trace ends early", output, ht_strerror(rc));
	/* Put every process back before the session stops collecting; the
	   recording ends now, not when the last detach has found a thread at
	   a safe point (seconds to a minute for busy threads on a loaded
	   machine, all of it recorded: attach.e2e timed out). */
	ht__session_stop_recording(s);
	for (int i = 0; i < npids; i++) {
		char why[512];
		if (!attached[i] || ht__pid_exited(pids[i]))
			continue;
		int drc = ht__inject_detach(&att[i], why, sizeof(why));
		if (drc < 0 && drc != HT_ERR_NOT_FOUND) {
			error_msg("cannot detach from process %d: %s", (int)pids[i], why);
			failures++;
		}
	}
	struct progress_state ps = {.start_ns = mono_ns(), .quiet = o->quiet};
	if (rc >= 0)
		rc = ht__session_finish(s, !ring.k, show_progress, &ps);
	const struct ht__session_stats *sst = ht__session_stats(s);
	int frc = 0;
	if (ring.k) {
		if (rc >= 0)
			ring_poll(&ring, s);
		if (rc >= 0 && ring_dump(&ring, s, output, &out) < 0)
			failures++;
		else if (rc < 0)
			ht__output_abort(&out);
		ht__ring_keep_free(ring.k);
	} else {
		ht__writer_set_losses(w, sst->lost_lossy, sst->lost_no_buffer,
				      sst->lost_in_handler);
		frc = ht__writer_finish(w, sst->duration_ns, sst->lost, HT_TRACEF_ATTACHED);
		ht__output_commit(&out, NULL, 0); /* published at the start: frees only */
		if (rc >= 0 && frc >= 0)
			ht__session_notes_done(s); /* the trace holds it all */
	}
	if (rc < 0 || frc < 0) {
		error_msg("cannot write '%s': %s", output, ht_strerror(rc < 0 ? rc : frc));
		failures++;
	} else {
		if (!o->quiet && !ring.k)
			say_written(output, sst);
		say_no_symbols(output, sst);
	}
	if (o->stats)
		say_stats(sst);
	if (!failures && !o->quiet && isatty(STDERR_FILENO))
		fprintf(stderr, "heaptrail: next: heaptrail report %s\n", output);
	snap_session = NULL;
	ht__session_destroy(s);
	return failures ? 1 : 0;
}

/*
 * Why the recorder cannot reach the program at path, found before it runs,
 * or NULL. The recorder comes in through the dynamic linker (LD_PRELOAD): a
 * statically linked program never runs the linker, the linker ignores
 * LD_PRELOAD for a set-user-ID program run by another user, and a malloc
 * the executable defines itself is found before the recorder's.
 */
static const char *untraceable(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return NULL;
	if (geteuid() != 0 && (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
			       ((st.st_mode & S_ISGID) && st.st_gid != getegid())))
		return "it is set-user-ID or set-group-ID and heaptrail does not run as root: the "
		       "dynamic linker ignores LD_PRELOAD for it, so the recorder is never loaded";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	Elf64_Ehdr eh;
	bool elf = pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) &&
		   !memcmp(eh.e_ident, ELFMAG, SELFMAG) && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
		   eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum && eh.e_phnum <= 256;
	bool interp = false;
	for (unsigned i = 0; elf && i < eh.e_phnum && !interp; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != sizeof(ph))
			elf = false;
		else
			interp = ph.p_type == PT_INTERP;
	}
	close(fd);
	if (!elf)
		return NULL; /* a script: its interpreter is what runs */
	if (!interp)
		return "it is statically linked: the recorder comes in through the dynamic linker "
		       "(LD_PRELOAD), which a static program does not run";
	static const char *const fns[] = {"malloc", "free", "calloc", "realloc"};
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		uint64_t value, base;
		if (ht__elf_dynsym(path, fns[i], &value, &base) == 0)
			return "its allocator is inside the executable (it defines malloc itself), "
			       "found before the recorder's: no allocation reaches the recorder";
	}
	return NULL;
}

int cmd_record(int argc, char **argv)
{
	struct options o = {0};
	int first = parse_options(argc, argv, &o);
	/* From here until their handlers are in, the signals that end a
	   recording wait: one that killed us now would leave the session's
	   file and a half-made trace behind. */
	block_forwarded(&start_mask);
	if (o.pids)
		return record_attach(&o);
	char **cmd = argv + first;
	int cmd_argc = argc - first;

	char path[PATH_MAX];
	int err = resolve_command(cmd[0], path, sizeof(path));
	if (err) {
		/* As a shell says it: a name not found in PATH, a path not there. */
		error_msg("cannot run '%s': %s", cmd[0],
			  err == ENOENT && !strchr(cmd[0], '/') ? "command not found"
								: strerror(err));
		return 127;
	}
	char recorder[PATH_MAX];
	find_recorder(recorder, sizeof(recorder));
	const char *untraced = untraceable(path);
	if (untraced)
		warning("'%s' cannot be traced: %s (programs it starts may be)", cmd[0], untraced);

	/* The output is opened (or refused) before anything runs; a default name
	   waits for the program's pid. */
	const unsigned out_flags = o.force ? HT__OUT_FORCE : 0;
	struct ht__output out = {.fd = -1};
	char why[1024];
	if (o.output && ht__output_open(&out, o.output, out_flags, 0600, why, sizeof(why)) < 0)
		die("%s", why);

	/* Orphaned descendants come back to us, so they are reaped and seen. */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

	struct ht__session_config cfg = HT__SESSION_CONFIG_INIT;
	cfg.ring_size = o.ring_size;
	cfg.ring_count = o.ring_count;
	cfg.flags = o.flags | (o.ring_bytes ? HT_SHM_CRASHES : 0);
	cfg.snapshot_interval_ns = o.snapshot_interval_ns;
	cfg.sample_maps = !o.no_maps;
	cfg.clock_monotonic = o.clock_monotonic;
	cfg.stack_mask = o.stack_mask;
	cfg.sample_rate = o.sample_rate;
	cfg.sample_seed = o.sample_seed;
	struct ht__session *s;
	int rc = ht__session_create(&s, &cfg);
	if (rc < 0)
		ht__output_abort(&out);
	if (rc < 0)
		die("cannot create the session's shared memory: %s%s", ht_strerror(rc),
		    rc == HT_ERR_NOMEM ? "; use fewer or smaller buffers (--buffers, --buffer-size)"
				       : "");
	char **env = child_env(recorder, ht__session_path(s));

	int go[2], errp[2];
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		ht__output_abort(&out);
		ht__session_destroy(s);
		die("cannot create a pipe: %s", strerror(errno));
	}
	struct sigaction ign;
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &ign, &start_pipe);
	install_forwarding();
	pid_t pid = fork();
	if (pid < 0) {
		ht__output_abort(&out);
		ht__session_destroy(s);
		die("cannot fork: %s", strerror(errno));
	}
	if (pid == 0) {
		close(go[1]);
		close(errp[0]);
		run_child(go[0], errp[1], path, cmd, env);
	}
	child_pid = pid;
	sigprocmask(SIG_SETMASK, &start_mask, NULL);
	close(go[0]);
	close(errp[1]);
	ht__session_set_root(s, pid);

	/* The trace file, now that its default name (with the pid) is known. */
	char defname[PATH_MAX];
	const char *output = o.output;
	if (!output) {
		const char *base = strrchr(cmd[0], '/');
		snprintf(defname, sizeof(defname), "%s.%d.htr", base ? base + 1 : cmd[0], (int)pid);
		output = defname;
		if (ht__output_open(&out, output, out_flags, 0600, why, sizeof(why)) < 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			ht__session_destroy(s);
			die("%s", why);
		}
	}
	struct ht__trace_meta meta = {.stack_mask = o.stack_mask,
				      .ts_unit_ns = o.ts_unit_ns,
				      .sample_rate = o.sample_rate,
				      .flags =
					  ((o.flags & HT_SHM_LOSSY) ? HT_TRACEF_LOSSY : 0) |
					  ((o.flags & HT_SHM_SNAPSHOT) ? HT_TRACEF_SNAPSHOT : 0),
				      .argc = (uint32_t)cmd_argc,
				      .argv = (const char *const *)cmd,
				      .untraced = untraced};
	struct ht__writer *w = NULL;
	struct ring_ctl ring = {0};
	rc = o.ring_bytes ? ring_start(&ring, s, &o, output, meta, pid)
			  : ht__session_open_trace(s, &out, meta, &w);
	if (rc < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		ht__output_abort(&out);
		ht__session_destroy(s);
		die("cannot write '%s': %s", output, ht_strerror(rc));
	}

	/* On a terminal, say what is traced and where it goes (scripts see nothing). */
	if (!o.quiet && isatty(STDERR_FILENO))
		fprintf(stderr, "heaptrail: tracing the heap and mappings of %s%s into '%s'\n",
			cmd[0], o.flags & HT_SHM_NO_FOLLOW ? "" : " and the processes it starts",
			output);
	/* Go; a failed exec reports its errno through the close-on-exec pipe. */
	if (write(go[1], "g", 1) != 1)
		err = EIO;
	close(go[1]);
	ssize_t n;
	do
		n = read(errp[0], &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(errp[0]);
	if (n == sizeof(err)) {
		waitpid(pid, NULL, 0);
		ht__writer_abort(w);
		ht__output_abort(&out);
		ht__ring_keep_free(ring.k);
		ht__session_destroy(s);
		error_msg("cannot run '%s': %s", cmd[0], strerror(err));
		return 127;
	}

	snapshot_on_sigusr2(s);
	on_request_signal(SIGCHLD, wake_on_child);
	while ((rc = ht__session_tick(s)) == 0) {
		if (ht__session_stats(s)->root_exited)
			child_gone = 1;
		if (stop_signals)
			ht__session_stop(s);
		if (ring.k)
			ring_poll(&ring, s);
		unsigned us = ht__session_sleep_us(s);
		if (us)
			usleep(us);
	}
	if (rc < 0)
		warning("writing '%s' failed: %s; the trace ends early", output, ht_strerror(rc));
	struct progress_state ps = {.start_ns = mono_ns(), .quiet = o.quiet};
	if (rc >= 0)
		rc = ht__session_finish(s, !ring.k, show_progress, &ps);
	const struct ht__session_stats *st = ht__session_stats(s);
	int status = st->root_exited ? st->root_status : 0;
	if (!st->root_exited && waitpid(pid, &status, 0) < 0)
		status = 0;
	int frc = 0;
	if (ring.k) {
		/* The window at the end is the trace (docs/modes.md). */
		if (rc >= 0)
			ring_poll(&ring, s);
		if (rc >= 0)
			frc = ring_dump(&ring, s, output, &out) < 0 ? HT_ERR_IO : 0;
		else
			ht__output_abort(&out);
		ht__ring_keep_free(ring.k);
	} else {
		ht__writer_set_losses(w, st->lost_lossy, st->lost_no_buffer, st->lost_in_handler);
		frc = ht__writer_finish(w, st->duration_ns, st->lost, 0);
		ht__output_commit(&out, NULL, 0); /* published at the start: frees only */
		if (rc >= 0 && frc >= 0)
			ht__session_notes_done(s); /* the trace holds it all */
	}
	if (rc < 0 || (frc < 0 && !ring.k)) {
		error_msg("cannot write '%s': %s", output, ht_strerror(rc < 0 ? rc : frc));
	} else if (!o.quiet && !ring.k) {
		say_written(output, st);
	} else if (!o.quiet && st->lost) {
		char why[600];
		describe_loss(why, sizeof(why), st->lost, st->lost_lossy, st->lost_no_buffer,
			      st->lost_in_handler);
		warning("%s", why);
	}
	if (rc >= 0 && (frc >= 0 || ring.k))
		say_no_symbols(output, st);
	if (o.stats)
		say_stats(st);
	snap_session = NULL;
	ht__session_destroy(s);
	/* The program's status, unless it succeeded and its trace did not (2) or leaked. */
	int exit_status = exit_status_of(status);
	if (exit_status == 0 && (rc < 0 || frc < 0))
		exit_status = 2;
	/* The gate reads the trace back: a device or FIFO output cannot be. */
	struct stat tst;
	if (rc >= 0 && frc >= 0 && o.gate.enabled &&
	    (stat(output, &tst) < 0 || !S_ISREG(tst.st_mode)))
		warning("'%s' is not a regular file, so --fail-on-leak cannot read it back; "
			"run 'heaptrail check' on a copy",
			output);
	else if (rc >= 0 && frc >= 0 && o.gate.enabled &&
		 !leak_gate_check(&o.gate, output, stderr) && exit_status == 0)
		exit_status = o.gate.exitcode;
	if (rc >= 0 && frc >= 0 && !o.quiet && isatty(STDERR_FILENO))
		fprintf(stderr, "heaptrail: next: heaptrail report %s\n", output);
	for (char **e = env; *e; e++)
		if (!strncmp(*e, "LD_PRELOAD=", 11) ||
		    !strncmp(*e, HT_ENV_SESSION "=", sizeof(HT_ENV_SESSION)))
			free(*e);
	free(env);
	return exit_status;
}
