/*
 * cmd_stop.c - `heaptrail stop NAME`: ends a named session; its processes
 * are detached and run on, the trace is finished and symbolized, and where
 * it is gets printed.
 */
#include <stdio.h>
#include <string.h>

#include "cli/builtin.h"
#include "cli/common.h"
#include "heaptrail/control.h"

static const char usage_text[] =
    "usage: heaptrail stop NAME\n"
    "\n"
    "Stop session NAME: the traced processes run on untraced, the trace is\n"
    "finished and symbolized, and its path is printed on standard output.\n"
    "\n"
    "  -q, --quiet         print only the path\n"
    "  -h, --help          show this help\n";

int cmd_stop(int argc, char **argv)
{
	const char *name = NULL;
	bool quiet = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage_text, stdout);
			return 0;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			quiet = true;
		} else if (a[0] == '-' && a[1]) {
			die("unknown option '%s'; see 'heaptrail stop --help'", a);
		} else if (!name) {
			name = a;
		} else {
			die("unexpected argument '%s'; see 'heaptrail stop --help'", a);
		}
	}
	if (!name) {
		fputs(usage_text, stderr);
		return 2;
	}
	struct ht_trace_properties props = HT_TRACE_PROPERTIES_INIT;
	/* Symbols of a long trace take a while: say what is going on. */
	if (!quiet && progress_wanted())
		fprintf(
		    stderr,
		    "heaptrail: stopping session '%s': finishing and symbolizing the trace...\n",
		    name);
	int rc = ht_stop_heap_trace(0, name, &props);
	if (rc < 0)
		session_error("stop", name, rc);
	if (!quiet)
		fprintf(stderr,
			"heaptrail: session '%s' stopped: wrote '%s' (%llu events, %llu lost)\n",
			name, props.file, (unsigned long long)props.events_written,
			(unsigned long long)props.events_lost);
	printf("%s\n", props.file);
	return 0;
}
