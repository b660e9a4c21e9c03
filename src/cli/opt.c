/*
 * opt.c - the shared option parser of the heaptrail commands (see opt.h):
 * builds getopt_long's tables from the command's option table and turns its
 * errors into messages that name the command and the nearest real option.
 */
#include "cli/opt.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"

static const struct cli_opt help_opt = {"help", 'h', no_argument};

void cli_init(struct cli_parser *p, const char *cmd, const char *usage, const struct cli_opt *opts,
	      int argc, char **argv, bool stop_at_operand)
{
	memset(p, 0, sizeof(*p));
	p->cmd = cmd;
	p->usage = usage;
	p->opts = opts;
	p->argc = argc;
	p->argv = argv;
	size_t nl = 0, ns = 0;
	/* '+': stop at the first operand; ':': report a missing value apart. */
	if (stop_at_operand)
		p->so[ns++] = '+';
	p->so[ns++] = ':';
	bool has_help = false;
	for (const struct cli_opt *o = opts;; o++) {
		if (!o->name) {
			if (has_help)
				break;
			o = &help_opt;
			has_help = true;
		}
		if (!strcmp(o->name, "help"))
			has_help = true;
		if (nl + 1 >= sizeof(p->lo) / sizeof(p->lo[0]) || ns + 4 >= sizeof(p->so))
			die("internal error: too many options for '%s'", cmd);
		p->lo[nl++] = (struct option){o->name, o->has_arg, NULL, o->key};
		if (o->key > 0 && o->key < CLI_LONG && isalnum(o->key)) {
			p->so[ns++] = (char)o->key;
			if (o->has_arg == required_argument)
				p->so[ns++] = ':';
			else if (o->has_arg == optional_argument) {
				p->so[ns++] = ':';
				p->so[ns++] = ':';
			}
		}
		if (o == &help_opt)
			break;
	}
	p->lo[nl] = (struct option){NULL, 0, NULL, 0};
	p->so[ns] = '\0';
	optind = 0; /* glibc: start over, forgetting any earlier parse */
	opterr = 0;
}

/* The option names of the table as "--name" strings, for suggestions. */
static size_t option_names(const struct cli_parser *p, char names[][40], size_t max)
{
	size_t n = 0;
	for (size_t i = 0; p->lo[i].name && n < max; i++)
		snprintf(names[n++], 40, "--%s", p->lo[i].name);
	return n;
}

static _Noreturn void unknown_option(struct cli_parser *p)
{
	char bad[64];
	if (optopt) {
		/* "-top" reaches getopt as the cluster -t -o -p: name the whole word. */
		snprintf(bad, sizeof(bad), "-%c", optopt);
		for (int i = 1; i < p->argc; i++) {
			const char *a = p->argv[i];
			if (a[0] == '-' && a[1] && a[1] != '-' && a[2] && strchr(a + 1, optopt)) {
				snprintf(bad, sizeof(bad), "%.*s", (int)strcspn(a, "="), a);
				break;
			}
		}
	} else
		snprintf(bad, sizeof(bad), "%.*s", (int)strcspn(p->argv[optind - 1], "="),
			 p->argv[optind - 1]);
	char names[48][40];
	const char *cands[48];
	size_t n = option_names(p, names, 48);
	for (size_t i = 0; i < n; i++)
		cands[i] = names[i];
	char dym[80];
	/* "-top" for "--top": the suggestion compares the name without dashes too. */
	const char *word = bad;
	char dashed[70];
	if (bad[0] == '-' && bad[1] != '-' && bad[2]) {
		snprintf(dashed, sizeof(dashed), "-%s", bad);
		word = dashed;
	}
	die("unknown option '%s'%s; see 'heaptrail %s --help'", bad,
	    cli_did_you_mean(dym, sizeof(dym), "", word, cands, n), p->cmd);
}

int cli_next(struct cli_parser *p)
{
	int c = getopt_long(p->argc, p->argv, p->so, p->lo, NULL);
	p->val = optarg;
	if (c == -1)
		return -1;
	if (c == 'h') {
		fputs(p->usage, stdout);
		exit(0);
	}
	if (c == ':') {
		die("option '%s' needs a value; see 'heaptrail %s --help'", p->argv[optind - 1],
		    p->cmd);
	}
	if (c == '?')
		unknown_option(p);
	if (p->val && p->val == p->argv[optind - 1] && optind >= 2)
		cli_check_value(p->argv[optind - 2], p->val);
	/*
	 * getopt takes an optional value only as "--opt=value"; a number in the
	 * next argument is taken too ("--fail-on-leak 4096"), as no operand of
	 * ours (a trace, a program) starts with a digit.
	 */
	if (!p->val && optind < p->argc && isdigit((unsigned char)p->argv[optind][0])) {
		for (size_t i = 0; p->lo[i].name; i++)
			if (p->lo[i].val == c && p->lo[i].has_arg == optional_argument) {
				p->val = p->argv[optind++];
				break;
			}
	}
	return c;
}

void cli_check_value(const char *opt, const char *val)
{
	/* "-" (standard output) and "-5" are values; "-o", "--force" are not. */
	if (val[0] == '-' && (isalpha((unsigned char)val[1]) || val[1] == '-'))
		die("option '%s' needs a value, and '%s' is an option; give the value "
		    "after '%s' (a file of that name: './%s')",
		    opt, val, opt, val);
}

int cli_operand_index(const struct cli_parser *p)
{
	return optind;
}

int cli_operands(struct cli_parser *p, int min, int max, const char *what, char ***out)
{
	int n = p->argc - optind;
	*out = p->argv + optind;
	if (n < min)
		die("no %s given; see 'heaptrail %s --help'", what, p->cmd);
	if (n > max)
		die("too many arguments: '%s'; see 'heaptrail %s --help'", p->argv[optind + max],
		    p->cmd);
	return n;
}

void cli_bad_value(const struct cli_parser *p, const char *opt, const char *why)
{
	die("invalid value '%s' for '%s': %s; see 'heaptrail %s --help'", p->val ? p->val : "", opt,
	    why, p->cmd);
}

/* Optimal string alignment distance, case-insensitive, of short words. */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 63 || lb > 63)
		return 99;
	size_t d[64][64];
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int ca = tolower((unsigned char)a[i - 1]),
			    cb = tolower((unsigned char)b[j - 1]);
			size_t best = d[i - 1][j - 1] + (ca != cb);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

const char *cli_suggest(const char *word, const char *const *cands, size_t n)
{
	/* A typo: one edit in a short word, up to a third of a longer one. */
	size_t len = strlen(word), limit = len <= 5 ? 1 : len / 3;
	const char *best = NULL;
	size_t best_d = limit + 1;
	for (size_t i = 0; i < n; i++) {
		if (!cands[i])
			continue;
		size_t d = distance(word, cands[i]);
		if (d < best_d) {
			best_d = d;
			best = cands[i];
		}
	}
	return best;
}

const char *cli_did_you_mean(char *buf, size_t n, const char *prefix, const char *word,
			     const char *const *cands, size_t ncands)
{
	const char *s = cli_suggest(word, cands, ncands);
	if (s)
		snprintf(buf, n, " (did you mean '%s%s'?)", prefix, s);
	else if (n)
		buf[0] = '\0';
	return buf;
}

size_t cli_subcommand(int argc, char **argv, const char *cmd, const char *usage,
		      const char *const *subs, size_t n)
{
	if (argc < 2) {
		fputs(usage, stderr);
		exit(2);
	}
	const char *sub = argv[1];
	if (!strcmp(sub, "-h") || !strcmp(sub, "--help")) {
		fputs(usage, stdout);
		exit(0);
	}
	if (sub[0] == '-')
		die("unknown option '%s'; the %s command comes first: see 'heaptrail %s --help'",
		    sub, cmd, cmd);
	for (size_t k = 0; k < n; k++)
		if (!strcmp(sub, subs[k]))
			return k;
	char choices[200] = "", dym[80];
	for (size_t k = 0; k < n; k++)
		snprintf(choices + strlen(choices), sizeof(choices) - strlen(choices), "%s%s",
			 k == 0	      ? ""
			 : k + 1 == n ? " or "
				      : ", ",
			 subs[k]);
	die("unknown %s command '%s'%s; %s", cmd, sub,
	    cli_did_you_mean(dym, sizeof(dym), "", sub, subs, n), choices);
}

void cli_unknown_option(const char *cmd, const char *arg, const char *text, const char *text2)
{
	static char names[160][48];
	const char *cands[160];
	size_t n = 0;
	const char *texts[2] = {text, text2};
	for (int t = 0; t < 2; t++) {
		for (const char *p = texts[t]; p && *p && n < 160; p++) {
			/* An option: a dash after a space, '[' or '(' and then a letter. */
			if (*p != '-' || (p > texts[t] && !strchr(" [(|,", p[-1])))
				continue;
			size_t len = strspn(p, "-");
			if (len > 2 || !isalpha((unsigned char)p[len]))
				continue;
			len += strspn(p + len,
				      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-");
			if (len >= sizeof(names[0]))
				continue;
			snprintf(names[n], sizeof(names[0]), "%.*s", (int)len, p);
			cands[n] = names[n];
			n++;
			p += len - 1;
		}
	}
	char word[64], dym[80];
	snprintf(word, sizeof(word), "%.*s", (int)strcspn(arg, "="), arg);
	die("unknown option '%s'%s; 'heaptrail %s --help' lists the options", arg,
	    cli_did_you_mean(dym, sizeof(dym), "", word, cands, n), cmd);
}
