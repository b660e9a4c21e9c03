/*
 * cmd_timeline.c - 'heaptrail timeline': outstanding heap bytes, committed
 * bytes and RSS over time, in total, per process or per heap handle, as a
 * table (text, CSV, JSON) and as an SVG picture. docs/tables.md is the
 * reference; what a point means is in src/analysis/timeline.h.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/heapnames.h"
#include "analysis/match.h"
#include "analysis/pass.h"
#include "analysis/query.h"
#include "analysis/timeline.h"
#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"
#include "cli/table_util.h"
#include "heaptrail/trace.h"

static const char timeline_usage[] =
    "usage: heaptrail timeline FILE [options]\n"
    "\n"
    "Outstanding heap bytes, committed bytes and resident bytes (RSS) at regular\n"
    "points in time, as a table or an SVG picture. docs/tables.md has the details.\n"
    "\n"
    "  --series S[,S...]    heap, commit, rss (default: all three)\n"
    "  --by K               none (default), process or handle (heap per handle,\n"
    "                       commit and rss per process)\n"
    "  --interval T         time between points (default: at most 1000 points);\n"
    "                       microseconds, or with a suffix s, ms, us, ns\n"
    "  --range T1 T2        only [T1, T2) (default: the whole trace)\n"
    "  --pid P[,P...]       only these processes\n"
    "  --format F           text (default), csv or json\n"
    "  --time-unit U        s (default), ms, us or ns for times in text and csv\n"
    "  --peak               each point is the highest value since the previous one\n"
    "                       (spikes shorter than the interval show)\n"
    "  --svg FILE           draw the series into FILE (then no table unless --format);\n"
    "                       a device or FIFO is written in place\n"
    "  --force              replace the --svg FILE if it exists (atomically)\n"
    "\n"
    "examples:\n"
    "  heaptrail timeline app.htr --interval 100ms\n"
    "  heaptrail timeline app.htr --series heap,commit,rss --svg mem.svg\n"
    "  heaptrail timeline app.htr --by process --format csv\n";

struct tl_opts {
	const char *file;
	const char *svg;
	unsigned mask;
	enum ht__tl_by by;
	uint64_t interval;
	bool has_range;
	uint64_t t1, t2;
	enum out_format fmt;
	bool fmt_given;
	bool peak;
	bool force;
	struct tu_unit unit;
	struct ht__query q;
};

struct tl_run {
	struct tl_opts *o;
	struct ht_reader *r;
	struct ht__timeline *tl;
	struct ht__heap_names *names; /* heap.h's names of custom heaps */
};

/* Reads the trace into t->tl through one pass. Dies on a read error. */
static void tl_read(struct tl_run *t)
{
	struct ht__pass *p;
	struct ht__tl_feed *feed = NULL;
	int rc = ht__pass_new(&p, t->r);
	if (rc == 0)
		rc = ht__timeline_attach(t->tl, p, &t->o->q, t->o->mask, t->o->peak, &feed);
	if (rc == 0 && (rc = ht__heap_names_new(&t->names)) == 0)
		rc = ht__heap_names_attach(
		    p, t->names,
		    ht__timeline_points(t->tl)
			? ht__timeline_time(t->tl, ht__timeline_points(t->tl) - 1)
			: UINT64_MAX);
	if (rc > 0)
		rc = 0;
	if (rc == 0)
		rc = ht__pass_run(p);
	ht__pass_free(p);
	ht__tl_feed_free(feed);
	if (rc == HT_ERR_NOMEM)
		die("cannot build the timeline: %s", ht_strerror(rc));
	if (rc < 0)
		read_failed(t->o->file, rc);
	reader_warning(t->r, t->o->file);
	ht__timeline_finish(t->tl);
}

/* A series' column name: "heap", "heap:1234", "heap:1234:0x10". */
static void series_name(struct tl_run *t, const struct ht__tl_series *s, char *buf, size_t len)
{
	const char *kind = ht__tl_kind_name(s->kind);
	if (s->process == UINT32_MAX) {
		snprintf(buf, len, "%s", kind);
		return;
	}
	const struct ht_process *p = ht_reader_process(t->r, s->process);
	int pid = p ? p->pid : -1;
	/* A pid that exec'd has one image per program: the program's name tells them apart. */
	char image[256] = "";
	uint32_t n = ht_reader_process_count(t->r);
	for (uint32_t i = 0; p && i < n; i++) {
		const struct ht_process *o = ht_reader_process(t->r, i);
		if (i != s->process && o && o->pid == pid) {
			snprintf(image, sizeof(image), ":%s", tu_basename(p->exe));
			ht__escape_control(image, sizeof(image));
			break;
		}
	}
	char heap[1100];
	if (s->has_heap)
		snprintf(buf, len, "%s:%d%s:%s", kind, pid, image,
			 ht__heap_label(t->names, s->process, s->heap, heap, sizeof(heap)));
	else
		snprintf(buf, len, "%s:%d%s", kind, pid, image);
}

static void print_table(struct tl_run *t, bool csv)
{
	uint32_t ns = ht__timeline_series_count(t->tl);
	uint64_t np = ht__timeline_points(t->tl);
	char buf[1200];
	const int64_t **vals = calloc(ns ? ns : 1, sizeof(*vals));
	if (!vals)
		die("out of memory");
	/* A sampled trace: its heap series are estimates (commit and RSS are not). */
	uint64_t rate = ht_reader_info(t->r)->sample_rate;
	char note[200];
	if (!csv && sample_note(ht_reader_info(t->r), note, sizeof(note)))
		printf("Note: %s (heap series)\n\n", note);
	if (csv)
		printf("time_%s", t->o->unit.name);
	else
		printf("%14s", t->o->unit.name[0] == 's' ? "Time (s)" : t->o->unit.name);
	for (uint32_t i = 0; i < ns; i++) {
		const struct ht__tl_series *s = ht__timeline_series(t->tl, i, &vals[i]);
		series_name(t, s, buf, sizeof(buf));
		if (csv) {
			putchar(',');
			csv_field(stdout, buf);
		} else {
			printf(" %16s", buf);
		}
	}
	if (csv && rate)
		printf(",sample_rate");
	putchar('\n');
	for (uint64_t p = 0; p < np; p++) {
		uint64_t ts = ht__timeline_time(t->tl, p);
		if (csv) {
			tu_time_exact(buf, sizeof(buf), ts, &t->o->unit);
			printf("%s", buf);
		} else {
			tu_time(buf, sizeof(buf), ts, &t->o->unit);
			printf("%14s", buf);
		}
		for (uint32_t i = 0; i < ns; i++) {
			if (csv) {
				printf(",%" PRId64, vals[i][p]);
			} else {
				tu_size(buf, sizeof(buf), vals[i][p]);
				printf(" %16s", buf);
			}
		}
		if (csv && rate)
			printf(",%" PRIu64, rate);
		putchar('\n');
	}
	free(vals);
}

static void print_json(struct tl_run *t)
{
	struct jw j;
	jw_init(&j, stdout, false);
	jw_obj_begin(&j);
	jw_key(&j, "interval_ns");
	jw_u64(&j, ht__timeline_interval(t->tl));
	jw_key(&j, "start_ns");
	jw_u64(&j, ht__timeline_time(t->tl, 0));
	jw_key(&j, "peak");
	jw_bool(&j, t->o->peak);
	jw_sampling(&j, ht_reader_info(t->r));
	jw_key(&j, "series");
	jw_arr_begin(&j);
	uint64_t np = ht__timeline_points(t->tl);
	for (uint32_t i = 0; i < ht__timeline_series_count(t->tl); i++) {
		const int64_t *v;
		const struct ht__tl_series *s = ht__timeline_series(t->tl, i, &v);
		jw_obj_begin(&j);
		jw_key(&j, "name");
		jw_str(&j, ht__tl_kind_name(s->kind));
		if (s->process != UINT32_MAX) {
			const struct ht_process *p = ht_reader_process(t->r, s->process);
			jw_key(&j, "process");
			jw_obj_begin(&j);
			jw_key(&j, "pid");
			jw_i64(&j, p ? p->pid : -1);
			jw_key(&j, "exe");
			jw_str(&j, p ? p->exe : NULL);
			jw_obj_end(&j);
		}
		if (s->has_heap) {
			jw_key(&j, "handle");
			jw_u64(&j, s->heap);
			jw_key(&j, "heap_name");
			jw_str(&j, ht__heap_name(t->names, s->process, s->heap));
		}
		jw_key(&j, "points");
		jw_arr_begin(&j);
		for (uint64_t k = 0; k < np; k++) {
			jw_arr_begin(&j);
			jw_u64(&j, ht__timeline_time(t->tl, k));
			jw_i64(&j, v[k]);
			jw_arr_end(&j);
		}
		jw_arr_end(&j);
		jw_obj_end(&j);
	}
	jw_arr_end(&j);
	jw_obj_end(&j);
	jw_finish(&j);
}

/* ---- SVG ---- */

/* A step of 1, 2 or 5 x 10^k at least span / max_ticks. */
static double nice_step(double span, int max_ticks)
{
	if (span <= 0)
		return 1;
	double raw = span / max_ticks;
	double mag = pow(10, floor(log10(raw)));
	double steps[] = {1, 2, 5, 10};
	for (int i = 0; i < 4; i++)
		if (steps[i] * mag >= raw)
			return steps[i] * mag;
	return 10 * mag;
}

/* Prints a tick value without needless decimals ("2.5", "10"). */
static void tick_text(char *buf, size_t len, double v, double step)
{
	int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
	if (dec > 9)
		dec = 9;
	snprintf(buf, len, "%.*f", dec, v);
	/* "0.50" -> "0.5", "2.0" -> "2": labels read better without trailing zeros. */
	if (strchr(buf, '.')) {
		char *e = buf + strlen(buf) - 1;
		while (*e == '0')
			*e-- = 0;
		if (*e == '.')
			*e = 0;
	}
	if (!strcmp(buf, "-0"))
		snprintf(buf, len, "0");
}

/* XML text: the markup characters as entities; control bytes and bytes
   that are not UTF-8 (which XML 1.0 allows in no form) as the text \xHH. */
static void svg_escape(FILE *f, const char *s)
{
	for (size_t k; *s; s += k) {
		if (!(k = ht__text_char(s))) {
			fprintf(f, "\\x%02x", (unsigned char)*s);
			k = 1;
			continue;
		}
		switch (*s) {
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '&':
			fputs("&amp;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&apos;", f);
			break;
		default:
			fwrite(s, 1, k, f);
		}
	}
}

static void write_svg(struct tl_run *t, FILE *f)
{
	uint32_t ns = ht__timeline_series_count(t->tl);
	uint64_t np = ht__timeline_points(t->tl);
	const double W = 960, L = 90, R = 30, B = 60, T = 60 + (double)((ns + 2) / 3) * 16;
	const double H = T + 400 + B;
	const double pw = W - L - R, ph = H - T - B;
	static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
					     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
	int64_t maxv = 0;
	for (uint32_t i = 0; i < ns; i++) {
		const int64_t *v;
		ht__timeline_series(t->tl, i, &v);
		for (uint64_t k = 0; k < np; k++)
			if (v[k] > maxv)
				maxv = v[k];
	}
	/* y unit: the largest of B, KiB, MiB, GiB that keeps the top value >= 1. */
	static const char *const yunits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int ui = 0;
	double ydiv = 1;
	while (ui < 4 && (double)maxv >= ydiv * 1024) {
		ydiv *= 1024;
		ui++;
	}
	double ymax_u = maxv > 0 ? (double)maxv / ydiv : 1;
	double ystep = nice_step(ymax_u, 6);
	if (!ui && ystep < 1)
		ystep = 1; /* no fractions of a byte */
	double ytop = ceil(ymax_u / ystep) * ystep;
	if (ytop <= 0)
		ytop = ystep;
	uint64_t t0 = ht__timeline_time(t->tl, 0), t1 = ht__timeline_time(t->tl, np - 1);
	double xspan_s = (double)(t1 - t0) / 1e9;
	if (xspan_s <= 0)
		xspan_s = 1e-9;
	double xstep = nice_step(xspan_s, 10);

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	fprintf(f,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		"viewBox=\"0 0 %.0f %.0f\" "
		"font-family=\"sans-serif\" font-size=\"12\">\n",
		W, H, W, H);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	fprintf(f, "<text x=\"%.0f\" y=\"24\" font-size=\"15\">heaptrail timeline: ", L);
	svg_escape(f, tu_basename(t->o->file));
	fprintf(f, "</text>\n");
	/* Grid and y labels. */
	for (double y = 0; y <= ytop + ystep / 1e6; y += ystep) {
		double py = T + ph - y / ytop * ph;
		char buf[64];
		tick_text(buf, sizeof(buf), y, ystep);
		fprintf(f,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
			L, py, L + pw, py);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s %s</text>\n", L - 6,
			py + 4, buf, yunits[ui]);
	}
	double t0_s = (double)t0 / 1e9;
	for (double x = ceil(t0_s / xstep) * xstep; x <= t0_s + xspan_s + xstep / 1e6; x += xstep) {
		double px = L + (x - t0_s) / xspan_s * pw;
		char buf[64];
		tick_text(buf, sizeof(buf), x, xstep);
		fprintf(f,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n",
			px, T, px, T + ph);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s s</text>\n", px,
			T + ph + 18, buf);
	}
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", L,
		T + ph, L + pw, T + ph);
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", L,
		T, L, T + ph);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time (s)</text>\n",
		L + pw / 2, H - 20);
	fprintf(f,
		"<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\">bytes "
		"(%s)</text>\n",
		T + ph / 2, yunits[ui]);
	/* One polyline per series, then its legend entry. */
	for (uint32_t i = 0; i < ns; i++) {
		const int64_t *v;
		const struct ht__tl_series *s = ht__timeline_series(t->tl, i, &v);
		const char *color = colors[i % (sizeof(colors) / sizeof(colors[0]))];
		char name[1200];
		series_name(t, s, name, sizeof(name));
		fprintf(f, "<polyline class=\"series\" data-name=\"");
		svg_escape(f, name);
		fprintf(f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
		for (uint64_t k = 0; k < np; k++) {
			double px =
			    L + (double)(ht__timeline_time(t->tl, k) - t0) / 1e9 / xspan_s * pw;
			double py = T + ph - ((double)v[k] / ydiv) / ytop * ph;
			fprintf(f, "%s%.1f,%.1f", k ? " " : "", px, py);
		}
		fprintf(f, "\"/>\n");
		/* The legend: three entries a line, above the plot. */
		double lx = L + (double)(i % 3) * 280, ly = 44 + (double)(i / 3) * 16;
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"%s\"/>\n",
			lx, ly - 6, color);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", lx + 20, ly);
		svg_escape(f, name);
		fprintf(f, "</text>\n");
	}
	fprintf(f, "</svg>\n");
}

/* ---- options ---- */

static void parse_series(struct tl_opts *o, const char *v)
{
	if (!v || !*v)
		die("'--series' needs a list: heap, commit, rss");
	char *copy = strdup(v);
	if (!copy)
		die("out of memory");
	o->mask = 0;
	char *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int k = ht__tl_kind_parse(tok);
		if (k < 0)
			die("unknown series '%s'; the series are heap, commit, rss", tok);
		o->mask |= 1u << k;
	}
	free(copy);
	if (!o->mask)
		die("'--series' needs a list: heap, commit, rss");
}

static void parse_args(struct tl_opts *o, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(timeline_usage, stdout);
			exit(0);
		} else if (!strcmp(a, "--series")) {
			parse_series(o, v);
			i++;
		} else if (!strcmp(a, "--by")) {
			if (!v)
				die("'--by' needs none, process or handle");
			if (!strcmp(v, "none"))
				o->by = HT_TL_BY_NONE;
			else if (!strcmp(v, "process"))
				o->by = HT_TL_BY_PROCESS;
			else if (!strcmp(v, "handle"))
				o->by = HT_TL_BY_HANDLE;
			else
				die("unknown split '%s'; use none, process or handle", v);
			i++;
		} else if (!strcmp(a, "--interval")) {
			if (!v || parse_time_ns(v, 1000, &o->interval) < 0 || !o->interval)
				die("invalid interval '%s'; use microseconds or a suffix s, ms, "
				    "us, ns",
				    v ? v : "");
			i++;
		} else if (!strcmp(a, "--range")) {
			if (i + 2 >= argc)
				die("'%s' needs two times, T1 and T2", a);
			tu_parse_range(argv[i + 1], argv[i + 2], &o->t1, &o->t2);
			o->has_range = true;
			i += 2;
		} else if (!strcmp(a, "--pid")) {
			tu_parse_pids(a, v, &o->q);
			i++;
		} else if (!strcmp(a, "--format")) {
			if (parse_format(v, &o->fmt) < 0)
				die("unknown format '%s'; use text, csv or json", v ? v : "");
			o->fmt_given = true;
			i++;
		} else if (!strcmp(a, "--time-unit")) {
			if (tu_parse_unit(v, &o->unit) < 0)
				die("unknown time unit '%s'; use s, ms, us or ns", v ? v : "");
			i++;
		} else if (!strcmp(a, "--peak")) {
			o->peak = true;
		} else if (!strcmp(a, "--force")) {
			o->force = true;
		} else if (!strcmp(a, "--svg")) {
			if (!v)
				die("'--svg' needs a file name");
			cli_check_value(a, v);
			o->svg = v;
			output_not_dash(v, "--svg", false);
			i++;
		} else if (a[0] == '-' && a[1]) {
			cli_unknown_option("timeline", a, timeline_usage, NULL);
		} else if (!o->file) {
			o->file = a;
		} else {
			die("unexpected argument '%s'", a);
		}
	}
	if (!o->file)
		die("no trace file given; usage: heaptrail timeline FILE [options]");
}

int cmd_timeline(int argc, char **argv)
{
	struct tl_opts o = {0};
	o.mask = 1u << HT_TL_HEAP | 1u << HT_TL_COMMIT | 1u << HT_TL_RSS;
	o.fmt = FMT_TEXT;
	tu_parse_unit("s", &o.unit);
	buffer_stdout();
	ht__query_init(&o.q);
	if (argc < 2) {
		fputs(timeline_usage, stderr);
		return 2;
	}
	argv = tu_normalize_args(argc, argv, &argc);
	parse_args(&o, argc, argv);

	struct tl_run t = {.o = &o};
	t.r = open_trace(o.file);
	int rc;
	struct ht__output svg_out;
	FILE *svg = o.svg ? output_begin(&svg_out, o.svg, o.force, 0644) : NULL;
	struct ht__window w = tu_window(t.r, o.has_range, o.t1, o.t2);
	if (w.end == UINT64_MAX) {
		/* An unfinished trace: its end is only known once read. */
		uint64_t end;
		if ((rc = ht__pass_trace_end(t.r, &end)) < 0)
			read_failed(o.file, rc);
		tu_window_check(t.r, o.has_range, &w);
	}
	uint64_t interval =
	    o.interval ? o.interval : ht__timeline_auto_interval(w.start, w.end, 1000);
	rc = ht__timeline_new(&t.tl, w.start, w.end, interval, o.mask, o.by);
	if (rc == HT_ERR_INVALID)
		die("too many points: the interval is too short for the window (at most 10000000 "
		    "points)");
	if (rc < 0)
		die("out of memory");
	if (o.peak)
		ht__timeline_peak(t.tl);
	tl_read(&t);
	if (svg) {
		write_svg(&t, svg);
		output_end(&svg_out, svg);
	}
	if (!o.svg || o.fmt_given) {
		switch (o.fmt) {
		case FMT_TEXT:
			print_table(&t, false);
			break;
		case FMT_CSV:
			print_table(&t, true);
			break;
		case FMT_JSON:
			print_json(&t);
			break;
		}
	}
	ht__timeline_free(t.tl);
	ht__heap_names_free(t.names);
	ht_reader_close(t.r);
	ht__query_release(&o.q);
	tu_args_release();
	return fflush(stdout) ? 1 : 0;
}
