/*
 * leakgate.h - the leak gate that 'heaptrail check' and 'heaptrail record
 * --fail-on-leak' share: their options, and the check of a finished trace
 * with its printout (the stacks that leaked, biggest first, and what the
 * suppressions took).
 */
#ifndef HT_CLI_LEAKGATE_H
#define HT_CLI_LEAKGATE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/opt.h"

struct leak_gate {
	bool enabled;	       /* record: --fail-on-leak given */
	uint64_t max_bytes;    /* leaks up to this many bytes pass */
	int exitcode;	       /* --error-exitcode (default 1) */
	bool defaults;	       /* the built-in suppressions */
	const char *files[16]; /* --suppressions */
	int nfiles;
};

enum {
	LG_FAIL = 0x1000,
	LG_EXITCODE,
	LG_SUPP,
	LG_NO_DEFAULTS,
	LG_PRINT_DEFAULTS,
};

/* The gate's entries of a command's option table. */
#define LEAK_GATE_OPTIONS                                                                          \
	{"fail-on-leak", LG_FAIL, optional_argument},                                              \
	    {"error-exitcode", LG_EXITCODE, required_argument},                                    \
	    {"suppressions", LG_SUPP, required_argument},                                          \
	    {"no-default-suppressions", LG_NO_DEFAULTS, no_argument},                              \
	{                                                                                          \
		"print-default-suppressions", LG_PRINT_DEFAULTS, no_argument                       \
	}

/* The gate's lines of a --help text. */
#define LEAK_GATE_HELP                                                                             \
	"  --fail-on-leak[=BYTES]  fail when more than BYTES (default 0; K, M, G\n"                \
	"                          allowed) are still allocated at exit, after the\n"              \
	"                          suppressions; prints the stacks, biggest first\n"               \
	"  --error-exitcode N      the exit status of a failed check (default 1)\n"                \
	"  --suppressions FILE     LeakSanitizer suppressions: 'leak:PATTERN' lines\n"             \
	"                          matched against each frame's function, module and\n"            \
	"                          file ('*' wildcard, '^' '$' anchors); repeatable\n"             \
	"  --no-default-suppressions  without the built-in ones (the dynamic loader,\n"            \
	"                          TLS, libstdc++'s emergency pool, stdio, locale)\n"              \
	"  --print-default-suppressions  print the built-in ones as a file\n"

void leak_gate_init(struct leak_gate *g);
/* Handles key when it is one of the gate's options (true), else false. */
bool leak_gate_option(struct leak_gate *g, struct cli_parser *p, int key);
/*
 * Checks the trace at path and prints the result to out. Returns true when
 * it passes. Dies when the trace or a suppression file cannot be read.
 */
bool leak_gate_check(const struct leak_gate *g, const char *path, FILE *out);

#endif
