/*
 * cmd_stop.c - `heaptrail stop NAME`: ends a named session; its processes
 * are detached and run on, the trace is finished and symbolized, and where
 * it is gets printed.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"
#include "control/ctl.h"
#include "heaptrail/control.h"

static const char usage_text[] =
    "usage: heaptrail stop NAME\n"
    "\n"
    "Stop session NAME: the traced processes run on untraced, the trace is\n"
    "finished and symbolized, and its path is printed on standard output.\n"
    "\n"
    "  -q, --quiet         print only the path\n"
    "  -h, --help          show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail stop web\n"
    "  heaptrail stop -q web | xargs heaptrail analyze\n";

int cmd_stop(int argc, char **argv)
{
	static const struct cli_opt opts[] = {{"quiet", 'q', no_argument}, {NULL, 0, 0}};
	bool quiet = false;
	struct cli_parser p;
	cli_init(&p, "stop", usage_text, opts, argc, argv, false);
	for (int c; (c = cli_next(&p)) != -1;)
		quiet |= c == 'q';
	char **names;
	cli_operands(&p, 1, 1, "session name", &names);
	const char *name = names[0];
	struct ht_trace_properties props = HT_TRACE_PROPERTIES_INIT;
	/* Symbols of a long trace take a while: say what is going on. */
	if (!quiet && progress_wanted())
		fprintf(
		    stderr,
		    "heaptrail: stopping session '%s': finishing and symbolizing the trace...\n",
		    name);
	int rc = ht_stop_heap_trace(0, name, &props);
	char dir[4096];
	/* A daemon that went away mid-request (HT_ERR_IO: killed while its
	   socket still took the connection) holds its lock until its last
	   thread is gone: a moment (cli.killed-start said "input/output
	   error" right after the SIGKILL). */
	int dead = rc == HT_ERR_NOT_FOUND || rc == HT_ERR_IO
		       ? ht__ctl_remove_dead(name, dir, sizeof(dir))
		       : 0;
	for (int i = 0; rc == HT_ERR_IO && dead == 0 && i < 100; i++) {
		usleep(10000);
		dead = ht__ctl_remove_dead(name, dir, sizeof(dir));
	}
	if (dead > 0) {
		fprintf(stderr,
			"heaptrail: stop: session '%s' is not running: its daemon ended without "
			"finishing (killed?); removed the files it left in %s. The trace it was "
			"writing is unfinished: 'heaptrail check TRACE' says what it holds, "
			"'heaptrail symbolize' adds its symbols\n",
			name, dir);
		return 1;
	}
	if (rc < 0)
		session_error("stop", name, rc);
	if (!quiet)
		fprintf(stderr,
			"heaptrail: session '%s' stopped: wrote '%s' (%llu events, %llu lost)\n",
			name, props.file, (unsigned long long)props.events_written,
			(unsigned long long)props.events_lost);
	warn_crashes_unreported(props.crashes_unreported);
	warn_crash_windows_failed(&props);
	if (props.symbols_missing)
		warn_no_symbols(NULL, props.file);
	printf("%s\n", props.file);
	return 0;
}
