/*
 * cmd_check.c - 'heaptrail check FILE': the leak gate for CI on a trace
 * already made; the same check as 'record --fail-on-leak' (cli/leakgate.c).
 */
#include <stdlib.h>

#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/leakgate.h"
#include "cli/opt.h"

static const char usage_text[] =
    "usage: heaptrail check FILE [--fail-on-leak=BYTES] [options]\n"
    "\n"
    "The leak gate for CI: exits with --error-exitcode (default 1) when more than\n"
    "BYTES (default 0) were still allocated when the trace ended, after the\n"
    "suppressions, and prints those stacks, biggest first; exits 0 otherwise.\n"
    "A trace that misses the end of the run (its collector was killed) fails too,\n"
    "with a line saying what it lacks: the part not recorded is not checked.\n"
    "The stacks are culled as 'heaptrail analyze -stacks so' culls them.\n"
    "\n"
    "options:\n" LEAK_GATE_HELP "  -h, --help              show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail check app.htr\n"
    "  heaptrail check app.htr --fail-on-leak=64K --suppressions lsan.supp\n"
    "  heaptrail check app.htr --no-default-suppressions --error-exitcode 42\n";

int cmd_check(int argc, char **argv)
{
	static const struct cli_opt opts[] = {LEAK_GATE_OPTIONS, {NULL, 0, 0}};
	struct leak_gate g;
	leak_gate_init(&g);
	struct cli_parser p;
	cli_init(&p, "check", usage_text, opts, argc, argv, false);
	for (int c; (c = cli_next(&p)) != -1;)
		leak_gate_option(&g, &p, c);
	char **files;
	cli_operands(&p, 1, 1, "trace file", &files);
	return leak_gate_check(&g, files[0], stdout) ? 0 : g.exitcode;
}
