/*
 * diff.c - matching two aggregations by row text (diff.h): each row's text
 * is interned, and the intern id indexes the diff's rows.
 */
#include "analysis/diff.h"

#include "base/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The text of a row: its frames innermost first joined by '\n', or its key. */
static char *row_text(struct ht__agg *a, const struct ht__agg_result *res,
		      const struct ht__agg_item *it)
{
	if (res->group != HT_GROUP_STACK)
		return strdup(it->key ? it->key : "?");
	if (!it->nframes)
		return strdup("[no stack]");
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return NULL;
	for (uint32_t f = 0; f < it->nframes; f++)
		fprintf(m, "%s%s", f ? "\n" : "", ht__agg_frame_text(a, it->frames[f]));
	if (fclose(m) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int64_t abs64(int64_t v)
{
	return v < 0 ? -v : v;
}

static int cmp_items(const void *pa, const void *pb)
{
	const struct ht__diff_item *x = pa, *y = pb;
	int64_t bx = abs64(x->delta_bytes), by = abs64(y->delta_bytes);
	if (bx != by)
		return bx > by ? -1 : 1;
	int64_t cx = abs64(x->delta_count), cy = abs64(y->delta_count);
	if (cx != cy)
		return cx > cy ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* Adds one side's rows into d (side 0: base, 1: new). */
static int add_side(struct ht__diff *d, size_t *alloc, struct ht__agg *a,
		    const struct ht__agg_result *res, enum ht__metric m, int side)
{
	for (size_t i = 0; i < res->count; i++) {
		const struct ht__agg_item *it = &res->items[i];
		char *text = row_text(a, res, it);
		if (!text)
			return HT_ERR_NOMEM;
		uint32_t id = ht__intern_id(&d->keys, text);
		free(text);
		if (id == HT__NO_ID)
			return HT_ERR_NOMEM;
		if (id >= *alloc) {
			size_t old = *alloc;
			if (ht__grow((void **)&d->items, alloc, (size_t)id + 1, sizeof(*d->items)) <
			    0)
				return HT_ERR_NOMEM;
			memset(d->items + old, 0, (*alloc - old) * sizeof(*d->items));
		}
		if (id >= d->count)
			d->count = id + 1;
		struct ht__diff_item *di = &d->items[id];
		uint64_t bytes = ht__metric_bytes(&it->c, m), count = ht__metric_count(&it->c, m);
		if (side) {
			di->new_bytes += bytes;
			di->new_count += count;
		} else {
			di->base_bytes += bytes;
			di->base_count += count;
		}
	}
	return 0;
}

int ht__diff_run(struct ht__diff *d, struct ht__agg *base, const struct ht__agg_result *base_res,
		 struct ht__agg *cur, const struct ht__agg_result *cur_res, enum ht__metric m)
{
	memset(d, 0, sizeof(*d));
	d->group = cur_res->group;
	size_t alloc = 0;
	int rc = add_side(d, &alloc, base, base_res, m, 0);
	if (rc == 0)
		rc = add_side(d, &alloc, cur, cur_res, m, 1);
	if (rc < 0) {
		ht__diff_release(d);
		return rc;
	}
	struct ht__diff_item *t = &d->totals;
	t->base_bytes = ht__metric_bytes(&base_res->totals, m);
	t->base_count = ht__metric_count(&base_res->totals, m);
	t->new_bytes = ht__metric_bytes(&cur_res->totals, m);
	t->new_count = ht__metric_count(&cur_res->totals, m);
	t->delta_bytes = (int64_t)t->new_bytes - (int64_t)t->base_bytes;
	t->delta_count = (int64_t)t->new_count - (int64_t)t->base_count;
	/* Rows with nothing on either side under this metric are left out. */
	size_t n = 0;
	for (size_t i = 0; i < d->count; i++) {
		struct ht__diff_item di = d->items[i];
		if (!di.base_bytes && !di.new_bytes && !di.base_count && !di.new_count)
			continue;
		di.key = d->keys.strs[i];
		di.delta_bytes = (int64_t)di.new_bytes - (int64_t)di.base_bytes;
		di.delta_count = (int64_t)di.new_count - (int64_t)di.base_count;
		d->items[n++] = di;
	}
	d->count = n;
	if (d->count)
		qsort(d->items, d->count, sizeof(*d->items), cmp_items);
	return 0;
}

void ht__diff_release(struct ht__diff *d)
{
	free(d->items);
	ht__intern_release(&d->keys);
	memset(d, 0, sizeof(*d));
}
