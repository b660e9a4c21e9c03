/*
 * test_fuzz.c - the reader on damaged input, built with ASan and UBSan: a
 * valid trace of many small chunks cut at every few bytes, with random bytes
 * flipped, and with chunk payloads mutated and re-sealed with valid checksums
 * (so the record decoder itself sees garbage). The reader must return an
 * error or a prefix of the real events, never crash, never loop.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <zstd.h>

#include "format/codec.h"
#include "format/writer.h"
#include "heaptrail/trace.h"
#include "testutil.h"

#define NEV 3000
static struct ht_event orig[NEV];
static uint8_t *file;
static size_t file_len;
static char path[300], cut_path[300];

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void make_trace(void)
{
	static const char *const argv[] = {"prog", "arg"};
	struct ht__trace_meta meta = {
	    .start_realtime_ns = 1, .argc = 2, .argv = argv, .hostname = "h"};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	CHECK_EQ(ht__writer_set_chunk_size(w, 2048), 0);
	ht__writer_module(w, 0, "/bin/prog", (const uint8_t *)"\1\2", 2);
	struct ht_process p = {.ppid = 1,
			       .parent = UINT32_MAX,
			       .flags = HT_PROCF_ROOT,
			       .exe = "/bin/prog",
			       .argc = 2,
			       .argv = argv};
	uint64_t ts = 0;
	for (int i = 0; i < NEV; i++) {
		if (i % 50 == 0) {
			uint32_t id = (uint32_t)(i / 50);
			ht__writer_frame(w, id, id % 3 ? 0 : HT_MODULE_NONE, 0x1000 + id * 16);
			/* outer frames shared with the previous stack (format 2) */
			uint32_t fr[5] = {id, id / 2, id / 4, id / 8, 0};
			ht__writer_stack(w, id + 1, fr, 5);
		}
		struct ht_event *e = &orig[i];
		memset(e, 0, sizeof(*e));
		uint64_t x = rnd();
		ts += x & 0xff;
		e->ts = ts;
		e->pid = 10;
		e->tid = 10 + (int32_t)((x >> 8) & 3);
		if (i == 0) {
			e->type = HT_EV_PROCESS_START;
			CHECK_EQ(ht__writer_event(w, e, &p), 0);
			continue;
		}
		switch ((x >> 12) % 5) {
		case 0:
			e->type = HT_EV_ALLOC;
			e->func = HT_FN_MALLOC;
			break;
		case 1:
			e->type = HT_EV_FREE;
			e->func = HT_FN_FREE;
			break;
		case 2:
			e->type = HT_EV_REALLOC;
			e->func = HT_FN_REALLOC;
			e->old_addr = (x >> 20) & 0xffff0;
			break;
		case 3:
			e->type = HT_EV_MMAP;
			e->func = HT_FN_MMAP;
			e->prot = 3;
			e->mflags = 0x22;
			e->fd = -1;
			break;
		default:
			e->type = HT_EV_THREAD_NAME;
			e->name = "t";
			break;
		}
		e->addr = 0x10000 + ((x >> 24) & 0xffff) * 16;
		e->size = (x >> 40) & 0xfff;
		e->stack = (x >> 52) & 1 ? (uint32_t)(i / 50) + 1 : 0;
		CHECK_EQ(ht__writer_event(w, e, NULL), 0);
	}
	struct ht__symbol s = {"f", "f.c", 3};
	ht__writer_symbols(w, 0, &s, 1);
	CHECK_EQ(ht__writer_finish(w, ts, 0, 0), 0);

	FILE *f = fopen(path, "rb");
	fseek(f, 0, SEEK_END);
	file_len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	file = malloc(file_len);
	CHECK_EQ(fread(file, 1, file_len, f), file_len);
	fclose(f);
}

static void write_file(const uint8_t *data, size_t len)
{
	unlink(cut_path);
	int fd = open(cut_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || (len && write(fd, data, len) != (ssize_t)len)) {
		perror("write");
		exit(2);
	}
	close(fd);
}

static int same_event(const struct ht_event *a, const struct ht_event *b)
{
	return a->type == b->type && a->ts == b->ts && a->tid == b->tid && a->pid == b->pid &&
	       a->addr == b->addr && a->size == b->size && a->old_addr == b->old_addr &&
	       a->stack == b->stack && a->func == b->func;
}

/*
 * Reads cut_path to its end (twice, with a rewind) and checks that what
 * comes out is a prefix of orig[]. strict = 0 for payloads re-sealed after
 * mutation, where decoded garbage may differ from the original.
 * Returns the number of events, or -1 when open failed.
 */
static long read_back(int strict)
{
	struct ht_reader *r;
	if (ht_reader_open(&r, cut_path) < 0)
		return -1;
	long n = 0;
	for (int pass = 0; pass < 2; pass++) {
		struct ht_event ev;
		int rc;
		long k = 0;
		while ((rc = ht_reader_next(r, &ev)) > 0) {
			if (strict && (k >= NEV || !same_event(&ev, &orig[k]))) {
				fprintf(stderr, "event %ld differs from the original\n", k);
				check_failures++;
				break;
			}
			/* Touch what a front end touches. */
			if (ev.stack) {
				const uint32_t *fr;
				uint32_t m = ht_reader_stack(r, ev.stack, &fr);
				for (uint32_t i = 0; i < m; i++)
					if (ht_reader_frame(r, fr[i]) == NULL) {
						fprintf(stderr, "stack %u names a missing frame\n",
							ev.stack);
						check_failures++;
					}
			}
			if (ev.process < ht_reader_process_count(r))
				(void)ht_reader_process(r, ev.process)->exe[0];
			if (ev.name)
				(void)strlen(ev.name);
			if (++k > 10 * NEV) {
				fprintf(stderr, "reader does not stop\n");
				check_failures++;
				break;
			}
		}
		if (pass == 0)
			n = k;
		else if (k != n) {
			fprintf(stderr, "second pass read %ld events, first %ld\n", k, n);
			check_failures++;
		}
		ht_reader_rewind(r);
	}
	const struct ht_trace_info *in = ht_reader_info(r);
	for (uint32_t i = 0; i < in->argc; i++)
		(void)strlen(in->argv[i]);
	ht_reader_close(r);
	return n;
}

/*
 * Where to cut the file: every byte of the file header, of each chunk's
 * header and of the footer, the first and last 8 bytes of each payload,
 * and every 61 bytes in between. A cut inside a payload loses that chunk
 * wherever it falls; the reader's decisions are at the edges. (Every 7th
 * byte, as before, read the same payloads 9 times over: 9 s of CPU under
 * ASan, over the 300 s timeout at a load of 40 on 2 cores.)
 */
static uint8_t *cut_points(void)
{
	uint8_t *at = calloc(file_len, 1);
	for (size_t i = 0; i < HT__HEADER_SIZE + 8 && i < file_len; i++)
		at[i] = 1;
	for (size_t i = file_len > HT__FOOTER_SIZE + 8 ? file_len - HT__FOOTER_SIZE - 8 : 0;
	     i < file_len; i++)
		at[i] = 1;
	size_t off = HT__HEADER_SIZE;
	struct ht__chunk_header h;
	while (off + HT__CHUNK_HEADER_SIZE <= file_len &&
	       ht__chunk_header_parse(file + off, &h) == 0) {
		size_t payload = off + HT__CHUNK_HEADER_SIZE, end = payload + h.comp_size;
		for (size_t i = off; i < end && i < file_len; i++) {
			size_t in = i - payload;
			if (i < payload + 8 || i + 8 >= end || in % 61 == 0)
				at[i] = 1;
		}
		off = end;
	}
	CHECK(off + HT__FOOTER_SIZE == file_len); /* every chunk walked */
	return at;
}

static void test_truncation(void)
{
	long full = -2;
	write_file(file, file_len);
	full = read_back(1);
	CHECK_EQ(full, NEV);
	long prev = 0;
	uint8_t *at = cut_points();
	for (size_t len = 0; len < file_len; len++) {
		if (!at[len])
			continue;
		write_file(file, len);
		long n = read_back(1);
		if (len < HT__HEADER_SIZE)
			CHECK_EQ(n, -1);
		else if (n < 0)
			CHECK(n >= 0);
		if (n > NEV)
			CHECK(n <= NEV);
		/* Longer cuts never give fewer events (chunks are whole or gone)... */
		if (n >= 0 && n < prev && len < file_len - HT__FOOTER_SIZE - 2048) {
			fprintf(stderr, "cut at %zu gave %ld events, shorter cut gave %ld\n", len,
				n, prev);
			check_failures++;
		}
		if (n > prev)
			prev = n;
		if (check_failures > 10)
			break;
	}
	free(at);
	CHECK_EQ(prev, NEV); /* cut in the tables: every event is still there */
}

static void test_flips(void)
{
	uint8_t *copy = malloc(file_len);
	for (int iter = 0; iter < 1500 && check_failures < 10; iter++) {
		memcpy(copy, file, file_len);
		int flips = 1 + (int)(rnd() % 4);
		for (int k = 0; k < flips; k++)
			copy[rnd() % file_len] ^= (uint8_t)(1u << (rnd() % 8));
		write_file(copy, file_len);
		long n = read_back(1);
		CHECK(n <= NEV);
	}
	free(copy);
}

/* Mutates chunk payloads and seals them again with valid CRC and checksum. */
static void test_resealed(void)
{
	uint8_t *out = malloc(file_len * 2 + 65536);
	uint8_t *raw = malloc(HT__RAW_MAX);
	for (int iter = 0; iter < 600 && check_failures < 10; iter++) {
		size_t o = 0, off = HT__HEADER_SIZE;
		memcpy(out, file, HT__HEADER_SIZE);
		o = HT__HEADER_SIZE;
		int target = (int)(rnd() % 20); /* which chunk to damage */
		int idx = 0;
		struct ht__chunk_header h;
		while (off + HT__CHUNK_HEADER_SIZE <= file_len &&
		       ht__chunk_header_parse(file + off, &h) == 0) {
			const uint8_t *payload = file + off + HT__CHUNK_HEADER_SIZE;
			uint32_t orig_comp = h.comp_size;
			size_t len = ZSTD_decompress(raw, HT__RAW_MAX, payload, orig_comp);
			if (ZSTD_isError(len))
				break;
			if (idx++ == target || rnd() % 16 == 0) {
				int muts = 1 + (int)(rnd() % 6);
				for (int k = 0; k < muts && len; k++) {
					switch (rnd() % 3) {
					case 0:
						raw[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
						break;
					case 1:
						raw[rnd() % len] = (uint8_t)rnd();
						break;
					default:
						len -= rnd() % (len < 64 ? len : 64);
						break; /* cut short */
					}
				}
			}
			size_t c = ZSTD_compress(out + o + HT__CHUNK_HEADER_SIZE, file_len + 65536,
						 raw, len, 1);
			h.raw_size = (uint32_t)len;
			h.comp_size = (uint32_t)c;
			ht__chunk_header_pack(out + o, &h);
			o += HT__CHUNK_HEADER_SIZE + c;
			off += HT__CHUNK_HEADER_SIZE + orig_comp;
		}
		/* A footer for the new layout: tables start at the first non-events chunk. */
		size_t t = HT__HEADER_SIZE, tables = 0;
		int seen_events = 0;
		while (t + HT__CHUNK_HEADER_SIZE <= o && ht__chunk_header_parse(out + t, &h) == 0) {
			if (h.kind == HT__CHUNK_EVENTS)
				seen_events = 1;
			else if (seen_events && !tables)
				tables = t;
			t += HT__CHUNK_HEADER_SIZE + h.comp_size;
		}
		struct ht__footer f = {.tables_offset = tables ? tables : o, .footer_offset = o};
		ht__footer_pack(out + o, &f);
		o += HT__FOOTER_SIZE;
		write_file(out, o);
		long n = read_back(0);
		CHECK(n <= 10 * NEV);
	}
	free(raw);
	free(out);
}

/*
 * One part (truncation, flips, resealed) or, without an argument, all three.
 * ctest runs the parts as three tests: each is a few seconds of CPU under
 * ASan, and one test of all three went over its 300 s at a load of 33 on 2
 * cores (52-62 s at a load of 21-25, 4.7-6.5 s of CPU).
 */
int main(int argc, char **argv)
{
	const char *part = argc > 1 ? argv[1] : NULL;
	if (part && strcmp(part, "truncation") && strcmp(part, "flips") &&
	    strcmp(part, "resealed")) {
		fprintf(stderr, "usage: test_fuzz [truncation|flips|resealed]\n");
		return 2;
	}
	test_path(path, sizeof(path), "fuzz.htr");
	test_path(cut_path, sizeof(cut_path), "cut.htr");
	make_trace();
	if (!part || !strcmp(part, "truncation"))
		test_truncation();
	if (!part || !strcmp(part, "flips"))
		test_flips();
	if (!part || !strcmp(part, "resealed"))
		test_resealed();
	free(file);
	return test_result("test_fuzz");
}
