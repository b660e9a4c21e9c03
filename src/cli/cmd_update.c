/*
 * cmd_update.c - `heaptrail update NAME`: replaces the processes and/or the
 * stack events of a running named session (UpdateHeapTrace). Processes left
 * out are detached and run on; their later events are not in the trace.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"
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
    "  -h, --help          show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail update web --pid 1234,5678\n"
    "  heaptrail update web --pid none --stacks alloc,free\n";

int cmd_update(int argc, char **argv)
{
	static pid_t pids[HT__CTL_MAX_PIDS];
	unsigned npids = 0;
	enum ht_event_type stacks[16];
	int nstacks = -1;
	const char *stacks_arg = NULL;
	bool quiet = false, have_pids = false;
	static const struct cli_opt opts[] = {
	    {"pid", 'p', required_argument},
	    {"stacks", CLI_LONG, required_argument},
	    {"quiet", 'q', no_argument},
	    {NULL, 0, 0},
	};
	struct cli_parser p;
	cli_init(&p, "update", usage_text, opts, argc, argv, false);
	for (int c; (c = cli_next(&p)) != -1;) {
		if (c == CLI_LONG) {
			nstacks = parse_stack_events(p.val, stacks);
			stacks_arg = p.val;
		} else if (c == 'p') {
			have_pids = true;
			if (strcmp(p.val, "none"))
				npids = (unsigned)parse_pid_option(p.val, pids, npids,
								   HT__CTL_MAX_PIDS);
		} else if (c == 'q') {
			quiet = true;
		}
	}
	char **ops;
	int nops = cli_operands(&p, 1, INT_MAX, "session name", &ops);
	const char *name = ops[0];
	npids = parse_pids_after_name("update", ops, nops, pids, npids);
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
	/* Both changes are said when both were asked for. */
	if (!quiet && nstacks == 0)
		fprintf(stderr, "heaptrail: session '%s' now captures no call stacks\n", name);
	else if (!quiet && nstacks > 0)
		fprintf(stderr, "heaptrail: session '%s' now captures the call stacks of %s\n",
			name, stacks_arg);
	return 0;
}
