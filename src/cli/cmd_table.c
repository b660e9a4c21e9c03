/*
 * cmd_table.c - 'heaptrail table heap|commit': WPA's Heap Allocations and
 * VirtualAlloc Commit Lifetimes tables for a time window, as an indented tree
 * of groups (or one row per block) in text, CSV or JSON. docs/tables.md is the
 * reference; the window rules are in src/analysis/window.h.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/heapnames.h"
#include "analysis/lifetime.h"
#include "analysis/match.h"
#include "analysis/pass.h"
#include "analysis/query.h"
#include "analysis/summary.h"
#include "analysis/window.h"
#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/query_opts.h"
#include "cli/opt.h"
#include "cli/table_util.h"
#include "format/textout.h"
#include "heaptrail/trace.h"
#include "base/vec.h"

static const char table_usage[] =
    "usage: heaptrail table heap|commit FILE [options]\n"
    "\n"
    "WPA's Heap Allocations (heap) and Commit Lifetimes (commit) tables for a time\n"
    "window: every block live in it, typed AIFI/AIFO/AOFI/AOFO (allocated and freed\n"
    "inside or outside), grouped into a tree with Count (allocated inside), Size\n"
    "(their bytes) and Impacting Size (outstanding at the end minus at the start).\n"
    "docs/tables.md has the details.\n"
    "\n"
    "  --range T1 T2        the window [T1, T2) (default: the whole trace); times in\n"
    "                       microseconds, or with a suffix s, ms, us, ns\n"
    "  --at-peak            the window from the start to the heap's peak (of the\n"
    "                       --pid processes, or of the whole trace): its Impacting\n"
    "                       rows are the blocks live at the peak\n"
    "  --pid P[,P...]       only these processes\n"
    "  --snapshot N         a heap snapshot trace: snapshot N (default: the last)\n"
    "  --group-by K[,K...]  levels of the tree: process, handle, type, impacting-type,\n"
    "                       stack, frame, image, thread; 'none' lists every block\n"
    "                       (default heap: process,handle,impacting-type,stack;\n"
    "                       commit: process,impacting-type,stack)\n"
    "  --depth N            show the first N levels only\n"
    "  --sort K             impacting (default), size or count, at every level\n"
    "  --top N              the first N groups of every level\n"
    "  --rows               list the blocks under each group of the last level\n"
    "  --format F           text (default), csv or json\n"
    "  --time-unit U        s (default), ms, us or ns for times in text and csv\n"
    "  -cullFrames F...     cull these frames too (module!, module!symbol, symbol)\n"
    "  -cullLists FILE...   cull the frames listed in these files\n"
    "  -requireFrames F...  only blocks whose stack holds one of these frames\n"
    "  --no-default-cull    do not cull the built-in list (allocator frames)\n"
    "\n"
    "examples:\n"
    "  heaptrail table heap app.htr --range 1.4s 1.8s --group-by impacting-type,stack\n"
    "  heaptrail table commit app.htr --range 1.4s 1.8s --format csv\n"
    "  heaptrail table heap app.htr --at-peak --depth 3\n";

enum table_kind { TABLE_HEAP, TABLE_COMMIT };

struct table_opts {
	enum table_kind kind;
	const char *file;
	bool has_range;
	uint64_t t1, t2;
	enum ht__wkey keys[HT_WK_MAX_LEVELS];
	uint32_t nkeys;
	bool keys_given;
	long depth; /* -1: all */
	enum ht__wsort sort;
	uint32_t top;
	bool rows;
	enum out_format fmt;
	struct tu_unit unit;
	struct ht__query q;
};

/* Everything one run needs while the trace streams. */
struct table_run {
	struct table_opts *o;
	struct ht_reader *r;
	struct ht__wtree *tree;
	struct ht__wstacks *stacks;
	struct ht__frame_matcher *cull;
	struct ht__frame_matcher *require;
	struct ht__window w;
	struct ht__heap_names *names; /* heap.h's names of custom heaps */
	uint64_t rate;		      /* heap table of a sampled trace: its sizes are estimates */
};

/* Reads the trace into t->tree through one pass. Dies on a read error. */
static void table_read(struct table_run *t)
{
	struct ht__pass *p;
	struct ht__wfeed *feed = NULL;
	int rc = ht__pass_new(&p, t->r);
	if (rc == 0)
		rc = ht__wtable_attach(p, t->o->kind == TABLE_COMMIT, t->tree, &t->w, t->stacks,
				       t->require, &t->o->q, !t->o->rows, &feed);
	if (rc == 0 && (rc = ht__heap_names_new(&t->names)) == 0)
		rc = ht__heap_names_attach(p, t->names, t->o->rows ? UINT64_MAX : t->w.end);
	if (rc > 0)
		rc = 0;
	if (rc == 0)
		rc = ht__pass_run(p);
	ht__pass_free(p);
	ht__wfeed_free(feed);
	if (rc == HT_ERR_NOMEM)
		die("cannot build the table: %s", ht_strerror(rc));
	if (rc < 0)
		read_failed(t->o->file, rc);
	reader_warning(t->r, t->o->file);
}

/* ---- output ---- */

static const char *row_time_names[2][2] = {{"alloc", "free"}, {"commit", "decommit"}};

/*
 * A stack on one line, innermost first as xperf prints stacks: "a <- b <- c",
 * "[no stack]" without frames; its length in *len when len is not NULL.
 * Valid until the next call. Each frame's text is measured once (the
 * default table writes a stack per block).
 */
static const char *stack_text_len(struct table_run *t, uint32_t stack, size_t *len)
{
	static char *buf;
	static size_t cap;
	const uint32_t *f;
	uint32_t nf = ht__wstacks_frames(t->stacks, stack, &f);
	const char *none = "[no stack]";
	size_t k = 0;
	if (ht__grow((void **)&buf, &cap, 16, 1) < 0)
		die("out of memory");
	if (!nf) {
		memcpy(buf, none, strlen(none) + 1);
		k = strlen(none);
	}
	for (uint32_t i = 0; i < nf; i++) {
		const char *ft = ht__wstacks_frame_text(t->stacks, f[i]);
		size_t n = strlen(ft);
		if (ht__grow((void **)&buf, &cap, k + n + 5, 1) < 0)
			die("out of memory");
		if (i) {
			memcpy(buf + k, " <- ", 4);
			k += 4;
		}
		memcpy(buf + k, ft, n);
		k += n;
	}
	buf[k] = 0;
	if (len)
		*len = k;
	return buf;
}

static const char *stack_text(struct table_run *t, uint32_t stack)
{
	return stack_text_len(t, stack, NULL);
}

/* The label of a group in text and CSV ("memtestapp (pid 12)", "Impacting", ...). */
/* snprintf(buf, len, "%s", s) without the format's parsing and its copy a
   byte at a time (a stack node's label is every frame's text: python's
   table heap, 113 M instructions in snprintf). */
static void copy_label(char *buf, size_t len, const char *s)
{
	if (!len)
		return;
	size_t n = strlen(s);
	if (n > len - 1)
		n = len - 1;
	memcpy(buf, s, n);
	buf[n] = 0;
}

static void node_label(struct table_run *t, const struct ht__wnode *n, char *buf, size_t len)
{
	const struct ht_process *p;
	switch (n->key) {
	case HT_WK_PROCESS:
		p = ht_reader_process(t->r, (uint32_t)n->value);
		snprintf(buf, len, "%s (pid %d)", p ? tu_basename(p->exe) : "?", p ? p->pid : -1);
		ht__escape_control(buf, len);
		break;
	case HT_WK_HANDLE: {
		char h[1100];
		snprintf(buf, len, "handle %s",
			 ht__heap_label(t->names, HT__ANY_PROCESS, n->value, h, sizeof(h)));
		break;
	}
	case HT_WK_TYPE:
		copy_label(buf, len, ht__wtype_name((int)n->value));
		break;
	case HT_WK_IMPACTING:
		copy_label(buf, len, n->value ? "Impacting" : "Transient");
		break;
	case HT_WK_FRAME:
		copy_label(buf, len, ht__wstacks_frame_name(t->stacks, n->value));
		break;
	case HT_WK_IMAGE:
		copy_label(buf, len, ht__wstacks_image_name(t->stacks, n->value));
		break;
	case HT_WK_THREAD:
		snprintf(buf, len, "thread %d", (int32_t)(uint32_t)n->value);
		break;
	case HT_WK_STACK:
		copy_label(buf, len, stack_text(t, (uint32_t)n->value));
		break;
	default:
		snprintf(buf, len, "?");
		break;
	}
}

static void text_row(struct table_run *t, const struct ht__wrow *w, int indent, bool full)
{
	char a[40], f[40], l[40], sz[32];
	tu_time(a, sizeof(a), w->alloc_ts, &t->o->unit);
	if (w->free_ts == HT_TS_NEVER) {
		snprintf(f, sizeof(f), "-");
		snprintf(l, sizeof(l), "-");
	} else {
		tu_time(f, sizeof(f), w->free_ts, &t->o->unit);
		tu_time(l, sizeof(l), w->free_ts - w->alloc_ts, &t->o->unit);
	}
	tu_size(sz, sizeof(sz), (int64_t)w->size);
	/* printf("%*s%-4s %-9s 0x%-14" PRIx64 " %14s %14s %14s %10s  thread %d"), a
	   field at a time (textout.h): a table can have millions of rows. */
	FILE *o = stdout;
	ht__out_pad(o, "", indent);
	ht__out_pad(o, ht__wtype_name(w->type), -4);
	ht__out_chr(o, ' ');
	ht__out_pad(o, ht__wtype_impacting_name(w->type), -9);
	ht__out_str(o, " 0x");
	ht__out_x64(o, w->addr, -14);
	ht__out_chr(o, ' ');
	ht__out_pad(o, a, 14);
	ht__out_chr(o, ' ');
	ht__out_pad(o, f, 14);
	ht__out_chr(o, ' ');
	ht__out_pad(o, l, 14);
	ht__out_chr(o, ' ');
	ht__out_pad(o, sz, 10);
	ht__out_str(o, "  thread ");
	ht__out_i64(o, w->tid, 0);
	if (w->unseen)
		ht__out_str(o, "  unseen"); /* found in /proc/PID/maps, no hook saw it */
	if (full) {
		const struct ht_process *p = ht_reader_process(t->r, w->process);
		ht__out_str(o, "  ");
		put_text(o, p ? tu_basename(p->exe) : "?");
		ht__out_str(o, " (pid ");
		ht__out_i64(o, p ? p->pid : -1, 0);
		ht__out_chr(o, ')');
		char h[1100];
		if (t->o->kind == TABLE_HEAP) {
			ht__out_str(o, "  handle ");
			ht__out_str(o, ht__heap_label(t->names, w->process, w->heap, h, sizeof(h)));
		}
		/* The stack on a line of its own: rows stay aligned, stacks are long. */
		ht__out_chr(o, '\n');
		ht__out_pad(o, "", indent);
		ht__out_str(o, "  ");
		size_t n;
		const char *st = stack_text_len(t, w->stack, &n);
		ht__out_mem(o, st, n);
	}
	ht__out_chr(o, '\n');
}

static void text_rows_header(struct table_run *t, int indent)
{
	const char *const *names = row_time_names[t->o->kind];
	char a[32], f[32];
	snprintf(a, sizeof(a), "%s (%s)", names[0], t->o->unit.name);
	snprintf(f, sizeof(f), "%s (%s)", names[1], t->o->unit.name);
	printf("%*s%-4s %-9s %-16s %14s %14s %14s %10s\n", indent, "", "Type", "Impacting",
	       "Address", a, f, "Lifetime", "Size");
}

static void text_node(struct table_run *t, const struct ht__wnode *n)
{
	char label[8192], c[32], i[32], s[32];
	/* A stack reads best one frame a line, innermost first, beside its numbers. */
	const uint32_t *f = NULL;
	uint32_t nf = n->depth && n->key == HT_WK_STACK
			  ? ht__wstacks_frames(t->stacks, (uint32_t)n->value, &f)
			  : 0;
	/* A stack's label (its frames on one line) is not printed when it has
	   frames: making it took 114 M of python's 2259 M instructions. */
	if (n->depth == 0)
		snprintf(label, sizeof(label), "Total");
	else if (!nf)
		node_label(t, n, label, sizeof(label));
	snprintf(c, sizeof(c), "%" PRIu64, n->count);
	tu_size(i, sizeof(i), n->impacting);
	tu_size(s, sizeof(s), (int64_t)n->size);
	/* printf("%10s %15s %12s  %*s%s\n"), a field at a time (textout.h) */
	FILE *o = stdout;
	for (uint32_t k = 0; k < (nf ? nf : 1); k++) {
		if (k) {
			/* blank columns, the indent and two more: 10 + 1 + 15 + 1
			   + 12 + 2 + 2 depth + 2 spaces in one (python's table heap:
			   seven calls a frame line, 582 M of its 2145 M instructions) */
			ht__out_pad(o, "", 43 + (int)n->depth * 2);
		} else {
			ht__out_pad(o, c, 10);
			ht__out_chr(o, ' ');
			ht__out_pad(o, i, 15);
			ht__out_chr(o, ' ');
			ht__out_pad(o, s, 12);
			ht__out_str(o, "  ");
			ht__out_pad(o, "", (int)n->depth * 2);
		}
		if (nf) {
			size_t len;
			const char *ft = ht__wstacks_frame_text_len(t->stacks, f[k], &len);
			ht__out_mem(o, ft, len);
		} else {
			ht__out_str(o, label);
		}
		ht__out_chr(o, '\n');
	}
	for (uint32_t k = 0; k < n->nchildren; k++)
		text_node(t, n->children[k]);
	if (n->nrows) {
		int indent = 41 + (int)(n->depth + 1) * 2;
		text_rows_header(t, indent);
		for (uint32_t k = 0; k < n->nrows; k++)
			text_row(t, &n->rows[k], indent, false);
	}
}

static void print_text(struct table_run *t, const struct ht__wnode *root)
{
	char a[40], b[40];
	tu_time(a, sizeof(a), t->w.start, &t->o->unit);
	tu_time(b, sizeof(b), t->w.end, &t->o->unit);
	printf("%s, window [%s %s, %s %s)",
	       t->o->kind == TABLE_HEAP ? "Heap Allocations" : "Commit Lifetimes", a,
	       t->o->unit.name, b, t->o->unit.name);
	if (t->o->nkeys) {
		printf(", grouped by ");
		for (uint32_t k = 0; k < t->o->nkeys; k++)
			printf("%s%s", k ? ", " : "", ht__wkey_name(t->o->keys[k]));
	}
	printf("\n");
	char note[200];
	if (t->rate && sample_note(ht_reader_info(t->r), note, sizeof(note)))
		printf("Note: %s\n", note);
	printf("\n");
	if (!t->o->nkeys) {
		/* One row per block, everything on the line. */
		char i[32], s[32];
		tu_size(i, sizeof(i), root->impacting);
		tu_size(s, sizeof(s), (int64_t)root->size);
		printf("Count %" PRIu64 ", Impacting Size %s, Size %s, %" PRIu64
		       " blocks in the window\n\n",
		       root->count, i, s, root->live);
		if (t->o->rows) {
			text_rows_header(t, 0);
			for (uint32_t k = 0; k < root->nrows; k++)
				text_row(t, &root->rows[k], 0, true);
		}
		return;
	}
	printf("%10s %15s %12s  %s\n", "Count", "Impacting Size", "Size", "Group");
	text_node(t, root);
}

/* CSV: one line per group with every key column (empty when not on the path), or one per block. */
static void csv_header(struct table_run *t)
{
	if (t->o->rows) {
		const char *const *names = row_time_names[t->o->kind];
		printf("process,pid,handle,heap_name,type,impacting_type,thread,address,%s_time_%s,"
		       "%s_time_%"
		       "s,lifetime_%s,"
		       "size,stack%s%s\n",
		       names[0], t->o->unit.name, names[1], t->o->unit.name, t->o->unit.name,
		       t->rate ? ",sample_rate" : "", t->o->kind == TABLE_COMMIT ? ",unseen" : "");
	} else {
		printf("depth,process,pid,handle,heap_name,type,impacting_type,stack,frame,image,"
		       "thread,"
		       "count,impacting_size,"
		       "size%s\n",
		       t->rate ? ",sample_rate" : "");
	}
}

static void csv_rows(struct table_run *t, const struct ht__wnode *n)
{
	for (uint32_t k = 0; k < n->nchildren; k++)
		csv_rows(t, n->children[k]);
	for (uint32_t k = 0; k < n->nrows; k++) {
		const struct ht__wrow *w = &n->rows[k];
		const struct ht_process *p = ht_reader_process(t->r, w->process);
		char buf[64];
		FILE *o = stdout; /* a field at a time (textout.h): no printf per row */
		csv_field(o, p ? tu_basename(p->exe) : "?");
		ht__out_chr(o, ',');
		ht__out_i64(o, p ? p->pid : -1, 0);
		ht__out_chr(o, ',');
		if (t->o->kind == TABLE_HEAP) {
			ht__out_u64(o, w->heap, 0);
			ht__out_chr(o, ',');
			csv_field(o, ht__heap_name(t->names, w->process, w->heap));
		} else {
			ht__out_chr(o, ',');
		}
		ht__out_chr(o, ',');
		ht__out_str(o, ht__wtype_name(w->type));
		ht__out_chr(o, ',');
		ht__out_str(o, ht__wtype_impacting_name(w->type));
		ht__out_chr(o, ',');
		ht__out_i64(o, w->tid, 0);
		ht__out_chr(o, ',');
		ht__out_u64(o, w->addr, 0);
		ht__out_chr(o, ',');
		tu_time_exact(buf, sizeof(buf), w->alloc_ts, &t->o->unit);
		ht__out_str(o, buf);
		ht__out_chr(o, ',');
		if (w->free_ts != HT_TS_NEVER) {
			tu_time_exact(buf, sizeof(buf), w->free_ts, &t->o->unit);
			ht__out_str(o, buf);
			ht__out_chr(o, ',');
			tu_time_exact(buf, sizeof(buf), w->free_ts - w->alloc_ts, &t->o->unit);
			ht__out_str(o, buf);
		} else {
			ht__out_chr(o, ',');
		}
		ht__out_chr(o, ',');
		ht__out_u64(o, w->size, 0);
		ht__out_chr(o, ',');
		csv_field(o, w->stack ? stack_text(t, w->stack) : "");
		if (t->rate) {
			ht__out_chr(o, ',');
			ht__out_u64(o, t->rate, 0);
		}
		if (t->o->kind == TABLE_COMMIT) {
			ht__out_chr(o, ',');
			ht__out_i64(o, w->unseen, 0);
		}
		ht__out_chr(o, '\n');
	}
}

/* One CSV line for a group: its depth, every key along its path (depth 0 is the total), its
 * metrics. */
static void csv_group(struct table_run *t, const struct ht__wnode *n, const struct ht__wnode **path)
{
	if (n->depth)
		path[n->depth - 1] = n;
	const char *cols[HT_WK__COUNT + 1] = {0};
	static char vals[HT_WK__COUNT + 1][256];
	int pid = -1;
	bool has_pid = false;
	uint32_t process = HT__ANY_PROCESS;
	const char *heap_name = NULL;
	for (uint32_t d = 0; d < n->depth; d++) {
		const struct ht__wnode *p = path[d];
		int col = p->key;
		/* process gets two columns: the name and the pid. */
		if (p->key == HT_WK_PROCESS) {
			const struct ht_process *pr = ht_reader_process(t->r, (uint32_t)p->value);
			snprintf(vals[col], sizeof(vals[col]), "%s",
				 pr ? tu_basename(pr->exe) : "?");
			pid = pr ? pr->pid : -1;
			has_pid = true;
			process = (uint32_t)p->value;
		} else if (p->key == HT_WK_HANDLE) {
			snprintf(vals[col], sizeof(vals[col]), "%" PRIu64, p->value);
			heap_name = ht__heap_name(t->names, process, p->value);
		} else if (p->key == HT_WK_THREAD) {
			snprintf(vals[col], sizeof(vals[col]), "%d", (int32_t)(uint32_t)p->value);
		} else if (p->key == HT_WK_STACK || p->key == HT_WK_FRAME ||
			   p->key == HT_WK_IMAGE) {
			/* Texts of any length, used before the next stack_text() call. */
			cols[col] = p->key == HT_WK_STACK ? stack_text(t, (uint32_t)p->value)
				    : p->key == HT_WK_FRAME
					? ht__wstacks_frame_name(t->stacks, p->value)
					: ht__wstacks_image_name(t->stacks, p->value);
			continue;
		} else {
			node_label(t, p, vals[col], sizeof(vals[col]));
		}
		cols[col] = vals[col];
	}
	printf("%u", n->depth);
	static const enum ht__wkey order[] = {HT_WK_PROCESS, HT_WK__COUNT,    HT_WK_HANDLE,
					      HT_WK_TYPE,    HT_WK_IMPACTING, HT_WK_STACK,
					      HT_WK_FRAME,   HT_WK_IMAGE,     HT_WK_THREAD};
	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
		putchar(',');
		if (order[k] == HT_WK__COUNT) {
			if (has_pid)
				printf("%d", pid);
		} else if (cols[order[k]]) {
			csv_field(stdout, cols[order[k]]);
		}
		if (order[k] == HT_WK_HANDLE) {
			putchar(',');
			csv_field(stdout, heap_name);
		}
	}
	printf(",%" PRIu64 ",%" PRId64 ",%" PRIu64, n->count, n->impacting, n->size);
	if (t->rate)
		printf(",%" PRIu64, t->rate);
	putchar('\n');
}

static void csv_node(struct table_run *t, const struct ht__wnode *n, const struct ht__wnode **path)
{
	csv_group(t, n, path);
	for (uint32_t k = 0; k < n->nchildren; k++)
		csv_node(t, n->children[k], path);
}

static void json_stack(struct table_run *t, struct jw *j, uint32_t stack)
{
	const uint32_t *f;
	uint32_t nf = ht__wstacks_frames(t->stacks, stack, &f);
	jw_arr_begin(j);
	for (uint32_t i = 0; i < nf; i++)
		jw_str(j, ht__wstacks_frame_text(t->stacks, f[i]));
	jw_arr_end(j);
}

static void json_process(struct table_run *t, struct jw *j, uint32_t process)
{
	const struct ht_process *p = ht_reader_process(t->r, process);
	jw_obj_begin(j);
	jw_key(j, "pid");
	jw_i64(j, p ? p->pid : -1);
	jw_key(j, "exe");
	jw_str(j, p ? p->exe : NULL);
	jw_obj_end(j);
}

static void json_row(struct table_run *t, struct jw *j, const struct ht__wrow *w)
{
	const char *const *names = row_time_names[t->o->kind];
	char key[32];
	jw_obj_begin(j);
	jw_key(j, "process");
	json_process(t, j, w->process);
	if (t->o->kind == TABLE_HEAP) {
		jw_key(j, "handle");
		jw_u64(j, w->heap);
		jw_key(j, "heap_name");
		jw_str(j, ht__heap_name(t->names, w->process, w->heap));
	}
	jw_key(j, "type");
	jw_str(j, ht__wtype_name(w->type));
	jw_key(j, "impacting_type");
	jw_str(j, ht__wtype_impacting_name(w->type));
	jw_key(j, "thread");
	jw_i64(j, w->tid);
	jw_key(j, "address");
	jw_u64(j, w->addr);
	snprintf(key, sizeof(key), "%s_ns", names[0]);
	jw_key(j, key);
	jw_u64(j, w->alloc_ts);
	snprintf(key, sizeof(key), "%s_ns", names[1]);
	jw_key(j, key);
	if (w->free_ts == HT_TS_NEVER)
		jw_null(j);
	else
		jw_u64(j, w->free_ts);
	jw_key(j, "lifetime_ns");
	if (w->free_ts == HT_TS_NEVER)
		jw_null(j);
	else
		jw_u64(j, w->free_ts - w->alloc_ts);
	jw_key(j, "size");
	jw_u64(j, w->size);
	jw_key(j, "stack");
	json_stack(t, j, w->stack);
	if (t->o->kind == TABLE_COMMIT) {
		jw_key(j, "unseen");
		jw_bool(j, w->unseen);
	}
	jw_obj_end(j);
}

static void json_metrics(struct jw *j, const struct ht__wnode *n)
{
	jw_key(j, "count");
	jw_u64(j, n->count);
	jw_key(j, "size");
	jw_u64(j, n->size);
	jw_key(j, "impacting_size");
	jw_i64(j, n->impacting);
	jw_key(j, "blocks");
	jw_u64(j, n->live);
}

static void json_node(struct table_run *t, struct jw *j, const struct ht__wnode *n)
{
	jw_obj_begin(j);
	char label[1024];
	switch (n->key) {
	case HT_WK_PROCESS:
		jw_key(j, "process");
		json_process(t, j, (uint32_t)n->value);
		break;
	case HT_WK_HANDLE:
		jw_key(j, "handle");
		jw_u64(j, n->value);
		jw_key(j, "heap_name");
		jw_str(j, ht__heap_name(t->names, HT__ANY_PROCESS, n->value));
		break;
	case HT_WK_TYPE:
		jw_key(j, "type");
		jw_str(j, ht__wtype_name((int)n->value));
		break;
	case HT_WK_IMPACTING:
		jw_key(j, "impacting_type");
		jw_str(j, n->value ? "Impacting" : "Transient");
		break;
	case HT_WK_STACK:
		jw_key(j, "stack");
		json_stack(t, j, (uint32_t)n->value);
		break;
	case HT_WK_THREAD:
		jw_key(j, "thread");
		jw_i64(j, (int32_t)(uint32_t)n->value);
		break;
	default:
		node_label(t, n, label, sizeof(label));
		jw_key(j, ht__wkey_name(n->key));
		jw_str(j, label);
		break;
	}
	json_metrics(j, n);
	jw_key(j, "children");
	jw_arr_begin(j);
	for (uint32_t k = 0; k < n->nchildren; k++)
		json_node(t, j, n->children[k]);
	jw_arr_end(j);
	if (t->o->rows && n->depth == t->o->nkeys) {
		jw_key(j, "rows");
		jw_arr_begin(j);
		for (uint32_t k = 0; k < n->nrows; k++)
			json_row(t, j, &n->rows[k]);
		jw_arr_end(j);
	}
	jw_obj_end(j);
}

static void print_json(struct table_run *t, const struct ht__wnode *root)
{
	struct jw j;
	jw_init(&j, stdout, true);
	jw_obj_begin(&j);
	jw_key(&j, "table");
	jw_str(&j, t->o->kind == TABLE_HEAP ? "heap" : "commit");
	if (t->o->kind == TABLE_HEAP)
		jw_sampling(&j, ht_reader_info(t->r));
	jw_key(&j, "window");
	jw_obj_begin(&j);
	jw_key(&j, "start_ns");
	jw_u64(&j, t->w.start);
	jw_key(&j, "end_ns");
	jw_u64(&j, t->w.end);
	jw_obj_end(&j);
	jw_key(&j, "group_by");
	jw_arr_begin(&j);
	for (uint32_t k = 0; k < t->o->nkeys; k++)
		jw_str(&j, ht__wkey_name(t->o->keys[k]));
	jw_arr_end(&j);
	jw_key(&j, "total");
	jw_obj_begin(&j);
	json_metrics(&j, root);
	jw_obj_end(&j);
	jw_key(&j, "groups");
	jw_arr_begin(&j);
	for (uint32_t k = 0; k < root->nchildren; k++)
		json_node(t, &j, root->children[k]);
	jw_arr_end(&j);
	if (!t->o->nkeys && t->o->rows) {
		jw_key(&j, "rows");
		jw_arr_begin(&j);
		for (uint32_t k = 0; k < root->nrows; k++)
			json_row(t, &j, &root->rows[k]);
		jw_arr_end(&j);
	}
	jw_obj_end(&j);
	jw_finish(&j);
}

/* ---- options ---- */

static void parse_keys(struct table_opts *o, const char *list)
{
	o->nkeys = 0;
	o->keys_given = true;
	if (!strcmp(list, "none") || !*list)
		return;
	char *copy = strdup(list);
	if (!copy)
		die("out of memory");
	char *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int k = ht__wkey_parse(tok);
		if (k < 0)
			die("unknown group-by key '%s'; the keys are process, handle, type, "
			    "impacting-type, "
			    "stack, frame, image, thread",
			    tok);
		if (k == HT_WK_HANDLE && o->kind == TABLE_COMMIT)
			die("group-by key 'handle' does not apply to commit lifetimes");
		if (o->nkeys == HT_WK_MAX_LEVELS)
			die("too many group-by keys (at most %d)", HT_WK_MAX_LEVELS);
		o->keys[o->nkeys++] = (enum ht__wkey)k;
	}
	free(copy);
}

static void parse_args(struct table_opts *o, int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(table_usage, argc < 2 ? stderr : stdout);
		exit(argc < 2 ? 2 : 0);
	}
	if (!strcmp(argv[1], "heap"))
		o->kind = TABLE_HEAP;
	else if (!strcmp(argv[1], "commit"))
		o->kind = TABLE_COMMIT;
	else
		die("unknown table '%s'; the tables are heap and commit", argv[1]);
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(table_usage, stdout);
			exit(0);
		} else if (!strcmp(a, "--range")) {
			if (i + 2 >= argc)
				die("'%s' needs two times, T1 and T2", a);
			tu_parse_range(argv[i + 1], argv[i + 2], &o->t1, &o->t2);
			o->has_range = true;
			i += 2;
		} else if (!strcmp(a, "--at-peak")) {
			o->q.at_peak = true;
		} else if (!strcmp(a, "--snapshot")) {
			o->q.snapshot = opt_snapshot(v, a);
			i++;
		} else if (!strcmp(a, "--pid")) {
			tu_parse_pids(a, v, &o->q);
			i++;
		} else if (!strcmp(a, "--group-by")) {
			if (!v)
				die("'--group-by' needs a list of keys");
			parse_keys(o, v);
			i++;
		} else if (!strcmp(a, "--depth")) {
			o->depth = (long)tu_parse_count(a, v);
			i++;
		} else if (!strcmp(a, "--sort")) {
			if (!v)
				die("'--sort' needs impacting, size or count");
			if (!strcmp(v, "impacting"))
				o->sort = HT_WSORT_IMPACTING;
			else if (!strcmp(v, "size"))
				o->sort = HT_WSORT_SIZE;
			else if (!strcmp(v, "count"))
				o->sort = HT_WSORT_COUNT;
			else
				die("unknown sort key '%s'; use impacting, size or count", v);
			i++;
		} else if (!strcmp(a, "--top")) {
			o->top = (uint32_t)tu_parse_count(a, v);
			if (!o->top)
				die("'%s' needs a count above 0", a);
			i++;
		} else if (!strcmp(a, "--rows")) {
			o->rows = true;
		} else if (!strcmp(a, "--format")) {
			if (parse_format(v, &o->fmt) < 0)
				die("unknown format '%s'; use text, csv or json", v ? v : "");
			i++;
		} else if (!strcmp(a, "--time-unit")) {
			if (tu_parse_unit(v, &o->unit) < 0)
				die("unknown time unit '%s'; use s, ms, us or ns", v ? v : "");
			i++;
		} else if (tu_parse_frames_option(&o->q, argc, argv, &i)) {
			continue;
		} else if (a[0] == '-' && a[1]) {
			cli_unknown_option("table", a, table_usage, NULL);
		} else if (!o->file) {
			o->file = a;
		} else {
			die("unexpected argument '%s'", a);
		}
	}
	if (!o->file)
		die("no trace file given; usage: heaptrail table heap|commit FILE [options]");
	if (o->q.at_peak && o->has_range)
		die("--at-peak chooses the window itself; drop --range");
	if (o->q.at_peak && o->kind != TABLE_HEAP)
		die("--at-peak is the heap's peak; use it with 'table heap'");
	if (!o->keys_given) {
		if (o->kind == TABLE_HEAP)
			parse_keys(o, "process,handle,impacting-type,stack");
		else
			parse_keys(o, "process,impacting-type,stack");
	}
	bool listing = !o->nkeys;
	if (o->depth >= 0 && (uint32_t)o->depth < o->nkeys)
		o->nkeys = (uint32_t)o->depth;
	/* 'none' lists the blocks; --depth 0 shows the total only. */
	if (listing)
		o->rows = true;
}

int cmd_table(int argc, char **argv)
{
	struct table_opts o = {0};
	o.depth = -1;
	o.fmt = FMT_TEXT;
	tu_parse_unit("s", &o.unit);
	buffer_stdout();
	ht__query_init(&o.q);
	argv = tu_normalize_args(argc, argv, &argc);
	parse_args(&o, argc, argv);
	int rc = ht__query_prepare(&o.q);
	if (rc < 0)
		die("invalid query: %s", ht_strerror(rc));

	struct table_run t = {.o = &o};
	t.r = open_trace(o.file);
	snapshot_check(t.r, o.file, 0);
	if (o.q.at_peak) {
		/* The window [0, peak]: what is live at its end is Impacting. */
		if ((rc = ht__summary_at_peak(&o.q, t.r, NULL)) < 0)
			read_failed(o.file, rc);
		o.has_range = true;
		o.t1 = 0;
		o.t2 = o.q.at_ts + 1;
		o.q.has_at = false;
	}
	t.w = tu_window(t.r, o.has_range, o.t1, o.t2);
	t.rate = o.kind == TABLE_HEAP ? ht_reader_info(t.r)->sample_rate : 0;
	if ((o.q.cull.count && ht__frame_matcher_new(&t.cull, &o.q.cull, t.r) < 0) ||
	    (o.q.require.count && ht__frame_matcher_new(&t.require, &o.q.require, t.r) < 0) ||
	    ht__wstacks_new(&t.stacks, t.r, t.cull) < 0)
		die("out of memory");
	t.tree = ht__wtree_new(&t.w, o.keys, o.nkeys, o.rows);
	if (!t.tree)
		die("out of memory");
	table_read(&t);
	tu_window_check(t.r, o.has_range, &t.w);
	ht__wtree_sort(t.tree, o.sort, o.top);
	const struct ht__wnode *root = ht__wtree_root(t.tree);
	const struct ht__wnode *path[HT_WK_MAX_LEVELS];
	switch (o.fmt) {
	case FMT_TEXT:
		print_text(&t, root);
		break;
	case FMT_CSV:
		csv_header(&t);
		if (o.rows)
			csv_rows(&t, root);
		else
			csv_node(&t, root, path);
		break;
	case FMT_JSON:
		print_json(&t, root);
		break;
	}
	ht__wtree_free(t.tree);
	ht__heap_names_free(t.names);
	ht__wstacks_free(t.stacks);
	if (t.require)
		ht__frame_matcher_free(t.require);
	if (t.cull)
		ht__frame_matcher_free(t.cull);
	ht_reader_close(t.r);
	ht__query_release(&o.q);
	tu_args_release();
	return fflush(stdout) ? 1 : 0;
}
