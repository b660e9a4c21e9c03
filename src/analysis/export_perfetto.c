/*
 * export_perfetto.c - the Chrome trace-event JSON writer of export.h, for
 * ui.perfetto.dev and chrome://tracing: per process a counter track of its
 * heap's outstanding bytes, of its committed bytes and of its RSS, an
 * instant event at its start and at its end, and its name.
 *
 * A pid that had several images (exec, or a pid used again) is one process
 * in Perfetto, named at the end by its images in order; its first image's
 * counters are "heap", "committed" and "rss", each later image's are tracks
 * of their own, "heap (image K: NAME)", so the image before an exec and the
 * one after it are never one line (a trace without a footer learns its
 * processes as it is read: no name can wait for the last image).
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
	uint32_t image; /* 1, 2, ...: its place among its pid's images; 0: not seen yet */
	uint32_t next;	/* the process index of its pid's next image, UINT32_MAX: none */
};

/* A pid of the trace: its images, chained through proc.next. */
struct pid_images {
	int32_t pid;
	uint32_t first, last, count; /* process indices of its first and latest image */
};

struct pf {
	FILE *out;
	const struct ht__query *q;
	struct ht_reader *r;
	struct ht__heap_sum h;
	struct proc *procs;
	size_t nprocs;
	HT_VEC(struct pid_images) pids; /* in the order they appeared */
	struct ht__hindex pid_ix;	/* pid -> its entry in pids */
	uint64_t width;			/* bucket width, ns */
	bool first;			/* no event written yet (for the commas) */
};

static uint64_t pid_hash(int32_t pid)
{
	return (uint64_t)(uint32_t)pid * 0x9E3779B97F4A7C15ull >> 16;
}

static uint64_t pid_rehash(const void *ctx, uint32_t id)
{
	const struct pf *f = ctx;
	return pid_hash(f->pids.v[id].pid);
}

/*
 * Process p's state, numbering its image the first time it is seen: a trace
 * without a footer learns its processes while it is read, so images are
 * numbered as they come (in time order: an exec'd image starts after the
 * one it replaced). NULL when out of memory.
 */
static struct proc *proc_of(struct pf *f, uint32_t p)
{
	if (p >= f->nprocs) {
		size_t old = f->nprocs;
		if (ht__grow((void **)&f->procs, &f->nprocs, (size_t)p + 1, sizeof(*f->procs)) < 0)
			return NULL;
		memset(f->procs + old, 0, (f->nprocs - old) * sizeof(*f->procs));
	}
	struct proc *pr = &f->procs[p];
	if (pr->image)
		return pr;
	const struct ht_process *hp = ht_reader_process(f->r, p);
	int32_t pid = hp ? hp->pid : -1;
	uint64_t h = pid_hash(pid);
	uint32_t *slot = ht__hindex_find(&f->pid_ix, h);
	for (; *slot && f->pids.v[*slot - 1].pid != pid; slot = ht__hindex_next(&f->pid_ix, slot))
		;
	if (*slot) {
		struct pid_images *e = &f->pids.v[*slot - 1];
		f->procs[e->last].next = p;
		e->last = p;
		pr->image = ++e->count;
	} else {
		struct pid_images e = {pid, p, p, 1};
		if (ht__vec_push(&f->pids, e) < 0 ||
		    ht__hindex_insert(&f->pid_ix, h, (uint32_t)(f->pids.len - 1), pid_rehash, f) <
			0)
			return NULL;
		pr->image = 1;
	}
	pr->heap.bucket = pr->commit.bucket = UINT64_MAX;
	pr->next = UINT32_MAX;
	return pr;
}

static void sep(struct pf *f)
{
	fputs(f->first ? "\n" : ",\n", f->out);
	f->first = false;
}

/* The characters of a JSON string, without its quotes. */
static void put_chars(FILE *out, const char *s)
{
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
}

/* A JSON string (names of processes and tracks). */
static void put_str(FILE *out, const char *s)
{
	fputc('"', out);
	put_chars(out, s);
	fputc('"', out);
}

static int32_t pid_of(const struct pf *f, uint32_t p)
{
	const struct ht_process *pr = ht_reader_process(f->r, p);
	return pr ? pr->pid : -1;
}

/* The file name of process p's image ("?" when unknown). */
static const char *image_name(const struct pf *f, uint32_t p)
{
	const struct ht_process *hp = ht_reader_process(f->r, p);
	const char *exe = hp && hp->exe ? hp->exe : "?";
	const char *slash = strrchr(exe, '/');
	return slash && slash[1] ? slash + 1 : exe;
}

static void put_counter(struct pf *f, uint32_t p, const char *name, uint64_t ts, uint64_t v)
{
	const struct proc *pr = p < f->nprocs ? &f->procs[p] : NULL;
	sep(f);
	fputs("{\"ph\":\"C\",\"name\":", f->out);
	if (pr && pr->image > 1) {
		char track[512];
		snprintf(track, sizeof(track), "%s (image %" PRIu32 ": %s)", name, pr->image,
			 image_name(f, p));
		put_str(f->out, track);
	} else {
		put_str(f->out, name);
	}
	fprintf(f->out,
		",\"pid\":%" PRId32 ",\"tid\":%" PRId32 ",\"ts\":%" PRIu64 ".%03" PRIu64
		",\"args\":{\"bytes\":%" PRIu64 "}}",
		pid_of(f, p), pid_of(f, p), ts / 1000, ts % 1000, v);
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

/* Each pid's name, at the end when all its images are known: its image's
   path, or its images' joined by " -> ". */
static void name_processes(struct pf *f)
{
	for (size_t k = 0; k < f->pids.len; k++) {
		const struct pid_images *e = &f->pids.v[k];
		sep(f);
		fprintf(f->out,
			"{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRId32
			",\"args\":{\"name\":\"",
			e->pid);
		for (uint32_t i = e->first; i != UINT32_MAX; i = f->procs[i].next) {
			const struct ht_process *hp = ht_reader_process(f->r, i);
			if (i != e->first)
				fputs(" -> ", f->out);
			put_chars(f->out, hp && hp->exe ? hp->exe : "?");
		}
		fputs("\"}}", f->out);
	}
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

/* An instant of the process, its image in args (which one, when several). */
static void instant(struct pf *f, uint32_t process, const char *name, uint64_t ts)
{
	const struct ht_process *hp = ht_reader_process(f->r, process);
	const struct proc *pr = &f->procs[process]; /* seen by proc_of() */
	sep(f);
	fprintf(f->out,
		"{\"ph\":\"i\",\"s\":\"p\",\"name\":\"%s\",\"pid\":%" PRId32 ",\"tid\":%" PRId32
		",\"ts\":%" PRIu64 ".%03" PRIu64 ",\"args\":{\"image\":%" PRIu32 ",\"exe\":",
		name, pid_of(f, process), pid_of(f, process), ts / 1000, ts % 1000, pr->image);
	put_str(f->out, hp && hp->exe ? hp->exe : "?");
	fputs("}}", f->out);
}

static int on_process_start(void *ctx, struct ht__pass *p, uint32_t process, uint64_t ts)
{
	(void)p;
	struct pf *f = ctx;
	if (!wanted(f, process))
		return 0;
	if (!proc_of(f, process))
		return HT_ERR_NOMEM;
	instant(f, process, "process start", ts);
	return 0;
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
	name_processes(f);
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
	ht__vec_release(&f.pids);
	ht__hindex_release(&f.pid_ix);
	ht__heap_sum_release(&f.h);
	return rc;
}
