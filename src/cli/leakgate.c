/*
 * leakgate.c - the leak gate of 'heaptrail check' and 'record --fail-on-leak'
 * (see leakgate.h); the counting is src/analysis/leaks.c's.
 */
#include "cli/leakgate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/leaks.h"
#include "cli/common.h"

/* Stacks printed in full; the rest are counted in one line. */
#define SHOWN_STACKS 20

void leak_gate_init(struct leak_gate *g)
{
	memset(g, 0, sizeof(*g));
	g->exitcode = 1;
	g->defaults = true;
}

bool leak_gate_option(struct leak_gate *g, struct cli_parser *p, int key)
{
	switch (key) {
	case LG_FAIL:
		g->enabled = true;
		if (p->val && parse_size(p->val, &g->max_bytes) < 0)
			cli_bad_value(p, "--fail-on-leak", "a number of bytes (K, M, G allowed)");
		return true;
	case LG_EXITCODE: {
		char *end;
		long v = strtol(p->val, &end, 10);
		if (*end || !*p->val || v < 1 || v > 255)
			cli_bad_value(p, "--error-exitcode", "a status from 1 to 255");
		g->exitcode = (int)v;
		return true;
	}
	case LG_SUPP:
		if (g->nfiles == (int)(sizeof(g->files) / sizeof(g->files[0])))
			die("too many --suppressions files: at most %zu",
			    sizeof(g->files) / sizeof(g->files[0]));
		g->files[g->nfiles++] = p->val;
		return true;
	case LG_NO_DEFAULTS:
		g->defaults = false;
		return true;
	case LG_PRINT_DEFAULTS:
		printf("# heaptrail's built-in leak suppressions (LeakSanitizer format)\n");
		for (const struct ht__supp_default *d = ht__supp_defaults; d->pattern; d++)
			printf("# %s\nleak:%s\n", d->why, d->pattern);
		exit(0);
	}
	return false;
}

static const char *plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}

bool leak_gate_check(const struct leak_gate *g, const char *path, FILE *out)
{
	struct ht__supp s;
	ht__supp_init(&s);
	if (g->defaults && ht__supp_add_defaults(&s) < 0)
		die("out of memory");
	for (int i = 0; i < g->nfiles; i++) {
		unsigned bad = 0, skipped = 0;
		int rc = ht__supp_add_file(&s, g->files[i], &bad, &skipped);
		if (rc == HT_ERR_INVALID)
			die("'%s' line %u: not a suppression; write 'leak:PATTERN'", g->files[i],
			    bad);
		if (rc < 0)
			die("cannot read suppressions '%s': %s", g->files[i],
			    rc == HT_ERR_NOMEM ? "out of memory" : strerror(errno));
		if (skipped)
			warning("'%s': %u line%s of other kinds than 'leak:' ignored", g->files[i],
				skipped, plural(skipped));
	}
	struct ht_reader *r = open_trace(path);
	struct ht__leak_report rep;
	int rc = ht__leaks_run(&rep, r, &s);
	if (rc < 0)
		read_failed(path, rc);
	const struct ht_trace_info *in = ht_reader_info(r);
	/* A trace that misses the end of the run (its collector killed, the file
	   cut) cannot show that nothing leaked: the gate fails and says why. */
	bool incomplete = in->flags & HT_TRACEF_TRUNCATED;
	bool pass = !incomplete && rep.leaked_bytes <= g->max_bytes;

	fprintf(out,
		"heaptrail: leak check %s: %" PRIu64 " byte%s in %" PRIu64
		" block%s never freed (limit %" PRIu64 "), %" PRIu64 " byte%s in %" PRIu64
		" block%s suppressed\n",
		pass ? "passed" : "FAILED", rep.leaked_bytes, plural(rep.leaked_bytes),
		rep.leaked_count, plural(rep.leaked_count), g->max_bytes, rep.suppressed_bytes,
		plural(rep.suppressed_bytes), rep.suppressed_count, plural(rep.suppressed_count));
	if (in->events_lost)
		fprintf(out,
			"heaptrail: warning: %" PRIu64 " events were lost; the counts may be off\n",
			in->events_lost);
	/* The reader's warning says what is missing: from where, and how many
	   events of how many processes the exit notes count after the end. */
	if (incomplete)
		fprintf(out,
			"heaptrail: the trace is %s: %s; the gate fails, since the part "
			"of the run not recorded is not checked\n",
			in->flags & HT_TRACEF_COMPLETE ? "damaged" : "incomplete",
			ht_reader_warning(r) ? ht_reader_warning(r)
					     : "the recording did not finish");
	if (in->untraced && *in->untraced)
		fprintf(out, "heaptrail: warning: %s cannot be traced (%s): nothing was checked\n",
			in->argc && in->argv[0] ? in->argv[0] : "the program", in->untraced);
	if (in->flags & HT_TRACEF_ATTACHED)
		fprintf(out,
			"heaptrail: note: the trace started after the program did; blocks from "
			"before are not seen\n");
	char note[200];
	if (sample_note(in, note, sizeof(note)))
		fprintf(out,
			"heaptrail: note: %s; a leak smaller than the rate may not be seen, "
			"record without --sample-rate to be sure\n",
			note);
	if (rep.leaked_bytes > g->max_bytes) {
		for (size_t i = 0; i < rep.leaked_stacks && i < SHOWN_STACKS; i++) {
			const struct ht__leak *l = &rep.items[i];
			fprintf(out, "\nleak %zu: %" PRIu64 " byte%s in %" PRIu64 " block%s\n",
				i + 1, l->bytes, plural(l->bytes), l->count, plural(l->count));
			if (!l->nframes)
				fprintf(out, "        [no stack]\n");
			for (uint32_t f = 0; f < l->nframes; f++) {
				const struct ht_frame *fr = ht_reader_frame(r, l->frames[f]);
				fprintf(out, "        %s",
					ht__leaks_frame_text(&rep, l->frames[f]));
				if (fr && fr->file)
					fprintf(out, "  %s:%" PRIu32, fr->file, fr->line);
				fputc('\n', out);
			}
		}
		if (rep.leaked_stacks > SHOWN_STACKS)
			fprintf(
			    out,
			    "\n... and %zu more stacks: 'heaptrail analyze %s' shows them all\n",
			    rep.leaked_stacks - SHOWN_STACKS, path);
	}
	bool any = false;
	for (size_t k = 0; k < s.count; k++) {
		if (!s.rules[k].count)
			continue;
		if (!any)
			fprintf(out, "%ssuppressed:\n",
				rep.leaked_bytes > g->max_bytes ? "\n" : "");
		any = true;
		fprintf(out, "  %10" PRIu64 " bytes in %" PRIu64 " block%s  leak:%s%s%s%s\n",
			s.rules[k].bytes, s.rules[k].count, plural(s.rules[k].count),
			s.rules[k].pattern, s.rules[k].why ? "  (built-in: " : "",
			s.rules[k].why ? s.rules[k].why : "", s.rules[k].why ? ")" : "");
	}
	fflush(out);
	ht__leaks_release(&rep);
	ht_reader_close(r);
	ht__supp_release(&s);
	return pass;
}
