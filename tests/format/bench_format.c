/*
 * bench_format.c - how fast the writer encodes and the reader decodes, and
 * how many bytes an event takes, on a synthetic malloc/free stream shaped like
 * a real program's (a few threads, size classes, LIFO-ish reuse, a thousand
 * stacks). Not a ctest test: run it by hand, e.g. bench_format 5000000 DIR.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format/codec.h"
#include "format/writer.h"
#include "heaptrail/trace.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: the machine is shared */
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define THREADS 4
#define LIVE 4096

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	const char *dir = argc > 2 ? argv[2] : "/tmp";
	char path[512];
	snprintf(path, sizeof(path), "%s/bench-%d.htr", dir, (int)getpid());

	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	if (ht__writer_open(&w, path, &meta) < 0) {
		fprintf(stderr, "cannot create %s\n", path);
		return 1;
	}
	for (uint32_t f = 0; f < 4000; f++)
		ht__writer_frame(w, f, 0, 0x1000 + f * 37);
	for (uint32_t s = 1; s <= 1000; s++) {
		uint32_t fr[12];
		for (int i = 0; i < 12; i++)
			fr[i] = (uint32_t)((s * 7 + i * 13) % 4000);
		ht__writer_stack(w, s, fr, 12);
	}
	/* Per thread a pool of live blocks: allocate into empty slots, free
	   random ones, so addresses are reused the way malloc reuses them. */
	static uint64_t live[THREADS][LIVE];
	uint64_t next_addr[THREADS];
	for (int t = 0; t < THREADS; t++)
		next_addr[t] = 0x7f0000000000ull + (uint64_t)t * 0x10000000ull;
	static const uint64_t sizes[] = {16, 24, 32, 48, 64, 100, 128, 256, 512, 1000, 4096, 24};
	uint64_t ts = 0;
	struct ht_event e = {0};
	e.pid = 1000;
	double t0 = now();
	for (long i = 0; i < n; i++) {
		uint64_t x = rnd();
		int t = (int)((x >> 3) % THREADS);
		if ((i & 63) == 0)
			t = (int)(x % THREADS); /* threads switch now and then */
		e.tid = 1000 + t;
		ts += 50 + (x >> 50) % 400;
		e.ts = ts;
		uint64_t *slot = &live[t][(x >> 16) % LIVE];
		if (*slot) {
			e.type = HT_EV_FREE;
			e.func = HT_FN_FREE;
			e.addr = *slot;
			e.size = 0;
			e.stack = 0;
			*slot = 0;
		} else {
			e.type = HT_EV_ALLOC;
			e.func = HT_FN_MALLOC;
			e.size = sizes[(x >> 32) % 12];
			e.addr = next_addr[t];
			next_addr[t] += (e.size + 31) & ~15ull;
			e.stack = 1 + (uint32_t)((x >> 40) % 1000);
			*slot = e.addr;
		}
		if (ht__writer_event(w, &e, NULL) < 0) {
			fprintf(stderr, "write failed\n");
			return 1;
		}
	}
	if (ht__writer_finish(w, ts, 0, 0) < 0) {
		fprintf(stderr, "finish failed\n");
		return 1;
	}
	double t1 = now();
	FILE *f = fopen(path, "rb");
	fseek(f, 0, SEEK_END);
	long bytes = ftell(f);
	/* Sum the raw sizes of the events chunks from their headers. */
	uint64_t raw = 0;
	long off = HT__HEADER_SIZE;
	uint8_t hb[HT__CHUNK_HEADER_SIZE];
	struct ht__chunk_header h;
	while (fseek(f, off, SEEK_SET) == 0 && fread(hb, 1, sizeof(hb), f) == sizeof(hb) &&
	       ht__chunk_header_parse(hb, &h) == 0) {
		if (h.kind == HT__CHUNK_EVENTS)
			raw += h.raw_size;
		off += HT__CHUNK_HEADER_SIZE + h.comp_size;
	}
	fclose(f);

	struct ht_reader *r;
	if (ht_reader_open(&r, path) < 0)
		return 1;
	struct ht_event ev;
	long m = 0;
	uint64_t sum = 0;
	double t2 = now();
	while (ht_reader_next(r, &ev) > 0) {
		sum += ev.size;
		m++;
	}
	double t3 = now();
	ht_reader_close(r);
	unlink(path);
	printf("events %ld, file %ld bytes, %.2f bytes/event\n", n, bytes, (double)bytes / n);
	printf("raw encoding %.2f bytes/event, zstd ratio %.2f\n", (double)raw / n,
	       (double)raw / bytes);
	printf("write: %.3f s, %.1f M events/s, %.1f MB/s encoded, %.1f MB/s written\n", t1 - t0,
	       n / (t1 - t0) / 1e6, raw / (t1 - t0) / 1e6, bytes / (t1 - t0) / 1e6);
	printf("read:  %.3f s, %.1f M events/s (%ld events, checksum %llu)\n", t3 - t2,
	       m / (t3 - t2) / 1e6, m, (unsigned long long)sum);
	return m == n ? 0 : 1;
}
