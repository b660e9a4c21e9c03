/*
 * recode.c - rewrites the events of a trace with this build's writer and
 * prints the sizes, so that encodings can be compared on the same events
 * (recording twice gives different timestamps). By hand, not in ctest:
 * recode [--defs] IN.htr OUT.htr [TS_UNIT_NS [CHUNK_BYTES [GROUP_BYTES]]]
 * (GROUP_BYTES 0: every chunk on its own, as before format version 7).
 * --defs writes the definitions too, each module, frame and stack before
 * the first event that uses it, as the collector does, and the symbols at
 * the end: the whole trace as a recording would lay it out.
 * recode --stats [--chunks] FILE prints where a trace's compressed bytes are: per
 * chunk kind, and per stream of the events chunks (--chunks: also a line per
 * events chunk, its flags, events, and compressed times, sizes and free codes).
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "format/codec.h"
#include "format/reader_phys.h"
#include "format/writer.h"
#include "heaptrail/trace.h"

static const char *const stream_names[] = {"ops",  "misc",  "time", "addr",
					   "size", "stack", "free", "defs"};

/* Per chunk kind and per stream of the events chunks: compressed bytes
   (stream table frames under "table"). */
static int stats(const char *path, bool chunks)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return 1;
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	uint8_t *all = malloc(size);
	fseek(f, 0, SEEK_SET);
	if (!all || fread(all, 1, size, f) != (size_t)size)
		return 1;
	fclose(f);
	uint32_t version = ht__get_le32(all + 8);
	/* Order-0 entropy of each stream's varints, over the whole trace. */
	enum { NV = 1 << 16 };
	static uint64_t vhist[HT__NSTREAMS][NV + 1], nvals[HT__NSTREAMS];
	uint8_t *raw = malloc(HT__RAW_MAX), *joined = NULL;
	size_t joined_cap = 0;
	uint64_t ndefs[4] = {0}, nframes = 0;
	uint64_t kind_bytes[16] = {0}, st_bytes[16] = {0}, st_raw[16] = {0}, table_bytes = 0;
	uint32_t kind_n[16] = {0};
	long off = HT__HEADER_SIZE;
	while (off + (long)HT__CHUNK_HEADER_SIZE <= size) {
		struct ht__chunk_header h;
		if (ht__chunk_header_parse(all + off, &h) < 0)
			break;
		const uint8_t *p = all + off + HT__CHUNK_HEADER_SIZE, *end = p + h.comp_size;
		kind_bytes[h.kind & 15] += HT__CHUNK_HEADER_SIZE + h.comp_size;
		kind_n[h.kind & 15]++;
		if (h.kind == HT__CHUNK_EVENTS && version >= HT__FILE_VERSION_PLANES) {
			size_t rn = ZSTD_decompress(raw, HT__RAW_MAX, p, h.comp_size);
			struct ht__cur cur[HT__NSTREAMS];
			const char *why;
			if (ZSTD_isError(rn) || ht__streams_open(raw, raw + rn, version, cur,
								 &joined, &joined_cap, &why) < 0)
				memset(cur, 0, sizeof(cur));
			if (version >= HT__FILE_VERSION_DEFSTREAM)
				for (struct ht__cur *df = &cur[HT__S_DEFS];
				     df->p < df->end && !df->bad;) {
					unsigned code = *df->p++;
					ndefs[code & 3]++;
					ht__get_varint(df);
					if (code == HT__REC_DEF_MODULE) {
						uint32_t l;
						ht__get_bytes(df, &l);
						ht__get_bytes(df, &l);
					} else if (code == HT__REC_DEF_FRAME) {
						ht__get_varint(df);
						ht__get_varint(df);
					} else {
						uint64_t n = ht__get_varint(df);
						ht__get_varint(df);
						nframes += n;
						for (uint64_t k = 0; k < n; k++)
							ht__get_varint(df);
					}
				}
			for (int i = HT__S_TIME; i <= HT__S_FREE; i++)
				while (cur[i].p < cur[i].end && !cur[i].bad) {
					uint64_t v = ht__get_varint(&cur[i]);
					vhist[i][v < NV ? v : NV]++;
					nvals[i]++;
				}
			size_t fl = ZSTD_findFrameCompressedSize(p, end - p);
			uint8_t tab[1024];
			size_t tl = ZSTD_decompress(tab, sizeof(tab), p, fl);
			table_bytes += fl;
			p += fl;
			struct ht__cur c = {tab, tab + tl, 0};
			uint64_t n = ht__get_varint(&c);
			uint64_t before[16];
			memcpy(before, st_bytes, sizeof(before));
			for (uint64_t i = 0; i < n && i < 16; i++) {
				uint64_t v = ht__get_varint(&c), len = v >> 1;
				int frames = len ? 1 : 0;
				if ((v & 1) && ht__get_varint(&c) < len)
					frames = 2;
				st_raw[i] += len;
				for (int k = 0; k < frames && p < end; k++) {
					fl = ZSTD_findFrameCompressedSize(p, end - p);
					if (ZSTD_isError(fl))
						return 1;
					st_bytes[i] += fl;
					p += fl;
				}
			}
			if (chunks) /* where a group's free codes cost most */
				printf(
				    "chunk %u flags %x events %u raw %u ts %.3f-%.3f time %llu "
				    "size %llu free %llu\n",
				    h.seq, h.flags, h.count, h.raw_size, h.first_ts / 1e9,
				    h.last_ts / 1e9,
				    (unsigned long long)(st_bytes[HT__S_TIME] - before[HT__S_TIME]),
				    (unsigned long long)(st_bytes[HT__S_SIZE] - before[HT__S_SIZE]),
				    (unsigned long long)(st_bytes[HT__S_FREE] -
							 before[HT__S_FREE]));
		}
		off += HT__CHUNK_HEADER_SIZE + h.comp_size;
	}
	static const char *const kinds[] = {"?",	 "events", "defs",   "symbols",
					    "processes", "meta",   "losses", "defindex"};
	printf("%s: %ld bytes, format %u\n", path, size, version);
	for (int k = 0; k < 16; k++)
		if (kind_n[k])
			printf("  %-10s %4u chunks %10llu bytes\n", k < 8 ? kinds[k] : "?",
			       kind_n[k], (unsigned long long)kind_bytes[k]);
	printf("  events chunks by stream (compressed, raw):\n    %-6s %10llu\n", "table",
	       (unsigned long long)table_bytes);
	for (int i = 0; i < 16; i++)
		if (st_raw[i])
			printf("    %-6s %10llu %10llu\n", i < 8 ? stream_names[i] : "?",
			       (unsigned long long)st_bytes[i], (unsigned long long)st_raw[i]);
	printf("  definitions: %llu modules, %llu frames, %llu stacks (%llu new frames in them)\n",
	       (unsigned long long)ndefs[HT__REC_DEF_MODULE & 3],
	       (unsigned long long)ndefs[HT__REC_DEF_FRAME & 3],
	       (unsigned long long)ndefs[HT__REC_DEF_STACK & 3], (unsigned long long)nframes);
	printf("  order-0 entropy of the varints (values >= %d as one), bytes:\n", NV);
	for (int i = HT__S_TIME; i <= HT__S_FREE; i++) {
		double e = 0;
		for (int v = 0; v <= NV; v++)
			if (vhist[i][v]) {
				double q = (double)vhist[i][v] / nvals[i];
				e -= vhist[i][v] * log2(q);
			}
		printf("    %-6s %10.0f (%llu values, %.2f bits each; %.1f %% zero, %.1f %% one)\n",
		       stream_names[i], e / 8, (unsigned long long)nvals[i],
		       nvals[i] ? e / nvals[i] : 0.0,
		       nvals[i] ? 100.0 * vhist[i][0] / nvals[i] : 0.0,
		       nvals[i] ? 100.0 * vhist[i][1] / nvals[i] : 0.0);
	}
	free(all);
	free(raw);
	free(joined);
	return 0;
}

/* --defs: what the collector defines before an event, in its order. */
struct defs {
	struct ht_reader *r;
	struct ht__writer *w;
	bool *module_done, *frame_done, *stack_done;
	uint32_t *owner; /* logical frame -> physical frame */
	uint32_t nphys, nlog;
};

static int def_module(struct defs *d, uint32_t m)
{
	if (m >= ht_reader_module_count(d->r) || d->module_done[m])
		return 0;
	d->module_done[m] = true;
	const struct ht_module *mod = ht_reader_module(d->r, m);
	uint8_t bid[64];
	uint32_t n = 0;
	for (const char *s = mod->build_id; s[0] && s[1] && n < sizeof(bid); s += 2) {
		unsigned v;
		sscanf(s, "%2x", &v);
		bid[n++] = (uint8_t)v;
	}
	return ht__writer_module(d->w, m, mod->path, bid, n);
}

static int def_stack(struct defs *d, uint32_t s)
{
	if (!s || s >= ht_reader_stack_count(d->r) || d->stack_done[s])
		return 0;
	d->stack_done[s] = true;
	const uint32_t *lf;
	uint32_t n = ht_reader_stack(d->r, s, &lf), np = 0;
	uint32_t *buf = malloc((n + 1) * sizeof(*buf));
	int rc = 0;
	for (uint32_t i = 0; i < n && !rc; i++) {
		uint32_t f = lf[i] < d->nlog ? d->owner[lf[i]] : UINT32_MAX;
		struct ht__phys_frame pf;
		if (f == UINT32_MAX || ht__reader_phys(d->r, f, &pf) < 0 || pf.first != lf[i])
			continue; /* not the start of a physical frame's run */
		buf[np++] = f;
		if (d->frame_done[f])
			continue;
		d->frame_done[f] = true;
		if (pf.module != HT_MODULE_NONE)
			rc = def_module(d, pf.module);
		if (!rc)
			rc = ht__writer_frame(d->w, f, pf.module, pf.rel);
	}
	if (!rc)
		rc = ht__writer_stack(d->w, s, buf, np);
	free(buf);
	return rc;
}

static int defs_init(struct defs *d)
{
	d->nphys = ht__reader_phys_count(d->r);
	d->nlog = ht_reader_frame_count(d->r);
	d->module_done = calloc(ht_reader_module_count(d->r) + 1, 1);
	d->frame_done = calloc(d->nphys + 1, 1);
	d->stack_done = calloc(ht_reader_stack_count(d->r) + 1, 1);
	d->owner = malloc((d->nlog + 1) * sizeof(*d->owner));
	if (!d->module_done || !d->frame_done || !d->stack_done || !d->owner)
		return -1;
	for (uint32_t l = 0; l < d->nlog; l++)
		d->owner[l] = UINT32_MAX;
	for (uint32_t f = 0; f < d->nphys; f++) {
		struct ht__phys_frame pf;
		if (ht__reader_phys(d->r, f, &pf) == 0)
			for (uint32_t k = 0; k < pf.nlog; k++)
				if (pf.first + k < d->nlog)
					d->owner[pf.first + k] = f;
	}
	return 0;
}

/* The symbols of every frame defined, at the end. */
static int defs_symbols(struct defs *d)
{
	struct ht__symbol syms[64];
	for (uint32_t f = 0; f < d->nphys; f++) {
		struct ht__phys_frame pf;
		if (!d->frame_done[f] || ht__reader_phys(d->r, f, &pf) < 0)
			continue;
		uint32_t n = 0;
		for (uint32_t k = 0; k < pf.nlog && n < 64; k++) {
			const struct ht_frame *lf = ht_reader_frame(d->r, pf.first + k);
			if (lf && (lf->function || lf->file))
				syms[n++] = (struct ht__symbol){lf->function, lf->file, lf->line};
		}
		int rc = n ? ht__writer_symbols(d->w, f, syms, n) : 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--stats"))
		return stats(argv[2], false);
	if (argc == 4 && !strcmp(argv[1], "--stats") && !strcmp(argv[2], "--chunks"))
		return stats(argv[3], true);
	bool with_defs = argc > 1 && !strcmp(argv[1], "--defs");
	if (with_defs) {
		argv++;
		argc--;
	}
	if (argc < 3 || argc > 6) {
		fprintf(stderr, "usage: recode [--defs] IN.htr OUT.htr [TS_UNIT_NS [CHUNK_BYTES "
				"[GROUP_BYTES]]]\n       recode --stats [--chunks] FILE\n");
		return 2;
	}
	struct ht_reader *r;
	int rc = ht_reader_open(&r, argv[1]);
	if (rc < 0) {
		fprintf(stderr, "recode: cannot open '%s': %s\n", argv[1], ht_strerror(rc));
		return 1;
	}
	struct ht__trace_meta meta = {.ts_unit_ns = argc > 3 ? (uint32_t)atoi(argv[3]) : 0};
	struct ht__writer *w;
	unlink(argv[2]);
	if ((rc = ht__writer_open(&w, argv[2], &meta)) < 0) {
		fprintf(stderr, "recode: cannot create '%s': %s\n", argv[2], ht_strerror(rc));
		return 1;
	}
	if (argc > 4 && atol(argv[4]) &&
	    (rc = ht__writer_set_chunk_size(w, (uint32_t)atol(argv[4]))) < 0) {
		fprintf(stderr, "recode: chunk size '%s': %s\n", argv[4], ht_strerror(rc));
		return 1;
	}
	if (argc > 5)
		ht__writer_set_group_size(w, (uint32_t)atol(argv[5]));
	struct defs d = {.r = r, .w = w};
	if (with_defs && defs_init(&d) < 0)
		return 1;
	struct ht_event ev;
	long n = 0;
	while ((rc = ht_reader_next(r, &ev)) > 0) {
		if (with_defs && ev.type == HT_EV_MODULE_LOAD && def_module(&d, ev.module) < 0)
			return 1;
		if (with_defs && def_stack(&d, ev.stack) < 0)
			return 1;
		const struct ht_process *p = NULL;
		if (ev.type == HT_EV_PROCESS_START || ev.type == HT_EV_PROCESS_EXEC)
			p = ht_reader_process(r, ev.process);
		if (ht__writer_event(w, &ev, p) < 0)
			return 1;
		n++;
	}
	if (with_defs && defs_symbols(&d) < 0)
		return 1;
	if (ht__writer_finish(w, 0, 0, 0) < 0)
		return 1;
	struct stat a, b;
	stat(argv[1], &a);
	stat(argv[2], &b);
	printf(with_defs
		   ? "%ld events: in %lld bytes, out %lld bytes (%.3f bytes/event)\n"
		   : "%ld events: in %lld bytes, events only out %lld bytes (%.3f bytes/event)\n",
	       n, (long long)a.st_size, (long long)b.st_size, (double)b.st_size / n);
	ht_reader_close(r);
	return 0;
}
