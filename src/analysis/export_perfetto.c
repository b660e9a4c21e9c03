/*
 * export_perfetto.c - the Chrome trace-event JSON writer of export.h, for
 * ui.perfetto.dev and chrome://tracing: per process a counter track of its
 * heap's outstanding bytes, of its committed bytes and of its RSS, an
 * instant event at its start and at its end, and its name.
 *
 * One pass (pass.h), written as it goes: memory does not grow with events.
 * A heap or commit counter changes at every event, so each is written at
 * most twice per time bucket (1/20000 of the trace, at least 1 us): the
 * highest value of the bucket at its first change, then its last value when
 * that differs, so peaks survive the thinning.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/export.h"
#include "analysis/match.h"
#include "analysis/pass.h"
#include "base/vec.h"

#define BUCKETS 20000

/* One counter of one process, thinned by bucket. */
struct counter {
	uint64_t bucket; /* index of the bucket being gathered, UINT64_MAX: none */
	uint64_t first_ts, max, last_ts, last;
	bool dirty;
};

struct proc {
	struct counter heap, commit;
	uint64_t commit_now;
	bool named;
};

struct pf {
	FILE *out;
	const struct ht__query *q;
	struct ht_reader *r;
	struct ht__heap_sum h;
	struct proc *procs;
	size_t nprocs;
	uint64_t width; /* bucket width, ns */
	bool first;	/* no event written yet (for the commas) */
};

static struct proc *proc_of(struct pf *f, uint32_t p)
{
	if (p >= f->nprocs) {
		size_t old = f->nprocs;
		if (ht__grow((void **)&f->procs, &f->nprocs, (size_t)p + 1, sizeof(*f->procs)) < 0)
			return NULL;
		memset(f->procs + old, 0, (f->nprocs - old) * sizeof(*f->procs));
		for (size_t i = old; i < f->nprocs; i++)
			f->procs[i].heap.bucket = f->procs[i].commit.bucket = UINT64_MAX;
	}
	return &f->procs[p];
}

static void sep(struct pf *f)
{
	fputs(f->first ? "\n" : ",\n", f->out);
	f->first = false;
}

/* A JSON string (names of processes and threads). */
static void put_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (size_t k; s && *s; s += k ? k : 1) {
		unsigned char c = (unsigned char)*s;
		k = ht__text_char(s);
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (!k) /* control, or not UTF-8: valid JSON either way */
			fprintf(out, "\\u%04x", c);
		else
			fwrite(s, 1, k, out);
	}
	fputc('"', out);
}

static int32_t pid_of(const struct pf *f, uint32_t p)
{
	const struct ht_process *pr = ht_reader_process(f->r, p);
	return pr ? pr->pid : -1;
}

static void put_counter(struct pf *f, uint32_t p, const char *name, uint64_t ts, uint64_t v)
{
	sep(f);
	fprintf(f->out,
		"{\"ph\":\"C\",\"name\":\"%s\",\"pid\":%" PRId32 ",\"tid\":%" PRId32
		",\"ts\":%" PRIu64 ".%03" PRIu64 ",\"args\":{\"bytes\":%" PRIu64 "}}",
		name, pid_of(f, p), pid_of(f, p), ts / 1000, ts % 1000, v);
}

static void flush(struct pf *f, uint32_t p, const char *name, struct counter *c)
{
	if (!c->dirty)
		return;
	put_counter(f, p, name, c->first_ts, c->max);
	if (c->last != c->max || c->last_ts != c->first_ts)
		put_counter(f, p, name, c->last_ts, c->last);
	c->dirty = false;
}

static void set(struct pf *f, uint32_t p, const char *name, struct counter *c, uint64_t ts,
		uint64_t v)
{
	uint64_t b = ts / f->width;
	if (c->bucket != b) {
		flush(f, p, name, c);
		c->bucket = b;
		c->first_ts = ts;
		c->max = v;
	}
	if (v > c->max)
		c->max = v;
	c->last_ts = ts;
	c->last = v;
	c->dirty = true;
}

static int name_process(struct pf *f, uint32_t p)
{
	struct proc *pr = proc_of(f, p);
	if (!pr)
		return HT_ERR_NOMEM;
	if (pr->named)
		return 0;
	pr->named = true;
	const struct ht_process *hp = ht_reader_process(f->r, p);
	sep(f);
	fprintf(f->out,
		"{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRId32 ",\"args\":{\"name\":",
		pid_of(f, p));
	put_str(f->out, hp && hp->exe ? hp->exe : "?");
	fputs("}}", f->out);
	return 0;
}

static bool wanted(struct pf *f, uint32_t p)
{
	const struct ht_process *pr = ht_reader_process(f->r, p);
	return pr && ht__query_wants_pid(f->q, pr->pid);
}

static int on_life(void *ctx, struct ht__pass *p, const struct ht__life *l)
{
	(void)p;
	struct pf *f = ctx;
	if (l->free_ts == HT_TS_NEVER)
		return 0;
	int rc = ht__heap_sum_add(&f->h, l->process, l->size, -1);
	if (rc <= 0)
		return rc;
	struct proc *pr = proc_of(f, l->process);
	if (!pr)
		return HT_ERR_NOMEM;
	set(f, l->process, "heap", &pr->heap, l->free_ts, f->h.bytes[l->process]);
	return 0;
}

static int on_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	struct pf *f = ctx;
	if (!wanted(f, ev->process))
		return 0;
	struct proc *pr = proc_of(f, ev->process);
	if (!pr)
		return HT_ERR_NOMEM;
	int rc = 0;
	switch (ev->type) {
	case HT_EV_ALLOC:
	case HT_EV_REALLOC:
		if (!ev->addr || (ev->flags & HT_EVF_FAILED))
			break;
		rc = ht__heap_sum_add(&f->h, ev->process, ev->size, 1);
		if (rc > 0)
			set(f, ev->process, "heap", &pr->heap, ev->ts, f->h.bytes[ev->process]);
		break;
	case HT_EV_RSS:
		if ((rc = name_process(f, ev->process)) == 0)
			put_counter(f, ev->process, "rss", ev->ts, ev->size);
		break;
	case HT_EV_MMAP:
	case HT_EV_MUNMAP:
	case HT_EV_MREMAP:
	case HT_EV_MPROTECT:
	case HT_EV_BRK: {
		struct ht__commit_stats cs;
		ht__pass_commit_process_stats(p, ev->process, &cs);
		if (cs.committed_bytes != pr->commit_now) {
			pr->commit_now = cs.committed_bytes;
			set(f, ev->process, "committed", &pr->commit, ev->ts, cs.committed_bytes);
		}
		break;
	}
	default:
		break;
	}
	return rc < 0 ? rc : 0;
}

static void instant(struct pf *f, uint32_t process, const char *name, uint64_t ts)
{
	sep(f);
	fprintf(f->out,
		"{\"ph\":\"i\",\"s\":\"p\",\"name\":\"%s\",\"pid\":%" PRId32 ",\"tid\":%" PRId32
		",\"ts\":%" PRIu64 ".%03" PRIu64 "}",
		name, pid_of(f, process), pid_of(f, process), ts / 1000, ts % 1000);
}

static int on_process_start(void *ctx, struct ht__pass *p, uint32_t process, uint64_t ts)
{
	(void)p;
	struct pf *f = ctx;
	if (!wanted(f, process))
		return 0;
	int rc = name_process(f, process);
	if (rc == 0)
		instant(f, process, "process start", ts);
	return rc;
}

static int on_process_end(void *ctx, struct ht__pass *p, uint32_t process, uint64_t ts)
{
	(void)p;
	struct pf *f = ctx;
	if (!wanted(f, process))
		return 0;
	struct proc *pr = proc_of(f, process);
	if (!pr)
		return HT_ERR_NOMEM;
	flush(f, process, "heap", &pr->heap);
	flush(f, process, "committed", &pr->commit);
	instant(f, process, "process end", ts);
	return ht__heap_sum_end(&f->h, process);
}

static int on_end(void *ctx, struct ht__pass *p)
{
	(void)p;
	struct pf *f = ctx;
	for (size_t i = 0; i < f->nprocs; i++) {
		flush(f, (uint32_t)i, "heap", &f->procs[i].heap);
		flush(f, (uint32_t)i, "committed", &f->procs[i].commit);
	}
	return 0;
}

static const struct ht__consumer perfetto_consumer = {
    .name = "perfetto",
    .needs = HT_PASS_NEED_COMMIT,
    .events = HT_PASS_EV(HT_EV_ALLOC) | HT_PASS_EV(HT_EV_REALLOC) | HT_PASS_EV(HT_EV_RSS) |
	      HT_PASS_EV(HT_EV_MMAP) | HT_PASS_EV(HT_EV_MUNMAP) | HT_PASS_EV(HT_EV_MREMAP) |
	      HT_PASS_EV(HT_EV_MPROTECT) | HT_PASS_EV(HT_EV_BRK),
    .event = on_event,
    .life = on_life,
    .process_start = on_process_start,
    .process_end = on_process_end,
    .end = on_end,
};

int ht__export_perfetto(FILE *out, struct ht_reader *r, const struct ht__query *q,
			ht__export_progress_fn progress, void *pctx)
{
	struct pf f;
	memset(&f, 0, sizeof(f));
	f.out = out;
	f.q = q;
	f.r = r;
	f.h.q = q;
	f.h.r = r;
	f.first = true;
	const struct ht_trace_info *info = ht_reader_info(r);
	f.width = info->duration_ns / BUCKETS;
	if (f.width < 1000)
		f.width = 1000;
	fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"host\":", out);
	put_str(out, info->hostname ? info->hostname : "?");
	fputs(",\"source\":\"heaptrail\"", out);
	/* The heap counters are estimates (the pass made them). */
	if (info->sample_rate)
		fprintf(out, ",\"sample_rate\":%" PRIu64 ",\"estimated\":true", info->sample_rate);
	fputs("},\"traceEvents\":[", out);
	struct ht__pass *p = NULL;
	int rc;
	if ((rc = ht__pass_new(&p, r)) < 0 || (rc = ht__pass_add(p, &perfetto_consumer, &f)) < 0)
		goto out;
	ht__pass_progress(p, progress, pctx);
	rc = ht__pass_run(p);
	fputs("\n]}\n", out);
	if (!rc && ferror(out))
		rc = HT_ERR_IO;
out:
	ht__pass_free(p);
	free(f.procs);
	ht__heap_sum_release(&f.h);
	return rc;
}
