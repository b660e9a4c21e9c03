/*
 * reportdata.c - computes what the HTML report shows (reportdata.h): the
 * summary, lifetimes grouped by site within a budget, and series over time.
 * The numbers follow the same rules as 'heaptrail table' (window.h) so that
 * the page and the tables agree for any window.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/commit.h"
#include "analysis/heapnames.h"
#include "analysis/lifetime.h"
#include "analysis/match.h"
#include "analysis/pass.h"
#include "analysis/reportdata.h"
#include "analysis/window.h"
#include "base/vec.h"

#define NONE32 UINT32_MAX

/* What one run needs besides the result. */
struct run {
	struct ht__report_data *d;
	const struct ht__report_opts *o;
	struct ht_reader *r;
	struct ht__match_list cull_list;
	struct ht__frame_matcher *cull;
	struct ht__wstacks *ws;
	/* Canonical stack id -> output stack index + 1 (0: not yet used). */
	uint32_t *canon_out;
	size_t canon_cap;
	/* Commits already counted, as 'heaptrail table' keeps them, so a range
	   decommitted in pieces counts once in Count. */
	struct ht__commit_seen seen;
	/* Heap series: live bytes after the last event, bytes freed since. */
	uint64_t live_prev, freed;
	/* RSS of each process, to follow the sum's peak. */
	uint64_t *rss;
	size_t rss_cap;
	uint64_t rss_sum;
	/* Last series and handle found, since events of one process and heap come in runs. */
	uint32_t hint_heap, hint_commit, hint_rss;
	size_t cap_heap, cap_commit, cap_rss; /* of d's series arrays (vec.h) */
	uint32_t last_handle;
	size_t handles_cap;
};

#define mix64 ht__mix64

#define grow ht__grow
#define grow_zero ht__grow_zero

#define grow32 ht__grow32

/* ---- sites and cells ---- */

static uint64_t site_hash(uint32_t process, uint32_t handle, uint32_t stack)
{
	return mix64(((uint64_t)process << 32 | handle) ^ mix64(stack));
}

static uint64_t site_rehash(const void *ctx, uint32_t id)
{
	const struct ht__rd_site *st = &((const struct ht__rd_table *)ctx)->sites[id];
	return site_hash(st->process, st->handle, st->stack);
}

/* The index of the site (process, handle, stack), added when new; negative on error. */
static int64_t site_get(struct ht__rd_table *t, uint32_t process, uint32_t handle, uint32_t stack)
{
	uint64_t h = site_hash(process, handle, stack);
	for (uint32_t *slot = ht__hindex_find(&t->site_index, h); *slot;
	     slot = ht__hindex_next(&t->site_index, slot)) {
		const struct ht__rd_site *s = &t->sites[*slot - 1];
		if (s->process == process && s->handle == handle && s->stack == stack)
			return *slot - 1;
	}
	if (grow32((void **)&t->sites, &t->sites_cap, t->nsites + 1, sizeof(*t->sites)) < 0)
		return HT_ERR_NOMEM;
	struct ht__rd_site *s = &t->sites[t->nsites];
	memset(s, 0, sizeof(*s));
	s->process = process;
	s->handle = handle;
	s->stack = stack;
	if (ht__hindex_insert(&t->site_index, h, t->nsites, site_rehash, t) < 0)
		return HT_ERR_NOMEM;
	return t->nsites++;
}

static uint64_t cell_hash(uint32_t site, uint32_t ab, uint32_t fb)
{
	return mix64((uint64_t)site << 32 ^ mix64((uint64_t)ab << 32 | fb));
}

static uint64_t cell_rehash(const void *ctx, uint32_t id)
{
	const struct ht__rd_cell *c = &((const struct ht__rd_table *)ctx)->cells[id];
	return cell_hash(c->site, c->alloc_bucket, c->free_bucket);
}

static int cell_add_raw(struct ht__rd_table *t, const struct ht__rd_cell *add)
{
	uint64_t h = cell_hash(add->site, add->alloc_bucket, add->free_bucket);
	for (uint32_t *slot = ht__hindex_find(&t->cell_index, h); *slot;
	     slot = ht__hindex_next(&t->cell_index, slot)) {
		struct ht__rd_cell *c = &t->cells[*slot - 1];
		if (c->site == add->site && c->alloc_bucket == add->alloc_bucket &&
		    c->free_bucket == add->free_bucket) {
			c->count += add->count;
			c->blocks += add->blocks;
			c->bytes += add->bytes;
			c->reallocs += add->reallocs;
			return 0;
		}
	}
	if (grow((void **)&t->cells, &t->cells_cap, t->ncells + 1, sizeof(*t->cells)) < 0)
		return HT_ERR_NOMEM;
	t->cells[t->ncells] = *add;
	if (ht__hindex_insert(&t->cell_index, h, (uint32_t)t->ncells, cell_rehash, t) < 0)
		return HT_ERR_NOMEM;
	t->ncells++;
	return 0;
}

/*
 * Halves the time resolution of the cells: buckets twice as wide, cells that
 * now share both buckets merged. Called when the cells outgrow their budget.
 */
static int cells_coarsen(struct ht__rd_table *t)
{
	struct ht__rd_cell *old = t->cells;
	size_t n = t->ncells;
	t->cells = NULL;
	t->ncells = 0;
	t->cells_cap = 0;
	ht__hindex_release(&t->cell_index);
	t->bucket_ns *= 2;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct ht__rd_cell c = old[i];
		c.alloc_bucket /= 2;
		if (c.free_bucket != NONE32)
			c.free_bucket /= 2;
		rc = cell_add_raw(t, &c);
	}
	free(old);
	return rc;
}

static int cell_add(struct ht__rd_table *t, uint32_t site, const struct ht__rd_life *l)
{
	struct ht__rd_cell c = {
	    .site = site,
	    .alloc_bucket = (uint32_t)(l->alloc_ts / t->bucket_ns),
	    .free_bucket =
		l->free_ts == HT_TS_NEVER ? NONE32 : (uint32_t)(l->free_ts / t->bucket_ns),
	    .count = l->piece ? 0 : l->count,
	    .blocks = 1,
	    .bytes = l->size,
	    .reallocs = l->realloc,
	};
	int rc = cell_add_raw(t, &c);
	while (rc == 0 && t->ncells > t->cell_budget && t->bucket_ns < (UINT64_MAX >> 2))
		rc = cells_coarsen(t);
	return rc;
}

/* Moves a site's exact lifetimes into cells; from now on it is binned. */
static int site_bin(struct ht__rd_table *t, uint32_t i)
{
	struct ht__rd_site *s = &t->sites[i];
	for (uint32_t k = 0; k < s->nlives; k++) {
		int rc = cell_add(t, i, &s->lives[k]);
		if (rc < 0)
			return rc;
	}
	t->nexact -= s->nlives;
	free(s->lives);
	s->lives = NULL;
	s->nlives = s->lives_cap = 0;
	s->binned = true;
	t->binned_sites++;
	return 0;
}

static const struct ht__rd_table *sort_table;

static int by_bytes(const void *a, const void *b)
{
	const struct ht__rd_site *x = &sort_table->sites[*(const uint32_t *)a];
	const struct ht__rd_site *y = &sort_table->sites[*(const uint32_t *)b];
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? -1 : 1;
	return x->nlives < y->nlives ? -1 : x->nlives > y->nlives;
}

/*
 * Over budget: bins the sites with the fewest bytes until the exact lifetimes
 * are down to three quarters of the budget, so that binning happens in a few
 * rounds however many lifetimes the trace has.
 */
static int table_trim(struct ht__rd_table *t)
{
	uint32_t *order = malloc((size_t)t->nsites * sizeof(*order) + 1);
	if (!order)
		return HT_ERR_NOMEM;
	uint32_t n = 0;
	for (uint32_t i = 0; i < t->nsites; i++)
		if (!t->sites[i].binned && t->sites[i].nlives)
			order[n++] = i;
	sort_table = t;
	qsort(order, n, sizeof(*order), by_bytes);
	int rc = 0;
	uint64_t target = t->budget - t->budget / 4;
	for (uint32_t k = 0; k < n && t->nexact > target && rc == 0; k++)
		rc = site_bin(t, order[k]);
	free(order);
	return rc;
}

static int table_add(struct ht__rd_table *t, uint32_t site, const struct ht__rd_life *l)
{
	struct ht__rd_site *s = &t->sites[site];
	s->bytes += l->size;
	if (s->binned)
		return cell_add(t, site, l);
	if (grow32((void **)&s->lives, &s->lives_cap, s->nlives + 1, sizeof(*s->lives)) < 0)
		return HT_ERR_NOMEM;
	s->lives[s->nlives++] = *l;
	if (++t->nexact > t->budget)
		return table_trim(t);
	return 0;
}

static void table_release(struct ht__rd_table *t)
{
	for (uint32_t i = 0; i < t->nsites; i++)
		free(t->sites[i].lives);
	free(t->sites);
	free(t->cells);
	ht__hindex_release(&t->site_index);
	ht__hindex_release(&t->cell_index);
	memset(t, 0, sizeof(*t));
}

/* ---- handles, stacks ---- */

static int64_t handle_index(struct run *x, uint64_t heap)
{
	struct ht__report_data *d = x->d;
	if (x->last_handle < d->nhandles && d->handles[x->last_handle] == heap)
		return x->last_handle;
	for (uint32_t i = 0; i < d->nhandles; i++)
		if (d->handles[i] == heap)
			return x->last_handle = i;
	if (grow((void **)&d->handles, &x->handles_cap, (size_t)d->nhandles + 1,
		 sizeof(*d->handles)) < 0)
		return HT_ERR_NOMEM;
	d->handles[d->nhandles] = heap;
	return x->last_handle = d->nhandles++;
}

/* The canonical (culled) stack id of a raw stack id; negative on error. */
static int64_t canon_stack(struct run *x, uint32_t raw)
{
	struct ht__witem it = {0};
	int rc = ht__wstacks_resolve(x->ws, raw, &it);
	if (rc < 0)
		return rc;
	return it.stack;
}

/* ---- series ---- */

/*
 * The series of (process, handle) in *arr, added when new. *hint is the
 * index found last time: events of one process and heap come in runs, so
 * the search is skipped most of the time.
 */
static int series_get(struct ht__rd_series **arr, uint32_t *n, size_t *cap, uint32_t *hint,
		      uint32_t points, uint32_t process, uint32_t handle,
		      struct ht__rd_series **out)
{
	if (*hint < *n && (*arr)[*hint].process == process && (*arr)[*hint].handle == handle) {
		*out = &(*arr)[*hint];
		return 0;
	}
	for (uint32_t i = 0; i < *n; i++)
		if ((*arr)[i].process == process && (*arr)[i].handle == handle) {
			*out = &(*arr)[i];
			*hint = i;
			return 0;
		}
	if (ht__grow((void **)arr, cap, (size_t)*n + 1, sizeof(**arr)) < 0)
		return HT_ERR_NOMEM;
	struct ht__rd_series *s = &(*arr)[*n];
	memset(s, 0, sizeof(*s));
	s->process = process;
	s->handle = handle;
	s->max = calloc(points, sizeof(uint64_t));
	s->last = calloc(points, sizeof(uint64_t));
	if (!s->max || !s->last) {
		free(s->max);
		free(s->last);
		return HT_ERR_NOMEM;
	}
	*hint = (*n)++;
	*out = s;
	return 0;
}

/* Closes the points before p with their values and opens p. */
static void series_move(struct ht__rd_series *s, uint32_t p)
{
	if (p <= s->filled)
		return;
	s->last[s->filled] = s->cur;
	for (uint32_t q = s->filled + 1; q < p; q++)
		s->max[q] = s->last[q] = s->cur;
	s->filled = p;
	s->max[p] = s->cur;
}

static void series_set(struct ht__rd_series *s, uint32_t p, uint64_t v)
{
	series_move(s, p);
	s->cur = v;
	if (v > s->max[s->filled])
		s->max[s->filled] = v;
	s->last[s->filled] = v;
}

static uint32_t point_of(const struct ht__report_data *d, uint64_t ts)
{
	uint64_t p = ts / d->point_ns;
	return p >= d->points ? d->points - 1 : (uint32_t)p;
}

static void series_release(struct ht__rd_series *arr, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		free(arr[i].max);
		free(arr[i].last);
	}
	free(arr);
}

/* ---- the consumer of the trace pass ---- */

/* The heap series of (process, heap) changes by delta at ts. */
static int heap_step(struct run *x, uint32_t process, uint64_t heap, uint64_t ts, int64_t delta)
{
	struct ht__report_data *d = x->d;
	int64_t h = handle_index(x, heap);
	struct ht__rd_series *s;
	if (h < 0 || series_get(&d->heap_series, &d->nheap_series, &x->cap_heap, &x->hint_heap,
				d->points, process, (uint32_t)h, &s) < 0)
		return HT_ERR_NOMEM;
	series_set(s, point_of(d, ts), s->cur + (uint64_t)delta);
	return 0;
}

static int on_life(void *ctx, struct ht__pass *p, const struct ht__life *l)
{
	(void)p;
	struct run *x = ctx;
	int64_t h = handle_index(x, l->heap);
	int64_t st = h < 0 ? h : canon_stack(x, l->stack);
	int64_t site = st < 0 ? st : site_get(&x->d->heap, l->process, (uint32_t)h, (uint32_t)st);
	if (site < 0)
		return (int)site;
	struct ht__rd_life rl = {l->size,
				 l->alloc_ts,
				 l->free_ts,
				 l->from_realloc,
				 0,
				 l->at_exit,
				 l->count > UINT32_MAX ? UINT32_MAX : (uint32_t)l->count};
	int rc = table_add(&x->d->heap, (uint32_t)site, &rl);
	if (rc < 0 || l->free_ts == HT_TS_NEVER)
		return rc;
	/* Freed now (or taken back at its process's end): the series drops now. */
	x->freed += l->size;
	return heap_step(x, l->process, l->heap, l->free_ts, -(int64_t)l->size);
}

static int on_commit(void *ctx, struct ht__pass *p, const struct ht__commit *c)
{
	(void)p;
	struct run *x = ctx;
	int piece = ht__commit_seen(&x->seen, c);
	int64_t h = piece < 0 ? HT_ERR_NOMEM : handle_index(x, 0);
	int64_t st = h < 0 ? h : canon_stack(x, c->stack);
	int64_t site = st < 0 ? st : site_get(&x->d->commit, c->process, (uint32_t)h, (uint32_t)st);
	if (site < 0)
		return (int)site;
	struct ht__rd_life rl = {
	    c->size, c->commit_ts, c->decommit_ts, 0, (uint8_t)piece, c->at_exit, 1};
	return table_add(&x->d->commit, (uint32_t)site, &rl);
}

static int set_rss(struct run *x, uint32_t process, uint64_t ts, uint64_t v)
{
	struct ht__report_data *d = x->d;
	struct ht__rd_series *s;
	if (grow_zero((void **)&x->rss, &x->rss_cap, (size_t)process + 1, sizeof(*x->rss)) < 0)
		return HT_ERR_NOMEM;
	int rc = series_get(&d->rss_series, &d->nrss_series, &x->cap_rss, &x->hint_rss, d->points,
			    process, 0, &s);
	if (rc < 0)
		return rc;
	series_set(s, point_of(d, ts), v);
	x->rss_sum = x->rss_sum - x->rss[process] + v;
	x->rss[process] = v;
	if (x->rss_sum > d->rss_peak) {
		d->rss_peak = x->rss_sum;
		d->rss_peak_ts = ts;
	}
	return 0;
}

/* The committed series of a process follows the commit map. */
static int commit_set(struct run *x, struct ht__pass *p, uint32_t process, uint64_t ts, bool ended)
{
	struct ht__report_data *d = x->d;
	struct ht__commit_stats cs;
	struct ht__rd_series *s;
	ht__pass_commit_process_stats(p, process, &cs);
	if (ended && !cs.committed_bytes)
		return 0; /* nothing committed: no series to end */
	int rc = series_get(&d->commit_series, &d->ncommit_series, &x->cap_commit, &x->hint_commit,
			    d->points, process, 0, &s);
	if (rc < 0)
		return rc;
	series_set(s, point_of(d, ts), ended ? 0 : cs.committed_bytes);
	return 0;
}

static int on_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	struct run *x = ctx;
	int rc = 0;
	if (ev->type == HT_EV_RSS)
		return set_rss(x, ev->process, ev->ts, ev->size);
	if (ev->type == HT_EV_MMAP || ev->type == HT_EV_MUNMAP || ev->type == HT_EV_MREMAP ||
	    ev->type == HT_EV_MPROTECT || ev->type == HT_EV_BRK)
		return commit_set(x, p, ev->process, ev->ts, false);
	/*
	 * A heap event: what it freed went down already (on_life); what it
	 * allocated is the rest of the change of the live bytes, in the
	 * event's process and heap.
	 */
	uint64_t live = ht__pass_life_stats(p)->live_bytes;
	int64_t allocated = (int64_t)(live - x->live_prev) + (int64_t)x->freed;
	x->live_prev = live;
	x->freed = 0;
	if (allocated)
		rc = heap_step(x, ev->process, ev->heap, ev->ts, allocated);
	return rc;
}

/*
 * An image ended: its committed ranges and heap blocks ended with it (the
 * pass's rule, as in the tables), so its committed series drops to 0 as its
 * heap series did, and its RSS too.
 */
static int on_process_end(void *ctx, struct ht__pass *p, uint32_t process, uint64_t ts)
{
	struct run *x = ctx;
	int rc = commit_set(x, p, process, ts, true);
	if (rc == 0 && process < x->rss_cap && x->rss[process])
		rc = set_rss(x, process, ts, 0);
	return rc;
}

static const struct ht__consumer report_consumer = {
    .name = "report",
    .events = HT_PASS_EV(HT_EV_ALLOC) | HT_PASS_EV(HT_EV_REALLOC) | HT_PASS_EV(HT_EV_FREE) |
	      HT_PASS_EV(HT_EV_HEAP_DESTROY) | HT_PASS_EV(HT_EV_MMAP) | HT_PASS_EV(HT_EV_MUNMAP) |
	      HT_PASS_EV(HT_EV_MREMAP) | HT_PASS_EV(HT_EV_MPROTECT) | HT_PASS_EV(HT_EV_BRK) |
	      HT_PASS_EV(HT_EV_RSS),
    .needs = HT_PASS_NEED_LIFE | HT_PASS_NEED_COMMIT,
    .event = on_event,
    .life = on_life,
    .commit = on_commit,
    .process_end = on_process_end,
};

static int by_alloc(const void *a, const void *b)
{
	const struct ht__rd_life *x = a, *y = b;
	if (x->alloc_ts != y->alloc_ts)
		return x->alloc_ts < y->alloc_ts ? -1 : 1;
	return x->free_ts < y->free_ts ? -1 : x->free_ts > y->free_ts;
}

/* Each site's lifetimes in allocation order, so the output can store time deltas. */
static void sort_lives(struct ht__rd_table *t)
{
	for (uint32_t i = 0; i < t->nsites; i++)
		if (t->sites[i].nlives > 1) /* qsort of NULL, 0 is undefined */
			qsort(t->sites[i].lives, t->sites[i].nlives, sizeof(struct ht__rd_life),
			      by_alloc);
}

/* Gives each used canonical stack an output index and lists its frames, outermost first. */
static int build_stacks(struct run *x)
{
	struct ht__report_data *d = x->d;
	struct ht__rd_table *tabs[2] = {&d->heap, &d->commit};
	uint32_t *frame_out = NULL; /* reader frame id -> output index + 1 */
	size_t frame_cap = 0;
	size_t off_cap = 0, fr_cap = 0, ids_cap = 0;
	int rc = 0;
	d->nstacks = 1; /* stack 0: no frames */
	if (grow((void **)&d->stack_off, &off_cap, 2, sizeof(uint32_t)) < 0)
		return HT_ERR_NOMEM;
	d->stack_off[0] = d->stack_off[1] = 0;
	uint32_t nfr = 0;
	for (int k = 0; k < 2 && rc == 0; k++) {
		struct ht__rd_table *t = tabs[k];
		for (uint32_t i = 0; i < t->nsites && rc == 0; i++) {
			uint32_t canon = t->sites[i].stack;
			const uint32_t *frames;
			uint32_t n = canon ? ht__wstacks_frames(x->ws, canon, &frames) : 0;
			if (!n) {
				t->sites[i].stack = 0;
				continue;
			}
			if ((rc = grow_zero((void **)&x->canon_out, &x->canon_cap,
					    (size_t)canon + 1, sizeof(uint32_t))) < 0)
				break;
			if (x->canon_out[canon]) {
				t->sites[i].stack = x->canon_out[canon] - 1;
				continue;
			}
			uint32_t si = d->nstacks++;
			x->canon_out[canon] = si + 1;
			t->sites[i].stack = si;
			if ((rc = grow((void **)&d->stack_off, &off_cap, (size_t)d->nstacks + 1,
				       sizeof(uint32_t))) < 0 ||
			    (rc = grow((void **)&d->stack_frames, &fr_cap, (size_t)nfr + n,
				       sizeof(uint32_t))) < 0)
				break;
			for (uint32_t j = n; j-- > 0;) {
				uint32_t f = frames[j];
				if ((rc = grow_zero((void **)&frame_out, &frame_cap, (size_t)f + 1,
						    sizeof(*frame_out))) < 0)
					break;
				if (!frame_out[f]) {
					if ((rc = grow((void **)&d->frame_ids, &ids_cap,
						       (size_t)d->nframes + 1, sizeof(uint32_t))) <
					    0)
						break;
					d->frame_ids[d->nframes++] = f;
					frame_out[f] = d->nframes;
				}
				d->stack_frames[nfr++] = frame_out[f] - 1;
			}
			d->stack_off[d->nstacks] = nfr;
		}
	}
	free(frame_out);
	return rc;
}

int ht__report_data_run(struct ht__report_data *d, struct ht_reader *r,
			const struct ht__report_opts *o)
{
	struct ht__report_opts defaults = HT_REPORT_OPTS_INIT;
	if (!o)
		o = &defaults;
	memset(d, 0, sizeof(*d));
	if (!o->points || !o->buckets || !o->heap_budget || !o->commit_budget || !o->cell_budget)
		return HT_ERR_INVALID;
	struct run x = {.d = d, .o = o, .r = r};
	struct ht__pass *pass = NULL;
	ht__match_list_init(&x.cull_list);
	uint64_t dur;
	int rc = ht__pass_trace_end(r, &dur);
	if (rc < 0) {
		memset(d, 0, sizeof(*d));
		return rc;
	}
	d->duration_ns = dur;
	d->points = o->points;
	d->point_ns = dur / o->points + 1;
	d->heap.budget = o->heap_budget;
	d->commit.budget = o->commit_budget;
	d->heap.cell_budget = d->commit.cell_budget = o->cell_budget;
	d->heap.bucket_ns = d->commit.bucket_ns = dur / o->buckets + 1;

	if (o->default_cull && (rc = ht__match_list_add_defaults(&x.cull_list)) < 0)
		goto out;
	if (x.cull_list.count && (rc = ht__frame_matcher_new(&x.cull, &x.cull_list, r)) < 0)
		goto out;
	if ((rc = ht__wstacks_new(&x.ws, r, x.cull)) < 0)
		goto out;
	/* One read: the summary and the report's data are consumers of one pass. */
	if ((rc = ht__pass_new(&pass, r)) < 0 ||
	    (rc = ht__summary_attach(&d->summary, pass, NULL)) < 0 ||
	    (rc = ht__pass_add(pass, &report_consumer, &x)) < 0 ||
	    (rc = ht__heap_names_new(&d->heap_names)) < 0 ||
	    (rc = ht__heap_names_attach(pass, d->heap_names, UINT64_MAX)) < 0 ||
	    (rc = ht__pass_run(pass)) < 0)
		goto out;
	if (d->duration_ns < d->summary.last_ts)
		d->duration_ns = d->summary.last_ts;
	d->snapshot = ht__pass_snapshot_taken(pass, &d->snapshot_ts);
	struct ht__rd_series *all[3] = {d->heap_series, d->commit_series, d->rss_series};
	uint32_t counts[3] = {d->nheap_series, d->ncommit_series, d->nrss_series};
	for (int k = 0; k < 3; k++)
		for (uint32_t i = 0; i < counts[k]; i++) {
			series_move(&all[k][i], d->points - 1);
			all[k][i].last[d->points - 1] = all[k][i].cur;
		}
	sort_lives(&d->heap);
	sort_lives(&d->commit);
	rc = build_stacks(&x);
out:
	ht__pass_free(pass);
	if (x.ws)
		ht__wstacks_free(x.ws);
	if (x.cull)
		ht__frame_matcher_free(x.cull);
	ht__match_list_release(&x.cull_list);
	free(x.canon_out);
	ht__commit_seen_release(&x.seen);
	free(x.rss);
	if (rc < 0)
		ht__report_data_release(d);
	return rc < 0 ? rc : 0;
}

void ht__report_data_release(struct ht__report_data *d)
{
	ht__summary_release(&d->summary);
	free(d->handles);
	ht__heap_names_free(d->heap_names);
	table_release(&d->heap);
	table_release(&d->commit);
	series_release(d->heap_series, d->nheap_series);
	series_release(d->commit_series, d->ncommit_series);
	series_release(d->rss_series, d->nrss_series);
	free(d->stack_off);
	free(d->stack_frames);
	free(d->frame_ids);
	memset(d, 0, sizeof(*d));
}
