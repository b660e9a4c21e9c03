/*
 * test_lifetime.c - the lifetime tracker's rules with exact expectations:
 * malloc/free, realloc chains, realloc(NULL), realloc(p, 0), failed realloc,
 * reuse of an address, unknown frees, two processes with the same address,
 * custom heaps and their destruction, and the order of finish; and what
 * the compact block records must keep exact (threads, functions, big sizes,
 * full pages, times kept aside, sites reused, times of 2 bytes made 4).
 */
#include "analysis/lifetime.h"
#include "testutil.h"

#define MAXL 64
static struct ht__life got[MAXL];
static int ngot;

static void on_end(void *ctx, const struct ht__life *l)
{
	(void)ctx;
	if (ngot < MAXL)
		got[ngot] = *l;
	ngot++;
}

static struct ht_event E(uint8_t type, uint64_t ts, uint32_t process, uint64_t old_addr,
			 uint64_t addr, uint64_t size) {
	struct ht_event e = {0};
	e.type = type;
	e.ts = ts;
	e.process = process;
	e.pid = 100 + (int32_t)process;
	e.tid = 7;
	e.old_addr = old_addr;
	e.addr = addr;
	e.size = size;
	e.func = type == HT_EV_REALLOC ? HT_FN_REALLOC
		 : type == HT_EV_FREE  ? HT_FN_FREE
				       : HT_FN_MALLOC;
	e.stack = (uint32_t)ts; /* a recognizable stack per event */
	return e;
}

static void
feed(struct ht__life_tracker *t, struct ht_event e)
{
	CHECK_EQ(ht__life_event(t, &e), 0);
}

static void expect(int i, uint64_t addr, uint64_t size, uint64_t alloc_ts, uint64_t free_ts,
		   uint32_t process, int from_realloc, int freed_by_realloc)
{
	if (i >= ngot) {
		fprintf(stderr, "lifetime %d missing (got %d)\n", i, ngot);
		check_failures++;
		return;
	}
	CHECK_EQ(got[i].addr, addr);
	CHECK_EQ(got[i].size, size);
	CHECK_EQ(got[i].alloc_ts, alloc_ts);
	CHECK_EQ(got[i].free_ts, free_ts);
	CHECK_EQ(got[i].process, process);
	CHECK_EQ(got[i].stack, alloc_ts);
	CHECK_EQ(got[i].from_realloc, from_realloc);
	CHECK_EQ(got[i].freed_by_realloc, freed_by_realloc);
	CHECK_EQ(got[i].tid, 7);
}

static void test_basic(void)
{
	ngot = 0;
	struct ht__life_tracker *t = ht__life_new(on_end, NULL);
	feed(t, E(HT_EV_ALLOC, 10, 0, 0, 0x1000, 100));
	feed(t, E(HT_EV_ALLOC, 11, 0, 0, 0x2000, 200));
	CHECK_EQ(ht__life_stats(t)->live_count, 2);
	CHECK_EQ(ht__life_stats(t)->live_bytes, 300);
	feed(t, E(HT_EV_FREE, 12, 0, 0, 0x1000, 0));
	CHECK_EQ(ngot, 1);
	expect(0, 0x1000, 100, 10, 12, 0, 0, 0);
	/* The same address again: a new block. */
	feed(t, E(HT_EV_ALLOC, 13, 0, 0, 0x1000, 50));
	feed(t, E(HT_EV_FREE, 14, 0, 0, 0x1000, 0));
	expect(1, 0x1000, 50, 13, 14, 0, 0, 0);
	/* Unknown and NULL frees: counted (NULL not), never errors. */
	feed(t, E(HT_EV_FREE, 15, 0, 0, 0x9999, 0));
	feed(t, E(HT_EV_FREE, 16, 0, 0, 0x1000, 0));
	feed(t, E(HT_EV_FREE, 17, 0, 0, 0, 0));
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 2);
	/* Failed allocations are nothing. */
	feed(t, E(HT_EV_ALLOC_FAIL, 18, 0, 0, 0, 1ull << 40));
	CHECK_EQ(ht__life_stats(t)->live_count, 1);
	CHECK_EQ(ht__life_stats(t)->live_bytes, 200);
	CHECK_EQ(ngot, 2);
	ht__life_finish(t);
	CHECK_EQ(ngot, 3);
	expect(2, 0x2000, 200, 11, HT_TS_NEVER, 0, 0, 0);
	CHECK_EQ(ht__life_stats(t)->live_count, 1);
	CHECK_EQ(ht__life_stats(t)->live_bytes, 200);
	ht__life_finish(t); /* nothing twice */
	CHECK_EQ(ngot, 3);
	ht__life_free(t);
}

static void test_realloc(void)
{
	ngot = 0;
	struct ht__life_tracker *t = ht__life_new(on_end, NULL);
	/* realloc(NULL, 10) is an allocation. */
	feed(t, E(HT_EV_REALLOC, 1, 0, 0, 0xa000, 10));
	CHECK_EQ(ngot, 0);
	/* A chain: moves, then grows in place. */
	feed(t, E(HT_EV_REALLOC, 2, 0, 0xa000, 0xb000, 20));
	feed(t, E(HT_EV_REALLOC, 3, 0, 0xb000, 0xb000, 30));
	CHECK_EQ(ngot, 2);
	expect(0, 0xa000, 10, 1, 2, 0, 1, 1);
	expect(1, 0xb000, 20, 2, 3, 0, 1, 1);
	/* A failed realloc leaves the block as it was. */
	struct ht_event f = E(HT_EV_REALLOC, 4, 0, 0xb000, 0, 1ull << 50);
	f.flags = HT_EVF_FAILED;
	feed(t, f);
	CHECK_EQ(ngot, 2);
	CHECK_EQ(ht__life_stats(t)->live_bytes, 30);
	/* realloc(p, 0) frees p. */
	feed(t, E(HT_EV_REALLOC, 5, 0, 0xb000, 0, 0));
	CHECK_EQ(ngot, 3);
	expect(2, 0xb000, 30, 3, 5, 0, 1, 1);
	CHECK_EQ(ht__life_stats(t)->live_count, 0);
	/* A block made by malloc and freed by realloc. */
	feed(t, E(HT_EV_ALLOC, 6, 0, 0, 0xc000, 8));
	feed(t, E(HT_EV_REALLOC, 7, 0, 0xc000, 0xd000, 16));
	expect(3, 0xc000, 8, 6, 7, 0, 0, 1);
	/* realloc of an unknown block: an unknown free, and a new block. */
	feed(t, E(HT_EV_REALLOC, 8, 0, 0xeeee, 0xe000, 4));
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 1);
	CHECK_EQ(ht__life_stats(t)->live_count, 2);
	ht__life_finish(t);
	CHECK_EQ(ngot, 6);
	expect(4, 0xd000, 16, 7, HT_TS_NEVER, 0, 1, 0);
	expect(5, 0xe000, 4, 8, HT_TS_NEVER, 0, 1, 0);
	ht__life_free(t);
}

static void test_processes_and_heaps(void)
{
	ngot = 0;
	struct ht__life_tracker *t = ht__life_new(on_end, NULL);
	/* Two processes, same address: two blocks. */
	feed(t, E(HT_EV_ALLOC, 1, 0, 0, 0x5000, 10));
	feed(t, E(HT_EV_ALLOC, 2, 1, 0, 0x5000, 20));
	feed(t, E(HT_EV_FREE, 3, 1, 0, 0x5000, 0));
	CHECK_EQ(ngot, 1);
	expect(0, 0x5000, 20, 2, 3, 1, 0, 0);
	/* A custom heap: same address as a process-heap block. */
	struct ht_event a = E(HT_EV_ALLOC, 4, 0, 0, 0x5000, 30);
	a.heap = 0x77;
	a.func = HT_FN_HEAP_API;
	feed(t, a);
	a = E(HT_EV_ALLOC, 5, 0, 0, 0x6000, 40);
	a.heap = 0x77;
	feed(t, a);
	a = E(HT_EV_ALLOC, 6, 1, 0, 0x6000, 50); /* other process, same handle */
	a.heap = 0x77;
	feed(t, a);
	CHECK_EQ(ht__life_stats(t)->live_count, 4);
	struct ht_event d = E(HT_EV_HEAP_DESTROY, 7, 0, 0, 0, 0);
	d.heap = 0x77;
	feed(t, d);
	CHECK_EQ(ngot, 3);
	/* Both blocks of heap 0x77 in process 0 ended at 7, oldest first. */
	expect(1, 0x5000, 30, 4, 7, 0, 0, 0);
	CHECK_EQ(got[1].heap, 0x77);
	CHECK_EQ(got[1].func, HT_FN_HEAP_API);
	expect(2, 0x6000, 40, 5, 7, 0, 0, 0);
	CHECK_EQ(got[2].func, HT_FN_MALLOC);
	CHECK_EQ(ht__life_stats(t)->live_count, 2);
	/* An allocation at a live address means the free was missed. */
	feed(t, E(HT_EV_ALLOC, 8, 0, 0, 0x5000, 60));
	CHECK_EQ(ngot, 4);
	expect(3, 0x5000, 10, 1, 8, 0, 0, 0);
	/* The exit event alone changes nothing: the trace pass says which image ends. */
	struct ht_event x = E(HT_EV_PROCESS_EXIT, 9, 0, 0, 0, 0);
	feed(t, x);
	CHECK_EQ(ngot, 4);
	/* Ending process 1 ends its block there, marked as never freed. */
	CHECK_EQ(ht__life_end_process(t, 1, 9), 0);
	CHECK_EQ(ngot, 5);
	expect(4, 0x6000, 50, 6, 9, 1, 0, 0);
	CHECK_EQ(got[4].heap, 0x77);
	CHECK_EQ(got[4].at_exit, 1);
	CHECK_EQ(ht__life_stats(t)->live_count, 1);
	CHECK_EQ(ht__life_end_process(t, 1, 10), 0); /* nothing left of it */
	CHECK_EQ(ngot, 5);
	ht__life_finish(t);
	CHECK_EQ(ngot, 6);
	expect(5, 0x5000, 60, 8, HT_TS_NEVER, 0, 0, 0);
	CHECK_EQ(got[5].at_exit, 0);
	ht__life_free(t);
}

/* Many blocks: the table grows and shrinks through deletions correctly. */
static void test_many(void)
{
	ngot = 0;
	struct ht__life_tracker *t = ht__life_new(NULL, NULL);
	const uint64_t n = 200000;
	for (uint64_t i = 0; i < n; i++)
		feed(t,
		     E(HT_EV_ALLOC, i, (uint32_t)(i & 1), 0, 0x10000 + (i / 2) * 16, i % 100 + 1));
	uint64_t bytes = 0;
	for (uint64_t i = 0; i < n; i++)
		bytes += i % 100 + 1;
	CHECK_EQ(ht__life_stats(t)->live_count, n);
	CHECK_EQ(ht__life_stats(t)->live_bytes, bytes);
	/* Free every block with i % 3 != 0, in a scrambled order. */
	uint64_t freed = 0;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t i = (k * 7919) % n;
		if (i % 3 == 0)
			continue;
		feed(t, E(HT_EV_FREE, n + k, (uint32_t)(i & 1), 0, 0x10000 + (i / 2) * 16, 0));
		bytes -= i % 100 + 1;
		freed++;
	}
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 0);
	CHECK_EQ(ht__life_stats(t)->live_count, n - freed);
	CHECK_EQ(ht__life_stats(t)->live_bytes, bytes);
	/* Every remaining block is still found. */
	for (uint64_t i = 0; i < n; i += 3)
		feed(t, E(HT_EV_FREE, 3 * n, (uint32_t)(i & 1), 0, 0x10000 + (i / 2) * 16, 0));
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 0);
	CHECK_EQ(ht__life_stats(t)->live_count, 0);
	CHECK_EQ(ht__life_stats(t)->live_bytes, 0);
	ht__life_free(t);
}

/*
 * What the compact records keep apart: thread, function, heap and realloc
 * origin per block (interned together), sizes of 2 GiB and more (kept
 * aside), records on several pages reused after frees, and the order of
 * blocks allocated at the same time (heap, then address).
 */
static void test_compact(void)
{
	ngot = 0;
	struct ht__life_tracker *t = ht__life_new(on_end, NULL);
	struct ht_event a = E(HT_EV_ALLOC, 1, 0, 0, 0x9000, 0x7fffffffull);
	a.tid = 11;
	a.func = HT_FN_CALLOC;
	feed(t, a);
	a = E(HT_EV_ALLOC, 2, 0, 0, 0xa000, 0x80000000ull);
	a.tid = 12;
	feed(t, a);
	a = E(HT_EV_ALLOC, 3, 0, 0, 0xb000, 0x123456789abull);
	feed(t, a);
	CHECK_EQ(ht__life_stats(t)->live_bytes, 0x7fffffffull + 0x80000000ull + 0x123456789abull);
	feed(t, E(HT_EV_FREE, 4, 0, 0, 0xa000, 0));
	CHECK_EQ(ngot, 1);
	CHECK_EQ(got[0].size, 0x80000000ull);
	CHECK_EQ(got[0].tid, 12);
	CHECK_EQ(got[0].func, HT_FN_MALLOC);
	/* The big size's place is reused; the other big one is untouched. */
	a = E(HT_EV_REALLOC, 5, 0, 0x9000, 0xc000, 0x900000000ull);
	a.tid = 13;
	feed(t, a);
	CHECK_EQ(ngot, 2);
	CHECK_EQ(got[1].addr, 0x9000);
	CHECK_EQ(got[1].size, 0x7fffffffull);
	CHECK_EQ(got[1].tid, 11);
	CHECK_EQ(got[1].func, HT_FN_CALLOC);
	CHECK_EQ(got[1].freed_by_realloc, 1);
	feed(t, E(HT_EV_FREE, 6, 0, 0, 0xb000, 0));
	CHECK_EQ(got[2].size, 0x123456789abull);
	feed(t, E(HT_EV_FREE, 7, 0, 0, 0xc000, 0));
	CHECK_EQ(ngot, 4);
	CHECK_EQ(got[3].size, 0x900000000ull);
	CHECK_EQ(got[3].tid, 13);
	CHECK_EQ(got[3].func, HT_FN_REALLOC);
	CHECK_EQ(got[3].from_realloc, 1);
	CHECK_EQ(ht__life_stats(t)->live_count, 0);
	CHECK_EQ(ht__life_stats(t)->live_bytes, 0);
	/* 100000 blocks (records on 4 pages) with a thread each of 5, freed
	   in reverse, then as many again in the records freed. */
	for (int round = 0; round < 2; round++) {
		ngot = 0;
		for (uint64_t i = 0; i < 100000; i++) {
			a = E(HT_EV_ALLOC, 10 + i, 0, 0, 0x100000 + i * 32, i + round);
			a.tid = (int32_t)(i % 5);
			feed(t, a);
		}
		for (uint64_t i = 100000; i-- > 0;)
			feed(t, E(HT_EV_FREE, 200000, 0, 0, 0x100000 + i * 32, 0));
		CHECK_EQ(ngot, 100000);
		int bad = 0;
		for (int k = 0; k < MAXL; k++) {
			uint64_t i = 100000 - 1 - (uint64_t)k;
			bad += got[k].addr != 0x100000 + i * 32 || got[k].size != i + round ||
			       got[k].tid != (int32_t)(i % 5) || got[k].alloc_ts != 10 + i;
		}
		CHECK_EQ(bad, 0);
	}
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 0);
	/* Allocated at the same moment: finish gives them by heap, then address. */
	ngot = 0;
	uint64_t addrs[4] = {0x3000, 0x1000, 0x2000, 0x1000};
	uint64_t heaps[4] = {0, 0, 5, 5};
	for (int k = 0; k < 4; k++) {
		a = E(HT_EV_ALLOC, 300000, 0, 0, addrs[k], 8);
		a.heap = heaps[k];
		feed(t, a);
	}
	ht__life_finish(t);
	CHECK_EQ(ngot, 4);
	CHECK_EQ(got[0].addr, 0x1000);
	CHECK_EQ(got[0].heap, 0);
	CHECK_EQ(got[1].addr, 0x3000);
	CHECK_EQ(got[1].heap, 0);
	CHECK_EQ(got[2].addr, 0x1000);
	CHECK_EQ(got[2].heap, 5);
	CHECK_EQ(got[3].addr, 0x2000);
	CHECK_EQ(got[3].heap, 5);
	ht__life_free(t);
}

/*
 * What the page entries must keep exact: every byte of a page a block (4096
 * entries, unaligned offsets), times kept aside (before the page's first
 * block, not a multiple of the unit, more than 2^32 units after it), pages
 * that empty and come back, and sites freed once no block names them.
 */
static void test_pages(void)
{
	ngot = 0;
	struct ht__life_tracker *t = ht__life_new(on_end, NULL);
	ht__life_ts_unit(t, 100);
	/* A one-byte block at every address of a page, in a scrambled order. */
	for (uint64_t k = 0; k < 4096; k++) {
		uint64_t i = (k * 1237) % 4096;
		struct ht_event a = E(HT_EV_ALLOC, 1000 + k * 100, 0, 0, 0x7000 + i, 1 + i % 3);
		a.stack = 5;
		feed(t, a);
	}
	CHECK_EQ(ht__life_stats(t)->live_count, 4096);
	/* One more at a live address ends the block there (unseen free). */
	struct ht_event a = E(HT_EV_ALLOC, 900000, 0, 0, 0x7abc, 64);
	feed(t, a);
	CHECK_EQ(ngot, 1);
	CHECK_EQ(got[0].addr, 0x7abc);
	CHECK_EQ(got[0].size, 1 + 0xabc % 3);
	CHECK_EQ(got[0].stack, 5);
	CHECK_EQ(ht__life_stats(t)->live_count, 4096);
	/* Free all but 0x7000 and 0x7fff, each reported with its own time. */
	uint64_t bad = 0;
	for (uint64_t k = 0; k < 4096; k++) {
		uint64_t i = (k * 1237) % 4096;
		if (i == 0 || i == 0xfff || i == 0xabc)
			continue;
		ngot = 0;
		feed(t, E(HT_EV_FREE, 1000000, 0, 0, 0x7000 + i, 0));
		bad += ngot != 1 || got[0].alloc_ts != 1000 + k * 100 ||
		       got[0].addr != 0x7000 + i || got[0].size != 1 + i % 3;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(ht__life_stats(t)->live_count, 3);
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 0);
	/* Times the page's 4-byte deltas cannot hold, on a page of their own:
	   before its first block, off the unit, and far after it. */
	uint64_t ts[5] = {5000, 4000, 5050, 5000 + 100ull * 0xffffffffull,
			  5000 + 100ull * 0x100000000ull};
	for (int k = 0; k < 5; k++)
		feed(t, E(HT_EV_ALLOC, ts[k], 0, 0, 0x20000 + 16 * (uint64_t)k, 8));
	for (int k = 4; k >= 0; k--) {
		ngot = 0;
		feed(t, E(HT_EV_FREE, ts[4] + 1, 0, 0, 0x20000 + 16 * (uint64_t)k, 0));
		CHECK_EQ(ngot, 1);
		CHECK_EQ(got[0].alloc_ts, ts[k]);
	}
	/* The page emptied; a block there again starts it afresh. */
	feed(t, E(HT_EV_ALLOC, 7, 0, 0, 0x20010, 8));
	ngot = 0;
	ht__life_finish(t);
	CHECK_EQ(ngot, 4);
	CHECK_EQ(got[0].addr, 0x20010);
	CHECK_EQ(got[0].alloc_ts, 7);
	CHECK_EQ(got[1].addr, 0x7000);
	CHECK_EQ(got[1].alloc_ts, 1000);
	CHECK_EQ(got[3].addr, 0x7abc);
	CHECK_EQ(got[3].size, 64);
	ht__life_free(t);

	/* 100000 sites (a stack each) live at once, all freed, then 100000
	   more: the freed sites are swept and their ids reused. */
	t = ht__life_new(on_end, NULL);
	for (int round = 0; round < 2; round++) {
		for (uint64_t i = 0; i < 100000; i++) {
			struct ht_event b = E(HT_EV_ALLOC, 10 + i, 0, 0, 0x100000 + i * 64, 48);
			b.stack = (uint32_t)(i + 100000 * (uint64_t)round);
			feed(t, b);
		}
		bad = 0;
		for (uint64_t i = 0; i < 100000; i++) {
			ngot = 0;
			feed(t, E(HT_EV_FREE, 200000, 0, 0, 0x100000 + i * 64, 0));
			bad += ngot != 1 || got[0].stack != i + 100000 * (uint64_t)round ||
			       got[0].alloc_ts != 10 + i;
		}
		CHECK_EQ(bad, 0);
	}
	CHECK_EQ(ht__life_stats(t)->live_count, 0);
	CHECK_EQ(ht__life_stats(t)->live_bytes, 0);
	ht__life_free(t);
}

/* A tracker without times (ht__life_no_times()): the blocks as exact but
   their alloc_ts, which is that of their page's first block; past 65535
   sites live it keeps times again, exact for the blocks made from then. */
static void test_no_times(void)
{
	struct ht__life_tracker *t = ht__life_new(on_end, NULL);
	ht__life_no_times(t);
	ngot = 0;
	feed(t, E(HT_EV_ALLOC, 10, 0, 0, 0x1000, 100));
	feed(t, E(HT_EV_ALLOC, 20, 0, 0, 0x1040, 200));
	feed(t, E(HT_EV_ALLOC, 30, 0, 0, 0x5000, 300));
	feed(t, E(HT_EV_FREE, 40, 0, 0, 0x1040, 0));
	CHECK_EQ(ngot, 1);
	CHECK_EQ(got[0].addr, 0x1040);
	CHECK_EQ(got[0].size, 200);
	CHECK_EQ(got[0].stack, 20);
	CHECK_EQ(got[0].alloc_ts, 10); /* the page's first block's */
	CHECK_EQ(got[0].free_ts, 40);
	CHECK_EQ(ht__life_stats(t)->live_count, 2);
	CHECK_EQ(ht__life_stats(t)->live_bytes, 400);
	ngot = 0;
	ht__life_finish(t);
	CHECK_EQ(ngot, 2);
	CHECK_EQ(got[0].addr + got[1].addr, 0x1000 + 0x5000);
	CHECK_EQ(got[0].stack + got[1].stack, 10 + 30);
	ht__life_free(t);

	t = ht__life_new(on_end, NULL);
	ht__life_no_times(t);
	const uint64_t n = 100000;
	for (uint64_t i = 0; i < n; i++) {
		struct ht_event b = E(HT_EV_ALLOC, 10 + i, 0, 0, 0x100000 + i * 64, 48 + i % 7);
		b.stack = (uint32_t)i;
		feed(t, b);
	}
	CHECK_EQ(ht__life_stats(t)->live_count, n);
	int bad = 0, exact = 0;
	for (uint64_t i = 0; i < n; i++) {
		ngot = 0;
		feed(t, E(HT_EV_FREE, 200000, 0, 0, 0x100000 + i * 64, 0));
		bad += ngot != 1 || got[0].stack != i || got[0].size != 48 + i % 7 ||
		       got[0].addr != 0x100000 + i * 64 || got[0].alloc_ts > 10 + i ||
		       got[0].alloc_ts < 10 + i / 64 * 64;
		exact += ngot == 1 && got[0].alloc_ts == 10 + i;
	}
	CHECK_EQ(bad, 0);
	/* Exact: the blocks from the one of site id 65535 on (kept aside
	   with their times), and before it the first of each page (1024). */
	CHECK_EQ(exact, (int)(n - 65535 + 1024));
	CHECK_EQ(ht__life_stats(t)->live_count, 0);
	CHECK_EQ(ht__life_stats(t)->live_bytes, 0);
	ht__life_free(t);
}

/* A tracker that tells blocks apart by heap and process only
   (ht__life_no_caller()): every block of two threads, malloc and realloc,
   two processes and two heaps, with its size, stack, process and heap, and
   tid, func and from_realloc 0; the same with and without. */
static void test_no_caller(void)
{
	for (int lean = 0; lean < 2; lean++) {
		struct ht__life_tracker *t = ht__life_new(on_end, NULL);
		if (lean)
			ht__life_no_caller(t);
		ngot = 0;
		struct ht_event a = E(HT_EV_ALLOC, 10, 0, 0, 0x1000, 100);
		feed(t, a);
		a = E(HT_EV_ALLOC, 11, 0, 0, 0x1040, 110);
		a.tid = 8; /* another thread, the same page */
		feed(t, a);
		a = E(HT_EV_REALLOC, 12, 1, 0, 0x1080, 120); /* another process */
		feed(t, a);
		a = E(HT_EV_ALLOC, 13, 0, 0, 0x10c0, 130);
		a.heap = 5; /* another heap */
		a.func = HT_FN_CALLOC;
		feed(t, a);
		feed(t, E(HT_EV_FREE, 20, 0, 0, 0x1040, 0));
		CHECK_EQ(ngot, 1);
		CHECK_EQ(got[0].stack, 11);
		CHECK_EQ(got[0].size, 110);
		CHECK_EQ(got[0].tid, lean ? 0 : 8);
		ht__life_finish(t);
		CHECK_EQ(ngot, 4);
		for (int i = 1; i < 4 && i < ngot; i++) {
			uint32_t k = got[i].stack - 10; /* 0, 2, 3 */
			CHECK_EQ(got[i].size, 100 + 10 * k);
			CHECK_EQ(got[i].addr, 0x1000 + 0x40 * k);
			CHECK_EQ(got[i].process, k == 2);
			CHECK_EQ(got[i].heap, k == 3 ? 5 : 0);
			CHECK_EQ(got[i].tid, lean ? 0 : 7);
			CHECK_EQ(got[i].from_realloc, lean ? 0 : k == 2);
			CHECK_EQ(got[i].func, lean     ? 0
					      : k == 2 ? HT_FN_REALLOC
					      : k == 3 ? HT_FN_CALLOC
						       : HT_FN_MALLOC);
		}
		CHECK_EQ(ht__life_stats(t)->live_count, 3);
		CHECK_EQ(ht__life_stats(t)->live_bytes, 100 + 120 + 130);
		ht__life_free(t);
	}
}

/*
 * A page's mark of the 16-byte offsets that hold a block (an allocation
 * there with no mark needs no scan): a freed block's mark goes, a block at
 * a marked offset ends the one there, and blocks at other offsets (8 bytes
 * in, 1 byte in) beside them are found by scanning, at the page's first and
 * last offsets too.
 */
static void test_marks(void)
{
	struct ht__life_tracker *t = ht__life_new(on_end, NULL);
	ngot = 0;
	feed(t, E(HT_EV_ALLOC, 10, 0, 0, 0x30000, 16));
	feed(t, E(HT_EV_ALLOC, 11, 0, 0, 0x30010, 16));
	feed(t, E(HT_EV_ALLOC, 12, 0, 0, 0x30008, 8));
	feed(t, E(HT_EV_ALLOC, 13, 0, 0, 0x30ff0, 16));
	feed(t, E(HT_EV_ALLOC, 14, 0, 0, 0x30fff, 1));
	CHECK_EQ(ngot, 0);
	feed(t, E(HT_EV_FREE, 20, 0, 0, 0x30000, 0));
	expect(0, 0x30000, 16, 10, 20, 0, 0, 0);
	/* Its mark is gone: a new block there ends nothing. */
	ngot = 0;
	feed(t, E(HT_EV_ALLOC, 21, 0, 0, 0x30000, 32));
	CHECK_EQ(ngot, 0);
	/* Marked and live: the block there ends (its free was not seen). */
	feed(t, E(HT_EV_ALLOC, 22, 0, 0, 0x30010, 48));
	expect(0, 0x30010, 16, 11, 22, 0, 0, 0);
	ngot = 0;
	feed(t, E(HT_EV_ALLOC, 23, 0, 0, 0x30ff0, 48));
	expect(0, 0x30ff0, 16, 13, 23, 0, 0, 0);
	ngot = 0;
	feed(t, E(HT_EV_ALLOC, 24, 0, 0, 0x30008, 4));
	expect(0, 0x30008, 8, 12, 24, 0, 0, 0);
	ngot = 0;
	feed(t, E(HT_EV_ALLOC, 25, 0, 0, 0x30fff, 1));
	expect(0, 0x30fff, 1, 14, 25, 0, 0, 0);
	ngot = 0;
	feed(t, E(HT_EV_FREE, 30, 0, 0, 0x30010, 0));
	expect(0, 0x30010, 48, 22, 30, 0, 0, 0);
	ngot = 0;
	feed(t, E(HT_EV_FREE, 31, 0, 0, 0x30010, 0)); /* freed twice: unknown */
	feed(t, E(HT_EV_FREE, 32, 0, 0, 0x30020, 0)); /* never allocated */
	CHECK_EQ(ngot, 0);
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 2);
	CHECK_EQ(ht__life_stats(t)->live_count, 4);
	ht__life_finish(t);
	CHECK_EQ(ngot, 4);
	expect(0, 0x30000, 32, 21, HT_TS_NEVER, 0, 0, 0);
	expect(3, 0x30fff, 1, 25, HT_TS_NEVER, 0, 0, 0);
	ht__life_free(t);
}

/* A fork child's frees of its parent's blocks (ht__life_fork(),
   docs/processes.md): counted as inherited, never a life nor unknown. */
static void test_fork(void)
{
	ngot = 0;
	struct ht__life_tracker *t = ht__life_new(on_end, NULL);
	/* Parent 0, with two children to come: three blocks of the process
	   heap, one of heap 0x77, and one it frees before the first child
	   starts (after its fork: the child still holds it). */
	ht__life_fork_expect(t, 0);
	ht__life_fork_expect(t, 0);
	feed(t, E(HT_EV_ALLOC, 1, 0, 0, 0x1000, 10));
	feed(t, E(HT_EV_ALLOC, 2, 0, 0, 0x2000, 20));
	feed(t, E(HT_EV_ALLOC, 3, 0, 0, 0x3000, 30));
	struct ht_event a = E(HT_EV_ALLOC, 4, 0, 0, 0x9000, 90);
	a.heap = 0x77;
	feed(t, a);
	feed(t, E(HT_EV_ALLOC, 5, 0, 0, 0x7000, 70));
	struct ht_event f = E(HT_EV_FREE, 6, 0, 0, 0x7000, 0);
	feed(t, f);
	CHECK_EQ(ht__life_note_free(t, &f), 0);
	CHECK_EQ(ngot, 1);
	/* Child 1. */
	CHECK_EQ(ht__life_fork(t, 0, 1), 0);
	CHECK_EQ(ht__life_stats(t)->live_count, 4); /* nothing of the child's */
	feed(t, E(HT_EV_FREE, 10, 1, 0, 0x1000, 0));
	feed(t, E(HT_EV_FREE, 11, 1, 0, 0x7000, 0));
	CHECK_EQ(ht__life_stats(t)->inherited_frees, 2);
	CHECK_EQ(ngot, 1);
	feed(t, E(HT_EV_FREE, 12, 1, 0, 0x1000, 0)); /* twice: unknown */
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 1);
	feed(t, E(HT_EV_FREE, 12, 1, 0, 0x5000, 0)); /* never the parent's */
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 2);
	/* A realloc of an inherited block: its free inherited, the new block
	   the child's. */
	feed(t, E(HT_EV_REALLOC, 13, 1, 0x3000, 0x4000, 40));
	CHECK_EQ(ht__life_stats(t)->inherited_frees, 3);
	CHECK_EQ(ngot, 1);
	feed(t, E(HT_EV_ALLOC, 13, 1, 0, 0x6000, 60));
	CHECK_EQ(ht__life_stats(t)->live_count, 6);
	/* Grandchild 2: the child's own 0x4000 and what it holds of the
	   parent's (0x2000, 0x9000), not what it freed (0x1000). */
	ht__life_fork_expect(t, 1);
	CHECK_EQ(ht__life_fork(t, 1, 2), 0);
	feed(t, E(HT_EV_FREE, 14, 2, 0, 0x4000, 0));
	feed(t, E(HT_EV_FREE, 15, 2, 0, 0x2000, 0));
	feed(t, E(HT_EV_FREE, 16, 2, 0, 0x1000, 0));
	CHECK_EQ(ht__life_stats(t)->inherited_frees, 5);
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 3);
	/* The child destroys heap 0x77: its copy of 0x9000 goes with it; the
	   grandchild's stays. */
	struct ht_event d = E(HT_EV_HEAP_DESTROY, 17, 1, 0, 0, 0);
	d.heap = 0x77;
	feed(t, d);
	f = E(HT_EV_FREE, 18, 1, 0, 0x9000, 0);
	f.heap = 0x77;
	feed(t, f);
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 4);
	f.process = 2;
	feed(t, f);
	CHECK_EQ(ht__life_stats(t)->inherited_frees, 6);
	/* The parent's blocks are its own, whatever the children freed. */
	feed(t, E(HT_EV_FREE, 19, 0, 0, 0x1000, 0));
	CHECK_EQ(ngot, 2);
	expect(1, 0x1000, 10, 1, 19, 0, 0, 0);
	/* The child ends before the grandchild: what it held then stays
	   for the grandchild; not what it freed before the grandchild's fork
	   (0x3000, by its realloc). */
	CHECK_EQ(ht__life_end_process(t, 1, 21), 0);
	CHECK_EQ(ngot, 4);
	expect(2, 0x4000, 40, 13, 21, 1, 1, 0);
	CHECK_EQ(got[2].at_exit, 1);
	feed(t, E(HT_EV_FREE, 22, 2, 0, 0x6000, 0));
	feed(t, E(HT_EV_FREE, 23, 2, 0, 0x3000, 0));
	CHECK_EQ(ht__life_stats(t)->inherited_frees, 7);
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 5);
	CHECK_EQ(ht__life_end_process(t, 2, 24), 0);
	/* The parent ends before its second child starts: that child still
	   has the parent's blocks. */
	CHECK_EQ(ht__life_end_process(t, 0, 25), 0);
	CHECK_EQ(ngot, 7);
	CHECK_EQ(ht__life_stats(t)->live_count, 0);
	CHECK_EQ(ht__life_fork(t, 0, 3), 0);
	feed(t, E(HT_EV_FREE, 26, 3, 0, 0x2000, 0));
	CHECK_EQ(ht__life_stats(t)->inherited_frees, 8);
	CHECK_EQ(ht__life_end_process(t, 3, 27), 0);
	/* None may ask now: what was kept is forgotten. */
	feed(t, E(HT_EV_FREE, 28, 3, 0, 0x3000, 0));
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 6);
	CHECK_EQ(ngot, 7);
	ht__life_finish(t);
	CHECK_EQ(ngot, 7);
	ht__life_free(t);
}

/*
 * A page's times in 2 bytes an entry until one needs more: a block 70000
 * units after its page's first, and times kept aside whose place is past
 * 65535, make the page wide; every time stays exact, before and after.
 */
static void test_wide_times(void)
{
	ngot = 0;
	struct ht__life_tracker *t = ht__life_new(on_end, NULL);
	ht__life_ts_unit(t, 100);
	for (uint64_t k = 0; k < 10; k++)
		feed(t, E(HT_EV_ALLOC, 1000 + k * 100, 0, 0, 0x40000 + k * 16, 8));
	feed(t, E(HT_EV_ALLOC, 1000 + 70000 * 100, 0, 0, 0x400a0, 8));
	feed(t, E(HT_EV_ALLOC, 1000 + 65535 * 100, 0, 0, 0x400b0, 8));
	feed(t, E(HT_EV_ALLOC, 1500, 0, 0, 0x400c0, 8));
	uint64_t want[13];
	for (int k = 0; k < 10; k++)
		want[k] = 1000 + (uint64_t)k * 100;
	want[10] = 1000 + 70000 * 100;
	want[11] = 1000 + 65535 * 100;
	want[12] = 1500;
	uint64_t bad = 0;
	for (int k = 12; k >= 0; k -= 2) {
		ngot = 0;
		feed(t, E(HT_EV_FREE, 9000000, 0, 0, 0x40000 + (uint64_t)k * 16, 0));
		bad += ngot != 1 || got[0].alloc_ts != want[k];
	}
	CHECK_EQ(bad, 0);
	ngot = 0;
	ht__life_finish(t);
	CHECK_EQ(ngot, 6);
	for (int k = 0; k < 6 && k < ngot; k++)
		CHECK_EQ(got[k].alloc_ts, want[2 * k + 1]);
	ht__life_free(t);

	/* 70000 times off the unit, kept aside; the last pages' entries name
	   places past 65535, and their pages' first blocks fit 2 bytes. */
	t = ht__life_new(on_end, NULL);
	ht__life_ts_unit(t, 100);
	for (uint64_t i = 0; i < 70000; i++) {
		feed(t, E(HT_EV_ALLOC, 100 * i + 100, 0, 0, 0x1000000 + i * 32, 16));
		feed(t, E(HT_EV_ALLOC, 100 * i + 101, 0, 0, 0x1000010 + i * 32, 16));
	}
	bad = 0;
	for (uint64_t i = 0; i < 70000; i++) {
		ngot = 0;
		feed(t, E(HT_EV_FREE, 9000000, 0, 0, 0x1000010 + i * 32, 0));
		feed(t, E(HT_EV_FREE, 9000000, 0, 0, 0x1000000 + i * 32, 0));
		bad += ngot != 2 || got[0].alloc_ts != 100 * i + 101 ||
		       got[1].alloc_ts != 100 * i + 100;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(ht__life_stats(t)->live_count, 0);
	CHECK_EQ(ht__life_stats(t)->unknown_frees, 0);
	ht__life_free(t);
}

int main(void)
{
	test_wide_times();
	test_marks();
	test_pages();
	test_compact();
	test_basic();
	test_realloc();
	test_processes_and_heaps();
	test_many();
	test_no_times();
	test_no_caller();
	test_fork();
	return test_result("test_lifetime");
}
