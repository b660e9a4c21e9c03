/*
 * cmd_update.c - `heaptrail update NAME`: replaces the processes and/or the
 * stack events of a running named session (UpdateHeapTrace). Processes left
 * out are detached and run on; their later events are not in the trace.
 */
#include <stdio.h>
#include <string.h>

#include "cli/builtin.h"
#include "cli/common.h"
#include "control/ctl.h"
#include "heaptrail/control.h"

static const char usage_text[] =
    "usage: heaptrail update NAME [--pid PID...|none] [--stacks LIST]\n"
    "\n"
    "With --pid, make session NAME trace exactly the processes given ('none':\n"
    "only the ones that join through IFEO); processes no longer listed are\n"
    "detached and keep running. With --stacks, change which events capture a\n"
    "call stack. What is not given stays as it is.\n"
    "\n"
    "  -p, --pid PID...    the new set of processes (PID,PID or PID PID;\n"
    "                      may be repeated)\n"
    "  --stacks LIST       as for 'heaptrail start'\n"
    "  -q, --quiet         print nothing but errors\n"
    "  -h, --help          show this help\n";

int cmd_update(int argc, char **argv)
{
	static pid_t pids[HT__CTL_MAX_PIDS];
	unsigned npids = 0;
	enum ht_event_type stacks[16];
	int nstacks = -1;
	const char *name = NULL;
	bool quiet = false, have_pids = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage_text, stdout);
			return 0;
		} else if (!strcmp(a, "-p") || !strcmp(a, "--pid") || !strcmp(a, "--stacks")) {
			if (i + 1 >= argc)
				die("option '%s' needs a value; see 'heaptrail update --help'", a);
			if (!strcmp(a, "--stacks")) {
				nstacks = parse_stack_events(argv[++i], stacks);
				continue;
			}
			have_pids = true;
			if (!strcmp(argv[++i], "none"))
				continue;
			npids = (unsigned)parse_pid_option(argv[i], pids, npids, HT__CTL_MAX_PIDS);
			/* "--pid 12 34": more numbers after the first are pids too. */
			while (strcmp(a, "--stacks") && i + 1 < argc && argv[i + 1][0] >= '0' &&
			       argv[i + 1][0] <= '9')
				npids = (unsigned)parse_pid_option(argv[++i], pids, npids,
								   HT__CTL_MAX_PIDS);
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			quiet = true;
		} else if (a[0] == '-' && a[1]) {
			die("unknown option '%s'; see 'heaptrail update --help'", a);
		} else if (!name) {
			name = a;
		} else {
			die("unexpected argument '%s'; see 'heaptrail update --help'", a);
		}
	}
	if (!name) {
		fputs(usage_text, stderr);
		return 2;
	}
	if (!have_pids && nstacks < 0)
		die("nothing to change: give --pid (or --pid none) and/or --stacks");
	int rc =
	    ht_update_heap_trace(0, name, have_pids ? pids : NULL, npids,
				 nstacks < 0 ? NULL : stacks, nstacks < 0 ? 0 : (unsigned)nstacks);
	if (rc < 0)
		session_error("update", name, rc);
	if (!quiet && have_pids)
		fprintf(stderr, "heaptrail: session '%s' now traces %u process%s\n", name, npids,
			npids == 1 ? "" : "es");
	else if (!quiet)
		fprintf(stderr, "heaptrail: session '%s' now captures the new stack events\n",
			name);
	return 0;
}
