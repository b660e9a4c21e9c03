/*
 * cmd_start.c - `heaptrail start NAME`: starts a named background session
 * (the StartHeapTrace of seed 001) for running processes, for programs
 * enabled with `heaptrail ifeo enable`, or both, through the control
 * library (include/heaptrail/control.h). See docs/sessions.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/protocol.h"
#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"
#include "control/ctl.h"
#include "heaptrail/control.h"
#include "session/symbolize.h"

static const char usage_text[] =
    "usage: heaptrail start NAME [-o FILE] [--pid PID...] [--stacks LIST]\n"
    "                       [--buffer-size SIZE] [--buffers N] [--lossy] [--ifeo]\n"
    "                       [--sample-rate SIZE] [--ring SIZE | --ring-time T] [--no-maps]\n"
    "                       [--snapshot [--snapshot-interval T]]\n"
    "\n"
    "Start a background heap tracing session called NAME and return once it\n"
    "traces. Processes join with --pid (now) or 'heaptrail update' (later);\n"
    "with --ifeo every new start of a program enabled with 'heaptrail ifeo\n"
    "enable' joins too. 'heaptrail stop NAME' writes the trace.\n"
    "\n"
    "  -o FILE             the trace (default: NAME.htr in this directory)\n"
    "  -p, --pid PID...    trace these running processes (PID,PID or PID PID;\n"
    "                      may be repeated)\n"
    "  --stacks LIST       events that capture a call stack, comma-separated:\n"
    "                      alloc,realloc,free,mmap,munmap,mprotect,heap-create,\n"
    "                      heap-destroy, or none or all\n"
    "                      (default: alloc,realloc,mmap,mprotect)\n"
    "  --sample-rate SIZE  record only a sample of the allocations, one per SIZE\n"
    "                      bytes on average (like 512KiB): heap numbers become\n"
    "                      estimates; mappings are still all recorded\n"
    "  --buffer-size SIZE  bytes per thread buffer, a power of two (default 1M)\n"
    "  --buffers N         number of thread buffers (default 512)\n"
    "  --lossy             drop events (and count them) when a buffer is full\n"
    "  --snapshot          heap snapshot mode: live blocks by stack, no event per\n"
    "                      allocation; 'heaptrail snapshot NAME' takes a snapshot,\n"
    "                      and one is taken at the stop\n"
    "  --snapshot-interval T  with --snapshot: also take one every T (s, ms;\n"
    "                      at least 10ms)\n"
    "  --ifeo              programs enabled for IFEO join this session\n"
    "  --ring SIZE         flight recorder: keep only the newest SIZE of events\n"
    "                      (at least 64K) and the state at their start;\n"
    "                      'heaptrail flush NAME -o FILE' writes that window, stop\n"
    "                      writes it to the trace, a traced process crashing\n"
    "                      writes it to FILE with .crash-PID (docs/modes.md)\n"
    "  --ring-time T       flight recorder keeping the last T of events (s, ms;\n"
    "                      with --ring, whichever is less; alone, at most 256M)\n"
    "  --no-maps           do not add the mappings no hook saw (found in\n"
    "                      /proc/PID/maps) to the committed memory\n"
    "  --max-size SIZE     end the session by itself once the trace is this big\n"
    "  --force             replace FILE if it exists (atomically; a device or FIFO\n"
    "                      is written in place; docs/outputs.md)\n"
    "  -q, --quiet         print nothing but errors\n"
    "  -h, --help          show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail start web --pid 1234 -o web.htr\n"
    "  heaptrail start boot --ifeo --max-size 2G -o /var/log/boot.htr --force\n"
    "  heaptrail start web --pid 1234 --ring 64M -o web.htr\n";

static const struct {
	const char *name;
	enum ht_event_type ev;
} stack_names[] = {
#define X(name, bit, ev, also) {name, ev},
    HT__STACK_KINDS(X)
#undef X
};
#define NSTACK_NAMES (sizeof(stack_names) / sizeof(stack_names[0]))

int parse_stack_events(const char *list, enum ht_event_type *out)
{
	if (!strcmp(list, "none"))
		return 0;
	unsigned n = 0;
	if (!strcmp(list, "all")) {
		for (size_t i = 0; i < NSTACK_NAMES; i++)
			out[n++] = stack_names[i].ev;
		return (int)n;
	}
	if (!*list)
		die("empty --stacks list; use 'none' for no stacks");
	char *copy = strdup(list), *save = NULL;
	if (!copy)
		die("out of memory");
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t i;
		for (i = 0; i < NSTACK_NAMES; i++)
			if (!strcmp(tok, stack_names[i].name))
				break;
		if (i == NSTACK_NAMES)
			die("unknown stack event '%s'; valid: alloc, realloc, free, mmap, munmap, "
			    "mprotect, heap-create, heap-destroy, none, all",
			    tok);
		bool dup = false;
		for (unsigned k = 0; k < n; k++)
			dup |= out[k] == stack_names[i].ev;
		if (!dup)
			out[n++] = stack_names[i].ev;
	}
	free(copy);
	return (int)n;
}

int parse_pid_option(const char *list, pid_t *out, unsigned n, unsigned max)
{
	const char *p = list;
	if (!*p)
		die("invalid process id list '%s': numbers separated by commas", list);
	while (*p) {
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (end == p || errno || v <= 0 || v > INT32_MAX || (*end && *end != ','))
			die("invalid process id list '%s': numbers separated by commas", list);
		bool dup = false;
		for (unsigned i = 0; i < n; i++)
			dup |= out[i] == (pid_t)v;
		if (!dup) {
			if (n == max)
				die("too many processes: at most %u", max);
			out[n++] = (pid_t)v;
		}
		p = *end ? end + 1 : end;
	}
	return (int)n;
}

unsigned parse_pids_after_name(const char *cmd, char **ops, int nops, pid_t *pids, unsigned npids)
{
	/* "--pid 12 34": more numbers after the name are pids too. */
	for (int i = 1; i < nops; i++) {
		if (!npids || ops[i][0] < '0' || ops[i][0] > '9')
			die("too many arguments: '%s'; see 'heaptrail %s --help'", ops[i], cmd);
		npids = (unsigned)parse_pid_option(ops[i], pids, npids, HT__CTL_MAX_PIDS);
	}
	return npids;
}

_Noreturn void session_error(const char *verb, const char *name, int rc)
{
	const char *why = ht__ctl_why();
	if (rc == HT_ERR_NOT_FOUND && !*why)
		die("no session '%s'; 'heaptrail sessions' lists the running ones", name);
	if (rc == HT_ERR_PERM && !*why)
		die("cannot %s session '%s': permission denied (it belongs to another user)", verb,
		    name);
	if (rc == HT_ERR_INVALID && !ht__ctl_name_ok(name))
		die("invalid session name '%s': letters, digits, '.', '_' and '-', at most %d",
		    name, HT_SESSION_NAME_MAX);
	if (*why)
		die("cannot %s session '%s': %s", verb, name, why);
	die("cannot %s session '%s': %s", verb, name, ht_strerror(rc));
}

int cmd_start(int argc, char **argv)
{
	struct ht_trace_properties props = HT_TRACE_PROPERTIES_INIT;
	static pid_t pids[HT__CTL_MAX_PIDS];
	unsigned npids = 0;
	enum ht_event_type stacks[16];
	int nstacks = -1;
	const char *output = NULL;
	bool quiet = false;
	enum {
		S_STACKS = CLI_LONG,
		S_BUFSIZE,
		S_BUFFERS,
		S_MAXSIZE,
		S_SAMPLE,
		S_LOSSY,
		S_IFEO,
		S_FORCE,
		S_RING,
		S_RINGTIME,
		S_NOMAPS,
		S_SNAPSHOT,
		S_SNAPINT
	};
	static const struct cli_opt opts[] = {
	    {"output", 'o', required_argument},
	    {"pid", 'p', required_argument},
	    {"stacks", S_STACKS, required_argument},
	    {"buffer-size", S_BUFSIZE, required_argument},
	    {"buffers", S_BUFFERS, required_argument},
	    {"max-size", S_MAXSIZE, required_argument},
	    {"sample-rate", S_SAMPLE, required_argument},
	    {"lossy", S_LOSSY, no_argument},
	    {"snapshot", S_SNAPSHOT, no_argument},
	    {"snapshot-interval", S_SNAPINT, required_argument},
	    {"ifeo", S_IFEO, no_argument},
	    {"force", S_FORCE, no_argument},
	    {"ring", S_RING, required_argument},
	    {"ring-time", S_RINGTIME, required_argument},
	    {"no-maps", S_NOMAPS, no_argument},
	    {"quiet", 'q', no_argument},
	    {NULL, 0, 0},
	};
	struct cli_parser p;
	cli_init(&p, "start", usage_text, opts, argc, argv, false);
	for (int c; (c = cli_next(&p)) != -1;) {
		const char *val = p.val;
		switch (c) {
		case 'o':
			output = val;
			output_not_dash(val, "-o", true);
			break;
		case 'p':
			npids = (unsigned)parse_pid_option(val, pids, npids, HT__CTL_MAX_PIDS);
			break;
		case S_STACKS:
			nstacks = parse_stack_events(val, stacks);
			break;
		case S_BUFSIZE: {
			uint64_t v;
			if (parse_size(val, &v) < 0 || v < 4096 || v > (1u << 30) || (v & (v - 1)))
				die("invalid buffer size '%s': a power of two from 4K to 1G", val);
			props.buffer_size = (uint32_t)v;
			break;
		}
		case S_BUFFERS: {
			char *end;
			unsigned long v = strtoul(val, &end, 10);
			if (*end || !*val || v < 1 || v > 65536)
				die("invalid buffer count '%s': 1 to 65536", val);
			props.buffers = (uint32_t)v;
			break;
		}
		case S_MAXSIZE:
			if (parse_size(val, &props.max_file_size) < 0 || !props.max_file_size)
				die("invalid size '%s': like 512M or 2G", val);
			break;
		case S_SAMPLE:
			props.sample_rate = parse_sample_rate(val);
			break;
		case S_LOSSY:
			props.flags |= HT_TRACE_LOSSY;
			break;
		case S_SNAPSHOT:
			props.flags |= HT_TRACE_SNAPSHOT;
			break;
		case S_SNAPINT:
			if (parse_time_ns(val, 1000000000ull, &props.snapshot_interval_ns) < 0 ||
			    props.snapshot_interval_ns < 10000000ull)
				die("invalid snapshot interval '%s': at least 10ms, like 1s or "
				    "500ms",
				    val);
			break;
		case S_IFEO:
			props.flags |= HT_TRACE_IFEO;
			break;
		case S_FORCE:
			props.flags |= HT_TRACE_FORCE;
			break;
		case S_RING:
			if (parse_size(val, &props.ring_bytes) < 0 ||
			    props.ring_bytes < (64u << 10))
				die("invalid ring size '%s': at least 64K, like 64M or 1G", val);
			break;
		case S_RINGTIME:
			if (parse_time_ns(val, 1000000000ull, &props.ring_ns) < 0 || !props.ring_ns)
				die("invalid ring time '%s': a positive time like 30s or 500ms",
				    val);
			break;
		case S_NOMAPS:
			props.flags |= HT_TRACE_NO_MAPS;
			break;
		case 'q':
			quiet = true;
			break;
		}
	}
	char **ops;
	int nops = cli_operands(&p, 1, INT_MAX, "session name", &ops);
	const char *name = ops[0];
	npids = parse_pids_after_name("start", ops, nops, pids, npids);
	if ((props.ring_bytes || props.ring_ns) && props.max_file_size)
		die("--max-size does not go with --ring or --ring-time: a flight recorder writes "
		    "its "
		    "trace only at the end, and its size is bounded by the ring");
	if (!ht__ctl_name_ok(name))
		die("invalid session name '%s': letters, digits, '.', '_' and '-', at most %d",
		    name, HT_SESSION_NAME_MAX);
	if (output &&
	    (size_t)snprintf(props.file, sizeof(props.file), "%s", output) >= sizeof(props.file))
		die("the path '%s' is too long", output);
	if (props.snapshot_interval_ns && !(props.flags & HT_TRACE_SNAPSHOT))
		die("--snapshot-interval goes with --snapshot");
	if ((props.ring_bytes || props.ring_ns) && (props.flags & HT_TRACE_SNAPSHOT))
		die("--snapshot and --ring are two modes: choose one");
	if (props.sample_rate && (props.flags & HT_TRACE_SNAPSHOT))
		die("--snapshot and --sample-rate are two modes: choose one");
	if ((props.flags & HT_TRACE_SNAPSHOT) && (props.flags & HT_TRACE_IFEO))
		die("--snapshot does not go with --ifeo: IFEO programs record every allocation "
		    "before they join; start a snapshot session with --pid instead");
	if (props.sample_rate && (props.flags & HT_TRACE_IFEO))
		die("--sample-rate does not go with --ifeo: IFEO programs record every allocation "
		    "before they join; start a sampled session with --pid instead");
	ht_trace_handle h;
	int rc = ht_start_heap_trace(&h, &props, name, pids, npids, nstacks < 0 ? NULL : stacks,
				     nstacks < 0 ? 0 : (unsigned)nstacks);
	if (rc == HT_ERR_EXISTS) {
		const char *why = ht__ctl_why();
		if (*why)
			die("cannot start session '%s': %s", name, why);
		die("session '%s' already exists; 'heaptrail stop %s' ends it", name, name);
	}
	if (rc < 0)
		session_error("start", name, rc);
	if (!quiet)
		fprintf(stderr, "heaptrail: session '%s' started (%u process%s%s); trace: '%s'\n",
			name, npids, npids == 1 ? "" : "es",
			(props.flags & HT_TRACE_IFEO) ? ", IFEO programs join" : "", props.file);
	/* The daemon symbolizes at the stop, as this process would now: say it
	   while there is time to install libdw (stop says it again). */
	const char *no_dw = quiet ? NULL : ht__symbolizer_missing();
	if (no_dw)
		warning(
		    "%s; frames the symbol cache lacks will have no symbols in the trace unless "
		    "it is installed before 'heaptrail stop %s' ('heaptrail symbolize' adds them "
		    "later)",
		    no_dw, name);
	return 0;
}
