/*
 * heaptrail.c - entry point of the heaptrail command: finds the command in the
 * table and runs it. Each command lives in its own cmd_NAME.c.
 */
#include <stdio.h>
#include <string.h>

#include "cli/builtin.h"
#include "cli/common.h"

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
    {"report", cmd_report, "one self-contained HTML file: graphs, window tables, flame graphs"},
    {"start", cmd_start, "start a named background session for running processes or IFEO"},
    {"update", cmd_update, "change the processes and stack events of a named session"},
    {"stop", cmd_stop, "stop a named session and write its trace"},
    {"sessions", cmd_sessions, "list the running named sessions"},
    {"ifeo", cmd_ifeo, "trace every start of a program: enable, disable, list, install"},
    {"autologger", cmd_autologger, "trace from boot: a systemd unit for the system session"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: heaptrail <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n'heaptrail <command> --help' describes each command.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("heaptrail %s\n", HT_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	error_msg("unknown command '%s'; 'heaptrail --help' lists the commands", argv[1]);
	return 2;
}
