/*
 * cmd_report.c - 'heaptrail report': one self-contained HTML file with the
 * graphs, the window tables, flame graphs and the xperf view of a trace. The
 * page is built at build time (src/report/) into share/heaptrail/ next to the
 * binary; this command writes that page with the trace's data inline, in the
 * JSON described in docs/report.md.
 */
#define _GNU_SOURCE /* asprintf, fopencookie */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/heapnames.h"
#include "analysis/lifetime.h"
#include "analysis/match.h"
#include "analysis/pass.h"
#include "analysis/reportdata.h"
#include "base/paths.h"
#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/query_opts.h"
#include "cli/opt.h"
#include "heaptrail/trace.h"

static const char report_usage[] =
    "usage: heaptrail report FILE [-o OUT.html] [options]\n"
    "\n"
    "Writes one HTML file that opens in any current browser without network\n"
    "access: memory graphs over time, drag to select a window, the Heap\n"
    "Allocations and Commit Lifetimes tables of that window, flame graphs and\n"
    "the top stacks, frames and images.\n"
    "\n"
    "  -o, --output FILE    the HTML file (default: FILE with .html for .htr); a\n"
    "                       device or FIFO is written in place (docs/outputs.md)\n"
    "  --exact N            heap lifetimes kept exactly (default 250000); the\n"
    "                       sites with the fewest bytes beyond that are bucketed\n"
    "  --points N           points of each graph (default 2000)\n"
    "  --snapshot N         a heap snapshot trace: snapshot N (default: the last)\n"
    "  --all-snapshots      a heap snapshot trace: one page per snapshot, OUT with\n"
    "                       .N before .html, each linking to the others\n"
    "  --no-default-cull    keep allocator frames on the stacks\n"
    "  --force              replace OUT if it exists (atomically)\n"
    "  -h, --help           show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail report app.htr\n"
    "  heaptrail report big.htr --points 500 --exact 50000\n"
    "  heaptrail report snap.htr --all-snapshots   # snap.1.html, snap.2.html, ...\n";

#define DATA_MARKER "/*@@HEAPTRAIL_DATA@@*/"

/* Where the bundled page is: share/heaptrail/report.html (base/paths.h);
 *found says whether it is there (else path is the first place looked). */
static char *template_path(int *found)
{
	char path[PATH_MAX];
	*found = ht__share_path("report.html", path, sizeof(path)) == 0;
	char *out = strdup(path);
	if (!out)
		die("out of memory");
	return out;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	struct stat st;
	char *buf = NULL;
	if (fstat(fileno(f), &st) == 0 && (buf = malloc((size_t)st.st_size + 1))) {
		*len = fread(buf, 1, (size_t)st.st_size, f);
		buf[*len] = 0;
	}
	fclose(f);
	return buf;
}

/*
 * The JSON goes inside a <script> element: escaping every '<' (which only
 * occurs inside JSON strings) keeps "</script>" in a symbol name from ending
 * it early, and stays valid JSON.
 */
static ssize_t escape_write(void *cookie, const char *buf, size_t size)
{
	FILE *out = cookie;
	size_t start = 0;
	for (size_t i = 0; i < size; i++) {
		if (buf[i] != '<')
			continue;
		if (i > start && fwrite(buf + start, 1, i - start, out) != i - start)
			return -1;
		if (fputs("\\u003c", out) < 0)
			return -1;
		start = i + 1;
	}
	if (size > start && fwrite(buf + start, 1, size - start, out) != size - start)
		return -1;
	return (ssize_t)size;
}

static void u64_array(struct jw *j, const char *key, const uint64_t *v, uint32_t n)
{
	jw_key(j, key);
	jw_arr_begin(j);
	for (uint32_t i = 0; i < n; i++)
		jw_u64(j, v[i]);
	jw_arr_end(j);
}

/* The pages of --all-snapshots: page[i] (a file name) shows snapshot i + 1. */
struct snap_pages {
	char **page;
	uint32_t n;
};

static void write_trace(struct jw *j, struct ht_reader *r, const char *file,
			const struct ht__report_data *d, const struct snap_pages *pages)
{
	const struct ht_trace_info *info = ht_reader_info(r);
	const char *base = strrchr(file, '/');
	jw_key(j, "trace");
	jw_obj_begin(j);
	jw_key(j, "file");
	jw_str(j, base ? base + 1 : file);
	jw_key(j, "argv");
	jw_arr_begin(j);
	for (uint32_t i = 0; i < info->argc; i++)
		jw_str(j, info->argv[i]);
	jw_arr_end(j);
	jw_key(j, "hostname");
	jw_str(j, info->hostname);
	jw_key(j, "start_realtime_ns");
	jw_u64(j, info->start_realtime_ns);
	jw_key(j, "duration_ns");
	jw_u64(j, d->duration_ns);
	jw_key(j, "events");
	jw_u64(j, d->summary.event_count);
	jw_key(j, "events_lost");
	jw_u64(j, info->events_lost);
	/* Heap snapshot traces: the snapshots, and the one the heap data shows
	   (--snapshot N; src/analysis/pass.h delivers it as live blocks). */
	jw_key(j, "snapshot");
	jw_u64(j, d->snapshot);
	jw_key(j, "snapshot_ts_ns");
	jw_u64(j, d->snapshot_ts);
	jw_key(j, "snapshots");
	jw_arr_begin(j);
	for (uint32_t i = 0; i < d->summary.nsnaps; i++) {
		const struct ht__summary_snap *sn = &d->summary.snaps[i];
		jw_obj_begin(j);
		jw_key(j, "number");
		jw_u64(j, sn->number);
		jw_key(j, "ts_ns");
		jw_u64(j, sn->ts);
		jw_key(j, "live_bytes");
		jw_u64(j, sn->live_bytes);
		jw_key(j, "live_count");
		jw_u64(j, sn->live_count);
		jw_key(j, "alloc_bytes");
		jw_u64(j, sn->alloc_bytes);
		jw_key(j, "alloc_count");
		jw_u64(j, sn->alloc_count);
		jw_key(j, "exit_pid"); /* 0: not taken at a process's exit */
		jw_i64(j, sn->exit_pid);
		jw_key(j, "at_exec"); /* that image's end was an exec */
		jw_bool(j, sn->at_exec);
		/* Its page, when --all-snapshots writes one for each. */
		jw_key(j, "page");
		const char *page =
		    pages && sn->number - 1 < pages->n ? pages->page[sn->number - 1] : NULL;
		const char *slash = page ? strrchr(page, '/') : NULL;
		jw_str(j, slash ? slash + 1 : page);
		jw_obj_end(j);
	}
	jw_arr_end(j);
	jw_key(j, "complete");
	jw_bool(j, info->flags & HT_TRACEF_COMPLETE);
	jw_key(j, "symbols");
	jw_bool(j, info->flags & HT_TRACEF_SYMBOLS);
	jw_key(j, "truncated");
	jw_bool(j, info->flags & HT_TRACEF_TRUNCATED);
	jw_key(j, "lossy");
	jw_bool(j, info->flags & HT_TRACEF_LOSSY);
	jw_sampling(j, info);
	jw_obj_end(j);
}

static void write_totals(struct jw *j, const struct ht__report_data *d)
{
	const struct ht__summary_counts *t = &d->summary.total;
	const struct {
		const char *k;
		uint64_t v;
	} f[] = {
	    {"heap_allocs", t->alloc_calls},
	    {"heap_frees", t->free_calls},
	    {"heap_reallocs", d->summary.events[HT_EV_REALLOC]},
	    {"heap_alloc_bytes", t->alloc_bytes},
	    {"heap_peak_bytes", t->peak_bytes},
	    {"heap_peak_ns", t->peak_ts},
	    {"heap_leaked_count", t->leaked_count},
	    {"heap_leaked_bytes", t->leaked_bytes},
	    {"unknown_frees", t->unknown_frees},
	    {"inherited_frees", t->inherited_frees},
	    {"commit_count", t->commits},
	    {"commit_bytes", t->commit_bytes},
	    {"commit_peak_bytes", t->committed_peak_bytes},
	    {"commit_peak_ns", t->committed_peak_ts},
	    {"rss_peak_bytes", d->rss_peak},
	    {"rss_peak_ns", d->rss_peak_ts},
	};
	jw_key(j, "totals");
	jw_obj_begin(j);
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		jw_key(j, f[i].k);
		jw_u64(j, f[i].v);
	}
	jw_obj_end(j);
}

static void write_processes(struct jw *j, struct ht_reader *r)
{
	jw_key(j, "processes");
	jw_arr_begin(j);
	for (uint32_t i = 0; i < ht_reader_process_count(r); i++) {
		const struct ht_process *p = ht_reader_process(r, i);
		char status[64];
		if (p->flags & HT_PROCF_SIGNALED)
			snprintf(status, sizeof(status), "signal %d", p->signal);
		else if (p->flags & HT_PROCF_EXITED)
			snprintf(status, sizeof(status), "exit %d", p->exit_code);
		else if (p->flags & HT_PROCF_EXECED)
			snprintf(status, sizeof(status), "exec");
		else
			snprintf(status, sizeof(status), "running at the end");
		jw_obj_begin(j);
		jw_key(j, "pid");
		jw_i64(j, p->pid);
		jw_key(j, "ppid");
		jw_i64(j, p->ppid);
		jw_key(j, "exe");
		jw_str(j, p->exe);
		jw_key(j, "argv");
		jw_arr_begin(j);
		for (uint32_t k = 0; k < p->argc; k++)
			jw_str(j, p->argv[k]);
		jw_arr_end(j);
		jw_key(j, "start_ns");
		jw_u64(j, p->start_ts);
		jw_key(j, "end_ns");
		jw_u64(j, p->end_ts);
		jw_key(j, "status");
		jw_str(j, status);
		jw_obj_end(j);
	}
	jw_arr_end(j);
}

/* Modules, frames (columns) and stacks (frame indices, outermost first). */
static void write_symbols(struct jw *j, struct ht_reader *r, const struct ht__report_data *d)
{
	jw_key(j, "modules");
	jw_arr_begin(j);
	for (uint32_t i = 0; i < ht_reader_module_count(r); i++) {
		const struct ht_module *m = ht_reader_module(r, i);
		jw_str(j, m && m->name ? m->name : "?");
	}
	jw_arr_end(j);

	char buf[4096];
	jw_key(j, "frames");
	jw_obj_begin(j);
	jw_key(j, "name");
	jw_arr_begin(j);
	for (uint32_t i = 0; i < d->nframes; i++) {
		ht__frame_text(r, d->frame_ids[i], true, buf, sizeof(buf));
		jw_str(j, buf);
	}
	jw_arr_end(j);
	jw_key(j, "file");
	jw_arr_begin(j);
	for (uint32_t i = 0; i < d->nframes; i++)
		jw_str(j, ht_reader_frame(r, d->frame_ids[i])->file);
	jw_arr_end(j);
	jw_key(j, "line");
	jw_arr_begin(j);
	for (uint32_t i = 0; i < d->nframes; i++)
		jw_u64(j, ht_reader_frame(r, d->frame_ids[i])->line);
	jw_arr_end(j);
	jw_key(j, "module");
	jw_arr_begin(j);
	for (uint32_t i = 0; i < d->nframes; i++) {
		uint32_t m = ht_reader_frame(r, d->frame_ids[i])->module;
		jw_i64(j, m == HT_MODULE_NONE ? -1 : (int64_t)m);
	}
	jw_arr_end(j);
	jw_obj_end(j);

	jw_key(j, "stacks");
	jw_arr_begin(j);
	for (uint32_t s = 0; s < d->nstacks; s++) {
		jw_arr_begin(j);
		for (uint32_t k = d->stack_off[s]; k < d->stack_off[s + 1]; k++)
			jw_u64(j, d->stack_frames[k]);
		jw_arr_end(j);
	}
	jw_arr_end(j);

	jw_key(j, "handles");
	jw_arr_begin(j);
	for (uint32_t i = 0; i < d->nhandles; i++) {
		snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)d->handles[i]);
		jw_str(j, buf);
	}
	jw_arr_end(j);

	/* What each process called its heaps (heap.h), for legends and selectors. */
	jw_key(j, "heap_names");
	jw_arr_begin(j);
	for (size_t k = 0; k < ht__heap_names_count(d->heap_names); k++) {
		uint32_t proc, h;
		uint64_t heap;
		const char *name = ht__heap_names_get(d->heap_names, k, &proc, &heap);
		for (h = 0; h < d->nhandles && d->handles[h] != heap; h++)
			;
		if (h == d->nhandles)
			continue; /* a heap nothing was allocated from */
		jw_obj_begin(j);
		jw_key(j, "process");
		jw_u64(j, proc);
		jw_key(j, "handle");
		jw_u64(j, h);
		jw_key(j, "name");
		jw_str(j, name);
		jw_obj_end(j);
	}
	jw_arr_end(j);
}

/* Column c of a site: 0 process, 1 handle, 2 stack. */
static uint64_t site_field(const struct ht__rd_site *s, int c)
{
	if (c == 0)
		return s->process;
	return c == 1 ? s->handle : s->stack;
}

static void write_table(struct jw *j, const char *key, const struct ht__rd_table *t)
{
	jw_key(j, key);
	jw_obj_begin(j);
	jw_key(j, "sites");
	jw_obj_begin(j);
	const char *names[3] = {"process", "handle", "stack"};
	for (int c = 0; c < 3; c++) {
		jw_key(j, names[c]);
		jw_arr_begin(j);
		for (uint32_t i = 0; i < t->nsites; i++)
			jw_u64(j, site_field(&t->sites[i], c));
		jw_arr_end(j);
	}
	jw_obj_end(j);

	/*
	 * Exact lifetimes, column by column, grouped by site (site_count says how
	 * many each site has) and in allocation order within a site: alloc is
	 * the delta from the site's previous allocation, life is free - alloc.
	 * Small numbers keep big reports small.
	 */
	jw_key(j, "exact");
	jw_obj_begin(j);
	jw_key(j, "site_count");
	jw_arr_begin(j);
	for (uint32_t i = 0; i < t->nsites; i++)
		jw_u64(j, t->sites[i].nlives);
	jw_arr_end(j);
	/* A sampled trace's lifetimes stand for count blocks each (docs/report.md). */
	bool counted = false;
	for (uint32_t i = 0; i < t->nsites && !counted; i++)
		for (uint32_t k = 0; k < t->sites[i].nlives && !counted; k++)
			counted = t->sites[i].lives[k].count != 1;
	const char *cols[7] = {"size", "alloc", "life", "realloc", "piece", "exit", "count"};
	for (int c = 0; c < (counted ? 7 : 6); c++) {
		jw_key(j, cols[c]);
		jw_arr_begin(j);
		for (uint32_t i = 0; i < t->nsites; i++) {
			const struct ht__rd_site *s = &t->sites[i];
			uint64_t prev = 0;
			for (uint32_t k = 0; k < s->nlives; k++) {
				const struct ht__rd_life *l = &s->lives[k];
				switch (c) {
				case 0:
					jw_u64(j, l->size);
					break;
				case 1:
					jw_u64(j, l->alloc_ts - prev);
					break;
				case 2:
					if (l->free_ts == HT_TS_NEVER)
						jw_i64(j, -1);
					else
						jw_u64(j, l->free_ts - l->alloc_ts);
					break;
				case 3:
					jw_u64(j, l->realloc);
					break;
				case 5:
					jw_u64(j, l->at_exit);
					break;
				case 6:
					jw_u64(j, l->count);
					break;
				default:
					jw_u64(j, l->piece);
					break;
				}
				prev = l->alloc_ts;
			}
		}
		jw_arr_end(j);
	}
	jw_obj_end(j);

	jw_key(j, "bucket_ns");
	jw_u64(j, t->bucket_ns);
	jw_key(j, "binned");
	jw_obj_begin(j);
	const char *bcols[7] = {"site", "alloc", "free", "count", "blocks", "bytes", "reallocs"};
	for (int c = 0; c < 7; c++) {
		jw_key(j, bcols[c]);
		jw_arr_begin(j);
		for (size_t i = 0; i < t->ncells; i++) {
			const struct ht__rd_cell *x = &t->cells[i];
			switch (c) {
			case 0:
				jw_u64(j, x->site);
				break;
			case 1:
				jw_u64(j, x->alloc_bucket);
				break;
			case 2:
				if (x->free_bucket == UINT32_MAX)
					jw_i64(j, -1);
				else
					jw_u64(j, x->free_bucket);
				break;
			case 3:
				jw_u64(j, x->count);
				break;
			case 4:
				jw_u64(j, x->blocks);
				break;
			case 5:
				jw_u64(j, x->bytes);
				break;
			default:
				jw_u64(j, x->reallocs);
				break;
			}
		}
		jw_arr_end(j);
	}
	jw_obj_end(j);
	jw_obj_end(j);
}

/* Series drawn one by one on a graph; the rest are summed into one. */
#define MAX_SERIES 16

static uint64_t series_peak(const struct ht__rd_series *s, uint32_t points)
{
	uint64_t m = 0;
	for (uint32_t i = 0; i < points; i++)
		if (s->max[i] > m)
			m = s->max[i];
	return m;
}

static const struct ht__rd_series *sort_series;
static uint32_t sort_points;

static int by_peak(const void *a, const void *b)
{
	uint64_t x = series_peak(&sort_series[*(const uint32_t *)a], sort_points);
	uint64_t y = series_peak(&sort_series[*(const uint32_t *)b], sort_points);
	return x > y ? -1 : x < y;
}

/*
 * The series of one graph. With many processes only the MAX_SERIES - 1 with
 * the highest peaks are kept; the others are summed into one entry with
 * process -1 and "others" (their count): its "last" is exact, its "max" the
 * sum of their maxima (an upper bound). This keeps the report's size bounded
 * however many processes the trace has.
 */
static void write_series_list(struct jw *j, const char *key, const struct ht__rd_series *s,
			      uint32_t n, uint32_t points, bool handle)
{
	uint32_t *order = malloc(((size_t)n + 1) * sizeof(*order));
	uint64_t *max = calloc(points, sizeof(*max)), *last = calloc(points, sizeof(*last));
	if (!order || !max || !last)
		die("out of memory");
	for (uint32_t i = 0; i < n; i++)
		order[i] = i;
	uint32_t shown = n;
	if (n > MAX_SERIES) {
		sort_series = s;
		sort_points = points;
		qsort(order, n, sizeof(*order), by_peak);
		shown = MAX_SERIES - 1;
	}
	jw_key(j, key);
	jw_arr_begin(j);
	for (uint32_t k = 0; k < shown; k++) {
		const struct ht__rd_series *x = &s[order[k]];
		jw_obj_begin(j);
		jw_key(j, "process");
		jw_u64(j, x->process);
		if (handle) {
			jw_key(j, "handle");
			jw_u64(j, x->handle);
		}
		u64_array(j, "max", x->max, points);
		u64_array(j, "last", x->last, points);
		jw_obj_end(j);
	}
	if (shown < n) {
		for (uint32_t k = shown; k < n; k++)
			for (uint32_t i = 0; i < points; i++) {
				max[i] += s[order[k]].max[i];
				last[i] += s[order[k]].last[i];
			}
		jw_obj_begin(j);
		jw_key(j, "process");
		jw_i64(j, -1);
		if (handle) {
			jw_key(j, "handle");
			jw_i64(j, -1);
		}
		jw_key(j, "others");
		jw_u64(j, n - shown);
		u64_array(j, "max", max, points);
		u64_array(j, "last", last, points);
		jw_obj_end(j);
	}
	jw_arr_end(j);
	free(order);
	free(max);
	free(last);
}

static void write_data(FILE *f, struct ht_reader *r, const char *file,
		       const struct ht__report_data *d, const struct snap_pages *pages)
{
	struct jw j;
	jw_init(&j, f, false);
	jw_obj_begin(&j);
	jw_key(&j, "format");
	jw_str(&j, "heaptrail-report");
	jw_key(&j, "version");
	jw_u64(&j, 1);
	write_trace(&j, r, file, d, pages);
	write_totals(&j, d);
	write_processes(&j, r);
	write_symbols(&j, r, d);
	write_table(&j, "heap", &d->heap);
	write_table(&j, "commit", &d->commit);
	jw_key(&j, "series");
	jw_obj_begin(&j);
	jw_key(&j, "bucket_ns");
	jw_u64(&j, d->point_ns);
	jw_key(&j, "count");
	jw_u64(&j, d->points);
	write_series_list(&j, "heap", d->heap_series, d->nheap_series, d->points, true);
	write_series_list(&j, "commit", d->commit_series, d->ncommit_series, d->points, false);
	write_series_list(&j, "rss", d->rss_series, d->nrss_series, d->points, false);
	jw_obj_end(&j);
	jw_key(&j, "limits");
	jw_obj_begin(&j);
	jw_key(&j, "heap_exact");
	jw_u64(&j, d->heap.nexact);
	jw_key(&j, "heap_budget");
	jw_u64(&j, d->heap.budget);
	jw_key(&j, "heap_binned_sites");
	jw_u64(&j, d->heap.binned_sites);
	jw_key(&j, "commit_exact");
	jw_u64(&j, d->commit.nexact);
	jw_key(&j, "commit_binned_sites");
	jw_u64(&j, d->commit.binned_sites);
	jw_obj_end(&j);
	jw_obj_end(&j);
	fflush(f);
}

static char *default_output(const char *file)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	size_t n = strlen(base);
	if (n > 4 && !strcmp(base + n - 4, ".htr"))
		n -= 4;
	char *out;
	if (asprintf(&out, "%.*s.html", (int)n, base) < 0)
		die("out of memory");
	return out;
}

/* Writes the page of r (the snapshot the pass is set to) to out. */
static void write_page(const char *tpl, size_t tlen, const char *mark, const char *out, bool force,
		       struct ht_reader *r, const char *file, const struct ht__report_opts *o,
		       const struct snap_pages *pages)
{
	/* Refused before the work; written under a temporary name and renamed,
	   so a failed run leaves no half page (format/output.h). */
	struct ht__output dst;
	FILE *f = output_begin(&dst, out, force, 0644);
	bool is_file = ht__output_is_file(&dst);
	struct ht__report_data d;
	int rc = ht__report_data_run(&d, r, o);
	if (rc < 0)
		read_failed(file, rc);
	reader_warning(r, file);

	cookie_io_functions_t io = {.write = escape_write};
	FILE *jf = fopencookie(f, "w", io);
	if (!jf)
		die("out of memory");
	fwrite(tpl, 1, (size_t)(mark - tpl), f);
	write_data(jf, r, file, &d, pages);
	if (fclose(jf) != 0)
		die("cannot write '%s': %s", out, strerror(errno));
	const char *rest = mark + strlen(DATA_MARKER);
	fwrite(rest, 1, tlen - (size_t)(rest - tpl), f);
	output_end(&dst, f);
	struct stat st;
	if (is_file && stat(out, &st) == 0)
		printf("heaptrail: wrote '%s' (%.1f MB)\n", out, st.st_size / 1048576.0);
	else if (!is_file)
		printf("heaptrail: wrote '%s'\n", out);
	ht__report_data_release(&d);
}

int cmd_report(int argc, char **argv)
{
	enum { O_EXACT = CLI_LONG, O_POINTS, O_NO_CULL, O_FORCE, O_SNAPSHOT, O_ALL_SNAPSHOTS };
	static const struct cli_opt opts[] = {
	    {"output", 'o', required_argument},
	    {"exact", O_EXACT, required_argument},
	    {"points", O_POINTS, required_argument},
	    {"no-default-cull", O_NO_CULL, no_argument},
	    {"force", O_FORCE, no_argument},
	    {"snapshot", O_SNAPSHOT, required_argument},
	    {"all-snapshots", O_ALL_SNAPSHOTS, no_argument},
	    {NULL, 0, 0},
	};
	char *out = NULL;
	bool force = false, all_snapshots = false;
	uint32_t one_snapshot = 0;
	struct ht__report_opts o = HT_REPORT_OPTS_INIT;
	struct cli_parser p;
	cli_init(&p, "report", report_usage, opts, argc, argv, false);
	for (int c; (c = cli_next(&p)) != -1;) {
		if (c == 'o') {
			output_not_dash(p.val, "-o", false);
			free(out);
			out = strdup(p.val);
		} else if (c == O_EXACT || c == O_POINTS) {
			char *end;
			unsigned long long v = strtoull(p.val, &end, 10);
			if (*end || !v || p.val[0] == '-' || v > 100000000ull)
				cli_bad_value(&p, c == O_EXACT ? "--exact" : "--points",
					      "a number from 1 to 100000000");
			if (c == O_EXACT)
				o.heap_budget = v;
			else
				o.points = (uint32_t)v;
		} else if (c == O_NO_CULL) {
			o.default_cull = false;
		} else if (c == O_FORCE) {
			force = true;
		} else if (c == O_SNAPSHOT) {
			one_snapshot = opt_snapshot(p.val, "--snapshot");
		} else if (c == O_ALL_SNAPSHOTS) {
			all_snapshots = true;
		}
	}
	char **files;
	cli_operands(&p, 1, 1, "trace file", &files);
	const char *file = files[0];
	if (all_snapshots && one_snapshot)
		die("--snapshot %u and --all-snapshots ask for different pages: give one of them",
		    one_snapshot);
	if (!out)
		out = default_output(file);

	int found;
	char *tpath = template_path(&found);
	size_t tlen = 0;
	char *tpl = read_file(tpath, &tlen);
	/* A heaptrail copied away from its build tree or install finds no
	   ../share/heaptrail: say where it looked and what it needs. */
	if (!tpl && !found)
		die("the report page is missing: no '%s' (nor one in ../../share/heaptrail): "
		    "heaptrail needs share/heaptrail/ beside its bin/ (run it where it was "
		    "built or installed, or copy both); a build without node and npm has no "
		    "page (it was not built)",
		    tpath);
	if (!tpl)
		die("the report page '%s' cannot be read: %s", tpath, strerror(errno));
	char *mark = strstr(tpl, DATA_MARKER);
	if (!mark)
		die("'%s' is not a heaptrail report page: rebuild heaptrail", tpath);

	struct ht_reader *r = open_trace(file);
	snapshot_check(r, file, 0);
	if (!all_snapshots) {
		write_page(tpl, tlen, mark, out, force, r, file, &o, NULL);
	} else {
		/* One page per snapshot: OUT with .N before its extension. */
		uint32_t n;
		int rc = ht__pass_snapshot_count(r, &n);
		if (rc < 0)
			read_failed(file, rc);
		if (!n)
			die("'%s' has no heap snapshots (it was not recorded with --snapshot): "
			    "drop "
			    "--all-snapshots",
			    file);
		struct snap_pages pages = {calloc(n, sizeof(char *)), n};
		if (!pages.page)
			die("out of memory");
		const char *dot = strrchr(out, '.'), *slash = strrchr(out, '/');
		size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - out) : strlen(out);
		for (uint32_t i = 0; i < n; i++)
			if (asprintf(&pages.page[i], "%.*s.%u%s", (int)stem, out, i + 1,
				     out + stem) < 0)
				die("out of memory");
		for (uint32_t i = 0; i < n; i++) {
			ht__pass_default_snapshot(i + 1);
			write_page(tpl, tlen, mark, pages.page[i], force, r, file, &o, &pages);
		}
		for (uint32_t i = 0; i < n; i++)
			free(pages.page[i]);
		free(pages.page);
	}
	ht_reader_close(r);
	free(tpl);
	free(tpath);
	free(out);
	return 0;
}
