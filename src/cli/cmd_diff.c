/*
 * cmd_diff.c - 'heaptrail diff': two traces, or two windows of one trace,
 * compared by stack, frame or image, rows matched by their symbolized text
 * (src/analysis/diff.h). This file parses options and prints.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/diff.h"
#include "analysis/export.h"
#include "cli/agg_side.h"
#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"
#include "cli/query_opts.h"

static const char usage_text[] =
    "usage: heaptrail diff BASE.htr NEW.htr [options]\n"
    "       heaptrail diff TRACE.htr --base-range T1 T2 --range T3 T4 [options]\n"
    "\n"
    "What changed between two runs or two windows: rows matched by their\n"
    "symbolized frames (so two builds or machines compare), sorted by the\n"
    "absolute byte delta, largest first.\n"
    "\n"
    "options:\n"
    "  -stacks | -frames | -images   rows by culled stack (default), topmost frame\n"
    "                         or its module\n"
    "  --metric M             outstanding (default), total or peak\n"
    "  --base-range T1 T2     the base window (one trace; -range is the new one)\n"
    "  --base-snapshot N      the base is snapshot N of a heap snapshot trace\n"
    "                         (--snapshot M is the new one; default the last)\n"
    "  -top N                 show N rows (default: all)\n"
    "  --format text|csv|json\n"
    "\n";

struct opts {
	const char *files[2];
	int nfiles;
	enum ht__group group;
	enum ht__metric metric;
	enum out_format format;
	bool has_base_range;
	uint32_t base_snapshot; /* --base-snapshot */
	uint64_t base_start, base_end;
	uint64_t top;
};

/* Parses argv into o and q (the query options apply to both sides). */
static void parse_args(int argc, char **argv, struct opts *o, struct ht__query *q)
{
	char name[64], buf[128];
	const char *unused = NULL;
	o->group = HT_GROUP_STACK;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (arg[0] != '-' || !arg[1]) {
			if (o->nfiles == 2)
				die("unexpected argument '%s'; diff takes BASE and NEW", arg);
			o->files[o->nfiles++] = arg;
			continue;
		}
		const char *eq = strchr(arg, '=');
		const char *val = eq ? eq + 1 : NULL;
		const char *a, *b;
		opt_norm_name(arg, eq ? (size_t)(eq - arg) : strlen(arg), name, sizeof(name));
		if (!strcmp(name, "h") || !strcmp(name, "help")) {
			fputs(usage_text, stdout);
			fputs(query_opts_help, stdout);
			fputs("\nexamples:\n"
			      "  heaptrail diff before.htr after.htr\n"
			      "  heaptrail diff before.htr after.htr -images --format csv\n",
			      stdout);
			exit(0);
		} else if (!strcmp(name, "stacks")) {
			o->group = HT_GROUP_STACK;
		} else if (!strcmp(name, "frames")) {
			o->group = HT_GROUP_FRAME;
		} else if (!strcmp(name, "images")) {
			o->group = HT_GROUP_IMAGE;
		} else if (!strcmp(name, "metric")) {
			const char *v = opt_value(argc, argv, &i, val, arg);
			if (ht__metric_parse(v, &o->metric) < 0)
				die("unknown metric '%s'; use outstanding, total or peak", v);
		} else if (!strcmp(name, "baserange")) {
			opt_two(argc, argv, &i, val, arg, "T1 T2", buf, sizeof(buf), &a, &b);
			o->has_base_range = true;
			o->base_start = opt_time(a, arg);
			o->base_end = opt_time(b, arg);
			if (o->base_end <= o->base_start)
				die("invalid range '%s %s': T2 must be after T1", a, b);
		} else if (!strcmp(name, "basesnapshot")) {
			const char *v = opt_value(argc, argv, &i, val, arg);
			char *end;
			unsigned long n = strtoul(v, &end, 10);
			if (*end || !n || v[0] == '-' || n > UINT32_MAX / 2)
				die("invalid snapshot '%s' for '%s': a number from 1", v, arg);
			o->base_snapshot = (uint32_t)n;
		} else if (!strcmp(name, "top")) {
			const char *v = opt_value(argc, argv, &i, val, arg);
			char *end;
			o->top = strtoull(v, &end, 10);
			if (*end || !o->top)
				die("invalid count '%s' for '%s'; use a number above 0", v, arg);
		} else if (!strcmp(name, "format")) {
			const char *v = opt_value(argc, argv, &i, val, arg);
			if (parse_format(v, &o->format) < 0)
				die("unknown format '%s'; use text, csv or json", v);
		} else if (!query_option(name, arg, val, argc, argv, &i, q, &unused)) {
			cli_unknown_option("diff", arg, usage_text, query_opts_help);
		}
	}
	if (unused && o->nfiles < 2)
		o->files[o->nfiles++] = unused;
	if (o->nfiles == 0)
		die("no traces given; usage: heaptrail diff BASE.htr NEW.htr");
	if (o->nfiles == 1 && !o->has_base_range && !o->base_snapshot)
		die("one trace needs --base-range T1 T2 (and -range T3 T4), or --base-snapshot N "
		    "(and --snapshot M); or give BASE and NEW");
	if (o->metric == HT_METRIC_PEAK) {
		if (q->has_range || o->has_base_range)
			die("the peak is one moment of the whole trace; drop the ranges or use "
			    "another metric");
		q->at_peak = true;
	}
}

static void side_setup(struct agg_side *s, const struct opts *o)
{
	s->q.group = o->group;
	s->q.sort = o->metric == HT_METRIC_TOTAL ? HT_SORT_ST : HT_SORT_SO;
	s->q.top = UINT64_MAX;
	s->q.top_given = true;
	agg_side_run(s, "comparing");
}

static const char *group_word(enum ht__group g)
{
	return g == HT_GROUP_FRAME ? "frame" : g == HT_GROUP_IMAGE ? "image" : "stack";
}

static void print_text(const struct ht__diff *d, size_t n)
{
	printf("%12s %12s %12s %10s %10s %10s\n", "Delta bytes", "Base bytes", "New bytes",
	       "Delta#", "Base#", "New#");
	const struct ht__diff_item *t = &d->totals;
	printf("%+12" PRId64 " %12" PRIu64 " %12" PRIu64 " %+10" PRId64 " %10" PRIu64 " %10" PRIu64
	       "  TOTAL\n",
	       t->delta_bytes, t->base_bytes, t->new_bytes, t->delta_count, t->base_count,
	       t->new_count);
	for (size_t i = 0; i < n; i++) {
		const struct ht__diff_item *it = &d->items[i];
		printf("%+12" PRId64 " %12" PRIu64 " %12" PRIu64 " %+10" PRId64 " %10" PRIu64
		       " %10" PRIu64 "  ",
		       it->delta_bytes, it->base_bytes, it->new_bytes, it->delta_count,
		       it->base_count, it->new_count);
		/* A stack: its first frame on the row, the others indented below. */
		for (const char *p = it->key; *p; p++) {
			if (*p == '\n')
				printf("\n%*s", 72, "");
			else
				putchar(*p);
		}
		putchar('\n');
	}
	if (n < d->count)
		printf("(%zu of %zu rows shown)\n", n, d->count);
}

static void print_csv(const struct ht__diff *d, size_t n)
{
	printf("delta_bytes,base_bytes,new_bytes,delta_count,base_count,new_count,%s\n",
	       group_word(d->group));
	for (size_t i = 0; i < n; i++) {
		const struct ht__diff_item *it = &d->items[i];
		printf("%" PRId64 ",%" PRIu64 ",%" PRIu64 ",%" PRId64 ",%" PRIu64 ",%" PRIu64 ",",
		       it->delta_bytes, it->base_bytes, it->new_bytes, it->delta_count,
		       it->base_count, it->new_count);
		/* Frames innermost first, "a <- b <- c", as every CSV stack. */
		char *k = NULL;
		size_t klen = 0;
		FILE *m = open_memstream(&k, &klen);
		if (!m)
			die("out of memory");
		for (const char *p = it->key; *p; p++)
			*p == '\n' ? fputs(" <- ", m) : fputc(*p, m);
		fclose(m);
		csv_field(stdout, k);
		free(k);
		putchar('\n');
	}
}

static void print_json(const struct ht__diff *d, size_t n, uint64_t base_rate, uint64_t new_rate)
{
	struct jw j;
	jw_init(&j, stdout, true);
	jw_obj_begin(&j);
	/* Sampled traces (docs/json-output.md): their side is estimates. */
	if (base_rate || new_rate) {
		jw_key(&j, "base_sample_rate");
		jw_u64(&j, base_rate);
		jw_key(&j, "new_sample_rate");
		jw_u64(&j, new_rate);
	}
	jw_key(&j, "items");
	jw_arr_begin(&j);
	for (size_t i = 0; i < n; i++) {
		const struct ht__diff_item *it = &d->items[i];
		jw_obj_begin(&j);
		jw_key(&j, group_word(d->group));
		if (d->group == HT_GROUP_STACK) {
			jw_arr_begin(&j);
			const char *p = it->key;
			for (;;) {
				const char *nl = strchr(p, '\n');
				size_t len = nl ? (size_t)(nl - p) : strlen(p);
				char *f = strndup(p, len);
				if (!f)
					die("out of memory");
				jw_str(&j, f);
				free(f);
				if (!nl)
					break;
				p = nl + 1;
			}
			jw_arr_end(&j);
		} else {
			jw_str(&j, it->key);
		}
		jw_key(&j, "base_bytes");
		jw_u64(&j, it->base_bytes);
		jw_key(&j, "new_bytes");
		jw_u64(&j, it->new_bytes);
		jw_key(&j, "delta_bytes");
		jw_i64(&j, it->delta_bytes);
		jw_key(&j, "base_count");
		jw_u64(&j, it->base_count);
		jw_key(&j, "new_count");
		jw_u64(&j, it->new_count);
		jw_key(&j, "delta_count");
		jw_i64(&j, it->delta_count);
		jw_obj_end(&j);
	}
	jw_arr_end(&j);
	jw_obj_end(&j);
	jw_finish(&j);
}

int cmd_diff(int argc, char **argv)
{
	struct opts o = {0};
	struct agg_side base = {0}, cur = {0};
	ht__query_init(&cur.q);
	parse_args(argc, argv, &o, &cur.q);
	/* The base takes the same query options: parse them again, then its range. */
	struct opts again = {0};
	ht__query_init(&base.q);
	parse_args(argc, argv, &again, &base.q);
	if (o.base_snapshot)
		base.q.snapshot = o.base_snapshot;
	if (o.has_base_range) {
		base.q.has_range = true;
		base.q.range_start = o.base_start;
		base.q.range_end = o.base_end;
	}
	base.path = o.files[0];
	cur.path = o.files[o.nfiles - 1];
	side_setup(&base, &o);
	side_setup(&cur, &o);
	struct ht__diff d;
	int rc = ht__diff_run(&d, base.agg, &base.res, cur.agg, &cur.res, o.metric);
	if (rc < 0)
		die("%s", ht_strerror(rc));
	size_t n = o.top && o.top < d.count ? (size_t)o.top : d.count;
	uint64_t base_rate = ht_reader_info(base.r)->sample_rate;
	uint64_t new_rate = ht_reader_info(cur.r)->sample_rate;
	char note[200];
	if (o.format == FMT_TEXT && sample_note(ht_reader_info(base.r), note, sizeof(note)))
		printf("NOTE: base: %s\n", note);
	if (o.format == FMT_TEXT && sample_note(ht_reader_info(cur.r), note, sizeof(note)))
		printf("NOTE: new: %s\n", note);
	if (o.format == FMT_TEXT && (base_rate || new_rate))
		putchar('\n');
	switch (o.format) {
	case FMT_JSON:
		print_json(&d, n, base_rate, new_rate);
		break;
	case FMT_CSV:
		print_csv(&d, n);
		break;
	default:
		print_text(&d, n);
		break;
	}
	fflush(stdout);
	ht__diff_release(&d);
	agg_side_release(&base);
	agg_side_release(&cur);
	return ferror(stdout) ? 1 : 0;
}
