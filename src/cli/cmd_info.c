/*
 * cmd_info.c - 'heaptrail info': what a trace holds at a glance (command,
 * processes, duration, event counts, lost events) and, per process and in
 * total, allocation calls and bytes, peak heap, leaks and committed memory.
 * The numbers come from src/analysis/summary.h; this file prints them.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/heapnames.h"
#include "analysis/pass.h"
#include "analysis/summary.h"
#include "cli/builtin.h"
#include "analysis/match.h"
#include "cli/common.h"
#include "cli/opt.h"
#include "heaptrail/trace.h"

static const char usage_text[] =
    "usage: heaptrail info FILE [--format text|json]\n"
    "\n"
    "Summarize a trace: the recorded command, its processes (pid, parent, exe,\n"
    "how they ended), duration, event counts, lost events and, per process and in\n"
    "total, allocation calls and bytes, peak outstanding heap (and when), what was\n"
    "never freed, and committed memory (mappings committed, peak committed).\n"
    "\n"
    "options:\n"
    "  --format text|json   output format (default text); JSON fields are in\n"
    "                       docs/json-output.md\n"
    "  -h, --help           show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail info app.htr\n"
    "  heaptrail info app.htr --format json\n";

/*
 * "1.234 ms": a time in the largest unit that keeps it >= 1, three decimals,
 * rounded to nearest (1,655,015,900 ns is 1.655 s, not truncated).
 */
static const char *fmt_time(char *buf, size_t n, uint64_t ns)
{
	static const struct {
		uint64_t ns;
		const char *name;
	} units[] = {{1000000000, "s"}, {1000000, "ms"}, {1000, "us"}};
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ns < units[i].ns)
			continue;
		uint64_t q = units[i].ns / 1000; /* ns in a thousandth of the unit */
		uint64_t milli = ns / q + (ns % q * 2 >= q);
		snprintf(buf, n, "%" PRIu64 ".%03" PRIu64 " %s", milli / 1000, milli % 1000,
			 units[i].name);
		return buf;
	}
	snprintf(buf, n, "%" PRIu64 " ns", ns);
	return buf;
}

/* "12.3 MiB" for sizes of 1 KiB and more; exact bytes are printed next to it. */
static const char *fmt_human(char *buf, size_t n, uint64_t bytes)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
	if (bytes < 1024) {
		buf[0] = 0;
		return buf;
	}
	double v = (double)bytes / 1024;
	int u = 0;
	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	snprintf(buf, n, " (%.1f %s)", v, units[u]);
	return buf;
}

/*
 * A shell-like rendering of argv: words with odd characters in single
 * quotes, words with control bytes as $'...' with \xHH escapes (never raw
 * terminal escapes).
 */
static void print_command(FILE *f, uint32_t argc, const char *const *argv)
{
	for (uint32_t i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (i)
			fputc(' ', f);
		if (*a && !a[strcspn(a, " \t\n'\"\\$`*?[]{}()<>|&;!#~")] && !has_control(a)) {
			fputs(a, f);
			continue;
		}
		bool ansi = has_control(a);
		fputs(ansi ? "$'" : "'", f);
		for (size_t k; *a; a += k) {
			k = ht__text_char(a);
			if (*a == '\'')
				fputs(ansi ? "\\'" : "'\\''", f);
			else if (ansi && *a == '\\')
				fputs("\\\\", f);
			else if (!k)
				fprintf(f, "\\x%02x", (unsigned char)*a);
			else
				fwrite(a, 1, k, f);
			k = k ? k : 1;
		}
		fputc('\'', f);
	}
}

static const char *proc_end(char *buf, size_t n, const struct ht_process *p)
{
	if (p->flags & HT_PROCF_EXITED)
		snprintf(buf, n, "exit %d", p->exit_code);
	else if (p->flags & HT_PROCF_SIGNALED)
		snprintf(buf, n, "killed by signal %d", p->signal);
	else if (p->flags & HT_PROCF_EXECED)
		snprintf(buf, n, "replaced by exec");
	else
		snprintf(buf, n, "running at the end of the trace");
	return buf;
}

static uint64_t proc_lost(const struct ht_process *p)
{
	return p->lost_lossy + p->lost_no_buffer + p->lost_in_handler;
}

/* The events a process did not record, and from when it went untraced. */
static void print_proc_loss(FILE *f, const struct ht_process *p)
{
	char t[32], w[600];
	if (proc_lost(p)) {
		describe_loss(w, sizeof(w), proc_lost(p), p->lost_lossy, p->lost_no_buffer,
			      p->lost_in_handler);
		fprintf(f, "      lost from %s: %s\n", fmt_time(t, sizeof(t), p->lost_from_ts), w);
	}
	if (p->untraced_from_ts || p->events_untraced)
		fprintf(f,
			"      untraced from %s: the recording stopped while it ran; %" PRIu64
			" event%s after that %s not in the trace\n",
			fmt_time(t, sizeof(t), p->untraced_from_ts), p->events_untraced,
			p->events_untraced == 1 ? "" : "s", p->events_untraced == 1 ? "is" : "are");
}

/*
 * A heap snapshot trace's heap (snap: the snapshot shown, the last): its
 * live blocks, and for the total what its counters say was allocated. Calls,
 * frees, the peak and temporaries are not recorded in that mode.
 */
static void print_snapshot_heap(FILE *f, const struct ht__summary_counts *c,
				const struct ht__summary_snap *snap, bool total)
{
	char h[32];
	fprintf(f, "  live at snapshot %-3u %" PRIu64 " bytes%s in %" PRIu64 " block%s\n",
		snap->number, c->alloc_bytes, fmt_human(h, sizeof(h), c->alloc_bytes),
		c->alloc_calls, c->alloc_calls == 1 ? "" : "s");
	if (total)
		fprintf(f,
			"  allocated            %" PRIu64 " bytes%s in %" PRIu64
			" block%s up to it\n",
			snap->alloc_bytes, fmt_human(h, sizeof(h), snap->alloc_bytes),
			snap->alloc_count, snap->alloc_count == 1 ? "" : "s");
	fputs("  peak heap            not recorded in heap snapshot mode\n", f);
}

/* A full trace's heap: calls, bytes, peak, leaks, temporaries. */
static void print_heap(FILE *f, const struct ht__summary_counts *c)
{
	char t[32], h[32];
	fprintf(f, "  allocation calls     %" PRIu64 "\n", c->alloc_calls);
	fprintf(f, "  bytes allocated      %" PRIu64 "%s\n", c->alloc_bytes,
		fmt_human(h, sizeof(h), c->alloc_bytes));
	fprintf(f, "  peak heap            %" PRIu64 " bytes%s", c->peak_bytes,
		fmt_human(h, sizeof(h), c->peak_bytes));
	if (c->peak_bytes)
		fprintf(f, " at %s", fmt_time(t, sizeof(t), c->peak_ts));
	fputc('\n', f);
	fprintf(f, "  never freed          %" PRIu64 " bytes%s in %" PRIu64 " block%s\n",
		c->leaked_bytes, fmt_human(h, sizeof(h), c->leaked_bytes), c->leaked_count,
		c->leaked_count == 1 ? "" : "s");
	fprintf(f, "  temporary            %" PRIu64 " block%s, %" PRIu64 " bytes%s\n",
		c->temporary_count, c->temporary_count == 1 ? "" : "s", c->temporary_bytes,
		fmt_human(h, sizeof(h), c->temporary_bytes));
	if (c->unknown_frees)
		fprintf(f, "  frees of unknown     %" PRIu64 "\n", c->unknown_frees);
	if (c->inherited_frees)
		fprintf(f,
			"  frees of inherited   %" PRIu64 " (blocks of the parent at the fork)\n",
			c->inherited_frees);
}

static void print_counts(FILE *f, const struct ht__summary_counts *c,
			 const struct ht__summary_snap *snap, bool total)
{
	char t[32], h[32];
	if (snap)
		print_snapshot_heap(f, c, snap, total);
	else
		print_heap(f, c);
	fprintf(f, "  mappings committed   %" PRIu64 ", %" PRIu64 " bytes%s\n", c->commits,
		c->commit_bytes, fmt_human(h, sizeof(h), c->commit_bytes));
	fprintf(f, "  peak committed       %" PRIu64 " bytes%s", c->committed_peak_bytes,
		fmt_human(h, sizeof(h), c->committed_peak_bytes));
	if (c->committed_peak_bytes)
		fprintf(f, " at %s", fmt_time(t, sizeof(t), c->committed_peak_ts));
	fputc('\n', f);
}

/* The warnings info shows: truncation, lost events, a program that could not
   be traced. n is how many were put in w. */
static int collect_warnings(struct ht_reader *r, char w[4][600])
{
	const struct ht_trace_info *in = ht_reader_info(r);
	int n = 0;
	if (in->untraced && *in->untraced)
		snprintf(w[n++], 600, "%s cannot be traced: %s",
			 in->argc && in->argv[0] ? in->argv[0] : "the program", in->untraced);
	if (in->flags & HT_TRACEF_TRUNCATED) {
		const char *why = ht_reader_warning(r);
		/* A recording that finished (its footer read) in a file damaged
		   since is not "incomplete": it is damaged. */
		snprintf(w[n++], 600, "the trace is %s%s%s",
			 in->flags & HT_TRACEF_COMPLETE ? "damaged" : "incomplete", why ? ": " : "",
			 why ? why : "");
	}
	if (in->events_lost)
		describe_loss(w[n++], 600, in->events_lost, in->lost_lossy, in->lost_no_buffer,
			      in->lost_in_handler);
	return n;
}

/* The custom heaps process declared (heap.h), on one line; nothing when none. */
static void print_heaps(FILE *f, const struct ht__heap_names *hn, uint32_t process)
{
	const char *sep = "  custom heaps         ";
	for (size_t k = 0; k < ht__heap_names_count(hn); k++) {
		uint32_t proc;
		uint64_t heap;
		char label[1100];
		ht__heap_names_get(hn, k, &proc, &heap);
		if (proc != process)
			continue;
		fputs(sep, f);
		put_text(f, ht__heap_label(hn, proc, heap, label, sizeof(label)));
		sep = ", ";
	}
	if (*sep == ',')
		fputc('\n', f);
}

/* The events of all processes after the recording stopped (not events_lost). */
static uint64_t untraced_total(struct ht_reader *r)
{
	uint64_t n = 0;
	for (uint32_t i = 0, np = ht_reader_process_count(r); i < np; i++)
		n += ht_reader_process(r, i)->events_untraced;
	return n;
}

static void print_text(const char *path, struct ht_reader *r, const struct ht__summary *s,
		       const struct ht__heap_names *hn)
{
	const struct ht_trace_info *in = ht_reader_info(r);
	FILE *f = stdout;
	char t[32], buf[64];
	char warn[4][600];
	int nwarn = collect_warnings(r, warn);
	for (int i = 0; i < nwarn; i++) {
		fputs("warning: ", f);
		put_text(f, warn[i]);
		fputc('\n', f);
	}

	fputs("trace:      ", f);
	put_text(f, path);
	fprintf(f, " (format %u%s%s)\n", in->version,
		!(in->flags & HT_TRACEF_COMPLETE) ? ", incomplete"
		: in->flags & HT_TRACEF_TRUNCATED ? ", damaged"
						  : ", complete",
		in->flags & HT_TRACEF_SYMBOLS ? ", symbols" : "");
	fprintf(f, "command:    ");
	print_command(f, in->argc, in->argv);
	fputc('\n', f);
	if (in->hostname && *in->hostname) {
		fputs("host:       ", f);
		put_text(f, in->hostname);
		fputc('\n', f);
	}
	if (in->start_realtime_ns) {
		time_t sec = (time_t)(in->start_realtime_ns / 1000000000);
		struct tm tm;
		gmtime_r(&sec, &tm);
		strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
		fprintf(f, "started:    %s\n", buf);
	}
	fprintf(f, "duration:   %s\n", fmt_time(t, sizeof(t), in->duration_ns));
	if (in->ts_unit_ns > 1)
		fprintf(f, "times:      in units of %u ns\n", in->ts_unit_ns);
	else
		fprintf(f, "times:      exact (1 ns)\n");
	fprintf(f, "events:     %" PRIu64, s->event_count);
	const char *sep = " (";
	for (unsigned k = 1; k < HT_EV__COUNT; k++) {
		if (!s->events[k])
			continue;
		fprintf(f, "%s%s %" PRIu64, sep, ht_event_name(k), s->events[k]);
		sep = ", ";
	}
	fputs(*sep == ',' ? ")\n" : "\n", f);
	/* "lost: 0" must be exact: events after the recording stopped (a killed
	   collector, a session stopped while the process ran) are not in it. */
	uint64_t untraced = untraced_total(r);
	fprintf(f, "lost:       %" PRIu64, in->events_lost);
	if (untraced)
		fprintf(f,
			" while recording; %" PRIu64 " event%s after the recording stopped %s not "
			"in the trace (untraced: see the processes)",
			untraced, untraced == 1 ? "" : "s", untraced == 1 ? "is" : "are");
	fputc('\n', f);
	char note[200];
	if (sample_note(in, note, sizeof(note)))
		fprintf(f, "sampling:   %s (events: the samples)\n", note);
	if (in->flags & HT_TRACEF_WINDOW) {
		char lim[96] = "", h[48];
		if (in->ring_bytes)
			snprintf(lim, sizeof(lim), "ring %" PRIu64 " bytes%s", in->ring_bytes,
				 fmt_human(h, sizeof(h), in->ring_bytes));
		if (in->ring_ns)
			snprintf(lim + strlen(lim), sizeof(lim) - strlen(lim), "%slast %s",
				 *lim ? ", " : "ring ", fmt_time(t, sizeof(t), in->ring_ns));
		fprintf(f,
			"window:     flight recorder (%s): events from %s; %" PRIu64
			" earlier events dropped (not lost: the state at the window's start is "
			"in the trace)\n",
			lim, fmt_time(buf, sizeof(buf), in->window_start_ns), in->window_dropped);
	}
	if (in->flags & HT_TRACEF_SNAPSHOT) {
		/* Heap snapshot mode: the synthetic blocks above are the last snapshot. */
		fprintf(f,
			"snapshots:  %u (heap snapshot mode; --snapshot N picks one, default "
			"the last)\n",
			s->nsnaps);
		for (uint32_t i = 0; i < s->nsnaps; i++) {
			const struct ht__summary_snap *sn = &s->snaps[i];
			fprintf(f,
				"  %u at %.3f ms: %" PRIu64 " bytes live in %" PRIu64
				" blocks; %" PRIu64 " bytes in %" PRIu64 " blocks allocated",
				sn->number, (double)sn->ts / 1e6, sn->live_bytes, sn->live_count,
				sn->alloc_bytes, sn->alloc_count);
			if (sn->at_exec)
				fprintf(f,
					"; at the exec of process %d (the image exec replaced, "
					"its blocks alone)",
					sn->exit_pid);
			else if (sn->exit_pid)
				fprintf(f, "; at the exit of process %d (its blocks alone)",
					sn->exit_pid);
			if (sn->untracked_count)
				fprintf(f,
					"; %" PRIu64 " blocks (%" PRIu64
					" bytes) not tracked (a limit)",
					sn->untracked_count, sn->untracked_bytes);
			fputc('\n', f);
		}
	}
	if (in->flags & HT_TRACEF_ATTACHED)
		fprintf(f, "note:       the trace started after some processes did: their earlier "
			   "allocations are unknown\n");

	uint32_t np = ht_reader_process_count(r);
	fprintf(f, "\nprocesses:  %u\n", np);
	for (uint32_t i = 0; i < np; i++) {
		const struct ht_process *p = ht_reader_process(r, i);
		fprintf(f, "  [%u] pid %d, parent %d", i, p->pid, p->ppid);
		if (p->parent != UINT32_MAX)
			fprintf(f, " [%u]", p->parent);
		fputs(", ", f);
		put_text(f, *p->exe ? p->exe : "(unknown exe)");
		fprintf(f, ", %s", proc_end(buf, sizeof(buf), p));
		if (p->flags & HT_PROCF_ROOT)
			fputs(", launched", f);
		if (p->flags & HT_PROCF_FORK)
			fputs(", forked", f);
		if (p->flags & HT_PROCF_EXEC)
			fputs(", exec'd", f);
		if (p->flags & HT_PROCF_ATTACHED)
			fputs(", attached after it started", f);
		if (p->flags & HT_PROCF_UNSEEN)
			fputs(", never traced (only its parent's wait reported it)", f);
		fputc('\n', f);
		if (p->argc) {
			fputs("      ", f);
			print_command(f, p->argc, p->argv);
			fputc('\n', f);
		}
		print_proc_loss(f, p);
	}

	/* A snapshot trace's heap is its last snapshot (the pass's default). */
	const struct ht__summary_snap *snap =
	    (ht_reader_info(r)->flags & HT_TRACEF_SNAPSHOT) && s->nsnaps ? &s->snaps[s->nsnaps - 1]
									 : NULL;
	fprintf(f, "\ntotal:\n");
	print_counts(f, &s->total, snap, true);
	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct ht_process *p = ht_reader_process(r, i);
		if (p) {
			fprintf(f, "\nprocess [%u] pid %d ", i, p->pid);
			put_text(f, *p->exe ? p->exe : "(unknown exe)");
			fputs(":\n", f);
		} else
			fprintf(f, "\nprocess [%u] (not in the process table):\n", i);
		print_counts(f, &s->procs[i], snap, false);
		print_heaps(f, hn, i);
	}
}

/* snapshot_mode: the peak was never measured (null); the rest is the shown
   snapshot's live blocks (docs/json-output.md). */
static void json_counts(struct jw *j, const struct ht__summary_counts *c, bool snapshot_mode)
{
	jw_key(j, "alloc_calls");
	jw_u64(j, c->alloc_calls);
	jw_key(j, "alloc_bytes");
	jw_u64(j, c->alloc_bytes);
	jw_key(j, "free_calls");
	jw_u64(j, c->free_calls);
	jw_key(j, "unknown_frees");
	jw_u64(j, c->unknown_frees);
	jw_key(j, "inherited_frees");
	jw_u64(j, c->inherited_frees);
	jw_key(j, "peak_bytes");
	snapshot_mode ? jw_null(j) : jw_u64(j, c->peak_bytes);
	jw_key(j, "peak_time_ns");
	snapshot_mode ? jw_null(j) : jw_u64(j, c->peak_ts);
	jw_key(j, "leaked_bytes");
	jw_u64(j, c->leaked_bytes);
	jw_key(j, "leaked_count");
	jw_u64(j, c->leaked_count);
	jw_key(j, "temporary_count");
	jw_u64(j, c->temporary_count);
	jw_key(j, "temporary_bytes");
	jw_u64(j, c->temporary_bytes);
	jw_key(j, "committed_count");
	jw_u64(j, c->commits);
	jw_key(j, "committed_bytes");
	jw_u64(j, c->commit_bytes);
	jw_key(j, "committed_peak_bytes");
	jw_u64(j, c->committed_peak_bytes);
	jw_key(j, "committed_peak_time_ns");
	jw_u64(j, c->committed_peak_ts);
}

static void json_argv(struct jw *j, uint32_t argc, const char *const *argv)
{
	jw_arr_begin(j);
	for (uint32_t i = 0; i < argc; i++)
		jw_str(j, argv[i]);
	jw_arr_end(j);
}

static void print_json(const char *path, struct ht_reader *r, const struct ht__summary *s,
		       const struct ht__heap_names *hn)
{
	const struct ht_trace_info *in = ht_reader_info(r);
	bool snapshot_mode = (in->flags & HT_TRACEF_SNAPSHOT) != 0;
	struct jw j;
	jw_init(&j, stdout, true);
	jw_obj_begin(&j);
	/* docs/json-output.md: bumped when a field changes meaning or goes away. */
	jw_key(&j, "schema");
	jw_u64(&j, 1);
	jw_key(&j, "file");
	jw_str(&j, path);
	jw_key(&j, "version");
	jw_u64(&j, in->version);
	jw_key(&j, "complete");
	jw_bool(&j, in->flags & HT_TRACEF_COMPLETE);
	jw_key(&j, "truncated");
	jw_bool(&j, in->flags & HT_TRACEF_TRUNCATED);
	jw_key(&j, "symbols");
	jw_bool(&j, in->flags & HT_TRACEF_SYMBOLS);
	jw_key(&j, "attached");
	jw_bool(&j, in->flags & HT_TRACEF_ATTACHED);
	jw_key(&j, "warnings");
	char warn[4][600];
	int nwarn = collect_warnings(r, warn);
	jw_arr_begin(&j);
	for (int i = 0; i < nwarn; i++)
		jw_str(&j, warn[i]);
	jw_arr_end(&j);
	jw_key(&j, "untraced");
	jw_str(&j, in->untraced && *in->untraced ? in->untraced : NULL);
	jw_key(&j, "command");
	json_argv(&j, in->argc, in->argv);
	jw_key(&j, "hostname");
	jw_str(&j, in->hostname);
	jw_key(&j, "start_realtime_ns");
	jw_u64(&j, in->start_realtime_ns);
	jw_key(&j, "duration_ns");
	jw_u64(&j, in->duration_ns);
	jw_key(&j, "time_resolution_ns");
	jw_u64(&j, in->ts_unit_ns);
	jw_key(&j, "events_lost");
	jw_u64(&j, in->events_lost);
	jw_key(&j, "events_untraced");
	jw_u64(&j, untraced_total(r));
	jw_key(&j, "events_lost_by_cause");
	jw_obj_begin(&j);
	jw_key(&j, "lossy");
	jw_u64(&j, in->lost_lossy);
	jw_key(&j, "no_buffer");
	jw_u64(&j, in->lost_no_buffer);
	jw_key(&j, "in_signal_handler");
	jw_u64(&j, in->lost_in_handler);
	jw_obj_end(&j);
	jw_sampling(&j, in);
	jw_key(&j, "window");
	if (in->flags & HT_TRACEF_WINDOW) {
		jw_obj_begin(&j);
		jw_key(&j, "start_ns");
		jw_u64(&j, in->window_start_ns);
		jw_key(&j, "dropped");
		jw_u64(&j, in->window_dropped);
		jw_key(&j, "ring_bytes");
		jw_u64(&j, in->ring_bytes);
		jw_key(&j, "ring_ns");
		jw_u64(&j, in->ring_ns);
		jw_obj_end(&j);
	} else {
		jw_null(&j);
	}
	jw_key(&j, "event_count");
	jw_u64(&j, s->event_count);
	jw_key(&j, "events");
	jw_obj_begin(&j);
	for (unsigned k = 1; k < HT_EV__COUNT; k++) {
		jw_key(&j, ht_event_name(k));
		jw_u64(&j, s->events[k]);
	}
	jw_obj_end(&j);
	jw_key(&j, "totals");
	jw_obj_begin(&j);
	json_counts(&j, &s->total, snapshot_mode);
	jw_obj_end(&j);
	/* The same totals grouped, for readers that look for heap and commit. */
	jw_key(&j, "heap");
	jw_obj_begin(&j);
	jw_key(&j, "alloc_calls");
	jw_u64(&j, s->total.alloc_calls);
	jw_key(&j, "alloc_bytes");
	jw_u64(&j, s->total.alloc_bytes);
	jw_key(&j, "peak_bytes");
	snapshot_mode ? jw_null(&j) : jw_u64(&j, s->total.peak_bytes);
	jw_key(&j, "peak_time_ns");
	snapshot_mode ? jw_null(&j) : jw_u64(&j, s->total.peak_ts);
	jw_key(&j, "leaked_bytes");
	jw_u64(&j, s->total.leaked_bytes);
	jw_key(&j, "leaked_count");
	jw_u64(&j, s->total.leaked_count);
	jw_obj_end(&j);
	jw_key(&j, "commit");
	jw_obj_begin(&j);
	jw_key(&j, "count");
	jw_u64(&j, s->total.commits);
	jw_key(&j, "bytes");
	jw_u64(&j, s->total.commit_bytes);
	jw_key(&j, "peak_bytes");
	jw_u64(&j, s->total.committed_peak_bytes);
	jw_key(&j, "peak_time_ns");
	jw_u64(&j, s->total.committed_peak_ts);
	jw_obj_end(&j);
	/* The custom heaps declared with heap.h (the process heap is "malloc"). */
	jw_key(&j, "heaps");
	jw_arr_begin(&j);
	for (size_t k = 0; k < ht__heap_names_count(hn); k++) {
		uint32_t proc;
		uint64_t heap;
		const char *name = ht__heap_names_get(hn, k, &proc, &heap);
		const struct ht_process *p = ht_reader_process(r, proc);
		jw_obj_begin(&j);
		jw_key(&j, "process");
		jw_u64(&j, proc);
		jw_key(&j, "pid");
		jw_i64(&j, p ? p->pid : -1);
		jw_key(&j, "handle");
		jw_u64(&j, heap);
		jw_key(&j, "name");
		jw_str(&j, name);
		jw_obj_end(&j);
	}
	jw_arr_end(&j);

	static const struct {
		uint32_t bit;
		const char *name;
	} flag_names[] = {
	    {HT_PROCF_ROOT, "root"},	 {HT_PROCF_FORK, "fork"},
	    {HT_PROCF_EXEC, "exec"},	 {HT_PROCF_ATTACHED, "attached"},
	    {HT_PROCF_EXITED, "exited"}, {HT_PROCF_SIGNALED, "signaled"},
	    {HT_PROCF_EXECED, "execed"}, {HT_PROCF_UNSEEN, "unseen"},
	};
	jw_key(&j, "snapshots");
	jw_arr_begin(&j);
	for (uint32_t i = 0; i < s->nsnaps; i++) {
		const struct ht__summary_snap *sn = &s->snaps[i];
		const struct {
			const char *k;
			uint64_t v;
		} kv[] = {{"number", sn->number},
			  {"ts_ns", sn->ts},
			  {"live_bytes", sn->live_bytes},
			  {"live_count", sn->live_count},
			  {"alloc_bytes", sn->alloc_bytes},
			  {"alloc_count", sn->alloc_count},
			  {"untracked_bytes", sn->untracked_bytes},
			  {"untracked_count", sn->untracked_count}};
		jw_obj_begin(&j);
		for (size_t k = 0; k < sizeof(kv) / sizeof(kv[0]); k++) {
			jw_key(&j, kv[k].k);
			jw_u64(&j, kv[k].v);
		}
		jw_key(&j, "exit_pid"); /* 0: not an exit snapshot */
		jw_i64(&j, sn->exit_pid);
		jw_key(&j, "at_exec"); /* the image's end was an exec */
		jw_bool(&j, sn->at_exec);
		jw_obj_end(&j);
	}
	jw_arr_end(&j);
	jw_key(&j, "processes");
	jw_arr_begin(&j);
	uint32_t np = ht_reader_process_count(r);
	if (s->nprocs > np)
		np = s->nprocs;
	static const struct ht__summary_counts zero;
	for (uint32_t i = 0; i < np; i++) {
		const struct ht_process *p = ht_reader_process(r, i);
		jw_obj_begin(&j);
		jw_key(&j, "index");
		jw_u64(&j, i);
		jw_key(&j, "pid");
		p ? jw_i64(&j, p->pid) : jw_null(&j);
		jw_key(&j, "ppid");
		p ? jw_i64(&j, p->ppid) : jw_null(&j);
		jw_key(&j, "parent");
		p && p->parent != UINT32_MAX ? jw_u64(&j, p->parent) : jw_null(&j);
		jw_key(&j, "exe");
		jw_str(&j, p ? p->exe : NULL);
		jw_key(&j, "argv");
		if (p)
			json_argv(&j, p->argc, p->argv);
		else
			jw_null(&j);
		jw_key(&j, "flags");
		jw_arr_begin(&j);
		for (size_t k = 0; p && k < sizeof(flag_names) / sizeof(flag_names[0]); k++)
			if (p->flags & flag_names[k].bit)
				jw_str(&j, flag_names[k].name);
		jw_arr_end(&j);
		jw_key(&j, "start_ns");
		jw_u64(&j, p ? p->start_ts : 0);
		jw_key(&j, "end_ns");
		jw_u64(&j, p ? p->end_ts : 0);
		jw_key(&j, "exit_code");
		p && (p->flags & HT_PROCF_EXITED) ? jw_i64(&j, p->exit_code) : jw_null(&j);
		jw_key(&j, "signal");
		p && (p->flags & HT_PROCF_SIGNALED) ? jw_i64(&j, p->signal) : jw_null(&j);
		jw_key(&j, "events_lost");
		jw_u64(&j, p ? proc_lost(p) : 0);
		jw_key(&j, "events_lost_by_cause");
		jw_obj_begin(&j);
		jw_key(&j, "lossy");
		jw_u64(&j, p ? p->lost_lossy : 0);
		jw_key(&j, "no_buffer");
		jw_u64(&j, p ? p->lost_no_buffer : 0);
		jw_key(&j, "in_signal_handler");
		jw_u64(&j, p ? p->lost_in_handler : 0);
		jw_obj_end(&j);
		jw_key(&j, "lost_from_ns");
		p &&proc_lost(p) ? jw_u64(&j, p->lost_from_ts) : jw_null(&j);
		jw_key(&j, "untraced_from_ns");
		p && (p->untraced_from_ts || p->events_untraced) ? jw_u64(&j, p->untraced_from_ts)
								 : jw_null(&j);
		jw_key(&j, "events_untraced");
		jw_u64(&j, p ? p->events_untraced : 0);
		json_counts(&j, i < s->nprocs ? &s->procs[i] : &zero, snapshot_mode);
		jw_obj_end(&j);
	}
	jw_arr_end(&j);
	jw_obj_end(&j);
	jw_finish(&j);
}

int cmd_info(int argc, char **argv)
{
	static const struct cli_opt opts[] = {
	    {"format", 'f', required_argument},
	    {NULL, 0, 0},
	};
	enum out_format fmt = FMT_TEXT;
	struct cli_parser p;
	cli_init(&p, "info", usage_text, opts, argc, argv, false);
	for (int c; (c = cli_next(&p)) != -1;) {
		if (c == 'f' && (parse_format(p.val, &fmt) < 0 || fmt == FMT_CSV))
			die("unknown format '%s'; info writes text or json", p.val);
	}
	char **files;
	cli_operands(&p, 1, 1, "trace file", &files);
	const char *path = files[0];

	struct ht_reader *r = open_trace(path);
	int rc;
	struct ht__summary s;
	struct ht__heap_names *hn = NULL;
	struct ht__pass *pass;
	if ((rc = ht__pass_new(&pass, r)) < 0 || (rc = ht__heap_names_new(&hn)) < 0)
		die("%s", ht_strerror(rc));
	bool attached = (rc = ht__summary_attach(&s, pass, NULL)) == 0;
	if (rc == 0 && (rc = ht__heap_names_attach(pass, hn, UINT64_MAX)) > 0)
		rc = 0;
	if (rc == 0)
		rc = ht__pass_run(pass);
	ht__pass_free(pass);
	if (rc < 0)
		read_failed(path, rc);
	if (fmt == FMT_JSON)
		print_json(path, r, &s, hn);
	else
		print_text(path, r, &s, hn);
	if (attached)
		ht__summary_release(&s);
	ht__heap_names_free(hn);
	ht_reader_close(r);
	return 0;
}
