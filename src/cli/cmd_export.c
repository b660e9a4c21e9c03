/*
 * cmd_export.c - 'heaptrail export': a trace in another tool's format
 * (collapsed stacks, pprof, massif, Chrome trace JSON for Perfetto, SQLite).
 * The writers are the analysis core's (src/analysis/export.h); this file
 * parses options, opens the output and reports.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/aggregate.h"
#include "analysis/export.h"
#include "analysis/pass.h"
#include "analysis/summary.h"
#include "cli/builtin.h"
#include "cli/agg_side.h"
#include "format/output.h"
#include "cli/common.h"
#include "cli/opt.h"
#include "cli/query_opts.h"

static const char usage_text[] =
    "usage: heaptrail export FILE --format FORMAT -o OUT [options]\n"
    "\n"
    "Write a trace in another tool's format (docs/export.md):\n"
    "  collapsed   one line a stack, root first, ';'-joined, a space, the bytes\n"
    "              (flamegraph.pl, speedscope)\n"
    "  pprof       gzipped profile.proto with Go's heap sample types\n"
    "              (go tool pprof, Pyroscope, Parca)\n"
    "  massif      valgrind's massif.out: snapshots over time and the tree at\n"
    "              the peak (ms_print, massif-visualizer)\n"
    "  perfetto    Chrome trace JSON: heap, committed and RSS counters per\n"
    "              process (ui.perfetto.dev, chrome://tracing)\n"
    "  sqlite      a database: allocations, commits, rss, threads, processes,\n"
    "              modules, frames, stacks (sqlite3, DuckDB, pandas); not to '-'\n"
    "\n"
    "options:\n"
    "  --format F             collapsed, pprof, massif, perfetto or sqlite\n"
    "  -o OUT                 the file to write; '-' for standard output\n"
    "  --force                replace OUT when it is a file that exists (a device\n"
    "                         or FIFO is written in place; docs/outputs.md)\n"
    "  --metric M             collapsed, pprof: outstanding (default: live at the\n"
    "                         end of the window), total (every allocation) or peak\n"
    "                         (live when the heap was largest); massif always has\n"
    "                         the tree at the peak, perfetto and sqlite all blocks\n"
    "  --modules              collapsed: keep the 'module!' prefix of frames\n"
    "  --base OTHER.htr       pprof: write this trace minus OTHER (same options),\n"
    "                         as pprof's -diff_base shows it\n"
    "\n";

enum format { F_NONE, F_COLLAPSED, F_PPROF, F_SQLITE, F_MASSIF, F_PERFETTO };

struct opts {
	const char *file, *out, *base;
	enum format format;
	enum ht__metric metric;
	bool modules, force;
};

static const struct {
	const char *name;
	enum format f;
} formats[] = {{"collapsed", F_COLLAPSED},
	       {"pprof", F_PPROF},
	       {"sqlite", F_SQLITE},
	       {"massif", F_MASSIF},
	       {"perfetto", F_PERFETTO}};

static void parse_args(int argc, char **argv, struct opts *o, struct ht__query *q)
{
	char name[64];
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (arg[0] != '-' || !arg[1]) {
			if (o->file)
				die("unexpected argument '%s'; one trace at a time", arg);
			o->file = arg;
			continue;
		}
		const char *eq = strchr(arg, '=');
		const char *val = eq ? eq + 1 : NULL;
		opt_norm_name(arg, eq ? (size_t)(eq - arg) : strlen(arg), name, sizeof(name));
		if (!strcmp(name, "h") || !strcmp(name, "help")) {
			fputs(usage_text, stdout);
			fputs(query_opts_help, stdout);
			fputs("\nexamples:\n"
			      "  heaptrail export app.htr --format collapsed -o app.folded\n"
			      "  heaptrail export app.htr --format pprof -o app.pb.gz --at-peak\n",
			      stdout);
			exit(0);
		} else if (!strcmp(name, "format")) {
			const char *v = opt_value(argc, argv, &i, val, arg);
			for (size_t k = 0; k < sizeof(formats) / sizeof(formats[0]); k++)
				if (!strcmp(v, formats[k].name))
					o->format = formats[k].f;
			if (o->format == F_NONE)
				die("unknown export format '%s'; use collapsed, pprof, massif, "
				    "perfetto or sqlite",
				    v);
		} else if (!strcmp(name, "o") || !strcmp(name, "output")) {
			o->out = opt_value(argc, argv, &i, val, arg);
		} else if (!strcmp(name, "metric")) {
			const char *v = opt_value(argc, argv, &i, val, arg);
			if (ht__metric_parse(v, &o->metric) < 0)
				die("unknown metric '%s'; use outstanding, total or peak", v);
		} else if (!strcmp(name, "modules")) {
			o->modules = true;
		} else if (!strcmp(name, "force")) {
			o->force = true;
		} else if (!strcmp(name, "base")) {
			o->base = opt_value(argc, argv, &i, val, arg);
		} else if (!query_option(name, arg, val, argc, argv, &i, q, &o->file)) {
			cli_unknown_option("export", arg, usage_text, query_opts_help);
		}
	}
	if (!o->file)
		die("no trace given; usage: heaptrail export FILE --format FORMAT -o OUT");
	if (o->format == F_NONE)
		die("no format given; use --format collapsed, pprof, massif, perfetto or sqlite");
	if (!o->out)
		die("no output given; use -o FILE, or -o - for standard output");
	if (o->format == F_SQLITE && !strcmp(o->out, "-"))
		die("a SQLite database cannot go to standard output; give -o FILE");
	if (o->base && o->format != F_PPROF)
		die("--base goes with --format pprof only");
	if (o->metric == HT_METRIC_PEAK)
		q->at_peak = true;
	if (q->at_peak && q->has_range)
		die("the peak is one moment of the whole trace; drop -range or use another metric");
}

/* One trace by culled stack, every stack kept, largest first by the metric. */
static void stack_side(struct agg_side *s, enum ht__metric m)
{
	s->q.group = HT_GROUP_STACK;
	s->q.sort = m == HT_METRIC_TOTAL ? HT_SORT_ST : HT_SORT_SO;
	s->q.top = UINT64_MAX;
	s->q.top_given = true;
	agg_side_run(s, "exporting");
}

/* massif and perfetto: their own passes over the whole trace. */
static void export_timed(const struct opts *o, struct agg_side *s, struct ht__output *output,
			 FILE *out)
{
	int rc;
	s->r = open_trace(s->path);
	if (s->q.has_range)
		die("%s shows the whole trace; drop -range",
		    o->format == F_MASSIF ? "massif" : "perfetto");
	if ((rc = ht__query_prepare(&s->q)) < 0)
		die("%s", ht_strerror(rc));
	struct progress prog;
	progress_init(&prog, "exporting");
	ht__export_progress_fn fn = progress_wanted() ? progress_show : NULL;
	if (o->format == F_MASSIF)
		rc = ht__export_massif(out, s->r, &s->q, fn, &prog);
	else
		rc = ht__export_perfetto(out, s->r, &s->q, fn, &prog);
	progress_done(&prog);
	if (rc < 0 && rc != HT_ERR_IO)
		die("cannot export '%s': %s", s->path, ht_strerror(rc));
	trace_warnings(s->r, s->path);
	if (output)
		output_end(output, out);
	else if (fflush(stdout) != 0 || ferror(stdout))
		die("cannot write to standard output: %s", strerror(errno));
	agg_side_release(s);
}

/* SQLite writes by name: into the output's temporary file, renamed at the end. */
static void export_sqlite(const struct opts *o, struct agg_side *s, struct ht__output *output,
			  FILE *out)
{
	if (!ht__output_is_file(output))
		die("'%s' is not a regular file; SQLite writes a database file", o->out);
	int rc;
	s->r = open_trace(s->path);
	if ((rc = ht__query_prepare(&s->q)) < 0)
		die("%s", ht_strerror(rc));
	struct progress prog;
	progress_init(&prog, "exporting");
	char why[512];
	rc = ht__export_sqlite(output->tmp ? output->tmp : output->path, s->r, &s->q,
			       progress_wanted() ? progress_show : NULL, &prog, why, sizeof(why));
	progress_done(&prog);
	if (rc < 0)
		die("cannot export '%s' to '%s': %s", s->path, o->out, why);
	trace_warnings(s->r, s->path);
	agg_side_range_check(&s->q, s->r, s->path);
	output_end(output, out);
	agg_side_release(s);
}

/* pprof's samples per process: one aggregation per pid, all in one pass. */
#define MAX_LABELLED_PIDS 64

struct by_pid {
	struct ht__query *qs;
	struct ht__agg **aggs;
	struct ht__agg_result *res;
	struct ht__pprof_side *sides;
	size_t n;
};

static void by_pid_release(struct by_pid *b)
{
	for (size_t i = 0; i < b->n; i++) {
		if (b->aggs[i]) {
			ht__agg_result_release(&b->res[i]);
			ht__agg_free(b->aggs[i]);
		}
	}
	free(b->qs);
	free(b->aggs);
	free(b->res);
	free(b->sides);
}

static const char *build_id_of(const struct ht_reader *r, const char *exe)
{
	for (uint32_t i = 0; exe && i < ht_reader_module_count(r); i++) {
		const struct ht_module *m = ht_reader_module(r, i);
		if (m->path && !strcmp(m->path, exe))
			return m->build_id;
	}
	return NULL;
}

/*
 * The sides of s for pprof: one per pid q keeps (labelled pid, exe and
 * build-id), from one pass; a single unlabelled side when there are more
 * than MAX_LABELLED_PIDS of them. s stays open (its reader) until released.
 */
static void pprof_sides(struct agg_side *s, enum ht__metric m, struct by_pid *b)
{
	int rc;
	s->r = open_trace(s->path);
	s->q.group = HT_GROUP_STACK;
	s->q.sort = m == HT_METRIC_TOTAL ? HT_SORT_ST : HT_SORT_SO;
	s->q.top = UINT64_MAX;
	s->q.top_given = true;
	if ((rc = ht__query_prepare(&s->q)) < 0)
		die("%s", ht_strerror(rc));
	int32_t pids[MAX_LABELLED_PIDS];
	const char *exes[MAX_LABELLED_PIDS];
	size_t n = 0;
	bool too_many = false;
	for (uint32_t p = 0; p < ht_reader_process_count(s->r); p++) {
		const struct ht_process *pr = ht_reader_process(s->r, p);
		if (!ht__query_wants_pid(&s->q, pr->pid))
			continue;
		size_t k = 0;
		while (k < n && pids[k] != pr->pid)
			k++;
		if (k == n && n == MAX_LABELLED_PIDS) {
			too_many = true;
			break;
		}
		pids[k] = pr->pid;
		exes[k] = pr->exe; /* the last image of the pid names it */
		n = k == n ? n + 1 : n;
	}
	if (too_many || !n) {
		if (too_many)
			warning("'%s' has more than %d processes: pprof samples get no pid and exe "
				"labels (choose processes with -pid)",
				s->path, MAX_LABELLED_PIDS);
		ht_reader_close(s->r);
		s->r = NULL;
		agg_side_run(s, "exporting");
		b->n = 1;
		b->qs = NULL;
		b->aggs = calloc(1, sizeof(*b->aggs));
		b->res = calloc(1, sizeof(*b->res));
		b->sides = calloc(1, sizeof(*b->sides));
		if (!b->aggs || !b->res || !b->sides)
			die("out of memory");
		b->sides[0] = (struct ht__pprof_side){s->agg, &s->res, s->r, 0, NULL, NULL};
		b->aggs[0] = NULL; /* owned by s */
		return;
	}
	if (s->q.at_peak && (rc = ht__summary_at_peak(&s->q, s->r, NULL)) < 0)
		read_failed(s->path, rc);
	b->n = n;
	b->qs = calloc(n, sizeof(*b->qs));
	b->aggs = calloc(n, sizeof(*b->aggs));
	b->res = calloc(n, sizeof(*b->res));
	b->sides = calloc(n, sizeof(*b->sides));
	struct ht__pass *p;
	if (!b->qs || !b->aggs || !b->res || !b->sides || ht__pass_new(&p, s->r) < 0)
		die("out of memory");
	for (size_t i = 0; i < n; i++) {
		/* The same query for one pid: the lists are shared, read-only. */
		b->qs[i] = s->q;
		b->qs[i].pids = &pids[i];
		b->qs[i].pid_count = 1;
		b->qs[i].pid_alloc = 0;
		if (ht__agg_new(&b->aggs[i], &b->qs[i], s->r) < 0 ||
		    ht__agg_attach(b->aggs[i], p) < 0)
			die("out of memory");
	}
	struct progress prog;
	progress_init(&prog, "exporting");
	ht__pass_progress(p, progress_wanted() ? progress_show : NULL, &prog);
	rc = ht__pass_run(p);
	progress_done(&prog);
	ht__pass_free(p);
	if (rc < 0)
		read_failed(s->path, rc);
	trace_warnings(s->r, s->path);
	agg_side_range_check(&s->q, s->r, s->path);
	for (size_t i = 0; i < n; i++) {
		if ((rc = ht__agg_finish(b->aggs[i], &b->res[i])) < 0)
			die("%s", ht_strerror(rc));
		/* pids[] dies with this frame: the queries no longer need it. */
		b->qs[i].pids = NULL;
		b->qs[i].pid_count = 0;
		b->sides[i] = (struct ht__pprof_side){
		    b->aggs[i], &b->res[i], s->r, pids[i], exes[i], build_id_of(s->r, exes[i])};
	}
}

int cmd_export(int argc, char **argv)
{
	struct opts o = {0};
	struct agg_side cur = {0}, base = {0};
	ht__query_init(&cur.q);
	parse_args(argc, argv, &o, &cur.q);
	cur.path = o.file;
	if (o.base) {
		/* The base takes the same query options: parse them again. */
		struct opts again = {0};
		ht__query_init(&base.q);
		parse_args(argc, argv, &again, &base.q);
		base.path = o.base;
	}
	/* Opened first, so a refusal (an existing file without --force) comes
	   before the work; see docs/outputs.md. */
	struct ht__output output;
	bool to_stdout = !strcmp(o.out, "-");
	FILE *out = to_stdout ? stdout : output_begin(&output, o.out, o.force, 0644);
	if (o.format == F_MASSIF || o.format == F_PERFETTO) {
		export_timed(&o, &cur, to_stdout ? NULL : &output, out);
		return 0;
	}
	if (o.format == F_SQLITE) {
		export_sqlite(&o, &cur, &output, out);
		return 0;
	}
	int rc = 0;
	if (o.format == F_PPROF) {
		struct by_pid c = {0}, b = {0};
		pprof_sides(&cur, o.metric, &c);
		if (o.base)
			pprof_sides(&base, o.metric, &b);
		rc = ht__export_pprof(out, c.sides, c.n, b.sides, b.n, o.metric, &cur.q);
		by_pid_release(&c);
		by_pid_release(&b);
	} else {
		stack_side(&cur, o.metric);
		/* The format has no place to say its bytes are estimates: stderr does. */
		char note[256];
		if (sample_note(ht_reader_info(cur.r), note, sizeof(note)))
			fprintf(stderr, "heaptrail: note: %s\n", note);
		rc = ht__export_collapsed(out, cur.agg, &cur.res, cur.r, o.metric, o.modules);
		/* An empty file alone reads as a failure (flamegraph.pl: "No stack
		   counts found"): say why it is empty. */
		size_t rows = 0;
		for (size_t i = 0; i < cur.res.count; i++)
			rows += ht__metric_bytes(&cur.res.items[i].c, o.metric) != 0;
		if (!rows && rc >= 0)
			fprintf(
			    stderr,
			    "heaptrail: note: the output is empty: no stack holds bytes by "
			    "--metric %s%s\n",
			    ht__metric_name(o.metric),
			    o.metric == HT_METRIC_OUTSTANDING
				? " (no block the filters keep is live at the end of the window; "
				  "--metric total counts every allocation)"
				: "");
	}
	if (rc < 0 && rc != HT_ERR_IO)
		die("%s", ht_strerror(rc));
	if (to_stdout) {
		if (fflush(stdout) != 0 || ferror(stdout))
			die("cannot write to standard output: %s", strerror(errno));
	} else {
		output_end(&output, out); /* a write error dies there, naming the file */
	}
	agg_side_release(&cur);
	if (o.base)
		agg_side_release(&base);
	return 0;
}
