/*
 * agg_side.c - one trace aggregated under a query (agg_side.h).
 */
#include "cli/agg_side.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "analysis/summary.h"
#include "cli/common.h"

struct ht_reader *open_trace(const char *path)
{
	struct ht_reader *r;
	errno = 0;
	int rc = ht_reader_open(&r, path);
	if (rc == HT_ERR_NOT_TRACE)
		die("'%s' is not a heaptrail trace", path);
	if (rc == HT_ERR_NOT_FOUND || (rc == HT_ERR_IO && errno))
		die("cannot open '%s': %s", path, strerror(errno ? errno : ENOENT));
	if (rc < 0)
		die("cannot read '%s': %s", path, ht_strerror(rc));
	return r;
}

void trace_warnings(struct ht_reader *r, const char *path)
{
	const char *w = ht_reader_warning(r);
	if (w)
		warning("%s", w);
	const struct ht_trace_info *info = ht_reader_info(r);
	if (info->events_lost)
		warning("'%s' lost %" PRIu64 " events while recording; counts may be low", path,
			info->events_lost);
}

void agg_side_run(struct agg_side *s, const char *verb)
{
	int rc;
	s->r = open_trace(s->path);
	if ((rc = ht__query_prepare(&s->q)) < 0)
		die("%s", ht_strerror(rc));
	if (s->q.at_peak && (rc = ht__summary_at_peak(&s->q, s->r, NULL)) < 0)
		die("cannot read '%s': %s", s->path, ht_strerror(rc));
	if ((rc = ht__agg_new(&s->agg, &s->q, s->r)) < 0)
		die("%s", ht_strerror(rc));
	struct progress prog;
	progress_init(&prog, verb);
	rc = ht__agg_run(s->agg, progress_wanted() ? progress_show : NULL, &prog);
	progress_done(&prog);
	if (rc < 0)
		die("cannot read '%s': %s", s->path, ht_strerror(rc));
	const char *w = ht_reader_warning(s->r);
	if (w)
		warning("%s", w);
	const struct ht_trace_info *info = ht_reader_info(s->r);
	if (info->events_lost)
		warning("'%s' lost %" PRIu64 " events while recording; counts may be low", s->path,
			info->events_lost);
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

void agg_side_release(struct agg_side *s)
{
	if (s->agg) {
		ht__agg_result_release(&s->res);
		ht__agg_free(s->agg);
	}
	if (s->r)
		ht_reader_close(s->r);
	ht__query_release(&s->q);
}
