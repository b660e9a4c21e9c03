/*
 * export_pprof.c - the pprof writer of export.h: turns aggregated stacks into
 * the messages of profile.proto (packed by protobuf-c) and gzips them, as Go
 * writes heap profiles. A location is one return address: a run of inlined
 * frames ending at the frame of their caller.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "analysis/export.h"
#include "analysis/intern.h"
#include "base/vec.h"
#include "profile.pb-c.h"

struct builder {
	struct ht__intern strs; /* the string table: id == index */
	struct ht__intern keys; /* "f:NAME:FILE", "l:SIDE:FIRST:LAST", "m:SIDE:MODULE" -> id */
	uint64_t *key_val;	/* per key id: function, location or mapping id */
	size_t key_alloc;
	Htpprof__Function *funcs;
	size_t nfuncs, afuncs;
	Htpprof__Location *locs;
	size_t nlocs, alocs;
	Htpprof__Line *lines; /* every location's lines, pointed at after building */
	size_t nlines, alines;
	size_t *loc_line0; /* per location: its first line in lines */
	size_t aloc_line0;
	Htpprof__Mapping *maps;
	size_t nmaps, amaps;
	Htpprof__Sample *samples;
	size_t nsamples, asamples;
	uint64_t *loc_ids; /* every sample's location ids */
	size_t nloc_ids, aloc_ids;
	size_t *sample_loc0;
	size_t asample_loc0;
	int64_t *values; /* 4 per sample */
	size_t avalues;
	Htpprof__Label *labels; /* LABELS per sample, n_label of them used */
	size_t alabels;
	int err;
};

static int64_t str_id(struct builder *b, const char *s)
{
	uint32_t id = ht__intern_id(&b->strs, s ? s : "");
	if (id == HT__NO_ID) {
		b->err = HT_ERR_NOMEM;
		return 0;
	}
	return id;
}

/* The key's value slot (0 when new), or NULL when out of memory. */
static uint64_t *key_slot(struct builder *b, const char *key)
{
	uint32_t id = ht__intern_id(&b->keys, key);
	if (id == HT__NO_ID) {
		b->err = HT_ERR_NOMEM;
		return NULL;
	}
	if (id >= b->key_alloc) {
		size_t old = b->key_alloc;
		if (ht__grow((void **)&b->key_val, &b->key_alloc, id + 1, sizeof(*b->key_val)) <
		    0) {
			b->err = HT_ERR_NOMEM;
			return NULL;
		}
		memset(b->key_val + old, 0, (b->key_alloc - old) * sizeof(*b->key_val));
	}
	return &b->key_val[id];
}

static uint64_t mapping_id(struct builder *b, int side, const struct ht_reader *r, uint32_t module)
{
	char key[64];
	snprintf(key, sizeof(key), "m:%d:%" PRIu32, side, module);
	uint64_t *slot = key_slot(b, key);
	if (!slot)
		return 0;
	if (*slot)
		return *slot;
	if (ht__grow((void **)&b->maps, &b->amaps, b->nmaps + 1, sizeof(*b->maps)) < 0) {
		b->err = HT_ERR_NOMEM;
		return 0;
	}
	const struct ht_module *mod = ht_reader_module(r, module);
	Htpprof__Mapping m = HTPPROF__MAPPING__INIT;
	m.id = b->nmaps + 1;
	/* Each module gets its own 1 TiB of made-up addresses: address - start
	   is the module's ELF address, which is what symbolizers want. */
	m.memory_start = m.id << 40;
	m.memory_limit = (m.id + 1) << 40;
	m.filename = str_id(b, mod ? mod->path : "");
	m.build_id = str_id(b, mod ? mod->build_id : "");
	m.has_functions = m.has_filenames = m.has_line_numbers = m.has_inline_frames = 1;
	b->maps[b->nmaps++] = m;
	return *slot = m.id;
}

/*
 * profile.proto: "mapping[0] will be the main binary" (go tool pprof's
 * "File:"): the executable of the first side, when a module of the trace is
 * it. Else the mappings come in the order the samples use them (jq's
 * profile said libjq.so.1, clang's libLLVM-14.so.1).
 */
static void main_mapping(struct builder *b, const struct ht__pprof_side *s)
{
	if (!s->exe || !s->r)
		return;
	for (uint32_t i = 0; i < ht_reader_module_count(s->r); i++) {
		const struct ht_module *mod = ht_reader_module(s->r, i);
		if (mod && mod->path && !strcmp(mod->path, s->exe)) {
			mapping_id(b, 0, s->r, i);
			return;
		}
	}
}

static uint64_t function_id(struct builder *b, int side, const struct ht_reader *r, uint32_t frame)
{
	const struct ht_frame *f = ht_reader_frame(r, frame);
	char text[512];
	if (f && f->function)
		snprintf(text, sizeof(text), "%s", f->function);
	else
		ht__frame_text(r, frame, false, text, sizeof(text));
	int64_t name = str_id(b, text);
	int64_t file = str_id(b, f && f->file ? f->file : "");
	char key[64];
	snprintf(key, sizeof(key), "f:%" PRId64 ":%" PRId64, name, file);
	uint64_t *slot = key_slot(b, key);
	if (!slot)
		return 0;
	if (*slot)
		return *slot;
	(void)side;
	if (ht__grow((void **)&b->funcs, &b->afuncs, b->nfuncs + 1, sizeof(*b->funcs)) < 0) {
		b->err = HT_ERR_NOMEM;
		return 0;
	}
	Htpprof__Function fn = HTPPROF__FUNCTION__INIT;
	fn.id = b->nfuncs + 1;
	fn.name = fn.system_name = name;
	fn.filename = file;
	b->funcs[b->nfuncs++] = fn;
	return *slot = fn.id;
}

/* The location of frames[0..n): inlined frames, then the caller's (last). */
static uint64_t location_id(struct builder *b, int side, const struct ht_reader *r,
			    const uint32_t *frames, uint32_t n)
{
	char key[64];
	snprintf(key, sizeof(key), "l:%d:%" PRIu32 ":%" PRIu32, side, frames[0], frames[n - 1]);
	uint64_t *slot = key_slot(b, key);
	if (!slot)
		return 0;
	if (*slot)
		return *slot;
	if (ht__grow((void **)&b->locs, &b->alocs, b->nlocs + 1, sizeof(*b->locs)) < 0 ||
	    ht__grow((void **)&b->loc_line0, &b->aloc_line0, b->nlocs + 1, sizeof(size_t)) < 0 ||
	    ht__grow((void **)&b->lines, &b->alines, b->nlines + n + 1, sizeof(*b->lines)) < 0) {
		b->err = HT_ERR_NOMEM;
		return 0;
	}
	const struct ht_frame *last = ht_reader_frame(r, frames[n - 1]);
	Htpprof__Location loc = HTPPROF__LOCATION__INIT;
	loc.id = b->nlocs + 1;
	if (last && last->module != HT_MODULE_NONE) {
		loc.mapping_id = mapping_id(b, side, r, last->module);
		loc.address = (loc.mapping_id << 40) + last->rel;
	} else if (last) {
		loc.address = last->rel;
	}
	b->loc_line0[b->nlocs] = b->nlines;
	for (uint32_t i = 0; i < n; i++) {
		const struct ht_frame *f = ht_reader_frame(r, frames[i]);
		Htpprof__Line l = HTPPROF__LINE__INIT;
		l.function_id = function_id(b, side, r, frames[i]);
		l.line = f ? f->line : 0;
		b->lines[b->nlines++] = l;
	}
	loc.n_line = n;
	b->locs[b->nlocs++] = loc;
	/* mapping_id() and function_id() may have grown the key values: slot
	   can be stale, the key's id is not. */
	if ((slot = key_slot(b, key)))
		*slot = loc.id;
	return loc.id;
}

#define LABELS 4

/* One sample per row of res, its values times sign, with the side's labels. */
static void add_side(struct builder *b, int side, const struct ht__pprof_side *s, int64_t sign)
{
	for (size_t i = 0; i < s->res->count && !b->err; i++) {
		const struct ht__agg_item *it = &s->res->items[i];
		if (ht__grow((void **)&b->samples, &b->asamples, b->nsamples + 1,
			     sizeof(*b->samples)) < 0 ||
		    ht__grow((void **)&b->sample_loc0, &b->asample_loc0, b->nsamples + 1,
			     sizeof(size_t)) < 0 ||
		    ht__grow((void **)&b->values, &b->avalues, b->nsamples * 4 + 3 + 1,
			     sizeof(*b->values)) < 0 ||
		    ht__grow((void **)&b->labels, &b->alabels, (b->nsamples + 1) * LABELS,
			     sizeof(*b->labels)) < 0 ||
		    ht__grow((void **)&b->loc_ids, &b->aloc_ids, b->nloc_ids + it->nframes + 1 + 1,
			     sizeof(*b->loc_ids)) < 0) {
			b->err = HT_ERR_NOMEM;
			return;
		}
		Htpprof__Sample smp = HTPPROF__SAMPLE__INIT;
		b->sample_loc0[b->nsamples] = b->nloc_ids;
		size_t n0 = b->nloc_ids;
		for (uint32_t f = 0; f < it->nframes;) {
			uint32_t g = f;
			while (g + 1 < it->nframes) {
				const struct ht_frame *fr = ht_reader_frame(s->r, it->frames[g]);
				if (!fr || !fr->inlined)
					break;
				g++;
			}
			b->loc_ids[b->nloc_ids++] =
			    location_id(b, side, s->r, it->frames + f, g - f + 1);
			f = g + 1;
		}
		smp.n_location_id = b->nloc_ids - n0;
		int64_t *v = &b->values[b->nsamples * 4];
		v[0] = sign * (int64_t)it->c.total_count;
		v[1] = sign * (int64_t)it->c.total_bytes;
		v[2] = sign * (int64_t)it->c.outstanding_count;
		v[3] = sign * (int64_t)it->c.outstanding_bytes;
		smp.n_value = 4;
		/* The labels Pyroscope and Parca group by (docs/fleet.md). */
		Htpprof__Label *lab = &b->labels[b->nsamples * LABELS];
		const struct ht_trace_info *info = ht_reader_info(s->r);
		const char *text[][2] = {
		    {"host", info && info->hostname ? info->hostname : NULL},
		    {"exe", s->exe},
		    {"build_id", s->build_id && *s->build_id ? s->build_id : NULL}};
		for (size_t k = 0; k < sizeof(text) / sizeof(text[0]); k++) {
			if (!text[k][1])
				continue;
			Htpprof__Label l = HTPPROF__LABEL__INIT;
			l.key = str_id(b, text[k][0]);
			l.str = str_id(b, text[k][1]);
			lab[smp.n_label++] = l;
		}
		if (s->pid > 0) {
			Htpprof__Label l = HTPPROF__LABEL__INIT;
			l.key = str_id(b, "pid");
			l.num = s->pid;
			lab[smp.n_label++] = l;
		}
		b->samples[b->nsamples++] = smp;
	}
}

/* gzip buf[0..len) to out. */
static int write_gzip(FILE *out, const uint8_t *buf, size_t len)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return HT_ERR_NOMEM;
	uint8_t chunk[65536];
	z.next_in = (uint8_t *)buf;
	z.avail_in = (uInt)len;
	int zr, rc = 0;
	do {
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		zr = deflate(&z, Z_FINISH);
		size_t n = sizeof(chunk) - z.avail_out;
		if (n && fwrite(chunk, 1, n, out) != n)
			rc = HT_ERR_IO;
	} while (zr == Z_OK && !rc);
	if (!rc && zr != Z_STREAM_END)
		rc = HT_ERR_IO;
	deflateEnd(&z);
	return rc;
}

static void builder_release(struct builder *b)
{
	ht__intern_release(&b->strs);
	ht__intern_release(&b->keys);
	free(b->key_val);
	free(b->funcs);
	free(b->locs);
	free(b->lines);
	free(b->loc_line0);
	free(b->maps);
	free(b->samples);
	free(b->loc_ids);
	free(b->sample_loc0);
	free(b->values);
	free(b->labels);
}

/* Arrays of pointers into items[0..n) of size elem, as protobuf-c wants them. */
static void **pointers(void *items, size_t n, size_t elem)
{
	void **p = malloc((n ? n : 1) * sizeof(*p));
	for (size_t i = 0; p && i < n; i++)
		p[i] = (char *)items + i * elem;
	return p;
}

/*
 * The profile's time and duration: q's window in the trace of duration ns
 * (a -range clipped to the trace, the moment of --at-peak, or the whole
 * trace), so go tool pprof's Time and Duration are those of the samples.
 */
static void window_of(const struct ht__query *q, uint64_t duration, uint64_t *start, uint64_t *len)
{
	uint64_t from = 0, to = duration;
	if (q && q->has_at) {
		from = to = q->at_ts;
	} else if (q && q->has_range) {
		from = q->range_start < duration ? q->range_start : duration;
		to = q->range_end < duration ? q->range_end : duration;
	}
	*start = from;
	*len = to - from;
}

int ht__export_pprof(FILE *out, const struct ht__pprof_side *cur, size_t ncur,
		     const struct ht__pprof_side *base, size_t nbase, enum ht__metric m,
		     const struct ht__query *q)
{
	struct builder b;
	memset(&b, 0, sizeof(b));
	str_id(&b, ""); /* index 0 must be the empty string */
	static const char *const types[4][2] = {{"alloc_objects", "count"},
						{"alloc_space", "bytes"},
						{"inuse_objects", "count"},
						{"inuse_space", "bytes"}};
	Htpprof__ValueType vt[4], period = HTPPROF__VALUE_TYPE__INIT;
	Htpprof__ValueType *vtp[4];
	for (int i = 0; i < 4; i++) {
		Htpprof__ValueType t = HTPPROF__VALUE_TYPE__INIT;
		t.type = str_id(&b, types[i][0]);
		t.unit = str_id(&b, types[i][1]);
		vt[i] = t;
		vtp[i] = &vt[i];
	}
	period.type = str_id(&b, "space");
	period.unit = str_id(&b, "bytes");
	if (ncur)
		main_mapping(&b, &cur[0]);
	for (size_t i = 0; i < ncur; i++)
		add_side(&b, 0, &cur[i], 1);
	for (size_t i = 0; i < nbase; i++)
		add_side(&b, 1, &base[i], -1);
	const struct ht_trace_info *info = ncur ? ht_reader_info(cur->r) : NULL;
	/* A sampled trace: the values are already estimates (the pass made them);
	   the period says the rate they come from, as Go's heap profiles do. */
	uint64_t rate = info ? info->sample_rate : 0;
	char sampled[128] = "", comment[400];
	if (rate)
		snprintf(sampled, sizeof(sampled),
			 ", estimates from allocations sampled every %" PRIu64
			 " bytes on average (--sample-rate)",
			 rate);
	snprintf(comment, sizeof(comment), "heaptrail %s%s, host %s%s", ht__metric_name(m),
		 base ? " (minus the base)" : "", info && info->hostname ? info->hostname : "?",
		 sampled);
	int64_t comment_id = str_id(&b, comment);

	Htpprof__Profile p = HTPPROF__PROFILE__INIT;
	void **sp = NULL, **mp = NULL, **lp = NULL, **fp = NULL, **linep = NULL, **labp = NULL;
	uint8_t *buf = NULL;
	int rc = b.err;
	if (rc < 0)
		goto out;
	/* Point every message at its arrays now that they no longer move. */
	for (size_t i = 0; i < b.nsamples; i++) {
		b.samples[i].location_id = b.loc_ids + b.sample_loc0[i];
		b.samples[i].value = b.values + i * 4;
	}
	sp = pointers(b.samples, b.nsamples, sizeof(*b.samples));
	mp = pointers(b.maps, b.nmaps, sizeof(*b.maps));
	lp = pointers(b.locs, b.nlocs, sizeof(*b.locs));
	fp = pointers(b.funcs, b.nfuncs, sizeof(*b.funcs));
	linep = pointers(b.lines, b.nlines, sizeof(*b.lines));
	labp = pointers(b.labels, b.nsamples * LABELS, sizeof(*b.labels));
	if (!sp || !mp || !lp || !fp || !linep || !labp) {
		rc = HT_ERR_NOMEM;
		goto out;
	}
	for (size_t i = 0; i < b.nlocs; i++)
		b.locs[i].line = (Htpprof__Line **)linep + b.loc_line0[i];
	for (size_t i = 0; i < b.nsamples; i++)
		b.samples[i].label = (Htpprof__Label **)labp + i * LABELS;
	p.n_sample_type = 4;
	p.sample_type = vtp;
	p.n_sample = b.nsamples;
	p.sample = (Htpprof__Sample **)sp;
	p.n_mapping = b.nmaps;
	p.mapping = (Htpprof__Mapping **)mp;
	p.n_location = b.nlocs;
	p.location = (Htpprof__Location **)lp;
	p.n_function = b.nfuncs;
	p.function = (Htpprof__Function **)fp;
	p.n_string_table = b.strs.count;
	p.string_table = b.strs.strs;
	if (info) {
		uint64_t from, len;
		window_of(q, info->duration_ns, &from, &len);
		p.time_nanos = (int64_t)(info->start_realtime_ns + from);
		p.duration_nanos = (int64_t)len;
	}
	p.period_type = &period;
	p.period = rate ? (int64_t)rate : 1;
	p.n_comment = 1;
	p.comment = &comment_id;
	p.default_sample_type = m == HT_METRIC_TOTAL ? vt[1].type : vt[3].type;
	size_t len = htpprof__profile__get_packed_size(&p);
	buf = malloc(len ? len : 1);
	if (!buf) {
		rc = HT_ERR_NOMEM;
		goto out;
	}
	htpprof__profile__pack(&p, buf);
	rc = write_gzip(out, buf, len);
out:
	free(buf);
	free(sp);
	free(mp);
	free(lp);
	free(fp);
	free(linep);
	free(labp);
	builder_release(&b);
	return rc;
}
