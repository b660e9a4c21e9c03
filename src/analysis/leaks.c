/*
 * leaks.c - the leak gate's core (see leaks.h): LeakSanitizer-style
 * suppressions over the 'analyze -stacks so' aggregation of the blocks never
 * freed.
 */
#include "analysis/leaks.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/aggregate.h"
#include "analysis/query.h"
#include "base/vec.h"

/*
 * What the C and C++ runtimes allocate once and never free, by design. The
 * loader rule is the broad one: it covers everything allocated below the
 * dynamic loader, which is its own link maps, thread-local storage (the DTV
 * and static TLS blocks) and the constructors of shared libraries it runs,
 * among them libstdc++'s emergency exception pool (71 KiB). The program's own
 * constructors run from libc, not the loader, and stay checked.
 */
const struct ht__supp_default ht__supp_defaults[] = {
    {"ld-linux", "the dynamic loader: link maps, TLS, shared libraries' constructors "
		 "(libstdc++'s emergency pool)"},
    {"_IO_file_doallocate", "stdio buffers"},
    {"^_nl_", "locale data"},
    {"^setlocale$", "locale names"},
    {NULL, NULL},
};

void ht__supp_init(struct ht__supp *s)
{
	memset(s, 0, sizeof(*s));
}

int ht__supp_add(struct ht__supp *s, const char *pattern, const char *why)
{
	if (!*pattern || !strcmp(pattern, "^") || !strcmp(pattern, "$"))
		return HT_ERR_INVALID;
	if (ht__grow((void **)&s->rules, &s->alloc, s->count + 1, sizeof(*s->rules)) < 0)
		return HT_ERR_NOMEM;
	char *p = strdup(pattern);
	if (!p)
		return HT_ERR_NOMEM;
	s->rules[s->count++] = (struct ht__supp_rule){.pattern = p, .why = why};
	return 0;
}

int ht__supp_add_defaults(struct ht__supp *s)
{
	for (const struct ht__supp_default *d = ht__supp_defaults; d->pattern; d++) {
		int rc = ht__supp_add(s, d->pattern, d->why);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int ht__supp_add_file(struct ht__supp *s, const char *path, unsigned *bad_line, unsigned *skipped)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return errno == ENOENT	 ? HT_ERR_NOT_FOUND
		       : errno == EACCES ? HT_ERR_PERM
					 : HT_ERR_IO;
	char line[4096];
	unsigned n = 0;
	int rc = 0;
	*bad_line = 0;
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		n++;
		char *p = line, *end = line + strlen(line);
		while (end > p && isspace((unsigned char)end[-1]))
			*--end = '\0';
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		char *colon = strchr(p, ':');
		if (!colon || colon == p) {
			*bad_line = n;
			rc = HT_ERR_INVALID;
		} else if (colon - p == 4 && !strncmp(p, "leak", 4)) {
			rc = ht__supp_add(s, colon + 1, NULL);
			if (rc == HT_ERR_INVALID)
				*bad_line = n;
		} else {
			++*skipped; /* another sanitizer's kind: not ours to apply */
		}
	}
	if (rc == 0 && ferror(f))
		rc = HT_ERR_IO;
	fclose(f);
	return rc;
}

void ht__supp_release(struct ht__supp *s)
{
	for (size_t i = 0; i < s->count; i++)
		free(s->rules[i].pattern);
	free(s->rules);
	memset(s, 0, sizeof(*s));
}

/* Does the glob p (only '*' special) match all of t, or its start with open_end? */
static bool glob(const char *p, const char *pe, const char *t, bool open_end)
{
	while (p < pe && *p != '*') {
		if (*t != *p)
			return false;
		p++;
		t++;
	}
	if (p == pe)
		return open_end || !*t;
	while (p < pe && *p == '*')
		p++;
	if (p == pe)
		return true;
	for (; *t; t++)
		if (glob(p, pe, t, open_end))
			return true;
	return false;
}

bool ht__supp_match(const char *pattern, const char *text)
{
	if (!text || !*text)
		return false;
	const char *p = pattern, *pe = pattern + strlen(pattern);
	bool anchor_start = *p == '^', anchor_end = pe > p && pe[-1] == '$';
	if (anchor_start)
		p++;
	if (anchor_end && pe > p)
		pe--;
	if (anchor_start)
		return glob(p, pe, text, !anchor_end);
	for (const char *t = text; *t; t++)
		if (glob(p, pe, t, !anchor_end))
			return true;
	return false;
}

/* Index of the first rule that matches a frame of the stack, or -1. */
static int suppressed_by(const struct ht__supp *s, struct ht_reader *r, const uint32_t *frames,
			 uint32_t n)
{
	for (size_t k = 0; k < s->count; k++) {
		const char *pat = s->rules[k].pattern;
		for (uint32_t i = 0; i < n; i++) {
			const struct ht_frame *fr = ht_reader_frame(r, frames[i]);
			if (!fr)
				continue;
			const struct ht_module *m =
			    fr->module != HT_MODULE_NONE ? ht_reader_module(r, fr->module) : NULL;
			if (ht__supp_match(pat, fr->function) || ht__supp_match(pat, fr->file) ||
			    (m && (ht__supp_match(pat, m->name) || ht__supp_match(pat, m->path))))
				return (int)k;
		}
	}
	return -1;
}

static int by_bytes(const void *a, const void *b)
{
	const struct ht__leak *x = a, *y = b;
	if ((x->rule < 0) != (y->rule < 0))
		return x->rule < 0 ? -1 : 1;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return x->count > y->count ? -1 : x->count < y->count;
}

int ht__leaks_run(struct ht__leak_report *out, struct ht_reader *r, struct ht__supp *s)
{
	memset(out, 0, sizeof(*out));
	struct ht__query *q = calloc(1, sizeof(*q));
	if (!q)
		return HT_ERR_NOMEM;
	ht__query_init(q);
	q->group = HT_GROUP_STACK;
	q->sort = HT_SORT_SO;
	q->top = UINT64_MAX;
	q->top_given = true;
	out->query = q;
	int rc = ht__query_prepare(q);
	if (rc == 0)
		rc = ht__agg_new(&out->agg, q, r);
	if (rc == 0)
		rc = ht__agg_run(out->agg, NULL, NULL);
	struct ht__agg_result res;
	memset(&res, 0, sizeof(res));
	if (rc == 0)
		rc = ht__agg_finish(out->agg, &res);
	if (rc == 0 && res.count) {
		out->items = calloc(res.count, sizeof(*out->items));
		if (!out->items)
			rc = HT_ERR_NOMEM;
	}
	for (size_t k = 0; k < s->count; k++)
		s->rules[k].bytes = s->rules[k].count = 0;
	for (size_t i = 0; rc == 0 && i < res.count; i++) {
		const struct ht__agg_item *it = &res.items[i];
		if (!it->c.outstanding_count)
			continue;
		struct ht__leak *l = &out->items[out->count++];
		l->bytes = it->c.outstanding_bytes;
		l->count = it->c.outstanding_count;
		l->frames = it->frames;
		l->nframes = it->nframes;
		l->rule = suppressed_by(s, r, it->frames, it->nframes);
		if (l->rule >= 0) {
			s->rules[l->rule].bytes += l->bytes;
			s->rules[l->rule].count += l->count;
			out->suppressed_bytes += l->bytes;
			out->suppressed_count += l->count;
		} else {
			out->leaked_bytes += l->bytes;
			out->leaked_count += l->count;
			out->leaked_stacks++;
		}
	}
	if (out->count)
		qsort(out->items, out->count, sizeof(*out->items), by_bytes);
	ht__agg_result_release(&res);
	if (rc < 0)
		ht__leaks_release(out);
	return rc;
}

const char *ht__leaks_frame_text(struct ht__leak_report *rep, uint32_t frame)
{
	return ht__agg_frame_text(rep->agg, frame);
}

void ht__leaks_release(struct ht__leak_report *rep)
{
	free(rep->items);
	if (rep->agg)
		ht__agg_free(rep->agg);
	if (rep->query) {
		ht__query_release(rep->query);
		free(rep->query);
	}
	memset(rep, 0, sizeof(*rep));
}
