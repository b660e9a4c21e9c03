/*
 * query_opts.c - the analysis options shared by analyze, export and diff
 * (query_opts.h): parsing and checking of filters, culling and symbols into
 * a struct ht__query.
 */
#include "cli/query_opts.h"

#include "analysis/pass.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"
#include "cli/opt.h"

const char query_opts_help[] =
    "filters:\n"
    "  -pid PID               only this process (repeatable, or PID,PID...)\n"
    "  -range T1 T2           only events in [T1, T2); an allocation is outstanding\n"
    "                         when it has no free inside the range\n"
    "  --at-peak              the blocks live when the heap was largest (of the\n"
    "                         -pid processes, or of the whole trace)\n"
    "  --temporary            only temporary allocations (freed before their thread\n"
    "                         allocated again)\n"
    "  -lifetime L1 L2        only allocations with L1 <= lifetime < L2\n"
    "  -size S1 S2            only allocations of S1 <= size < S2 bytes\n"
    "  -requireFrames F...    only allocations whose stack has a frame matching F\n"
    "  --snapshot N           a heap snapshot trace (record --snapshot): snapshot N\n"
    "                         ('heaptrail info' lists them; default: the last)\n"
    "  times are from the start of the trace, in microseconds unless suffixed\n"
    "  s, ms, us or ns ('1.5s', '200ms')\n"
    "culling (as 'heaptrail analyze'):\n"
    "  -cullFrames F...       frames to cull\n"
    "  -cullLists FILE...     files of frames to cull, one per line ('#' comments)\n"
    "  --no-default-cull      without the built-in list\n"
    "  --no-symbols           frames as module!0xOFFSET\n";

/* The option name without dashes and underscores, lowercase: "cullframes". */
void opt_norm_name(const char *arg, size_t len, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 1 < cap; i++) {
		if (arg[i] == '-' || arg[i] == '_')
			continue;
		out[o++] = (char)tolower((unsigned char)arg[i]);
	}
	out[o] = '\0';
}

/* The value of option opt: the "=VALUE" part, or the next argument. */
const char *opt_value(int argc, char **argv, int *i, const char *inline_val, const char *opt)
{
	if (inline_val)
		return inline_val;
	if (*i + 1 >= argc)
		die("option '%s' needs a value", opt);
	cli_check_value(opt, argv[*i + 1]);
	return argv[++*i];
}

/*
 * Two values: "-range T1 T2", or "--range=T1,T2". The inline form is split at
 * its comma into buf.
 */
void opt_two(int argc, char **argv, int *i, const char *inline_val, const char *opt,
	     const char *what, char *buf, size_t cap, const char **a, const char **b)
{
	if (inline_val) {
		const char *comma = strchr(inline_val, ',');
		if (!comma || (size_t)(comma - inline_val) >= cap)
			die("option '%s' needs two values: %s", opt, what);
		memcpy(buf, inline_val, (size_t)(comma - inline_val));
		buf[comma - inline_val] = '\0';
		*a = buf;
		*b = comma + 1;
		return;
	}
	if (*i + 2 >= argc || (argv[*i + 2][0] == '-' && !isdigit((unsigned char)argv[*i + 2][1])))
		die("option '%s' needs two values: %s", opt, what);
	*a = argv[++*i];
	*b = argv[++*i];
}

uint64_t opt_time(const char *s, const char *opt)
{
	uint64_t v;
	if (parse_time_ns(s, 1000, &v) < 0)
		die("invalid time '%s' for '%s'; use a number with s, ms, us or ns (default us)", s,
		    opt);
	return v;
}

static uint64_t size_arg(const char *s, const char *opt)
{
	uint64_t v;
	if (parse_size(s, &v) < 0)
		die("invalid size '%s' for '%s'; use a number of bytes (K, M, G allowed)", s, opt);
	return v;
}

static void add_frames(struct ht__match_list *l, const char *spec, const char *opt)
{
	int rc = ht__match_list_add(l, spec);
	if (rc == HT_ERR_INVALID)
		die("invalid frame '%s' for '%s'; use module!, module!symbol or symbol", spec, opt);
	if (rc < 0)
		die("%s", ht_strerror(rc));
}

void opt_cull_list(struct ht__match_list *l, const char *path)
{
	int rc = ht__match_list_add_file(l, path);
	if (rc >= 0)
		return;
	if (rc == HT_ERR_INVALID && errno == EILSEQ)
		die("'%s' is not a cull list: it is not text (a list has one frame per line)",
		    path);
	if (rc == HT_ERR_INVALID && errno == EFBIG)
		die("'%s' is not a cull list: it is larger than %u MiB", path,
		    HT_MATCH_FILE_MAX >> 20);
	if (rc == HT_ERR_NOT_FOUND || rc == HT_ERR_PERM || rc == HT_ERR_IO)
		die("cannot read cull list '%s': %s", path, strerror(errno));
	die("cannot read cull list '%s': %s", path, ht_strerror(rc));
}

/*
 * The values of a list option (-cullFrames a b c): every following argument up
 * to the next option. A value ending in ".htr" is taken as the trace when none
 * was given yet, so "-cullFrames f app.htr" still works.
 */
static void list_values(int argc, char **argv, int *i, const char *inline_val, const char *opt,
			const char **file, struct ht__query *q, int which)
{
	int n = 0;
	if (inline_val) {
		if (which == 2)
			opt_cull_list(&q->cull, inline_val);
		else
			add_frames(which ? &q->cull : &q->require, inline_val, opt);
		return;
	}
	while (*i + 1 < argc && argv[*i + 1][0] != '-') {
		const char *v = argv[++*i];
		size_t len = strlen(v);
		if (!*file && n && len > 4 && !strcmp(v + len - 4, ".htr")) {
			*file = v;
			continue;
		}
		if (which == 2)
			opt_cull_list(&q->cull, v);
		else
			add_frames(which ? &q->cull : &q->require, v, opt);
		n++;
	}
	if (!n)
		die("option '%s' needs at least one value", opt);
}

static void pid_list(const char *v, struct ht__query *q)
{
	const char *p = v;
	while (*p) {
		char *end;
		errno = 0;
		long pid = strtol(p, &end, 10);
		if (end == p || errno || pid <= 0 || pid > INT32_MAX || (*end && *end != ','))
			die("invalid pid '%s'", v);
		if (ht__query_add_pid(q, (int32_t)pid) < 0)
			die("out of memory");
		p = *end ? end + 1 : end;
	}
}

static uint32_t snapshot_asked;

void snapshot_check(struct ht_reader *r, const char *path, uint32_t n)
{
	if (!n)
		n = snapshot_asked;
	if (!n)
		return;
	uint32_t have;
	int rc = ht__pass_snapshot_count(r, &have);
	if (rc < 0)
		read_failed(path, rc);
	if (!have)
		die("'%s' has no heap snapshots (it was not recorded with --snapshot): drop "
		    "--snapshot",
		    path);
	if (n > have)
		die("'%s' has %u snapshot%s: --snapshot takes 1 to %u ('heaptrail info' lists "
		    "them)",
		    path, have, have == 1 ? "" : "s", have);
}

uint32_t opt_snapshot(const char *v, const char *opt)
{
	char *end;
	unsigned long n = v ? strtoul(v, &end, 10) : 0;
	if (!v || *end || !n || v[0] == '-' || n > UINT32_MAX / 2)
		die("invalid snapshot '%s' for '%s': a number from 1 ('heaptrail info' lists the "
		    "snapshots of a trace)",
		    v ? v : "", opt);
	ht__pass_default_snapshot((uint32_t)n);
	snapshot_asked = (uint32_t)n;
	return (uint32_t)n;
}

bool query_option(const char *name, const char *arg, const char *val, int argc, char **argv, int *i,
		  struct ht__query *q, const char **file)
{
	char buf[128];
	const char *a, *b;
	if (!strcmp(name, "snapshot")) {
		q->snapshot = opt_snapshot(opt_value(argc, argv, i, val, arg), arg);
	} else if (!strcmp(name, "pid")) {
		pid_list(opt_value(argc, argv, i, val, arg), q);
	} else if (!strcmp(name, "range")) {
		opt_two(argc, argv, i, val, arg, "T1 T2", buf, sizeof(buf), &a, &b);
		q->has_range = true;
		q->range_start = opt_time(a, arg);
		q->range_end = opt_time(b, arg);
		if (q->range_end <= q->range_start)
			die("invalid range '%s %s': T2 must be after T1", a, b);
	} else if (!strcmp(name, "lifetime")) {
		opt_two(argc, argv, i, val, arg, "L1 L2", buf, sizeof(buf), &a, &b);
		q->life_min = opt_time(a, arg);
		q->life_max = opt_time(b, arg);
		if (q->life_max <= q->life_min)
			die("invalid lifetime '%s %s': L2 must be greater than L1", a, b);
	} else if (!strcmp(name, "size")) {
		opt_two(argc, argv, i, val, arg, "S1 S2", buf, sizeof(buf), &a, &b);
		q->size_min = size_arg(a, arg);
		q->size_max = size_arg(b, arg);
		if (q->size_max <= q->size_min)
			die("invalid size range '%s %s': S2 must be greater than S1", a, b);
	} else if (!strcmp(name, "requireframes") || !strcmp(name, "requireframe")) {
		list_values(argc, argv, i, val, arg, file, q, 0);
	} else if (!strcmp(name, "cullframes") || !strcmp(name, "cullframe")) {
		list_values(argc, argv, i, val, arg, file, q, 1);
	} else if (!strcmp(name, "culllists") || !strcmp(name, "culllist")) {
		list_values(argc, argv, i, val, arg, file, q, 2);
	} else if (!strcmp(name, "nodefaultcull")) {
		q->default_cull = false;
	} else if (!strcmp(name, "symbols")) {
		q->symbols = 1;
	} else if (!strcmp(name, "nosymbols")) {
		q->symbols = 0;
	} else if (!strcmp(name, "atpeak")) {
		q->at_peak = true;
	} else if (!strcmp(name, "temporary")) {
		q->temporary_only = true;
	} else {
		return false;
	}
	if (q->at_peak && q->has_range)
		die("--at-peak and -range do not go together; the peak is one moment of the whole "
		    "trace");
	return true;
}
