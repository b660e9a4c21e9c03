/*
 * cmd_symbolize.c - 'heaptrail symbolize': WPA's Load Symbols for a trace
 * whose collector died before symbolizing, or that was recorded where the
 * debug files were missing. The modules are looked up by build-id in the
 * given directories, /usr/lib/debug and their recorded paths with the
 * collector's own symbolizer (session/symbolize.h), and the trace is written
 * again through the format's writer with the new symbol table (docs/symbols.md).
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/pass.h"
#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"
#include "format/reader_phys.h"
#include "format/writer.h"
#include "heaptrail/trace.h"
#include "session/symbolize.h"
#include "base/vec.h"

static const char usage_text[] =
    "usage: heaptrail symbolize FILE [--symbol-path DIR[:DIR...]] (-o OUT | --force)\n"
    "\n"
    "Resolves the trace's frames to module!function file:line (with inlined\n"
    "functions) and writes the trace again with those symbols: for a trace\n"
    "whose collector was killed before it symbolized, or one recorded on a\n"
    "machine without the debug files (WPA's Configure Symbol Path + Load\n"
    "Symbols). Each module is looked for by its build-id, in this order:\n"
    "  1. each DIR of --symbol-path: DIR/.build-id/xx/rest.debug,\n"
    "     DIR/.build-id/xx/rest, then DIR/NAME (the module's file name)\n"
    "  2. the path the module was recorded at\n"
    "  3. /usr/lib/debug/.build-id/xx/rest.debug\n"
    "A file is used only when its build-id is the recorded one. Frames that\n"
    "had symbols keep them when no file is found now.\n"
    "\n"
    "  --symbol-path DIRS   directories to look in first, ':'-separated\n"
    "                       (default: $HEAPTRAIL_SYMBOL_PATH)\n"
    "  -o, --output OUT     write the symbolized trace to OUT (a new file; an\n"
    "                       existing one needs --force; a device or FIFO is\n"
    "                       written in place)\n"
    "  --force              without -o: replace FILE itself (atomically); with\n"
    "                       -o: replace OUT if it exists\n"
    "  --strip              write the trace without any symbols instead (to share\n"
    "                       it without function and file names)\n"
    "  -q, --quiet          print nothing but errors and warnings\n"
    "  -h, --help           show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail symbolize app.htr -o app.sym.htr\n"
    "  heaptrail symbolize app.htr --force --symbol-path /srv/build/out:/srv/debug\n"
    "  heaptrail analyze app.sym.htr -stacks -cullFrames 'libfoo.so!pool_alloc'\n";

struct rewrite {
	struct ht_reader *r;
	struct ht__writer *w;
	uint32_t nphys;
	struct ht__phys_frame *phys; /* nlog 0: never defined */
	bool *resolved;		     /* per physical frame: new symbols written */
};

/* Reads every event once (an unfinished trace defines its tables as it goes). */
static int read_through(struct ht_reader *r, struct progress *pr)
{
	static const struct ht__consumer nothing = {.name = "read through"};
	struct ht__pass *p = NULL;
	int rc = ht__pass_new(&p, r);
	if (rc == 0 && (rc = ht__pass_add(p, &nothing, NULL)) >= 0) {
		if (pr)
			ht__pass_progress(p, progress_show, pr);
		rc = ht__pass_run(p);
	}
	ht__pass_free(p);
	return rc;
}

static int copy_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	struct rewrite *rw = ctx;
	const struct ht_process *proc = NULL;
	if (ev->type == HT_EV_PROCESS_START || ev->type == HT_EV_PROCESS_EXEC)
		proc = ht_reader_process(ht__pass_reader(p), ev->process);
	return ht__writer_event(rw->w, ev, proc);
}

/* Every event into the writer, in order, through one pass; *events counts them. */
static int copy_events(struct rewrite *rw, uint64_t *events)
{
	static const struct ht__consumer copier = {
	    .name = "copy", .events = HT_PASS_ALL_EVENTS, .event = copy_event};
	struct ht__pass *p = NULL;
	int rc = ht__pass_new(&p, rw->r);
	/* A heap snapshot trace's events as stored: no synthetic blocks. */
	if (rc == 0)
		ht__pass_snapshot(p, HT_PASS_SNAPSHOT_NONE);
	if (rc == 0 && (rc = ht__pass_add(p, &copier, rw)) >= 0)
		rc = ht__pass_run(p);
	*events = p ? ht__pass_events(p) : 0;
	ht__pass_free(p);
	return rc;
}

static int put_symbols(void *ctx, uint32_t frame, const struct ht__symbol *syms, uint32_t n)
{
	struct rewrite *rw = ctx;
	rw->resolved[frame] = true;
	return ht__writer_symbols(rw->w, frame, syms, n);
}

static uint8_t hexval(char c)
{
	return (uint8_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
}

/* Modules, frames and stacks of the trace, as definitions of the new one. */
static void write_defs(struct rewrite *rw, struct ht__module_ent *mods, uint32_t nmods)
{
	int rc = 0;
	for (uint32_t m = 0; m < nmods && !rc; m++)
		rc = ht__writer_module(rw->w, m, mods[m].path, mods[m].build_id,
				       mods[m].build_id_len);
	for (uint32_t f = 0; f < rw->nphys && !rc; f++)
		if (rw->phys[f].nlog)
			rc = ht__writer_frame(rw->w, f, rw->phys[f].module, rw->phys[f].rel);
	/* A stack's logical frames are runs, one per physical frame: map back. */
	uint32_t nlog = ht_reader_frame_count(rw->r);
	uint32_t *owner = malloc((nlog ? nlog : 1) * sizeof(*owner));
	uint32_t *buf = NULL;
	size_t cap = 0;
	if (!owner)
		die("out of memory");
	for (uint32_t l = 0; l < nlog; l++)
		owner[l] = UINT32_MAX;
	for (uint32_t f = 0; f < rw->nphys; f++)
		for (uint32_t k = 0; k < rw->phys[f].nlog; k++)
			if (rw->phys[f].first + k < nlog)
				owner[rw->phys[f].first + k] = f;
	uint32_t nstacks = ht_reader_stack_count(rw->r);
	for (uint32_t s = 1; s < nstacks && !rc; s++) {
		const uint32_t *lf;
		uint32_t n = ht_reader_stack(rw->r, s, &lf);
		if (!n)
			continue;
		if (ht__grow((void **)&buf, &cap, n, sizeof(*buf)) < 0)
			die("out of memory");
		uint32_t np = 0;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t f = lf[i] < nlog ? owner[lf[i]] : UINT32_MAX;
			if (f == UINT32_MAX)
				die("the trace's stack %u names an unknown frame: it is damaged",
				    s);
			if (rw->phys[f].first == lf[i]) /* a run starts here */
				buf[np++] = f;
		}
		rc = ht__writer_stack(rw->w, s, buf, np);
	}
	free(buf);
	free(owner);
	if (rc < 0)
		die("cannot write the definitions: %s", ht_strerror(rc));
}

/* Frames no file was found for now keep the symbols the trace had. */
static int keep_old_symbols(struct rewrite *rw)
{
	struct ht__symbol syms[64];
	for (uint32_t f = 0; f < rw->nphys; f++) {
		const struct ht__phys_frame *pf = &rw->phys[f];
		if (rw->resolved[f] || !pf->nlog)
			continue;
		uint32_t n = 0;
		for (uint32_t k = 0; k < pf->nlog && n < 64; k++) {
			const struct ht_frame *lf = ht_reader_frame(rw->r, pf->first + k);
			if (lf && (lf->function || lf->file))
				syms[n++] = (struct ht__symbol){lf->function, lf->file, lf->line};
		}
		int rc = n ? ht__writer_symbols(rw->w, f, syms, n) : 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void show_frames(void *ctx, uint64_t done, uint64_t total)
{
	progress_show(ctx, done, total);
}

int cmd_symbolize(int argc, char **argv)
{
	enum { O_PATH = CLI_LONG, O_FORCE, O_STRIP };
	static const struct cli_opt opts[] = {
	    {"symbol-path", O_PATH, required_argument},
	    {"output", 'o', required_argument},
	    {"force", O_FORCE, no_argument},
	    {"quiet", 'q', no_argument},
	    {"strip", O_STRIP, no_argument},
	    {NULL, 0, 0},
	};
	const char *symbol_path = getenv("HEAPTRAIL_SYMBOL_PATH"), *out = NULL;
	bool force = false, quiet = false, strip = false;
	struct cli_parser p;
	cli_init(&p, "symbolize", usage_text, opts, argc, argv, false);
	for (int c; (c = cli_next(&p)) != -1;) {
		if (c == O_PATH)
			symbol_path = p.val;
		else if (c == 'o')
			out = p.val;
		else if (c == O_FORCE)
			force = true;
		else if (c == 'q')
			quiet = true;
		else if (c == O_STRIP)
			strip = true;
	}
	output_not_dash(out, "-o", false);
	char **files;
	cli_operands(&p, 1, 1, "trace file", &files);
	const char *file = files[0];
	if (!out && !force)
		die("say where the symbolized trace goes: -o OUT, or --force to rewrite '%s' "
		    "in place",
		    file);

	struct rewrite rw = {0};
	rw.r = open_trace(file);
	int rc;
	const struct ht_trace_info *in = ht_reader_info(rw.r);
	/* An unfinished trace's definitions come with its events: read them all first. */
	struct progress pr;
	progress_init(&pr, "reading");
	rc = read_through(rw.r, quiet ? NULL : &pr);
	progress_done(&pr);
	if (rc < 0)
		read_failed(file, rc);
	reader_warning(rw.r, file);

	uint32_t nmods = ht_reader_module_count(rw.r);
	struct ht__module_ent *mods = calloc(nmods ? nmods : 1, sizeof(*mods));
	rw.nphys = ht__reader_phys_count(rw.r);
	rw.phys = calloc(rw.nphys ? rw.nphys : 1, sizeof(*rw.phys));
	rw.resolved = calloc(rw.nphys ? rw.nphys : 1, sizeof(*rw.resolved));
	struct ht__frame_key *keys = calloc(rw.nphys ? rw.nphys : 1, sizeof(*keys));
	if (!mods || !rw.phys || !rw.resolved || !keys)
		die("out of memory");
	for (uint32_t m = 0; m < nmods; m++) {
		const struct ht_module *md = ht_reader_module(rw.r, m);
		mods[m].path = (char *)(md && md->path ? md->path : "");
		size_t hex = md && md->build_id ? strlen(md->build_id) : 0;
		for (size_t i = 0; i + 1 < hex && i / 2 < sizeof(mods[m].build_id); i += 2)
			mods[m].build_id[mods[m].build_id_len++] =
			    (uint8_t)(hexval(md->build_id[i]) << 4 | hexval(md->build_id[i + 1]));
	}
	for (uint32_t f = 0; f < rw.nphys; f++) {
		if (ht__reader_phys(rw.r, f, &rw.phys[f]) < 0)
			rw.phys[f] = (struct ht__phys_frame){HT_MODULE_NONE, 0, 0, 0};
		keys[f] = (struct ht__frame_key){rw.phys[f].module, rw.phys[f].rel};
	}

	struct ht__output dst;
	char why[1024];
	const char *target = out ? out : file;
	if (ht__output_open(&dst, target, force ? HT__OUT_FORCE : 0, 0600, why, sizeof(why)) < 0)
		die("%s", why);
	struct ht__trace_meta meta = {
	    .start_realtime_ns = in->start_realtime_ns,
	    .stack_mask = in->stack_mask,
	    /* The kind of trace stays: a snapshot trace's events are snapshots. */
	    .flags = in->flags & (HT_TRACEF_LOSSY | HT_TRACEF_ATTACHED | HT_TRACEF_SNAPSHOT),
	    .argc = in->argc,
	    .argv = in->argv,
	    .hostname = in->hostname,
	    .ts_unit_ns = in->ts_unit_ns,
	    .untraced = in->untraced,
	    .sample_rate = in->sample_rate,
	};
	if ((rc = ht__writer_open_fd(&rw.w, dst.fd, &meta)) < 0) {
		ht__output_abort(&dst);
		die("cannot write '%s': %s", target, ht_strerror(rc));
	}
	dst.fd = -1; /* the writer's */
	/* A flight recorder's window stays one: where it starts, what it dropped. */
	if (in->flags & HT_TRACEF_WINDOW)
		ht__writer_set_window(rw.w, in->window_start_ns, in->window_dropped, in->ring_bytes,
				      in->ring_ns);
	write_defs(&rw, mods, nmods);
	uint64_t events = 0;
	rc = copy_events(&rw, &events);
	if (rc < 0) {
		ht__writer_abort(rw.w);
		ht__output_abort(&dst);
		die("cannot copy the events of '%s': %s", file, ht_strerror(rc));
	}

	const char *no_dw = strip ? NULL : ht__symbolizer_missing();
	if (no_dw) {
		ht__writer_abort(rw.w);
		ht__output_abort(&dst);
		die("%s", no_dw);
	}
	progress_init(&pr, "symbolizing frames");
	struct ht__symbolize_job job = {
	    .mods = mods,
	    .nmods = nmods,
	    .frames = keys,
	    .nframes = rw.nphys,
	    .symbol_path = symbol_path,
	    .symbols = put_symbols,
	    .ctx = &rw,
	    .progress = quiet ? NULL : show_frames,
	    .progress_ctx = &pr,
	};
	rc = strip ? 0 : ht__symbolize_frames(&job);
	progress_done(&pr);
	if (!rc && !strip)
		rc = keep_old_symbols(&rw);
	uint32_t flags = (in->flags & HT_TRACEF_COMPLETE) ? 0 : HT__FINISH_INCOMPLETE;
	/* The processes' losses, with what the exit notes of an unfinished
	   trace told (TRACE.lost): the new trace keeps them in its own table. */
	for (uint32_t i = 0; i < ht_reader_process_count(rw.r); i++) {
		const struct ht_process *p = ht_reader_process(rw.r, i);
		if (p)
			ht__writer_process_loss(rw.w, i, p);
	}
	ht__writer_set_losses(rw.w, in->lost_lossy, in->lost_no_buffer, in->lost_in_handler);
	int frc = ht__writer_finish(rw.w, in->duration_ns, in->events_lost, flags);
	if (rc < 0 || frc < 0) {
		ht__output_abort(&dst);
		die("cannot write '%s': %s", target, ht_strerror(rc < 0 ? rc : frc));
	}
	if (ht__output_commit(&dst, why, sizeof(why)) < 0)
		die("%s", why);

	/* Never silent: the modules whose frames found no file are named. */
	uint32_t *found = calloc(nmods ? nmods : 1, sizeof(*found));
	uint32_t *used = calloc(nmods ? nmods : 1, sizeof(*used));
	if (!found || !used)
		die("out of memory");
	for (uint32_t f = 0; f < rw.nphys; f++) {
		uint32_t m = rw.phys[f].module;
		if (m < nmods && rw.phys[f].nlog) {
			used[m]++;
			found[m] += rw.resolved[f];
		}
	}
	uint32_t missing = 0;
	for (uint32_t m = 0; m < nmods && !strip; m++)
		if (used[m] && !found[m]) {
			const struct ht_module *md = ht_reader_module(rw.r, m);
			if (missing++ < 10) {
				fputs("heaptrail: warning: no symbols for '", stderr);
				put_text(stderr, md->path);
				fprintf(
				    stderr,
				    "' (build-id %s, %u frame%s): no file with that build-id, or "
				    "only a stripped one; its frames stay addresses\n",
				    *md->build_id ? md->build_id : "none", used[m],
				    used[m] == 1 ? "" : "s");
			}
		}
	if (missing > 10)
		warning("%u more modules without symbols", missing - 10);
	if (!quiet && strip)
		fprintf(stderr, "heaptrail: wrote '%s': %llu events, no symbols\n", target,
			(unsigned long long)events);
	else if (!quiet)
		fprintf(stderr,
			"heaptrail: wrote '%s': %llu events, %u of %u frames symbolized, %u "
			"module%s without symbols\n",
			target, (unsigned long long)events, job.symbolized, rw.nphys, missing,
			missing == 1 ? "" : "s");
	free(found);
	free(used);
	free(keys);
	free(rw.phys);
	free(rw.resolved);
	free(mods);
	ht_reader_close(rw.r);
	return 0;
}
