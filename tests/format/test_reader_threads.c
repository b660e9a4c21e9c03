/*
 * test_reader_threads.c - the reader decodes events chunks on threads
 * (HT_READER_THREADS): the events, their names, the warnings and the end of
 * the stream must be those of decoding on the caller's thread, whatever the
 * number of threads, on a trace of many small chunks, after a rewind in the
 * middle, and on traces damaged in a chunk's payload or header; and the
 * stack table, whose expansion into logical frames runs on a thread of its
 * own while the events are read, must be that of a read without threads.
 */
#include <pthread.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "format/codec.h"
#include "format/writer.h"
#include "heaptrail/trace.h"
#include "testutil.h"

static uint64_t rng;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define NEV 120000
#define NLIVE 512

/* A malloc-like stream on 4 threads of 2 processes, with thread names and
   stack definitions between the events, in chunks of 8 KiB. */
static void write_trace(const char *path)
{
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	if (!w)
		return;
	CHECK_EQ(ht__writer_set_chunk_size(w, 8192), 0);
	static uint64_t live[NLIVE];
	uint64_t ts = 0, top = 0x5555000000ull;
	uint32_t nstacks = 0;
	rng = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < NEV; i++) {
		uint64_t x = next_rand();
		struct ht_event e = {0};
		e.process = (uint32_t)(x >> 5) & 1;
		e.pid = 10 + (int32_t)e.process;
		e.tid = 100 + (int32_t)((x >> 5) & 3);
		ts += (x >> 40) & 0x3ff;
		e.ts = ts;
		if (i % 997 == 0) { /* a new stack, sharing outer frames */
			uint32_t frames[4] = {nstacks, nstacks / 2, nstacks / 4, 0};
			ht__writer_frame(w, nstacks, HT_MODULE_NONE, 0x400000 + nstacks);
			CHECK_EQ(ht__writer_stack(w, ++nstacks, frames, 4), 0);
		}
		if (i % 1013 == 0) {
			char name[32];
			snprintf(name, sizeof(name), "worker %d", i);
			e.type = HT_EV_THREAD_NAME;
			e.name = name;
			CHECK_EQ(ht__writer_event(w, &e, NULL), 0);
			continue;
		}
		unsigned k = (unsigned)(x >> 12) % NLIVE;
		if (live[k]) {
			e.type = HT_EV_FREE;
			e.func = HT_FN_FREE;
			e.addr = live[k];
			live[k] = 0;
		} else {
			e.type = HT_EV_ALLOC;
			e.func = HT_FN_MALLOC;
			e.size = 8 + ((x >> 24) & 0x1ff);
			e.addr = live[k] = top;
			top += ht__chunk_size(e.size);
			e.stack = 1 + (uint32_t)(x >> 50) % nstacks;
		}
		CHECK_EQ(ht__writer_event(w, &e, NULL), 0);
	}
	CHECK_EQ(ht__writer_finish(w, ts, 0, 0), 0);
}

/* What a read of the trace gave, to compare reads with each other. */
struct readout {
	uint64_t n;
	uint64_t hash; /* over every field of every event, names included */
	uint64_t n_named;
	int truncated;
	char warning[512];
};

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h;
}

static uint64_t event_hash(uint64_t h, const struct ht_event *e)
{
	h = mix(h, e->type | (uint64_t)e->func << 8 | (uint64_t)e->flags << 16);
	h = mix(h, e->process | (uint64_t)(uint32_t)e->pid << 32);
	h = mix(h, (uint32_t)e->tid);
	h = mix(h, e->ts);
	h = mix(h, e->stack | (uint64_t)e->module << 32);
	h = mix(h, e->heap);
	h = mix(h, e->addr);
	h = mix(h, e->size);
	h = mix(h, e->old_addr);
	h = mix(h, e->old_size);
	h = mix(h, e->prot | (uint64_t)e->mflags << 32);
	h = mix(h, (uint32_t)e->fd | (uint64_t)(uint32_t)e->value << 32);
	for (const char *s = e->name; s && *s; s++)
		h = mix(h, (uint8_t)*s);
	return h;
}

/* Reads path with threads decoding threads; with rewind_at > 0, reads that
   many events first, rewinds and reads it all. */
static void read_trace(const char *path, const char *threads, uint64_t rewind_at,
		       struct readout *out)
{
	memset(out, 0, sizeof(*out));
	setenv("HT_READER_THREADS", threads, 1);
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	struct ht_event ev;
	int rc;
	for (uint64_t i = 0; i < rewind_at && ht_reader_next(r, &ev) > 0; i++)
		;
	if (rewind_at)
		CHECK_EQ(ht_reader_rewind(r), 0);
	while ((rc = ht_reader_next(r, &ev)) > 0) {
		out->n++;
		out->hash = event_hash(out->hash, &ev);
		out->n_named += ev.name != NULL;
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(ht_reader_next(r, &ev), 0); /* the end stays the end */
	out->truncated = !!(ht_reader_info(r)->flags & HT_TRACEF_TRUNCATED);
	const char *w = ht_reader_warning(r);
	snprintf(out->warning, sizeof(out->warning), "%s", w ? w : "");
	ht_reader_close(r);
}

/* Every number of threads reads what the caller's thread reads. */
static void same_reads(const char *path, const struct readout *want, const char *what)
{
	static const char *const threads[] = {"1", "2", "4"};
	for (unsigned i = 0; i < sizeof(threads) / sizeof(threads[0]); i++) {
		for (int rw = 0; rw < 2; rw++) {
			struct readout got;
			read_trace(path, threads[i], rw ? 5000 : 0, &got);
			if (got.n != want->n || got.hash != want->hash ||
			    got.truncated != want->truncated || strcmp(got.warning, want->warning))
				fprintf(stderr, "%s with %s threads%s:\n", what, threads[i],
					rw ? " after a rewind" : "");
			CHECK_U64(got.n, want->n);
			CHECK_U64(got.hash, want->hash);
			CHECK_EQ(got.truncated, want->truncated);
			CHECK_STR(got.warning, want->warning);
		}
	}
}

/* Offset of the n-th chunk of the file (0: the first after the header). */
static long chunk_offset(FILE *f, int n)
{
	long off = HT__HEADER_SIZE;
	uint8_t hb[HT__CHUNK_HEADER_SIZE];
	struct ht__chunk_header h;
	for (int i = 0; i < n; i++) {
		if (fseek(f, off, SEEK_SET) || fread(hb, 1, sizeof(hb), f) != sizeof(hb) ||
		    ht__chunk_header_parse(hb, &h) < 0)
			return -1;
		off += HT__CHUNK_HEADER_SIZE + h.comp_size;
	}
	return off;
}

/* A copy of src with byte at (the start of chunk n) + delta flipped. */
static void damaged_copy(const char *src, const char *dst, int n, long delta)
{
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", src, dst);
	CHECK_EQ(system(cmd), 0);
	FILE *f = fopen(dst, "r+b");
	CHECK(f != NULL);
	if (!f)
		return;
	long off = chunk_offset(f, n);
	CHECK(off > 0);
	uint8_t b = 0;
	CHECK(fseek(f, off + delta, SEEK_SET) == 0 && fread(&b, 1, 1, f) == 1);
	b ^= 0x5a;
	CHECK(fseek(f, off + delta, SEEK_SET) == 0 && fwrite(&b, 1, 1, f) == 1);
	fclose(f);
}

/* Stacks enough that their expansion goes to a thread (more than 65536
   frames in all), each sharing outer frames with the one before (within
   its group of chunks: the definitions are spread over many), over frames
   with 0 to 3 logical frames of symbols. */
#define NSTK 3000
#define NFRAMES 600

static uint32_t written[NSTK + 1][65]; /* per stack: n, then its frames */

static void write_stacks_trace(const char *path)
{
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	if (!w)
		return;
	CHECK_EQ(ht__writer_set_chunk_size(w, 8192), 0);
	CHECK_EQ(ht__writer_set_group_size(w, 32768), 0);
	CHECK_EQ(ht__writer_module(w, 0, "/usr/lib/libt.so", (const uint8_t *)"\1\2", 2), 0);
	for (uint32_t f = 0; f < NFRAMES; f++)
		CHECK_EQ(ht__writer_frame(w, f, 0, 0x1000 + 16 * f), 0);
	rng = 0x2545f4914f6cdd1dull;
	uint32_t frames[64];
	uint32_t n = 0;
	uint64_t ts = 0;
	for (uint32_t id = 1; id <= NSTK; id++) {
		uint32_t keep = n ? (uint32_t)(next_rand() % n) : 0; /* outer frames kept */
		uint32_t add = 1 + (uint32_t)(next_rand() % (64 - keep));
		memmove(frames + add, frames + n - keep, keep * sizeof(*frames));
		for (uint32_t i = 0; i < add; i++)
			frames[i] = (uint32_t)(next_rand() % NFRAMES);
		n = add + keep;
		CHECK_EQ(ht__writer_stack(w, id, frames, n), 0);
		written[id][0] = n;
		memcpy(&written[id][1], frames, n * sizeof(*frames));
		struct ht_event e = {.type = HT_EV_ALLOC, .func = HT_FN_MALLOC, .size = 32};
		for (uint32_t i = 0; i < 7; i++) { /* 21000 events, 7 a stack */
			e.ts = ++ts;
			e.addr = 0x5555000000ull + 48 * ts;
			e.stack = id - i % id;
			CHECK_EQ(ht__writer_event(w, &e, NULL), 0);
		}
	}
	for (uint32_t f = 0; f < NFRAMES; f++) {
		char fn[3][32];
		struct ht__symbol syms[3];
		uint32_t ns = f % 4;
		for (uint32_t i = 0; i < ns; i++) {
			snprintf(fn[i], sizeof(fn[i]), "fn_%u_%u", f, i);
			syms[i] = (struct ht__symbol){fn[i], "t.c", f + i};
		}
		if (ns)
			CHECK_EQ(ht__writer_symbols(w, f, syms, ns), 0);
	}
	CHECK_EQ(ht__writer_finish(w, ts, 0, 0), 0);
}

/* A hash of every stack: its logical frames, each frame's address and
   symbols. */
static uint64_t stacks_hash(struct ht_reader *r)
{
	uint64_t h = ht_reader_stack_count(r);
	for (uint32_t s = 0; s < ht_reader_stack_count(r); s++) {
		const uint32_t *frames;
		uint32_t n = ht_reader_stack(r, s, &frames);
		h = mix(h, n);
		for (uint32_t i = 0; i < n; i++) {
			const struct ht_frame *f = ht_reader_frame(r, frames[i]);
			h = mix(h, frames[i]);
			h = mix(h, f ? f->rel | (uint64_t)f->line << 48 | (uint64_t)f->inlined << 40
				     : 0);
			for (const char *c = f && f->function ? f->function : ""; *c; c++)
				h = mix(h, (uint8_t)*c);
		}
	}
	return h;
}

static void *stacks_hash_main(void *arg)
{
	struct ht_reader *r = arg;
	uint64_t *h = malloc(sizeof(*h));
	if (h)
		*h = stacks_hash(r);
	return h;
}

/* The stack table, read with threads (before the events, after them, from
   two threads at once, or not at all before closing) as without. */
static void same_stacks(const char *path)
{
	setenv("HT_READER_THREADS", "0", 1);
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	CHECK_U64(ht_reader_stack_count(r), NSTK + 1);
	/* the stacks written: each physical frame f is f % 4 logical frames
	   (1 without symbols) at its address */
	for (uint32_t s = 1; s <= NSTK; s++) {
		const uint32_t *frames;
		uint32_t n = ht_reader_stack(r, s, &frames), k = 0;
		for (uint32_t i = 0; i < written[s][0]; i++) {
			uint32_t f = written[s][1 + i];
			for (uint32_t j = 0; j < (f % 4 ? f % 4 : 1); j++, k++) {
				const struct ht_frame *fr =
				    k < n ? ht_reader_frame(r, frames[k]) : NULL;
				CHECK(fr && fr->rel == 0x1000 + 16 * f);
			}
		}
		CHECK_U64(n, k);
	}
	uint64_t want = stacks_hash(r);
	struct readout none;
	ht_reader_close(r);
	read_trace(path, "0", 0, &none);
	CHECK_U64(none.n, 7 * NSTK);

	static const char *const threads[] = {"1", "2"};
	for (unsigned t = 0; t < 2; t++) {
		for (int when = 0; when < 4; when++) {
			setenv("HT_READER_THREADS", threads[t], 1);
			CHECK_EQ(ht_reader_open(&r, path), 0);
			if (!r)
				return;
			CHECK_U64(ht_reader_stack_count(r), NSTK + 1);
			struct ht_event ev;
			uint64_t n = 0;
			if (when == 0)
				CHECK_U64(stacks_hash(r), want);
			if (when == 2) { /* two threads ask at once, while events are read */
				pthread_t th;
				void *got = NULL;
				CHECK_EQ(pthread_create(&th, NULL, stacks_hash_main, r), 0);
				uint64_t mine = stacks_hash(r);
				CHECK_EQ(pthread_join(th, &got), 0);
				CHECK(got != NULL);
				if (got)
					CHECK_U64(*(uint64_t *)got, want);
				free(got);
				CHECK_U64(mine, want);
			}
			while (when < 3 && ht_reader_next(r, &ev) > 0)
				n++;
			if (when < 3)
				CHECK_U64(n, 7 * NSTK);
			if (when == 1)
				CHECK_U64(stacks_hash(r), want);
			ht_reader_close(r); /* when 3: never asked */
		}
	}
}

int main(void)
{
	char path[300], bad[300];
	test_path(path, sizeof(path), "threads.htr");
	write_trace(path);

	struct readout here;
	read_trace(path, "0", 0, &here);
	CHECK_U64(here.n, NEV);
	CHECK_U64(here.n_named, (NEV + 1012) / 1013);
	CHECK_EQ(here.truncated, 0);
	CHECK_STR(here.warning, "");
	same_reads(path, &here, "the whole trace");

	/* A payload that fails its checksum in chunk 40: the events before it,
	   then the same warning. */
	test_path(bad, sizeof(bad), "payload.htr");
	damaged_copy(path, bad, 40, HT__CHUNK_HEADER_SIZE + 100);
	struct readout dam;
	read_trace(bad, "0", 0, &dam);
	CHECK(dam.n > 1000 && dam.n < NEV - 1000);
	CHECK_EQ(dam.truncated, 1);
	CHECK(strstr(dam.warning, "chunk fails its checksum at offset") != NULL);
	same_reads(bad, &dam, "a damaged payload");

	/* A damaged header in chunk 30. */
	test_path(bad, sizeof(bad), "header.htr");
	damaged_copy(path, bad, 30, 1);
	read_trace(bad, "0", 0, &dam);
	CHECK(dam.n > 1000 && dam.n < NEV - 1000);
	CHECK_EQ(dam.truncated, 1);
	CHECK(strstr(dam.warning, "damaged chunk header at offset") != NULL);
	same_reads(bad, &dam, "a damaged header");

	/* Without its footer (the recording did not finish) the tables come
	   from the events, in order: the same events. */
	test_path(bad, sizeof(bad), "nofooter.htr");
	struct stat st;
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, bad);
	CHECK(stat(path, &st) == 0 && system(cmd) == 0);
	CHECK_EQ(truncate(bad, st.st_size - HT__FOOTER_SIZE), 0);
	struct readout scan;
	read_trace(bad, "0", 0, &scan);
	CHECK_U64(scan.n, NEV);
	CHECK_U64(scan.hash, here.hash);
	same_reads(bad, &scan, "a trace without its footer");

	test_path(path, sizeof(path), "stacks.htr");
	write_stacks_trace(path);
	same_stacks(path);

	/* A stack definitions' frame (the last stream of a payload) that fails
	   zstd's checksum in chunk 5, while the frames after it may be read
	   ahead on a thread: the tables do not parse, and every number of
	   threads reads the trace as one without its footer. */
	FILE *f = fopen(path, "rb");
	CHECK(f != NULL);
	long c5 = f ? chunk_offset(f, 5) : -1, c6 = f ? chunk_offset(f, 6) : -1;
	if (f)
		fclose(f);
	CHECK(c5 > 0 && c6 > c5 + HT__CHUNK_HEADER_SIZE + 16);
	test_path(bad, sizeof(bad), "defs.htr");
	damaged_copy(path, bad, 5, c6 - c5 - 6);
	read_trace(bad, "0", 0, &dam);
	CHECK(strstr(dam.warning, "definition index does not parse") != NULL);
	CHECK_EQ(dam.truncated, 1);
	same_reads(bad, &dam, "a damaged stack definition");
	return test_result("test_reader_threads");
}
