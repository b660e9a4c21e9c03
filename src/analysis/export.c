/*
 * export.c - what every export shares (export.h): the metrics, and the
 * collapsed-stack writer, the smallest of the formats.
 */
#include "analysis/export.h"

#include <stdlib.h>
#include <string.h>

#include "base/vec.h"

static const char *const metric_names[] = {"outstanding", "total", "peak"};

int ht__metric_parse(const char *s, enum ht__metric *out)
{
	for (unsigned i = 0; s && i < 3; i++) {
		if (!strcmp(s, metric_names[i])) {
			*out = (enum ht__metric)i;
			return 0;
		}
	}
	return HT_ERR_INVALID;
}

const char *ht__metric_name(enum ht__metric m)
{
	return (unsigned)m < 3 ? metric_names[m] : "?";
}

uint64_t ht__metric_bytes(const struct ht__agg_counts *c, enum ht__metric m)
{
	return m == HT_METRIC_TOTAL ? c->total_bytes : c->outstanding_bytes;
}

uint64_t ht__metric_count(const struct ht__agg_counts *c, enum ht__metric m)
{
	return m == HT_METRIC_TOTAL ? c->total_count : c->outstanding_count;
}

/* One frame's name for flamegraph.pl: no ';' or line break inside. */
static void put_frame(FILE *out, const char *text, size_t skip)
{
	for (const char *p = text + skip; *p; p++)
		fputc(*p == ';' || *p == '\n' || *p == '\r' ? '_' : *p, out);
}

int ht__export_collapsed(FILE *out, struct ht__agg *a, const struct ht__agg_result *res,
			 const struct ht_reader *r, enum ht__metric m, bool modules)
{
	for (size_t i = 0; i < res->count; i++) {
		const struct ht__agg_item *it = &res->items[i];
		uint64_t v = ht__metric_bytes(&it->c, m);
		if (!v)
			continue;
		if (!it->nframes)
			fputs("[no stack]", out);
		/* Root first: the aggregator's frames are innermost first. */
		for (uint32_t f = it->nframes; f-- > 0;) {
			const char *text = ht__agg_frame_text(a, it->frames[f]);
			size_t skip = 0;
			if (!modules) {
				struct ht__match_frame mf;
				ht__match_frame_from_reader(r, it->frames[f], &mf);
				size_t n = mf.module_name ? strlen(mf.module_name) : 0;
				if (n && !strncmp(text, mf.module_name, n) && text[n] == '!')
					skip = n + 1;
			}
			put_frame(out, text, skip);
			if (f)
				fputc(';', out);
		}
		fprintf(out, " %llu\n", (unsigned long long)v);
	}
	return ferror(out) ? HT_ERR_IO : 0;
}

/* The state of process p, growing the arrays; NULL when out of memory. */
static uint8_t *sum_state(struct ht__heap_sum *h, uint32_t p)
{
	if (p >= h->n) {
		size_t old = h->n, cap = h->n, cap2 = h->n;
		if (ht__grow((void **)&h->state, &cap, (size_t)p + 1, 1) < 0 ||
		    ht__grow((void **)&h->bytes, &cap2, cap, sizeof(*h->bytes)) < 0)
			return NULL;
		memset(h->state + old, 0, cap - old);
		memset(h->bytes + old, 0, (cap - old) * sizeof(*h->bytes));
		h->n = cap;
	}
	if (!h->state[p]) {
		const struct ht_process *pr = ht_reader_process(h->r, p);
		h->state[p] = pr && ht__query_wants_pid(h->q, pr->pid) ? 1 : 2;
	}
	return &h->state[p];
}

int ht__heap_sum_add(struct ht__heap_sum *h, uint32_t p, uint64_t size, int sign)
{
	uint8_t *st = sum_state(h, p);
	if (!st)
		return HT_ERR_NOMEM;
	if (*st != 1)
		return 0;
	if (sign > 0) {
		h->bytes[p] += size;
		h->total += size;
	} else {
		h->bytes[p] -= size;
		h->total -= size;
	}
	return 1;
}

int ht__heap_sum_end(struct ht__heap_sum *h, uint32_t p)
{
	uint8_t *st = sum_state(h, p);
	if (!st)
		return HT_ERR_NOMEM;
	if (*st == 1) {
		h->total -= h->bytes[p];
		*st = 2;
	}
	return 0;
}

void ht__heap_sum_release(struct ht__heap_sum *h)
{
	free(h->bytes);
	free(h->state);
	h->bytes = NULL;
	h->state = NULL;
	h->n = 0;
}
