/*
 * cmd_sessions.c - `heaptrail sessions`: the caller's running named
 * sessions with their processes, buffers, events written and lost, and
 * trace file, like `xperf -loggers`.
 */
#include <stdio.h>
#include <string.h>

#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"
#include "control/ctl.h"
#include "heaptrail/control.h"

static const char usage_text[] =
    "usage: heaptrail sessions [--format text|json]\n"
    "\n"
    "List your running heap tracing sessions: name, traced processes,\n"
    "buffers (in use / count x size), events written and lost, trace file.\n"
    "\n"
    "  --format FMT        text (default) or json: a list of objects with name,\n"
    "                      file, pids, events, events_lost, buffers, buffer_size,\n"
    "                      buffers_used, crashes_unreported (crashes of a flight\n"
    "                      recorder the crash table had no room for: no window),\n"
    "                      crash_windows, crash_windows_failed (crash windows\n"
    "                      written, and not written: see the listing or stop),\n"
    "                      daemon_pid, ifeo, lossy\n"
    "  -h, --help          show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail sessions\n"
    "  heaptrail sessions --format json\n";

#define MAX_SESSIONS 256

int cmd_sessions(int argc, char **argv)
{
	enum out_format fmt = FMT_TEXT;
	static const struct cli_opt opts[] = {{"format", 'f', required_argument}, {NULL, 0, 0}};
	struct cli_parser p;
	cli_init(&p, "sessions", usage_text, opts, argc, argv, false);
	for (int c; (c = cli_next(&p)) != -1;)
		if (c == 'f' && (parse_format(p.val, &fmt) < 0 || fmt == FMT_CSV))
			die("invalid format '%s': text or json", p.val);
	char **rest;
	cli_operands(&p, 0, 0, "", &rest);
	static char names[MAX_SESSIONS][HT_SESSION_NAME_MAX + 1];
	int n = ht_list_heap_traces(names, MAX_SESSIONS);
	if (n < 0)
		die("cannot list sessions: %s", ht_strerror(n));
	if (n > MAX_SESSIONS)
		n = MAX_SESSIONS;
	struct jw j;
	if (fmt == FMT_JSON) {
		jw_init(&j, stdout, true);
		jw_arr_begin(&j);
	} else if (n == 0) {
		printf("no sessions\n");
		return 0;
	} else {
		printf("%-16s %8s %9s %-16s %12s %10s  %s\n", "NAME", "PID", "PROCESSES", "BUFFERS",
		       "EVENTS", "LOST", "FILE");
	}
	for (int i = 0; i < n; i++) {
		struct ht_trace_properties p = HT_TRACE_PROPERTIES_INIT;
		static pid_t pids[HT__CTL_MAX_PIDS];
		unsigned np = HT__CTL_MAX_PIDS;
		if (ht_query_heap_trace(0, names[i], &p, pids, &np) < 0)
			continue; /* ended meanwhile */
		if (np > HT__CTL_MAX_PIDS)
			np = HT__CTL_MAX_PIDS;
		if (fmt == FMT_JSON) {
			jw_obj_begin(&j);
			jw_key(&j, "name");
			jw_str(&j, names[i]);
			jw_key(&j, "file");
			jw_str(&j, p.file);
			jw_key(&j, "pids");
			jw_arr_begin(&j);
			for (unsigned k = 0; k < np; k++)
				jw_i64(&j, pids[k]);
			jw_arr_end(&j);
			jw_key(&j, "events");
			jw_u64(&j, p.events_written);
			jw_key(&j, "events_lost");
			jw_u64(&j, p.events_lost);
			jw_key(&j, "buffers");
			jw_u64(&j, p.buffers);
			jw_key(&j, "buffer_size");
			jw_u64(&j, p.buffer_size);
			jw_key(&j, "buffers_used");
			jw_u64(&j, p.buffers_in_use);
			jw_key(&j, "crashes_unreported");
			jw_u64(&j, p.crashes_unreported);
			jw_key(&j, "crash_windows");
			jw_u64(&j, p.crash_windows);
			jw_key(&j, "crash_windows_failed");
			jw_u64(&j, p.crash_windows_failed);
			jw_key(&j, "daemon_pid");
			jw_i64(&j, p.daemon_pid);
			jw_key(&j, "ifeo");
			jw_bool(&j, p.flags & HT_TRACE_IFEO);
			jw_key(&j, "lossy");
			jw_bool(&j, p.flags & HT_TRACE_LOSSY);
			jw_obj_end(&j);
			continue;
		}
		char procs[32], bufs[48];
		snprintf(procs, sizeof(procs), "%u", np);
		snprintf(bufs, sizeof(bufs), "%u/%u x %uK", p.buffers_in_use, p.buffers,
			 p.buffer_size / 1024);
		printf("%-16s %8d %9s %-16s %12llu %10llu  %s\n", names[i], (int)p.daemon_pid,
		       procs, bufs, (unsigned long long)p.events_written,
		       (unsigned long long)p.events_lost, p.file);
		if (p.crashes_unreported)
			printf("%-16s %8s %llu crashes had no room in the crash table: no window "
			       "written\n",
			       "", "", (unsigned long long)p.crashes_unreported);
		if (p.crash_windows_failed)
			printf("%-16s %8s %u crash windows could not be written (process %d: %s)\n",
			       "", "", p.crash_windows_failed, (int)p.crash_failed_pid,
			       ht_strerror(p.crash_error));
		if (np) {
			printf("%-16s %8s pids:", "", "");
			for (unsigned k = 0; k < np; k++)
				printf(" %d", (int)pids[k]);
			printf("%s\n", (p.flags & HT_TRACE_IFEO) ? "  (IFEO programs join)" : "");
		}
	}
	if (fmt == FMT_JSON) {
		jw_arr_end(&j);
		jw_finish(&j);
	}
	return 0;
}
