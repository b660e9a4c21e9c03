/*
 * export.c - what every export shares (export.h): the metrics, and the
 * collapsed-stack writer, the smallest of the formats.
 */
#include "analysis/export.h"

#include <string.h>

static const char *const metric_names[] = {"outstanding", "total", "peak"};

int ht_metric_parse(const char *s, enum ht_metric *out)
{
	for (unsigned i = 0; s && i < 3; i++) {
		if (!strcmp(s, metric_names[i])) {
			*out = (enum ht_metric)i;
			return 0;
		}
	}
	return HT_ERR_INVALID;
}

const char *ht_metric_name(enum ht_metric m)
{
	return (unsigned)m < 3 ? metric_names[m] : "?";
}

uint64_t ht_metric_bytes(const struct ht_agg_counts *c, enum ht_metric m)
{
	return m == HT_METRIC_TOTAL ? c->total_bytes : c->outstanding_bytes;
}

uint64_t ht_metric_count(const struct ht_agg_counts *c, enum ht_metric m)
{
	return m == HT_METRIC_TOTAL ? c->total_count : c->outstanding_count;
}

/* One frame's name for flamegraph.pl: no ';' or line break inside. */
static void put_frame(FILE *out, const char *text, size_t skip)
{
	for (const char *p = text + skip; *p; p++)
		fputc(*p == ';' || *p == '\n' || *p == '\r' ? '_' : *p, out);
}

int ht_export_collapsed(FILE *out, struct ht_agg *a, const struct ht_agg_result *res,
			const struct ht_reader *r, enum ht_metric m, bool modules)
{
	for (size_t i = 0; i < res->count; i++) {
		const struct ht_agg_item *it = &res->items[i];
		uint64_t v = ht_metric_bytes(&it->c, m);
		if (!v)
			continue;
		if (!it->nframes)
			fputs("[no stack]", out);
		/* Root first: the aggregator's frames are innermost first. */
		for (uint32_t f = it->nframes; f-- > 0;) {
			const char *text = ht_agg_frame_text(a, it->frames[f]);
			size_t skip = 0;
			if (!modules) {
				struct ht_match_frame mf;
				ht_match_frame_from_reader(r, it->frames[f], &mf);
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
