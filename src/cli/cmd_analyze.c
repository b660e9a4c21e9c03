/*
 * cmd_analyze.c - 'heaptrail analyze', the xperf heap actions: which stacks,
 * frames, images, processes and heap handles hold the memory, with xperf's
 * filters, culling and sort keys, as text, CSV or JSON. The counting is the
 * analysis core's (src/analysis/aggregate.h); this file parses options and
 * prints.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analysis/aggregate.h"
#include "analysis/query.h"
#include "analysis/summary.h"
#include "base/vec.h"
#include "cli/builtin.h"
#include "cli/agg_side.h"
#include "cli/common.h"
#include "format/textout.h"
#include "cli/opt.h"
#include "cli/query_opts.h"
#include "heaptrail/trace.h"

static const char usage_text[] =
    "usage: heaptrail analyze FILE [options]\n"
    "\n"
    "Which stacks, frames, images, processes and heap handles hold the memory, as\n"
    "the xperf heap actions. Options take one dash or two ('-top 5', '--top 5',\n"
    "'--top=5'); '-cullFrames' is also '--cull-frames'.\n"
    "\n"
    "modes (without one: -stacks so, as xperf):\n"
    "  -stacks [KEY]          aggregate by whole stack, after culling\n"
    "  -frames [KEY]          by the topmost frame after culling\n"
    "  -images [KEY]          by the module (image) of that frame; also -image\n"
    "  KEY                    a sort key alone means -stacks KEY\n"
    "  --summary              a row per process and heap handle, TOTAL first\n"
    "sort keys (largest first; ties: then total size, then the key text):\n"
    "  so   outstanding size (default)   soc  outstanding count\n"
    "  st   total size                   stc  total count\n"
    "  src  realloc count (allocations that came from a realloc)\n"
    "\n"
    "filters:\n"
    "  -pid PID               only this process (repeatable, or PID,PID...)\n"
    "  -range T1 T2           only events in [T1, T2); an allocation is outstanding\n"
    "                         when it has no free inside the range\n"
    "  --at-peak              the allocations live when the heap was largest (of\n"
    "                         the -pid processes, or of the whole trace)\n"
    "  --temporary            only temporary allocations: freed before the thread\n"
    "                         that made them allocated again (heaptrack's meaning)\n"
    "  -lifetime L1 L2        only allocations with L1 <= lifetime < L2; one not\n"
    "                         freed in the range lives up to the range's end (the\n"
    "                         trace's end without -range)\n"
    "  -size S1 S2            only allocations of S1 <= size < S2 bytes\n"
    "  -requireFrames F...    only allocations whose stack has a frame matching one\n"
    "                         of F (tested before culling)\n"
    "  times are from the start of the trace, in microseconds unless suffixed\n"
    "  s, ms, us or ns ('1.5s', '200ms')\n"
    "\n"
    "culling (remove the longest run of matching frames from the allocation end;\n"
    "when every frame matches, keep the bottom one):\n"
    "  -cullFrames F...       frames to cull\n"
    "  -cullLists FILE...     files of frames to cull, one per line ('#' comments)\n"
    "  --no-default-cull      without the built-in list (heaptrail's own frames,\n"
    "                         malloc & co., operator new/new[], mmap & co.)\n"
    "  --print-default-cull   print the built-in list, as a -cullLists file\n"
    "  frames: 'module!', 'module!symbol' or 'symbol', case-insensitive; module is\n"
    "  a file name or full path; a trailing '*' matches a prefix; 'module!0xOFFSET'\n"
    "  matches an address\n"
    "\n"
    "output:\n"
    "  -top N                 show N items (default: at most 10000, and says so\n"
    "                         when items were cut)\n"
    "  -totals                only the totals\n"
    "  -symbols               frames as module!function (default when the trace\n"
    "                         has symbols)\n"
    "  --no-symbols           frames as module!0xOFFSET\n"
    "  --format text|csv|json\n"
    "  -o, --output OUT       write to OUT instead of standard output\n"
    "  --force                replace OUT if it exists\n"
    "\n"
    "xperf's own spelling works too: -i FILE for the trace, -a heap for the action\n"
    "(the only one). Put FILE first: lists (-cullFrames ...) run to the next option.\n"
    "\n"
    "examples:\n"
    "  heaptrail analyze app.htr\n"
    "  heaptrail analyze -i app.htr -a heap -stacks so -cullLists cullFuncs.txt -o out.txt\n"
    "  heaptrail analyze app.htr -frames st -range 2s 5s -top 10 --format csv\n";

/* What the options asked for, besides the query. */
struct opts {
	const char *file;
	enum out_format format;
	bool mode_given;
	bool summary;	    /* --summary: the handle table */
	const char *output; /* -o */
	bool force;
};

/* The option names analyze knows (without dashes), for "did you mean". */
static const char *const known_options[] = {
    "stacks",
    "frames",
    "images",
    "summary",
    "sort",
    "top",
    "totals",
    "format",
    "output",
    "force",
    "input",
    "action",
    "print-default-cull",
    "pid",
    "range",
    "lifetime",
    "size",
    "requireFrames",
    "cullFrames",
    "cullLists",
    "no-default-cull",
    "symbols",
    "no-symbols",
    "at-peak",
    "temporary",
    "help",
};

static _Noreturn void unknown_option(const char *arg)
{
	char word[64], cand[sizeof(known_options) / sizeof(known_options[0])][40];
	const char *cands[sizeof(known_options) / sizeof(known_options[0])];
	size_t n = sizeof(known_options) / sizeof(known_options[0]);
	snprintf(word, sizeof(word), "%.*s", (int)strcspn(arg, "="), arg + strspn(arg, "-"));
	for (size_t i = 0; i < n; i++) {
		snprintf(cand[i], sizeof(cand[i]), "%s", known_options[i]);
		cands[i] = cand[i];
	}
	char dym[80];
	/* xperf options are one dash, camelCase ones two; suggest as typed. */
	die("unknown option '%s'%s; 'heaptrail analyze --help' lists the options", arg,
	    cli_did_you_mean(dym, sizeof(dym), arg[1] == '-' ? "--" : "-", word, cands, n));
}

static bool is_sort_key(const char *s)
{
	enum ht__sort k;
	return ht__sort_parse(s, &k) == 0;
}

/* "xx" after -stacks looks like a mistyped key rather than a file name. */
static bool looks_like_key(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 4)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalpha((unsigned char)s[i]))
			return false;
	struct stat st;
	return stat(s, &st) < 0;
}

static _Noreturn void bad_key(const char *s)
{
	die("unknown sort key '%s'; use so, soc, st, stc or src", s);
}

static void set_mode(struct opts *o, struct ht__query *q, enum ht__group g, int argc, char **argv,
		     int *i, const char *inline_val)
{
	if (o->mode_given && q->group != g)
		die("choose one of -stacks, -frames and -images");
	o->mode_given = true;
	q->group = g;
	const char *key = inline_val;
	if (!key && *i + 1 < argc && argv[*i + 1][0] != '-') {
		const char *next = argv[*i + 1];
		if (is_sort_key(next) || (o->file && looks_like_key(next)) ||
		    (!o->file && looks_like_key(next) && *i + 2 < argc)) {
			key = next;
			++*i;
		}
	}
	if (key && ht__sort_parse(key, &q->sort) < 0)
		bad_key(key);
}

static void parse_args(int argc, char **argv, struct opts *o, struct ht__query *q)
{
	char name[64];
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (!strcmp(arg, "--")) {
			for (i++; i < argc; i++) {
				if (o->file)
					die("unexpected argument '%s'", argv[i]);
				o->file = argv[i];
			}
			break;
		}
		if (arg[0] != '-' || !arg[1]) {
			if (!o->file) {
				o->file = arg;
			} else if (is_sort_key(arg)) {
				if (!o->mode_given)
					q->group = HT_GROUP_STACK;
				o->mode_given = true;
				ht__sort_parse(arg, &q->sort);
			} else if (looks_like_key(arg)) {
				bad_key(arg);
			} else {
				die("unexpected argument '%s'; one trace at a time", arg);
			}
			continue;
		}
		const char *eq = strchr(arg, '=');
		const char *val = eq ? eq + 1 : NULL;
		opt_norm_name(arg, eq ? (size_t)(eq - arg) : strlen(arg), name, sizeof(name));

		if (!strcmp(name, "h") || !strcmp(name, "help")) {
			fputs(usage_text, stdout);
			exit(0);
		} else if (!strcmp(name, "printdefaultcull")) {
			printf("# heaptrail's built-in cull list (analyze --no-default-cull drops "
			       "it)\n");
			for (const char *const *d = ht__match_default_list; *d; d++)
				printf("%s\n", *d);
			exit(0);
		} else if (!strcmp(name, "i") || !strcmp(name, "input")) {
			const char *v = opt_value(argc, argv, &i, val, arg);
			if (o->file)
				die("two traces: '%s' and '%s'; analyze reads one", o->file, v);
			o->file = v;
		} else if (!strcmp(name, "a") || !strcmp(name, "action")) {
			const char *v = opt_value(argc, argv, &i, val, arg);
			if (strcmp(v, "heap"))
				die("unknown action '%s' for '%s': heaptrail analyzes the heap "
				    "('-a heap')",
				    v, arg);
		} else if (!strcmp(name, "o") || !strcmp(name, "output")) {
			o->output = opt_value(argc, argv, &i, val, arg);
			output_not_dash(o->output, "-o", false);
		} else if (!strcmp(name, "force")) {
			o->force = true;
		} else if (!strcmp(name, "summary")) {
			o->summary = true;
		} else if (!strcmp(name, "stacks") || !strcmp(name, "stack")) {
			set_mode(o, q, HT_GROUP_STACK, argc, argv, &i, val);
		} else if (!strcmp(name, "frames") || !strcmp(name, "frame")) {
			set_mode(o, q, HT_GROUP_FRAME, argc, argv, &i, val);
		} else if (!strcmp(name, "images") || !strcmp(name, "image")) {
			set_mode(o, q, HT_GROUP_IMAGE, argc, argv, &i, val);
		} else if (is_sort_key(name) && !val) {
			if (!o->mode_given)
				q->group = HT_GROUP_STACK;
			o->mode_given = true;
			ht__sort_parse(name, &q->sort);
		} else if (!strcmp(name, "sort")) {
			const char *k = opt_value(argc, argv, &i, val, arg);
			if (ht__sort_parse(k, &q->sort) < 0)
				bad_key(k);
			if (!o->mode_given)
				q->group = HT_GROUP_STACK;
			o->mode_given = true;
		} else if (query_option(name, arg, val, argc, argv, &i, q, &o->file)) {
			continue;
		} else if (!strcmp(name, "top")) {
			const char *v = opt_value(argc, argv, &i, val, arg);
			char *end;
			errno = 0;
			unsigned long long n = strtoull(v, &end, 10);
			if (!isdigit((unsigned char)*v) || *end || errno || n == 0)
				die("invalid count '%s' for '%s'; use a number above 0", v, arg);
			q->top = n;
			q->top_given = true;
		} else if (!strcmp(name, "totals")) {
			q->totals_only = true;
		} else if (!strcmp(name, "format")) {
			const char *v = opt_value(argc, argv, &i, val, arg);
			if (parse_format(v, &o->format) < 0)
				die("unknown format '%s'; use text, csv or json", v);
		} else {
			unknown_option(arg);
		}
	}
	if (o->summary && o->mode_given)
		die("--summary is the table by process and heap handle: leave out -stacks, "
		    "-frames, -images and sort keys");
	/* xperf: -stacks is the default action; --summary is the handle table. */
	if (!o->summary && !o->mode_given)
		q->group = HT_GROUP_STACK;
	if (!o->file)
		die("no trace given; usage: heaptrail analyze FILE [options]");
}

static const char *group_word(enum ht__group g, bool plural)
{
	switch (g) {
	case HT_GROUP_STACK:
		return plural ? "stacks" : "stack";
	case HT_GROUP_FRAME:
		return plural ? "frames" : "frame";
	case HT_GROUP_IMAGE:
		return plural ? "images" : "image";
	default:
		return plural ? "handles" : "handle";
	}
}

static double kb(uint64_t bytes)
{
	return (double)bytes / 1024.0;
}

static void upper_copy(const char *s, char *out, size_t cap)
{
	size_t k;
	for (k = 0; s[k] && k + 1 < cap; k++)
		out[k] = (char)toupper((unsigned char)s[k]);
	out[k] = '\0';
}

static void text_block(const struct ht__agg_counts *c)
{
	ht__out_str(stdout, "    Alloc count:       ");
	ht__out_u64(stdout, c->total_count, 12);
	ht__out_str(stdout, "\n    Alloc KiB:         ");
	ht__out_kib(stdout, c->total_bytes, 14);
	ht__out_str(stdout, "\n    Realloc count:     ");
	ht__out_u64(stdout, c->realloc_count, 12);
	ht__out_str(stdout, "\n    Outstanding count: ");
	ht__out_u64(stdout, c->outstanding_count, 12);
	ht__out_str(stdout, "\n    Outstanding KiB:   ");
	ht__out_kib(stdout, c->outstanding_bytes, 14);
	ht__out_chr(stdout, '\n');
}

/*
 * A stack's frames. The same frames come back in stack after stack (millions
 * of lines on a large trace), so each frame's line is made once, kept by
 * frame id, and copied into stdout's buffer (buffer_stdout(): 256 KiB, where
 * a stack's lines fit; gathering them into a buffer of our own first made
 * a second copy of clang++'s 80 MB). The lines are kept one after the other
 * with HT__OUT_SLACK bytes readable past the last, for ht__out_mem_slack().
 */
struct frame_line {
	size_t off, len; /* in lines_text; len 0: not made yet (a line ends in '\n') */
};
static struct frame_line *frame_lines;
static size_t nframe_lines;
/* A line is made in a memory stream, rewound after each, then kept in
   lines_text (a memory stream per line cost its own buffer, zeroed:
   python: 26 M instructions for 3000 lines). */
static FILE *lines;
static char *lines_buf;
static size_t lines_buf_len;
static char *lines_text;
static size_t lines_len, lines_cap;

/* Makes frame's line: its place in lines_text. */
static __attribute__((noinline)) void frame_line_make(struct ht__agg *agg,
						      const struct ht_reader *r, uint32_t frame)
{
	if (frame >= nframe_lines && ht__grow_zero((void **)&frame_lines, &nframe_lines,
						   (size_t)frame + 1, sizeof(*frame_lines)) < 0)
		die("out of memory");
	if (!lines && !(lines = open_memstream(&lines_buf, &lines_buf_len)))
		die("out of memory");
	FILE *m = lines;
	const struct ht_frame *f = ht_reader_frame(r, frame);
	ht__out_str(m, "        ");
	ht__out_str(m, ht__agg_frame_text(agg, frame));
	if (f && f->file) {
		ht__out_str(m, "  ");
		put_text(m, f->file);
		ht__out_chr(m, ':');
		ht__out_u64(m, f->line, 0);
	}
	if (f && f->inlined)
		ht__out_str(m, "  (inlined)");
	ht__out_chr(m, '\n');
	if (fflush(m) != 0 || !lines_buf)
		die("out of memory");
	size_t n = lines_buf_len;
	if (lines_len + n + HT__OUT_SLACK > lines_cap &&
	    ht__grow((void **)&lines_text, &lines_cap, lines_len + n + HT__OUT_SLACK, 1) < 0)
		die("out of memory");
	memcpy(lines_text + lines_len, lines_buf, n);
	memset(lines_text + lines_len + n, 0, HT__OUT_SLACK);
	frame_lines[frame] = (struct frame_line){lines_len, n};
	lines_len += n;
	rewind(m);
}

static void print_frames(struct ht__agg *agg, const struct ht_reader *r, const uint32_t *frames,
			 uint32_t n)
{
	FILE *out = stdout;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t frame = frames[i];
		if (frame >= nframe_lines || !frame_lines[frame].len)
			frame_line_make(agg, r, frame);
		const struct frame_line *fl = &frame_lines[frame];
		ht__out_mem_slack(out, lines_text + fl->off, fl->len);
	}
}

static void frame_lines_release(void)
{
	if (lines)
		fclose(lines);
	free(lines_buf);
	lines = NULL;
	lines_buf = NULL;
	lines_buf_len = 0;
	free(lines_text);
	lines_text = NULL;
	lines_len = lines_cap = 0;
	free(frame_lines);
	frame_lines = NULL;
	nframe_lines = 0;
}

static const char *exe_of(const struct ht_reader *r, uint32_t process)
{
	const struct ht_process *p = ht_reader_process(r, process);
	return p && p->exe ? p->exe : "?";
}

static void print_handles_text(const struct ht__agg_result *res, const struct ht_reader *r,
			       const struct ht__heap_names *names)
{
	printf("%10s %12s %10s %12s %10s  %-18s  %s\n", "Alloc#", "Alloc KiB", "Out#", "Out KiB",
	       "Realloc#", "Handle", "Process");
	const struct ht__agg_counts *t = &res->totals;
	printf("%10" PRIu64 " %12.1f %10" PRIu64 " %12.1f %10" PRIu64 "  TOTAL\n", t->total_count,
	       kb(t->total_bytes), t->outstanding_count, kb(t->outstanding_bytes),
	       t->realloc_count);
	for (size_t i = 0; i < res->count; i++) {
		const struct ht__agg_item *it = &res->items[i];
		char handle[1100];
		ht__heap_label(names, it->process, it->heap, handle, sizeof(handle));
		printf("%10" PRIu64 " %12.1f %10" PRIu64 " %12.1f %10" PRIu64 "  %-18s  %" PRId32
		       " ",
		       it->c.total_count, kb(it->c.total_bytes), it->c.outstanding_count,
		       kb(it->c.outstanding_bytes), it->c.realloc_count, handle, it->pid);
		put_text(stdout, exe_of(r, it->process));
		putchar('\n');
	}
}

static void print_text(const struct ht__agg_result *res, struct ht__agg *agg,
		       const struct ht_reader *r, const struct ht__query *q,
		       const struct ht__heap_names *names)
{
	char note[200];
	if (sample_note(ht_reader_info(r), note, sizeof(note)))
		printf("NOTE: %s\n\n", note);
	if (res->group == HT_GROUP_HANDLE) {
		print_handles_text(res, r, names);
		if (res->count < res->total_items && !q->totals_only)
			printf("(%zu of %zu rows shown)\n", res->count, res->total_items);
		return;
	}
	printf("GLOBAL ALLOCATIONS\n");
	text_block(&res->totals);
	if (q->totals_only)
		return;
	char upper[16], title[32], one[16];
	upper_copy(group_word(res->group, true), upper, sizeof(upper));
	upper_copy(group_word(res->group, false), one, sizeof(one));
	upper_copy(ht__sort_title(res->sort), title, sizeof(title));
	printf("\nTOP %zu %s BY %s", res->count, upper, title);
	if (res->count < res->total_items)
		printf(" (%zu of %zu shown)", res->count, res->total_items);
	printf("\n");
	text_block(&res->shown);
	for (size_t i = 0; i < res->count; i++) {
		const struct ht__agg_item *it = &res->items[i];
		/* The next stack's frame ids, fetched while this one is
		   written: each stack's first reads of its ids missed (python:
		   a third of the text's samples). */
		if (i + 1 < res->count && it[1].frames) {
			const char *f = (const char *)it[1].frames;
			size_t bytes = it[1].nframes * sizeof(*it[1].frames);
			for (size_t b = 0; b < bytes && b < 512; b += 64)
				__builtin_prefetch(f + b);
		}
		ht__out_chr(stdout, '\n');
		ht__out_str(stdout, one);
		ht__out_chr(stdout, ' ');
		ht__out_u64(stdout, i + 1, 0);
		if (res->group == HT_GROUP_IMAGE) {
			ht__out_str(stdout, ": ");
			ht__out_str(stdout, it->key);
		}
		ht__out_str(stdout, "\n    Out# ");
		ht__out_u64(stdout, it->c.outstanding_count, 0);
		ht__out_str(stdout, ", Out KiB ");
		ht__out_kib(stdout, it->c.outstanding_bytes, 0);
		ht__out_str(stdout, ", Alloc# ");
		ht__out_u64(stdout, it->c.total_count, 0);
		ht__out_str(stdout, ", Alloc KiB ");
		ht__out_kib(stdout, it->c.total_bytes, 0);
		ht__out_str(stdout, ", Realloc# ");
		ht__out_u64(stdout, it->c.realloc_count, 0);
		ht__out_chr(stdout, '\n');
		if (res->group == HT_GROUP_IMAGE)
			continue;
		if (!it->nframes)
			ht__out_str(stdout, "        [no stack]\n");
		print_frames(agg, r, it->frames, it->nframes);
	}
}

static void json_counts(struct jw *j, const struct ht__agg_counts *c)
{
	jw_key(j, "outstanding_bytes");
	jw_u64(j, c->outstanding_bytes);
	jw_key(j, "outstanding_count");
	jw_u64(j, c->outstanding_count);
	jw_key(j, "total_bytes");
	jw_u64(j, c->total_bytes);
	jw_key(j, "total_count");
	jw_u64(j, c->total_count);
	jw_key(j, "realloc_count");
	jw_u64(j, c->realloc_count);
}

static void print_json(const struct ht__agg_result *res, struct ht__agg *agg,
		       const struct ht_reader *r, const struct ht__query *q,
		       const struct ht__heap_names *names)
{
	struct jw j;
	jw_init(&j, stdout, true);
	jw_obj_begin(&j);
	jw_key(&j, "mode");
	jw_str(&j, group_word(res->group, true));
	if (res->group != HT_GROUP_HANDLE) {
		jw_key(&j, "sort");
		jw_str(&j, ht__sort_name(res->sort));
	}
	jw_key(&j, "symbols");
	jw_bool(&j, res->symbols);
	jw_sampling(&j, ht_reader_info(r));
	jw_key(&j, "totals");
	jw_obj_begin(&j);
	jw_key(&j, "alloc_count");
	jw_u64(&j, res->totals.total_count);
	jw_key(&j, "alloc_bytes");
	jw_u64(&j, res->totals.total_bytes);
	jw_key(&j, "realloc_count");
	jw_u64(&j, res->totals.realloc_count);
	jw_key(&j, "outstanding_count");
	jw_u64(&j, res->totals.outstanding_count);
	jw_key(&j, "outstanding_bytes");
	jw_u64(&j, res->totals.outstanding_bytes);
	jw_obj_end(&j);
	if (!q->totals_only) {
		jw_key(&j, "items_total");
		jw_u64(&j, res->total_items);
		jw_key(&j, "items");
		jw_arr_begin(&j);
		for (size_t i = 0; i < res->count; i++) {
			const struct ht__agg_item *it = &res->items[i];
			jw_obj_begin(&j);
			switch (res->group) {
			case HT_GROUP_HANDLE:
				jw_key(&j, "pid");
				jw_i64(&j, it->pid);
				jw_key(&j, "exe");
				jw_str(&j, exe_of(r, it->process));
				jw_key(&j, "handle");
				jw_u64(&j, it->heap);
				jw_key(&j, "heap_name");
				jw_str(&j, ht__heap_name(names, it->process, it->heap));
				break;
			case HT_GROUP_STACK:
				jw_key(&j, "stack");
				jw_arr_begin(&j);
				for (uint32_t f = 0; f < it->nframes; f++)
					jw_str(&j, ht__agg_frame_text(agg, it->frames[f]));
				jw_arr_end(&j);
				break;
			case HT_GROUP_FRAME:
				jw_key(&j, "frame");
				jw_str(&j, it->key);
				break;
			case HT_GROUP_IMAGE:
				jw_key(&j, "image");
				jw_str(&j, it->key);
				break;
			}
			json_counts(&j, &it->c);
			jw_obj_end(&j);
		}
		jw_arr_end(&j);
	}
	jw_obj_end(&j);
	jw_finish(&j);
}

static void csv_u64(uint64_t v, char sep)
{
	ht__out_u64(stdout, v, 0);
	ht__out_chr(stdout, sep);
}

static void print_csv(const struct ht__agg_result *res, struct ht__agg *agg,
		      const struct ht_reader *r, const struct ht__query *q,
		      const struct ht__heap_names *names)
{
	/* A sampled trace's rows end with the rate their estimates come from. */
	uint64_t rate = ht_reader_info(r)->sample_rate;
	if (q->totals_only) {
		printf(
		    "alloc_count,alloc_bytes,realloc_count,outstanding_count,outstanding_bytes%s\n",
		    rate ? ",sample_rate" : "");
		csv_u64(res->totals.total_count, ',');
		csv_u64(res->totals.total_bytes, ',');
		csv_u64(res->totals.realloc_count, ',');
		csv_u64(res->totals.outstanding_count, ',');
		csv_u64(res->totals.outstanding_bytes, rate ? ',' : '\n');
		if (rate)
			csv_u64(rate, '\n');
		return;
	}
	if (res->group == HT_GROUP_HANDLE)
		printf("pid,exe,handle,heap_name,");
	printf("outstanding_bytes,outstanding_count,total_bytes,total_count,realloc_count");
	if (res->group != HT_GROUP_HANDLE)
		printf(",%s", group_word(res->group, false));
	printf("%s\n", rate ? ",sample_rate" : "");
	char *line = NULL;
	size_t line_len = 0;
	for (size_t i = 0; i < res->count; i++) {
		const struct ht__agg_item *it = &res->items[i];
		if (res->group == HT_GROUP_HANDLE) {
			printf("%" PRId32 ",", it->pid);
			csv_field(stdout, exe_of(r, it->process));
			printf(",%" PRIu64 ",", it->heap);
			csv_field(stdout, ht__heap_name(names, it->process, it->heap));
			putchar(',');
		}
		csv_u64(it->c.outstanding_bytes, ',');
		csv_u64(it->c.outstanding_count, ',');
		csv_u64(it->c.total_bytes, ',');
		csv_u64(it->c.total_count, ',');
		ht__out_u64(stdout, it->c.realloc_count, 0);
		if (res->group == HT_GROUP_STACK) {
			/* Innermost first, "a <- b <- c": every CSV stack is written so (table
			 * too). Each stream makes a new buffer: the last one is freed first. */
			free(line);
			line = NULL;
			FILE *m = open_memstream(&line, &line_len);
			if (!m)
				die("out of memory");
			for (uint32_t f = 0; f < it->nframes; f++) {
				if (f)
					ht__out_str(m, " <- ");
				ht__out_str(m, ht__agg_frame_text(agg, it->frames[f]));
			}
			fclose(m);
			ht__out_chr(stdout, ',');
			csv_field(stdout, line);
		} else if (res->group != HT_GROUP_HANDLE) {
			putchar(',');
			csv_field(stdout, it->key);
		}
		if (rate)
			printf(",%" PRIu64, rate);
		putchar('\n');
	}
	free(line);
}

int cmd_analyze(int argc, char **argv)
{
	struct opts o = {0};
	struct agg_side side = {0};
	struct ht__query *qp = &side.q;
	buffer_stdout();
	ht__query_init(qp);
	parse_args(argc, argv, &o, qp);
	side.path = o.file;
	/* -o: stdout itself goes to the file, so every printer below writes there. */
	struct ht__output out;
	FILE *of = NULL;
	if (o.output) {
		of = output_begin(&out, o.output, o.force, 0644);
		fflush(stdout);
		if (dup2(fileno(of), STDOUT_FILENO) < 0)
			die("cannot write '%s': %s", o.output, strerror(errno));
	}
	side.want_heap_names = true;
	agg_side_run(&side, "analyzing");
	struct ht_reader *r = side.r;
	struct ht__agg *agg = side.agg;
	const struct ht__query q = *qp;
	const struct ht__agg_result res = side.res;
	if (q.symbols == 1 && !(ht_reader_info(r)->flags & HT_TRACEF_SYMBOLS))
		warning("'%s' has no symbols; frames show as module!0xOFFSET", o.file);
	if (!q.top_given && !q.totals_only && res.count < res.total_items)
		warning("showing the first %zu of %zu %s; use -top N to show more", res.count,
			res.total_items, group_word(res.group, true));
	switch (o.format) {
	case FMT_JSON:
		print_json(&res, agg, r, &q, side.heap_names);
		break;
	case FMT_CSV:
		print_csv(&res, agg, r, &q, side.heap_names);
		break;
	default:
		print_text(&res, agg, r, &q, side.heap_names);
		break;
	}
	fflush(stdout);
	frame_lines_release();
	agg_side_release(&side);
	if (ferror(stdout))
		return 1;
	if (of)
		output_end(&out, of);
	return 0;
}
