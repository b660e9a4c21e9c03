/*
 * opt.h - the one option parser of the heaptrail commands: a table of long
 * options over getopt_long, so every command takes '--opt value' and
 * '--opt=value' (an optional value: '--opt=V', or a number after it),
 * '-h/--help', and answers a misspelt option with the nearest
 * real one. analyze keeps its xperf spellings but shares the suggestions.
 */
#ifndef HT_CLI_OPT_H
#define HT_CLI_OPT_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

/* One option: --name, and -key too when key is a printable character. */
struct cli_opt {
	const char *name;
	int key;     /* a character for a short form, or an id >= 256 */
	int has_arg; /* no_argument, required_argument or optional_argument */
};

/* Ids for long-only options start here. */
#define CLI_LONG 256

struct cli_parser {
	const char *cmd;   /* "info", "table heap": for messages */
	const char *usage; /* printed by -h/--help */
	const struct cli_opt *opts;
	int argc;
	char **argv;
	const char *val; /* the value of the option just returned, or NULL */
	struct option lo[48];
	char so[100];
};

/*
 * Prepares to parse argv[1..argc) against opts (ended by {NULL}). With
 * stop_at_operand, the options end at the first operand (record PROGRAM ARGS);
 * otherwise options and operands mix freely.
 */
void cli_init(struct cli_parser *p, const char *cmd, const char *usage, const struct cli_opt *opts,
	      int argc, char **argv, bool stop_at_operand);

/*
 * The key of the next option (its value, if any, in p->val), or -1 when the
 * options are done. Prints the usage and exits 0 on -h/--help; dies with a
 * suggestion on an unknown option or a missing value.
 */
int cli_next(struct cli_parser *p);

/*
 * Dies when val, the argument given after option opt as its value, looks
 * like an option itself ("--svg -o out.svg" would write a file named "-o"):
 * "-" and negative numbers pass. cli_next() checks every value it takes.
 */
void cli_check_value(const char *opt, const char *val);

/* Index in argv of the first operand, once cli_next returned -1. */
int cli_operand_index(const struct cli_parser *p);

/*
 * The operands, checked: dies unless min <= count <= max, naming what is
 * missing (e.g. "a trace file") or the first surplus one. Returns the count
 * and sets *out to the first.
 */
int cli_operands(struct cli_parser *p, int min, int max, const char *what, char ***out);

/* Dies with "invalid VALUE for --OPT: WHY; see 'heaptrail CMD --help'". */
_Noreturn void cli_bad_value(const struct cli_parser *p, const char *opt, const char *why);

/*
 * The candidate nearest to word (case-insensitive edit distance, small enough
 * to be a typo), or NULL. cands has n entries; NULL entries are skipped.
 */
const char *cli_suggest(const char *word, const char *const *cands, size_t n);

/* " (did you mean 'X'?)" into buf when a suggestion exists, else "". */
const char *cli_did_you_mean(char *buf, size_t n, const char *prefix, const char *word,
			     const char *const *cands, size_t ncands);

/*
 * The subcommand of a command made of them (ifeo, autologger): its index in
 * subs (n names). No argument prints usage to stderr and exits 2; -h or
 * --help prints it and exits 0; an option before the subcommand, or an
 * unknown word, dies naming the choices.
 */
size_t cli_subcommand(int argc, char **argv, const char *cmd, const char *usage,
		      const char *const *subs, size_t n);

/*
 * Dies with "unknown option ARG (did you mean X?)" for the commands that parse
 * by hand (xperf-style lists): the candidates are the option names found in
 * their help texts (text2 may be NULL).
 */
_Noreturn void cli_unknown_option(const char *cmd, const char *arg, const char *text,
				  const char *text2);

#endif
