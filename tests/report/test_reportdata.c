/*
 * test_reportdata.c - what heaptrail report computes (src/analysis/reportdata.h)
 * on a trace written with the trace writer, with values worked out by hand:
 * exact and binned lifetimes within a budget, cells coarsening, culled stacks
 * outermost first, series maxima, RSS peak, and bad options.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/match.h"
#include "analysis/reportdata.h"
#include "format/writer.h"
#include "heaptrail/trace.h"

#include "check.h"

static const char *const argv0[] = {"/usr/bin/app"};

static void ev(struct ht__writer *w, uint8_t type, uint8_t func, uint64_t ts, uint64_t addr,
	       uint64_t size, uint32_t stack)
{
	struct ht_event e = {.type = type,
			     .func = func,
			     .pid = 100,
			     .tid = 100,
			     .ts = ts,
			     .addr = addr,
			     .size = size,
			     .stack = stack,
			     .fd = -1};
	if (type == HT_EV_MMAP) {
		e.prot = 3;	 /* PROT_READ | PROT_WRITE */
		e.mflags = 0x22; /* MAP_PRIVATE | MAP_ANONYMOUS */
	}
	ht__writer_event(w, &e, NULL);
}

/*
 * Duration 10000 ns; frames: 0 libc!malloc, 1 app!big, 2 app!small,
 * 3 app!main, 4 libc!mmap, 5 app!spike. Stacks 1 big, 2 small, 3 spike.
 *   big:   8 blocks of 1000 B at 1000 * i + 100, freed 500 ns later
 *   small: 200 blocks of 8 B at 8100 + i, never freed
 *   spike: 8 KB mapped at 3100, 5100, 6100, each unmapped 100 ns later
 *   RSS 4096 at 1500, 12288 at 5500; exit at 9500.
 */
static int write_trace(const char *path)
{
	struct ht__writer *w;
	struct ht__trace_meta meta = {.argc = 1, .argv = argv0, .hostname = "test"};
	int rc = ht__writer_open(&w, path, &meta);
	if (rc < 0)
		return rc;
	ht__writer_module(w, 0, "/usr/bin/app", NULL, 0);
	ht__writer_module(w, 1, "/lib/x86_64-linux-gnu/libc.so.6", NULL, 0);
	static const uint32_t mods[6] = {1, 0, 0, 0, 1, 0};
	for (uint32_t f = 0; f < 6; f++)
		ht__writer_frame(w, f, mods[f], 0x1000 * (f + 1));
	static const uint32_t s1[] = {0, 1, 3}, s2[] = {0, 2, 3}, s3[] = {4, 5, 3};
	ht__writer_stack(w, 1, s1, 3);
	ht__writer_stack(w, 2, s2, 3);
	ht__writer_stack(w, 3, s3, 3);
	struct ht_process proc = {.pid = 100,
				  .ppid = 1,
				  .parent = UINT32_MAX,
				  .flags = HT_PROCF_ROOT,
				  .exe = "/usr/bin/app",
				  .argc = 1,
				  .argv = argv0};
	struct ht_event start = {.type = HT_EV_PROCESS_START, .pid = 100, .tid = 100};
	ht__writer_event(w, &start, &proc);
	for (int i = 0; i < 8; i++) {
		uint64_t t = 1000 * (uint64_t)i + 100;
		if (i == 1)
			ev(w, HT_EV_RSS, 0, 1500, 0, 4096, 0);
		if (i == 3)
			ev(w, HT_EV_MMAP, HT_FN_MMAP, 3100, 0x7f0000000000, 8192, 3);
		if (i == 5)
			ev(w, HT_EV_MMAP, HT_FN_MMAP, 5100, 0x7f0000000000, 8192, 3);
		if (i == 6)
			ev(w, HT_EV_MMAP, HT_FN_MMAP, 6100, 0x7f0000000000, 8192, 3);
		ev(w, HT_EV_ALLOC, HT_FN_MALLOC, t, 0x1000, 1000, 1);
		if (i == 3)
			ev(w, HT_EV_MUNMAP, HT_FN_MUNMAP, 3200, 0x7f0000000000, 8192, 0);
		if (i == 5)
			ev(w, HT_EV_MUNMAP, HT_FN_MUNMAP, 5200, 0x7f0000000000, 8192, 0);
		if (i == 5)
			ev(w, HT_EV_RSS, 0, 5500, 0, 12288, 0);
		if (i == 6)
			ev(w, HT_EV_MUNMAP, HT_FN_MUNMAP, 6200, 0x7f0000000000, 8192, 0);
		ev(w, HT_EV_FREE, HT_FN_FREE, t + 500, 0x1000, 0, 0);
	}
	for (int i = 0; i < 200; i++)
		ev(w, HT_EV_ALLOC, HT_FN_MALLOC, 8100 + (uint64_t)i, 0x100000 + 16 * (uint64_t)i, 8,
		   2);
	ev(w, HT_EV_PROCESS_EXIT, 0, 9500, 0, 0, 0);
	static const char *const names[] = {"malloc", "big", "small", "main", "mmap", "spike"};
	for (uint32_t f = 0; f < 6; f++) {
		struct ht__symbol sym = {names[f], "app.c", 10 + f};
		ht__writer_symbols(w, f, &sym, 1);
	}
	return ht__writer_finish(w, 10000, 0, HT_TRACEF_SYMBOLS);
}

/* The frame texts of output stack s, outermost first, joined with " > ". */
static void stack_text(struct ht_reader *r, const struct ht__report_data *d, uint32_t s, char *buf,
		       size_t len)
{
	buf[0] = 0;
	for (uint32_t k = d->stack_off[s]; k < d->stack_off[s + 1]; k++) {
		char f[256];
		ht__frame_text(r, d->frame_ids[d->stack_frames[k]], true, f, sizeof(f));
		if (buf[0])
			strncat(buf, " > ", len - strlen(buf) - 1);
		strncat(buf, f, len - strlen(buf) - 1);
	}
}

static const struct ht__rd_site *find_site(const struct ht__rd_table *t, struct ht_reader *r,
					   const struct ht__report_data *d, const char *stack)
{
	char buf[1024];
	for (uint32_t i = 0; i < t->nsites; i++) {
		stack_text(r, d, t->sites[i].stack, buf, sizeof(buf));
		if (!strcmp(buf, stack))
			return &t->sites[i];
	}
	fprintf(stderr, "no site with stack '%s'\n", stack);
	check_failures++;
	return NULL;
}

int main(void)
{
	char dir[] = "/tmp/ht-reportdata-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char path[256];
	snprintf(path, sizeof(path), "%s/t.htr", dir);
	CHECK_EQ(write_trace(path), 0);

	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);

	/* Bad options are refused. */
	struct ht__report_data d;
	struct ht__report_opts o = HT_REPORT_OPTS_INIT;
	o.points = 0;
	CHECK_EQ(ht__report_data_run(&d, r, &o), HT_ERR_INVALID);

	/* A budget of 10 exact heap lifetimes: big keeps its 8, small is binned. */
	o = (struct ht__report_opts)HT_REPORT_OPTS_INIT;
	o.points = 10;
	o.heap_budget = 10;
	o.buckets = 100;
	CHECK_EQ(ht__report_data_run(&d, r, &o), 0);
	CHECK_EQ(d.duration_ns, 10000);
	CHECK_EQ(d.point_ns, 1001);
	CHECK_EQ(d.summary.total.alloc_calls, 208);
	CHECK_EQ(d.nhandles, 1);
	CHECK_EQ(d.heap.nsites, 2);
	CHECK_EQ(d.heap.nexact, 8);
	CHECK_EQ(d.heap.binned_sites, 1);
	const struct ht__rd_site *big = find_site(&d.heap, r, &d, "app!main > app!big");
	const struct ht__rd_site *small = find_site(&d.heap, r, &d, "app!main > app!small");
	if (big && small) {
		CHECK_EQ(big->binned, 0);
		CHECK_EQ(big->nlives, 8);
		CHECK_EQ(big->lives[3].alloc_ts, 3100);
		CHECK_EQ(big->lives[3].free_ts, 3600);
		CHECK_EQ(big->lives[3].size, 1000);
		CHECK_EQ(small->binned, 1);
		CHECK_EQ(small->nlives, 0);
	}
	/* The small blocks: 8100..8299 in buckets of 101 ns, 80 to 82, never freed:
	   they end with their process at 9500 (bucket 94), as in the tables. */
	uint64_t n = 0, bytes = 0;
	for (size_t i = 0; i < d.heap.ncells; i++) {
		const struct ht__rd_cell *c = &d.heap.cells[i];
		CHECK_EQ(c->free_bucket, 94);
		CHECK_EQ(c->alloc_bucket >= 80 && c->alloc_bucket <= 82, 1);
		n += c->count;
		bytes += c->bytes;
	}
	CHECK_EQ(d.heap.bucket_ns, 101);
	CHECK_EQ(d.heap.ncells, 3);
	CHECK_EQ(n, 200);
	CHECK_EQ(bytes, 1600);

	/* Three committed spikes, each kept exactly, with mmap culled from the stack. */
	CHECK_EQ(d.commit.nsites, 1);
	const struct ht__rd_site *spike = find_site(&d.commit, r, &d, "app!main > app!spike");
	if (spike) {
		CHECK_EQ(spike->nlives, 3);
		CHECK_EQ(spike->lives[1].alloc_ts, 5100);
		CHECK_EQ(spike->lives[1].free_ts, 5200);
		CHECK_EQ(spike->lives[1].size, 8192);
		CHECK_EQ(spike->lives[1].piece, 0);
	}

	/* Series: the point's largest value shows a spike shorter than the point. */
	CHECK_EQ(d.nheap_series, 1);
	CHECK_EQ(d.heap_series[0].max[0], 1000);
	CHECK_EQ(d.heap_series[0].last[0], 0);
	CHECK_EQ(d.heap_series[0].max[8], 1600);
	CHECK_EQ(d.heap_series[0].max[9], 1600);
	CHECK_EQ(d.heap_series[0].last[9], 0); /* taken back at the exit at 9500 */
	CHECK_EQ(d.ncommit_series, 1);
	CHECK_EQ(d.commit_series[0].max[3], 8192);
	CHECK_EQ(d.commit_series[0].last[3], 0);
	CHECK_EQ(d.commit_series[0].max[4], 0);
	CHECK_EQ(d.nrss_series, 1);
	CHECK_EQ(d.rss_series[0].max[5], 12288);
	CHECK_EQ(d.rss_series[0].last[9], 0); /* the process exited at 9500 */
	CHECK_EQ(d.rss_peak, 12288);
	CHECK_EQ(d.rss_peak_ts, 5500);
	ht__report_data_release(&d);

	/* A cell budget of 1: the buckets double until one cell holds every small block. */
	o.cell_budget = 1;
	CHECK_EQ(ht__report_data_run(&d, r, &o), 0);
	CHECK_EQ(d.heap.ncells, 1);
	CHECK_EQ(d.heap.bucket_ns, 404);
	if (d.heap.ncells == 1) {
		CHECK_EQ(d.heap.cells[0].count, 200);
		CHECK_EQ(d.heap.cells[0].bytes, 1600);
		CHECK_EQ(d.heap.cells[0].alloc_bucket, 20);
	}
	ht__report_data_release(&d);

	/* Without the default cull list the allocator frames stay on the stacks. */
	o = (struct ht__report_opts)HT_REPORT_OPTS_INIT;
	o.default_cull = false;
	CHECK_EQ(ht__report_data_run(&d, r, &o), 0);
	find_site(&d.heap, r, &d, "app!main > app!big > libc.so.6!malloc");
	CHECK_EQ(d.heap.nexact, 208);
	CHECK_EQ(d.heap.binned_sites, 0);
	ht__report_data_release(&d);

	ht_reader_close(r);
	unlink(path);
	rmdir(dir);
	if (check_failures)
		fprintf(stderr, "%d checks failed\n", check_failures);
	return check_failures ? 1 : 0;
}
