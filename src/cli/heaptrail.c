/*
 * heaptrail.c - entry point of the heaptrail command: finds the command in the
 * table and runs it. Each command lives in its own cmd_NAME.c.
 */
#include <stdio.h>
#include <string.h>

#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"

struct cmd_struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct cmd_struct commands[] = {
    {"record", cmd_record, "run a program and trace its heap and mappings"},
    {"info", cmd_info, "summarize a trace: processes, events, totals, peaks"},
    {"dump", cmd_dump, "print every event of a trace in order"},
    {"analyze", cmd_analyze, "xperf heap actions: stacks, frames, images, filters"},
    {"table", cmd_table, "WPA tables for a time window: heap allocations, commit lifetimes"},
    {"timeline", cmd_timeline, "heap, committed and resident bytes over time, as a table or SVG"},
    {"check", cmd_check, "the leak gate for CI: fail when a trace leaked, print the stacks"},
    {"export", cmd_export, "write a trace as pprof, collapsed stacks, massif, Perfetto or SQLite"},
    {"diff", cmd_diff, "compare two traces or two windows by stack, frame or image"},
    {"symbolize", cmd_symbolize,
     "resolve a trace's frames later, from a symbol path (Load Symbols)"},
    {"report", cmd_report, "one self-contained HTML file: graphs, window tables, flame graphs"},
    {"start", cmd_start, "start a named background session for running processes or IFEO"},
    {"update", cmd_update, "change the processes and stack events of a named session"},
    {"stop", cmd_stop, "stop a named session and write its trace"},
    {"flush", cmd_flush, "write the window of a flight-recorder session"},
    {"snapshot", cmd_snapshot, "take a heap snapshot in a session recording with --snapshot"},
    {"sessions", cmd_sessions, "list the running named sessions"},
    {"ifeo", cmd_ifeo, "trace every start of a program: enable, disable, list, install"},
    {"autologger", cmd_autologger, "trace from boot: a systemd unit for the system session"},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
	fprintf(out, "usage: heaptrail <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n'heaptrail help <command>' or 'heaptrail <command> --help' describes each\n"
		     "command; 'heaptrail --version' prints the version.\n"
		     "\nexamples:\n"
		     "  heaptrail record -o app.htr ./app --flag\n"
		     "  heaptrail analyze app.htr\n"
		     "  heaptrail report app.htr -o app.html\n");
}

static const struct cmd_struct *find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(name, commands[i].name))
			return &commands[i];
	return NULL;
}

static _Noreturn void unknown_command(const char *name)
{
	const char *names[NCOMMANDS];
	for (size_t i = 0; i < NCOMMANDS; i++)
		names[i] = commands[i].name;
	char dym[80];
	die("unknown command '%s'%s; 'heaptrail --help' lists the commands", name,
	    cli_did_you_mean(dym, sizeof(dym), "heaptrail ", name, names, NCOMMANDS));
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *a = argv[1];
	/* help is a command too: its own help ('help --help', 'help help') is the list. */
	if (!strcmp(a, "--help") || !strcmp(a, "-h") ||
	    (!strcmp(a, "help") && (argc == 2 || !strcmp(argv[2], "--help") ||
				    !strcmp(argv[2], "-h") || !strcmp(argv[2], "help")))) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
		printf("heaptrail %s\n", HT_VERSION);
		return 0;
	}
	if (!strcmp(a, "help")) {
		/* "heaptrail help record" is "heaptrail record --help". */
		if (argc > 3)
			die("unexpected argument '%s'; usage: heaptrail help [COMMAND]", argv[3]);
		const struct cmd_struct *c = find_command(argv[2]);
		if (!c)
			unknown_command(argv[2]);
		char *hargv[] = {(char *)c->name, "--help", NULL};
		return c->fn(2, hargv);
	}
	if (a[0] == '-') {
		const char *names[] = {"--help", "--version"};
		char dym[80];
		die("unknown option '%s'%s; options go after the command: heaptrail <command> "
		    "[options]",
		    a, cli_did_you_mean(dym, sizeof(dym), "", a, names, 2));
	}
	const struct cmd_struct *c = find_command(a);
	if (!c)
		unknown_command(a);
	return c->fn(argc - 1, argv + 1);
}
