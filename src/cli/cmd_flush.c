/*
 * cmd_flush.c - `heaptrail flush NAME -o FILE`: a flight-recorder session
 * (`heaptrail start NAME --ring SIZE`) writes its window, the newest events
 * with the state at their start, to FILE and goes on (docs/modes.md).
 */
#include <stdio.h>
#include <string.h>

#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"
#include "heaptrail/control.h"

static const char usage_text[] =
    "usage: heaptrail flush NAME -o FILE [--force]\n"
    "\n"
    "Write the window of flight-recorder session NAME (started with --ring or\n"
    "--ring-time) to FILE: its newest events and the state at their start, a\n"
    "complete trace. The session goes on recording; flush again for a later\n"
    "window. The path is printed on standard output.\n"
    "\n"
    "  -o FILE             the trace to write (required)\n"
    "  --force             replace FILE if it exists (atomically; docs/outputs.md)\n"
    "  -q, --quiet         print only the path\n"
    "  -h, --help          show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail flush web -o before-the-spike.htr\n"
    "  heaptrail flush web -o web.now.htr --force\n";

int cmd_flush(int argc, char **argv)
{
	enum { F_FORCE = CLI_LONG };
	static const struct cli_opt opts[] = {{"output", 'o', required_argument},
					      {"force", F_FORCE, no_argument},
					      {"quiet", 'q', no_argument},
					      {NULL, 0, 0}};
	bool quiet = false, force = false;
	const char *output = NULL;
	struct cli_parser p;
	cli_init(&p, "flush", usage_text, opts, argc, argv, false);
	for (int c; (c = cli_next(&p)) != -1;) {
		if (c == 'q')
			quiet = true;
		else if (c == F_FORCE)
			force = true;
		else if (c == 'o')
			output = p.val;
	}
	char **names;
	cli_operands(&p, 1, 1, "session name", &names);
	const char *name = names[0];
	if (!output)
		die("flush needs the file to write: heaptrail flush %s -o FILE", name);
	struct ht_trace_properties props = HT_TRACE_PROPERTIES_INIT;
	int rc = ht_flush_heap_trace(0, name, output, force, &props);
	if (rc < 0)
		session_error("flush", name, rc);
	if (!quiet)
		fprintf(stderr, "heaptrail: session '%s': wrote its window to '%s' (%llu events)\n",
			name, props.file, (unsigned long long)props.events_written);
	printf("%s\n", props.file);
	return 0;
}
