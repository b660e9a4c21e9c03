/*
 * cmd_dump.c - 'heaptrail dump': every event of a trace in order, one line
 * each, as stable text (for golden tests and eyes) or JSON Lines (for
 * scripts), optionally with each event's stack. docs/json-output.md has the
 * fields.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/match.h"
#include "analysis/pass.h"
#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"
#include "heaptrail/trace.h"

static const char usage_text[] =
    "usage: heaptrail dump FILE [--format text|json] [--stacks]\n"
    "\n"
    "Print every event of a trace in time order, one per line:\n"
    "  TS PID TID TYPE FUNC FIELD=VALUE... stack=ID\n"
    "TS is in ns since the start of the trace; addresses, handles, prot and flags\n"
    "are hex, sizes and ids decimal; stack=0 means no stack was captured.\n"
    "\n"
    "options:\n"
    "  --format text|json   text (default) or JSON Lines: one object per event\n"
    "                       (fields in docs/json-output.md)\n"
    "  --stacks             add each event's frames, innermost first, as\n"
    "                       'module!function file:line' or 'module!0xREL'\n"
    "  -h, --help           show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail dump app.htr | head\n"
    "  heaptrail dump app.htr --stacks --format json > events.jsonl\n";

/* Fields printed for a type even when 0 (others only when set). */
static unsigned always(unsigned type)
{
#define ALWAYS(id, value, name, func, fields) [HT_EV_##id] = fields,
	static const unsigned fields[HT_EV__COUNT] = {HT_EVENT_TYPES(ALWAYS)};
#undef ALWAYS
	return type < HT_EV__COUNT ? fields[type] : 0;
}

static int is_heap_event(unsigned type)
{
	return type == HT_EV_ALLOC || type == HT_EV_ALLOC_FAIL || type == HT_EV_REALLOC ||
	       type == HT_EV_FREE;
}

static unsigned fields_of(const struct ht_event *ev)
{
	unsigned f = always(ev->type);
	f |= ev->heap ? HT_FLD_HEAP : 0;
	f |= ev->old_addr ? HT_FLD_OLD_ADDR : 0;
	f |= ev->old_size ? HT_FLD_OLD_SIZE : 0;
	f |= ev->addr ? HT_FLD_ADDR : 0;
	f |= ev->size ? HT_FLD_SIZE : 0;
	f |= ev->prot ? HT_FLD_PROT : 0;
	f |= ev->mflags ? HT_FLD_MFLAGS : 0;
	f |= ev->fd ? HT_FLD_FD : 0;
	f |= ev->module ? HT_FLD_MODULE : 0;
	f |= ev->value ? HT_FLD_VALUE : 0;
	f |= ev->name ? HT_FLD_NAME : 0;
	return f;
}

/* A string in double quotes with \", \\ and \xNN for control bytes and bytes
   that are not UTF-8. */
static void quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (const char *p = s ? s : ""; *p;) {
		size_t k = ht__text_char(p);
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (!k)
			fprintf(f, "\\x%02x", (unsigned char)*p);
		else
			fwrite(p, 1, k, f);
		p += k ? k : 1;
	}
	fputc('"', f);
}

/* "module!function file:line", "module!0xREL" or "0xADDR" into buf. */
static void frame_text(struct ht_reader *r, uint32_t id, char *buf, size_t n)
{
	const struct ht_frame *fr = ht_reader_frame(r, id);
	if (!fr) {
		snprintf(buf, n, "?");
		return;
	}
	const struct ht_module *m =
	    fr->module != HT_MODULE_NONE ? ht_reader_module(r, fr->module) : NULL;
	const char *mod = m ? (*m->name ? m->name : "?") : NULL;
	int k;
	if (fr->function && mod)
		k = snprintf(buf, n, "%s!%s", mod, fr->function);
	else if (fr->function)
		k = snprintf(buf, n, "%s", fr->function);
	else if (mod)
		k = snprintf(buf, n, "%s!0x%" PRIx64, mod, fr->rel);
	else
		k = snprintf(buf, n, "0x%" PRIx64, fr->rel);
	if (k >= 0 && (size_t)k < n && fr->file)
		snprintf(buf + k, n - (size_t)k, fr->line ? " %s:%u" : " %s", fr->file, fr->line);
}

static void print_text(struct ht_reader *r, const struct ht_event *ev, int stacks)
{
	FILE *f = stdout;
	fprintf(f, "%" PRIu64 " %d %d %s %s", ev->ts, ev->pid, ev->tid, ht_event_name(ev->type),
		ht_func_name(ev->func));
	unsigned fl = fields_of(ev);
	if (fl & HT_FLD_PROCESS)
		fprintf(f, " process=%u", ev->process);
	if (fl & HT_FLD_HEAP)
		fprintf(f, " heap=0x%" PRIx64, ev->heap);
	if (fl & HT_FLD_OLD_ADDR)
		fprintf(f,
			ev->type == HT_EV_MODULE_LOAD ? " bias=0x%" PRIx64 : " old_addr=0x%" PRIx64,
			ev->old_addr);
	if (fl & HT_FLD_OLD_SIZE)
		fprintf(f, " old_size=%" PRIu64, ev->old_size);
	if (fl & HT_FLD_ADDR)
		fprintf(f, " addr=0x%" PRIx64, ev->addr);
	if (fl & HT_FLD_SIZE)
		fprintf(f, " size=%" PRIu64, ev->size);
	if (fl & HT_FLD_PROT)
		fprintf(f, " prot=0x%x", ev->prot);
	if (fl & HT_FLD_MFLAGS)
		fprintf(f, " mflags=0x%x", ev->mflags);
	if (fl & HT_FLD_FD)
		fprintf(f, " fd=%d", ev->fd);
	if (fl & HT_FLD_MODULE)
		fprintf(f, " module=%u", ev->module);
	if (ev->type == HT_EV_PROCESS_EXIT && (ev->flags & HT_EVF_EXEC))
		fputs(" end=exec", f);
	else if (ev->type == HT_EV_PROCESS_EXIT)
		fprintf(f, (ev->flags & HT_EVF_SIGNAL) ? " signal=%d" : " exit_code=%d", ev->value);
	else if (fl & HT_FLD_VALUE)
		fprintf(f, " value=%d", ev->value);
	if (fl & HT_FLD_NAME) {
		fputs(" name=", f);
		quoted(f, ev->name);
	}
	if (ev->type == HT_EV_PROCESS_START || ev->type == HT_EV_PROCESS_EXEC) {
		const struct ht_process *p = ht_reader_process(r, ev->process);
		if (p) {
			fprintf(f, " ppid=%d exe=", p->ppid);
			quoted(f, p->exe);
		}
	}
	if (ev->type == HT_EV_MODULE_LOAD) {
		const struct ht_module *m = ht_reader_module(r, ev->module);
		if (m) {
			fputs(" path=", f);
			quoted(f, m->path);
		}
	}
	if (ev->flags & HT_EVF_FAILED)
		fputs(" failed", f);
	if (ev->flags & HT_EVF_UNSEEN)
		fputs(" unseen", f);
	if (ev->flags & HT_EVF_SYNTHETIC)
		fputs(" synthetic", f);
	fprintf(f, " stack=%u\n", ev->stack);
	if (stacks && ev->stack) {
		const uint32_t *frames;
		uint32_t n = ht_reader_stack(r, ev->stack, &frames);
		char buf[1024];
		for (uint32_t i = 0; i < n; i++) {
			frame_text(r, frames[i], buf, sizeof(buf));
			const struct ht_frame *fr = ht_reader_frame(r, frames[i]);
			fputs("    ", f);
			put_text(f, buf); /* file names come from the program's debug info */
			fputs(fr && fr->inlined ? " (inlined)\n" : "\n", f);
		}
	}
}

static void print_json(struct ht_reader *r, const struct ht_event *ev, int stacks)
{
	struct jw j;
	jw_init(&j, stdout, false);
	jw_obj_begin(&j);
	jw_key(&j, "ts");
	jw_u64(&j, ev->ts);
	jw_key(&j, "pid");
	jw_i64(&j, ev->pid);
	jw_key(&j, "tid");
	jw_i64(&j, ev->tid);
	jw_key(&j, "process");
	jw_u64(&j, ev->process);
	jw_key(&j, "type");
	jw_str(&j, ht_event_name(ev->type));
	jw_key(&j, "func");
	jw_str(&j, ht_func_name(ev->func));
	unsigned fl = fields_of(ev);
	if (is_heap_event(ev->type))
		fl |= HT_FLD_HEAP;
	if (fl & HT_FLD_HEAP) {
		jw_key(&j, "heap");
		jw_u64(&j, ev->heap);
	}
	if (fl & HT_FLD_OLD_ADDR) {
		jw_key(&j, ev->type == HT_EV_MODULE_LOAD ? "bias" : "old_addr");
		jw_u64(&j, ev->old_addr);
	}
	if (fl & HT_FLD_OLD_SIZE) {
		jw_key(&j, "old_size");
		jw_u64(&j, ev->old_size);
	}
	if (fl & HT_FLD_ADDR) {
		jw_key(&j, "addr");
		jw_u64(&j, ev->addr);
	}
	if (fl & HT_FLD_SIZE) {
		jw_key(&j, "size");
		jw_u64(&j, ev->size);
	}
	if (fl & HT_FLD_PROT) {
		jw_key(&j, "prot");
		jw_u64(&j, ev->prot);
	}
	if (fl & HT_FLD_MFLAGS) {
		jw_key(&j, "mflags");
		jw_u64(&j, ev->mflags);
	}
	if (fl & HT_FLD_FD) {
		jw_key(&j, "fd");
		jw_i64(&j, ev->fd);
	}
	if (fl & HT_FLD_MODULE) {
		jw_key(&j, "module");
		jw_u64(&j, ev->module);
	}
	if (ev->type == HT_EV_PROCESS_EXIT && (ev->flags & HT_EVF_EXEC)) {
		jw_key(&j, "end");
		jw_str(&j, "exec");
	} else if (ev->type == HT_EV_PROCESS_EXIT) {
		jw_key(&j, (ev->flags & HT_EVF_SIGNAL) ? "signal" : "exit_code");
		jw_i64(&j, ev->value);
	} else if (fl & HT_FLD_VALUE) {
		jw_key(&j, "value");
		jw_i64(&j, ev->value);
	}
	if (fl & HT_FLD_NAME) {
		jw_key(&j, "name");
		jw_str(&j, ev->name);
	}
	if (ev->type == HT_EV_PROCESS_START || ev->type == HT_EV_PROCESS_EXEC) {
		const struct ht_process *p = ht_reader_process(r, ev->process);
		if (p) {
			jw_key(&j, "ppid");
			jw_i64(&j, p->ppid);
			jw_key(&j, "exe");
			jw_str(&j, p->exe);
		}
	}
	if (ev->type == HT_EV_MODULE_LOAD) {
		const struct ht_module *m = ht_reader_module(r, ev->module);
		if (m) {
			jw_key(&j, "path");
			jw_str(&j, m->path);
		}
	}
	if (ev->flags & HT_EVF_FAILED) {
		jw_key(&j, "failed");
		jw_bool(&j, true);
	}
	if (ev->flags & HT_EVF_UNSEEN) {
		jw_key(&j, "unseen");
		jw_bool(&j, true);
	}
	if (ev->flags & HT_EVF_SYNTHETIC) {
		jw_key(&j, "synthetic");
		jw_bool(&j, true);
	}
	jw_key(&j, "stack");
	jw_u64(&j, ev->stack);
	if (stacks && ev->stack) {
		const uint32_t *frames;
		uint32_t n = ht_reader_stack(r, ev->stack, &frames);
		jw_key(&j, "frames");
		jw_arr_begin(&j);
		for (uint32_t i = 0; i < n; i++) {
			const struct ht_frame *fr = ht_reader_frame(r, frames[i]);
			const struct ht_module *m = fr && fr->module != HT_MODULE_NONE
							? ht_reader_module(r, fr->module)
							: NULL;
			jw_obj_begin(&j);
			jw_key(&j, "module");
			jw_str(&j, m ? m->name : NULL);
			jw_key(&j, "rel");
			jw_u64(&j, fr ? fr->rel : 0);
			jw_key(&j, "function");
			jw_str(&j, fr ? fr->function : NULL);
			jw_key(&j, "file");
			jw_str(&j, fr ? fr->file : NULL);
			jw_key(&j, "line");
			jw_u64(&j, fr ? fr->line : 0);
			jw_key(&j, "inlined");
			jw_bool(&j, fr && fr->inlined);
			jw_obj_end(&j);
		}
		jw_arr_end(&j);
	}
	jw_obj_end(&j);
	fputc('\n', stdout); /* not jw_finish: no flush per line */
}

struct dump_opts {
	enum out_format fmt;
	int stacks;
};

static int dump_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	const struct dump_opts *d = ctx;
	if (d->fmt == FMT_JSON)
		print_json(ht__pass_reader(p), ev, d->stacks);
	else
		print_text(ht__pass_reader(p), ev, d->stacks);
	return 0;
}

int cmd_dump(int argc, char **argv)
{
	static const struct cli_opt opts[] = {
	    {"format", 'f', required_argument},
	    {"stacks", 's', no_argument},
	    {NULL, 0, 0},
	};
	enum out_format fmt = FMT_TEXT;
	int stacks = 0;
	struct cli_parser p;
	cli_init(&p, "dump", usage_text, opts, argc, argv, false);
	for (int c; (c = cli_next(&p)) != -1;) {
		if (c == 'f' && (parse_format(p.val, &fmt) < 0 || fmt == FMT_CSV))
			die("unknown format '%s'; dump writes text or json", p.val);
		if (c == 's')
			stacks = 1;
	}
	char **files;
	cli_operands(&p, 1, 1, "trace file", &files);
	const char *path = files[0];

	struct ht_reader *r = open_trace(path);
	int rc;
	static char outbuf[1 << 16];
	setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	/* Every event, in order, through the one trace pass (no trackers needed). */
	struct dump_opts d = {fmt, stacks};
	static const struct ht__consumer dumper = {
	    .name = "dump", .events = HT_PASS_ALL_EVENTS, .event = dump_event};
	struct ht__pass *pass = NULL;
	if ((rc = ht__pass_new(&pass, r)) == 0)
		ht__pass_snapshot(pass, HT_PASS_SNAPSHOT_NONE); /* the events as stored */
	if (rc == 0 && (rc = ht__pass_add(pass, &dumper, &d)) >= 0)
		rc = ht__pass_run(pass);
	ht__pass_free(pass);
	if (fflush(stdout) != 0)
		die("cannot write the dump: output error");
	if (rc < 0)
		read_failed(path, rc);
	reader_warning(r, path);
	ht_reader_close(r);
	return 0;
}
