/*
 * agg_side.c - one trace aggregated under a query (agg_side.h).
 */
#include "cli/agg_side.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "analysis/pass.h"
#include "analysis/summary.h"
#include "cli/common.h"
#include "cli/query_opts.h"

void agg_side_run(struct agg_side *s, const char *verb)
{
	int rc;
	s->r = open_trace(s->path);
	snapshot_check(s->r, s->path, s->q.snapshot);
	if ((rc = ht__query_prepare(&s->q)) < 0)
		die("%s", ht_strerror(rc));
	if (s->q.at_peak && (rc = ht__summary_at_peak(&s->q, s->r, NULL)) < 0)
		read_failed(s->path, rc);
	if ((rc = ht__agg_new(&s->agg, &s->q, s->r)) < 0)
		die("%s", ht_strerror(rc));
	struct ht__pass *p;
	if ((rc = ht__pass_new(&p, s->r)) < 0 || (rc = ht__agg_attach(s->agg, p)) < 0)
		die("%s", ht_strerror(rc));
	if (s->want_heap_names) {
		/* The names need no event past what the aggregation reads. */
		uint64_t until = s->q.has_range ? s->q.range_end
				 : s->q.has_at	? s->q.at_ts + 1
						: UINT64_MAX;
		if ((rc = ht__heap_names_new(&s->heap_names)) < 0 ||
		    (rc = ht__heap_names_attach(p, s->heap_names, until)) < 0)
			die("%s", ht_strerror(rc));
	}
	struct progress prog;
	progress_init(&prog, verb);
	ht__pass_progress(p, progress_wanted() ? progress_show : NULL, &prog);
	rc = ht__pass_run(p);
	ht__pass_free(p);
	progress_done(&prog);
	if (rc < 0)
		read_failed(s->path, rc);
	trace_warnings(s->r, s->path);
	agg_side_range_check(&s->q, s->r, s->path);
	for (size_t i = 0; i < s->q.pid_count; i++) {
		bool found = false;
		for (uint32_t p = 0; p < ht_reader_process_count(s->r) && !found; p++)
			found = ht_reader_process(s->r, p)->pid == s->q.pids[i];
		if (!found)
			warning("no process with pid %" PRId32 " in '%s'", s->q.pids[i], s->path);
	}
	if ((rc = ht__agg_finish(s->agg, &s->res)) < 0)
		die("%s", ht_strerror(rc));
}

void agg_side_range_check(const struct ht__query *q, struct ht_reader *r, const char *path)
{
	const struct ht_trace_info *info = ht_reader_info(r);
	if (!q->has_range || !(info->flags & HT_TRACEF_COMPLETE) ||
	    q->range_start < info->duration_ns)
		return;
	warning("the range starts at %.6f s, after the end of '%s' (%.6f s): nothing is in it",
		(double)q->range_start / 1e9, path, (double)info->duration_ns / 1e9);
}

void agg_side_release(struct agg_side *s)
{
	ht__heap_names_free(s->heap_names);
	s->heap_names = NULL;
	if (s->agg) {
		ht__agg_result_release(&s->res);
		ht__agg_free(s->agg);
	}
	if (s->r)
		ht_reader_close(s->r);
	ht__query_release(&s->q);
}
