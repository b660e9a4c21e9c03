/*
 * export_massif.c - the massif writer of export.h: a massif.out file as
 * valgrind's massif writes it (the format ms_print and massif-visualizer
 * read): heap snapshots over time, and the detailed allocation tree at the
 * heap's peak.
 *
 * One pass (pass.h) feeds two consumers: the aggregator, counting the blocks
 * live at the peak by culled stack (found by ht__summary_at_peak() before),
 * and the snapshot taker here, which follows the heap's outstanding bytes as
 * info counts them (a process leaves the sum when it ends) and samples them
 * at evenly spaced times. Snapshots are few (about 50) and kept until the
 * tree is known at the end.
 */
#define _GNU_SOURCE /* qsort_r */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/export.h"
#include "analysis/match.h"
#include "analysis/pass.h"
#include "analysis/summary.h"
#include "base/vec.h"

#define SNAPSHOTS 50

struct snap {
	uint64_t ts, bytes;
	bool peak;
};

struct massif {
	struct ht__heap_sum h;
	uint64_t step, next_ts;
	uint64_t peak_ts, peak_bytes;
	bool peak_taken;
	HT_VEC(struct snap) snaps;
};

static int take(struct massif *m, uint64_t ts, bool peak)
{
	struct snap s = {ts, m->h.total, peak};
	return ht__vec_push(&m->snaps, s);
}

/* The snapshots due before an event at ts, with the heap as it was. */
static int advance(struct massif *m, uint64_t ts)
{
	while (m->step && ts >= m->next_ts) {
		if (take(m, m->next_ts, false) < 0)
			return HT_ERR_NOMEM;
		m->next_ts += m->step;
	}
	return 0;
}

static int on_life(void *ctx, struct ht__pass *p, const struct ht__life *l)
{
	(void)p;
	struct massif *m = ctx;
	if (l->free_ts == HT_TS_NEVER)
		return 0;
	if (advance(m, l->free_ts) < 0)
		return HT_ERR_NOMEM;
	int rc = ht__heap_sum_add(&m->h, l->process, l->size, -1);
	return rc < 0 ? rc : 0;
}

static int on_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	(void)p;
	struct massif *m = ctx;
	bool made = ev->addr && !(ev->type == HT_EV_REALLOC && (ev->flags & HT_EVF_FAILED));
	if (!made)
		return 0;
	if (advance(m, ev->ts) < 0)
		return HT_ERR_NOMEM;
	int rc = ht__heap_sum_add(&m->h, ev->process, ev->size, 1);
	if (rc <= 0)
		return rc;
	/* The peak's own snapshot, right after the allocation that made it. */
	if (!m->peak_taken && ev->ts == m->peak_ts && m->h.total == m->peak_bytes) {
		m->peak_taken = true;
		return take(m, ev->ts, true);
	}
	return 0;
}

static int on_process_end(void *ctx, struct ht__pass *p, uint32_t process, uint64_t ts)
{
	(void)p;
	struct massif *m = ctx;
	if (advance(m, ts) < 0)
		return HT_ERR_NOMEM;
	return ht__heap_sum_end(&m->h, process);
}

static const struct ht__consumer massif_consumer = {
    .name = "massif",
    .events = HT_PASS_EV(HT_EV_ALLOC) | HT_PASS_EV(HT_EV_REALLOC),
    .event = on_event,
    .life = on_life,
    .process_end = on_process_end,
};

/* A frame as massif prints it: "0xADDR: function (file:line)". */
static void put_frame(FILE *out, const struct ht_reader *r, struct ht__agg *a, uint32_t frame)
{
	const struct ht_frame *f = ht_reader_frame(r, frame);
	const char *text = ht__agg_frame_text(a, frame);
	fprintf(out, " 0x%" PRIx64 ": ", f ? f->rel : 0);
	/* '#' starts a comment for ms_print. */
	ht__fput_text(out, f && f->function ? f->function : text, "#");
	if (f && f->file) {
		fputs(" (", out);
		ht__fput_text(out, f->file, "#");
		fprintf(out, ":%" PRIu32 ")", f->line);
	} else if (f && f->module != HT_MODULE_NONE) {
		fputs(" (in ", out);
		ht__fput_text(out, ht_reader_module(r, f->module)->path, "#");
		fputc(')', out);
	}
}

struct tree_ctx {
	FILE *out;
	const struct ht_reader *r;
	struct ht__agg *a;
	const struct ht__agg_item *items;
	uint64_t total;
	uint32_t depth; /* for the sort */
};

static const char *key_at(const struct tree_ctx *t, size_t i, uint32_t depth)
{
	const struct ht__agg_item *it = &t->items[i];
	return depth < it->nframes ? ht__agg_frame_text(t->a, it->frames[depth]) : "";
}

static int cmp_key(const void *pa, const void *pb, void *ctx)
{
	const struct tree_ctx *t = ctx;
	return strcmp(key_at(t, *(const size_t *)pa, t->depth),
		      key_at(t, *(const size_t *)pb, t->depth));
}

struct group {
	size_t first, n; /* in the index array */
	uint64_t bytes;
};

static int cmp_group(const void *pa, const void *pb)
{
	const struct group *x = pa, *y = pb;
	return (x->bytes < y->bytes) - (x->bytes > y->bytes);
}

/*
 * The children of a node: idx[0..n) are the rows under it, grouped by their
 * frame at depth (callers of the node's frame). Groups under 1% of the peak
 * are folded into one line, as massif's threshold does.
 */
static int write_children(struct tree_ctx *t, size_t *idx, size_t n, uint32_t depth, int indent)
{
	t->depth = depth;
	qsort_r(idx, n, sizeof(*idx), cmp_key, t);
	HT_VEC(struct group) groups = {0};
	for (size_t i = 0; i < n;) {
		size_t j = i;
		uint64_t bytes = 0;
		while (j < n && !strcmp(key_at(t, idx[j], depth), key_at(t, idx[i], depth)))
			bytes += t->items[idx[j++]].c.outstanding_bytes;
		struct group g = {i, j - i, bytes};
		/* Rows whose stack ends above this depth add no child. */
		if (*key_at(t, idx[i], depth) && ht__vec_push(&groups, g) < 0) {
			ht__vec_release(&groups);
			return HT_ERR_NOMEM;
		}
		i = j;
	}
	if (groups.len > 1) /* groups.v is NULL when empty */
		qsort(groups.v, groups.len, sizeof(*groups.v), cmp_group);
	size_t big = 0;
	uint64_t small_bytes = 0;
	for (size_t g = 0; g < groups.len; g++) {
		if (groups.v[g].bytes * 100 >= t->total && groups.v[g].bytes)
			big++;
		else
			small_bytes += groups.v[g].bytes;
	}
	int rc = 0;
	for (size_t g = 0; g < big && !rc; g++) {
		const struct group *gr = &groups.v[g];
		const struct ht__agg_item *it = &t->items[idx[gr->first]];
		t->depth = depth + 1;
		qsort_r(idx + gr->first, gr->n, sizeof(*idx), cmp_key, t);
		/* Children under the threshold fold into one more line. */
		size_t nbig = 0, nsmall = 0;
		for (size_t i = 0; i < gr->n;) {
			size_t j = i;
			uint64_t b = 0;
			const char *k = key_at(t, idx[gr->first + i], depth + 1);
			while (j < gr->n && !strcmp(key_at(t, idx[gr->first + j], depth + 1), k))
				b += t->items[idx[gr->first + j++]].c.outstanding_bytes;
			if (*k) {
				if (b * 100 >= t->total && b)
					nbig++;
				else
					nsmall++;
			}
			i = j;
		}
		fprintf(t->out, "%*sn%zu: %" PRIu64, indent, "", nbig + (nsmall ? 1 : 0),
			gr->bytes);
		put_frame(t->out, t->r, t->a, it->frames[depth]);
		fputc('\n', t->out);
		rc = write_children(t, idx + gr->first, gr->n, depth + 1, indent + 1);
	}
	if (!rc && big < groups.len)
		fprintf(t->out,
			"%*sn0: %" PRIu64 " in %zu places, all below massif's threshold (1.00%%)\n",
			indent, "", small_bytes, groups.len - big);
	ht__vec_release(&groups);
	return rc;
}

/* How many lines write_children() writes at the top: big groups, plus one for the small. */
static size_t top_children(struct tree_ctx *t, size_t *idx, size_t n)
{
	t->depth = 0;
	qsort_r(idx, n, sizeof(*idx), cmp_key, t);
	size_t big = 0, small = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		uint64_t b = 0;
		while (j < n && !strcmp(key_at(t, idx[j], 0), key_at(t, idx[i], 0)))
			b += t->items[idx[j++]].c.outstanding_bytes;
		if (*key_at(t, idx[i], 0)) {
			if (b * 100 >= t->total && b)
				big++;
			else
				small++;
		}
		i = j;
	}
	return big + (small ? 1 : 0);
}

static void put_cmd(FILE *out, const struct ht_trace_info *info)
{
	fputs("cmd:", out);
	if (!info->argc)
		fputs(" (unknown)", out);
	for (uint32_t i = 0; i < info->argc; i++) {
		fputc(' ', out);
		ht__fput_text(out, info->argv[i], "#");
	}
	fputc('\n', out);
}

int ht__export_massif(FILE *out, struct ht_reader *r, struct ht__query *q,
		      ht__export_progress_fn progress, void *pctx)
{
	struct massif m;
	memset(&m, 0, sizeof(m));
	m.h.q = q;
	m.h.r = r;
	struct ht__agg *a = NULL;
	struct ht__pass *p = NULL;
	struct ht__agg_result res;
	memset(&res, 0, sizeof(res));
	size_t *idx = NULL;
	int rc;
	q->group = HT_GROUP_STACK;
	q->sort = HT_SORT_SO;
	q->top = UINT64_MAX;
	q->top_given = true;
	if ((rc = ht__summary_at_peak(q, r, &m.peak_bytes)) < 0)
		return rc;
	m.peak_ts = q->at_ts;
	const struct ht_trace_info *info = ht_reader_info(r);
	uint64_t duration = info->duration_ns;
	m.step = duration / SNAPSHOTS ? duration / SNAPSHOTS : 1;
	m.next_ts = 0;
	if ((rc = ht__agg_new(&a, q, r)) < 0 || (rc = ht__pass_new(&p, r)) < 0 ||
	    (rc = ht__agg_attach(a, p)) < 0 || (rc = ht__pass_add(p, &massif_consumer, &m)) < 0)
		goto out;
	ht__pass_progress(p, progress, pctx);
	if ((rc = ht__pass_run(p)) < 0)
		goto out;
	/* The snapshots up to the end, then the end itself. */
	uint64_t end = ht__pass_end_ts(p);
	if ((rc = advance(&m, end)) < 0)
		goto out;
	if ((!m.snaps.len || m.snaps.v[m.snaps.len - 1].ts != end) &&
	    (rc = take(&m, end, false)) < 0)
		goto out;
	if ((rc = ht__agg_finish(a, &res)) < 0)
		goto out;

	/* Times in ms, as massif's --time-unit=ms. */
	fputs("desc: heaptrail export, host ", out);
	ht__fput_text(out, info->hostname ? info->hostname : "?", "#");
	if (info->sample_rate) /* the heap sizes are estimates (the pass made them) */
		fprintf(out,
			", estimates from allocations sampled every %" PRIu64
			" bytes on average (--sample-rate)",
			info->sample_rate);
	fputc('\n', out);
	put_cmd(out, info);
	fputs("time_unit: ms\n", out);
	idx = malloc((res.count ? res.count : 1) * sizeof(*idx));
	if (!idx) {
		rc = HT_ERR_NOMEM;
		goto out;
	}
	for (size_t i = 0; i < m.snaps.len; i++) {
		const struct snap *s = &m.snaps.v[i];
		fprintf(out,
			"#-----------\nsnapshot=%zu\n#-----------\ntime=%" PRIu64
			"\nmem_heap_B=%" PRIu64 "\nmem_heap_extra_B=0\nmem_stacks_B=0\n",
			i, s->ts / 1000000, s->bytes);
		if (!s->peak) {
			fputs("heap_tree=empty\n", out);
			continue;
		}
		fputs("heap_tree=peak\n", out);
		size_t n = 0;
		for (size_t k = 0; k < res.count; k++)
			if (res.items[k].c.outstanding_bytes)
				idx[n++] = k;
		struct tree_ctx t = {out, r, a, res.items, res.totals.outstanding_bytes, 0};
		fprintf(out,
			"n%zu: %" PRIu64 " (heap allocation functions) malloc/new/new[], "
			"--alloc-fns, etc.\n",
			top_children(&t, idx, n), res.totals.outstanding_bytes);
		if ((rc = write_children(&t, idx, n, 0, 1)) < 0)
			goto out;
	}
	rc = ferror(out) ? HT_ERR_IO : 0;
out:
	free(idx);
	ht__agg_result_release(&res);
	ht__pass_free(p);
	ht__agg_free(a);
	ht__vec_release(&m.snaps);
	ht__heap_sum_release(&m.h);
	return rc;
}
