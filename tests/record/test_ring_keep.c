/*
 * test_ring_keep.c - the flight recorder's keeper (src/session/ring_keep.h)
 * fed a known event stream directly: its accounting stays within the ring's
 * bytes, and a written window holds exactly the newest events after a
 * synthetic prefix that is exactly the state at the window's start
 * (computed here independently), for every flush.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "analysis/lifetime.h"
#include "base/protocol.h"
#include "check.h"
#include "format/output.h"
#include "heaptrail/trace.h"
#include "session/ring_keep.h"
#include "session/session.h"

#define MAXEV 400000

static struct ht_event fed[MAXEV];
static uint32_t nfed;
static struct ht__ring_keep *k;
static uint64_t now_ts;

static void feed(struct ht_event ev, const struct ht_process *proc)
{
	ev.ts = now_ts += 1000;
	if (!ev.tid)
		ev.tid = ev.pid;
	CHECK(nfed < MAXEV);
	fed[nfed++] = ev;
	CHECK_EQ(ht__ring_keep_sink()->event(k, &ev, proc), 0);
}

static void alloc(uint32_t process, int32_t pid, uint64_t heap, uint64_t addr, uint64_t size)
{
	feed((struct ht_event){.type = HT_EV_ALLOC,
			       .func = HT_FN_MALLOC,
			       .process = process,
			       .pid = pid,
			       .heap = heap,
			       .addr = addr,
			       .size = size,
			       .stack = 1},
	     NULL);
}

static void free_(uint32_t process, int32_t pid, uint64_t addr)
{
	feed((struct ht_event){.type = HT_EV_FREE,
			       .func = HT_FN_FREE,
			       .process = process,
			       .pid = pid,
			       .addr = addr},
	     NULL);
}

/* The blocks live after the first n fed events, by a model of our own. */
struct blk {
	uint32_t process;
	uint64_t heap, addr, size;
};
static struct blk live[64];
static unsigned nlive;

static void model_blocks(uint32_t n)
{
	nlive = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct ht_event *e = &fed[i];
		if (e->type == HT_EV_ALLOC) {
			CHECK(nlive < 64);
			live[nlive++] = (struct blk){e->process, e->heap, e->addr, e->size};
		} else if (e->type == HT_EV_FREE || e->type == HT_EV_PROCESS_EXIT) {
			for (unsigned j = 0; j < nlive; j++)
				if (live[j].process == e->process &&
				    (e->type == HT_EV_PROCESS_EXIT || live[j].addr == e->addr)) {
					live[j--] = live[--nlive];
					if (e->type == HT_EV_FREE)
						break;
				}
		}
	}
}

static void no_end(void *ctx, const struct ht__life *l)
{
	(void)ctx;
	(void)l;
}

/* Write the window to path and check it against the fed stream. */
static void check_window(struct ht__session *s, const char *path, uint64_t max_bytes)
{
	const struct ht__ring_keep_stats st = *ht__ring_keep_stats(k);
	CHECK(st.peak_bytes <= max_bytes);
	CHECK(st.bytes <= st.peak_bytes);
	CHECK_U64(st.events + st.dropped, nfed);
	CHECK(st.dropped > 0);
	uint32_t first = (uint32_t)st.dropped; /* index of the first kept event */
	CHECK_U64(st.window_start_ns, fed[first].ts);

	struct ht__output o;
	char why[512];
	CHECK_EQ(ht__output_open(&o, path, HT__OUT_FORCE, 0600, why, sizeof(why)), 0);
	const char *argv[] = {"test"};
	struct ht__trace_meta meta = {.argc = 1, .argv = argv, .ts_unit_ns = 1};
	struct ht__ring_keep_result res;
	CHECK_EQ(ht__ring_keep_write(k, s, &o, meta, &res), 0);
	CHECK_U64(res.events, st.events);
	CHECK_U64(res.dropped, st.dropped);

	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	const struct ht_trace_info *in = ht_reader_info(r);
	CHECK(in->flags & HT_TRACEF_WINDOW);
	CHECK(in->flags & HT_TRACEF_COMPLETE);
	CHECK_U64(in->window_start_ns, st.window_start_ns);
	CHECK_U64(in->window_dropped, st.dropped);
	CHECK_U64(in->ring_bytes, max_bytes);
	CHECK_U64(in->events_lost, 0);
	/* Only the image alive at the window's start: the child exited before. */
	CHECK_EQ(ht_reader_process_count(r), 1);
	const struct ht_process *p = ht_reader_process(r, 0);
	CHECK_EQ(p->pid, 100);
	CHECK_STR(p->exe, "/bin/prog");
	CHECK_EQ(p->argc, 2);
	CHECK_STR(p->argv[1], "--serve");

	model_blocks(first);
	struct ht__life_tracker *lt = ht__life_new(no_end, NULL);
	struct ht_event ev;
	uint32_t kept = 0, synth = 0, synth_allocs = 0, synth_maps = 0;
	bool in_prefix = true, thread_named = false, heap_named = false;
	while (ht_reader_next(r, &ev) > 0) {
		CHECK_EQ(ht__life_event(lt, &ev), 0);
		if (ev.flags & HT_EVF_SYNTHETIC) {
			CHECK(in_prefix);
			CHECK_U64(ev.ts, st.window_start_ns);
			CHECK_EQ(ev.process, 0);
			synth++;
			if (ev.type == HT_EV_ALLOC) {
				bool found = false;
				for (unsigned j = 0; j < nlive; j++)
					if (live[j].addr == ev.addr && live[j].heap == ev.heap &&
					    live[j].size == ev.size)
						found = true;
				CHECK(found);
				CHECK_EQ(ev.stack, 1);
				synth_allocs++;
			} else if (ev.type == HT_EV_MMAP) {
				CHECK_U64(ev.addr, 0x70000000);
				CHECK_U64(ev.size, 1 << 20);
				CHECK_EQ(ev.stack, 2);
				synth_maps++;
			} else if (ev.type == HT_EV_THREAD_START) {
				thread_named = ev.tid == 101 && !strcmp(ev.name, "worker");
			} else if (ev.type == HT_EV_HEAP_CREATE) {
				heap_named = ev.heap == 77 && !strcmp(ev.name, "pool");
			} else {
				CHECK_EQ(ev.type, HT_EV_PROCESS_START);
			}
			continue;
		}
		in_prefix = false;
		/* The kept events are exactly the newest ones, in order. */
		CHECK(first + kept < nfed);
		if (first + kept >= nfed)
			break;
		const struct ht_event *want = &fed[first + kept++];
		CHECK_EQ(ev.type, want->type);
		CHECK_U64(ev.ts, want->ts);
		CHECK_U64(ev.addr, want->addr);
		CHECK_U64(ev.size, want->size);
		CHECK_EQ(ev.process, 0);
	}
	CHECK_U64(kept, st.events);
	CHECK_EQ(synth_allocs, nlive);
	CHECK_EQ(synth_maps, 1);
	CHECK(thread_named);
	CHECK(heap_named);
	CHECK_U64(res.synthetic, synth);
	/* Every free in the window finds its block: none is of an unknown one. */
	CHECK_U64(ht__life_stats(lt)->unknown_frees, 0);
	ht__life_free(lt);
	ht_reader_close(r);
}

int main(void)
{
	char dir[] = "/tmp/ht-ringkeep-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	struct ht__session_config cfg = HT__SESSION_CONFIG_INIT;
	cfg.dir = dir;
	cfg.ring_count = 2;
	cfg.ring_size = 4096;
	struct ht__session *s;
	CHECK_EQ(ht__session_create(&s, &cfg), 0);
	const uint64_t max_bytes = 64 << 10;
	struct ht__ring_keep_config rc = {.max_bytes = max_bytes};
	CHECK_EQ(ht__ring_keep_new(&k, &rc), 0);
	struct ht__ring_keep_config bad = {.max_bytes = 1000};
	struct ht__ring_keep *k2;
	CHECK_EQ(ht__ring_keep_new(&k2, &bad), HT_ERR_INVALID);

	/* Before the window: the program, its worker thread, a custom heap, a
	   mapping, blocks A and B, and a child that comes and goes. */
	const char *pargv[] = {"prog", "--serve"};
	struct ht_process proc = {
	    .pid = 100, .parent = UINT32_MAX, .exe = "/bin/prog", .argc = 2, .argv = pargv};
	feed((struct ht_event){.type = HT_EV_PROCESS_START, .process = 0, .pid = 100}, &proc);
	feed(
	    (struct ht_event){
		.type = HT_EV_THREAD_START, .process = 0, .pid = 100, .tid = 101, .name = "worker"},
	    NULL);
	feed((struct ht_event){.type = HT_EV_HEAP_CREATE,
			       .func = HT_FN_HEAP_API,
			       .process = 0,
			       .pid = 100,
			       .heap = 77,
			       .name = "pool"},
	     NULL);
	feed((struct ht_event){.type = HT_EV_MMAP,
			       .func = HT_FN_MMAP,
			       .process = 0,
			       .pid = 100,
			       .addr = 0x70000000,
			       .size = 1 << 20,
			       .prot = PROT_READ | PROT_WRITE,
			       .mflags = MAP_PRIVATE | MAP_ANONYMOUS,
			       .fd = -1,
			       .stack = 2},
	     NULL);
	alloc(0, 100, 0, 0x1000, 1111);
	alloc(0, 100, 0, 0x2000, 2222);
	alloc(0, 100, 77, 0x9000, 99);
	struct ht_process child = {.pid = 200, .ppid = 100, .parent = 0, .exe = "/bin/prog"};
	feed((struct ht_event){.type = HT_EV_PROCESS_START, .process = 1, .pid = 200}, &child);
	alloc(1, 200, 0, 0x5000, 55);
	feed((struct ht_event){.type = HT_EV_PROCESS_EXIT, .process = 1, .pid = 200}, NULL);
	/* Churn that pushes all of that out of the window. */
	for (int i = 0; i < 5000; i++) {
		alloc(0, 100, 0, 0x3000 + (uint64_t)(i % 8) * 64, 48);
		free_(0, 100, 0x3000 + (uint64_t)(i % 8) * 64);
	}
	/* B is freed inside the window, C allocated in it. */
	free_(0, 100, 0x2000);
	alloc(0, 100, 0, 0x4000, 3333);

	char path[256];
	snprintf(path, sizeof(path), "%s/w1.htr", dir);
	check_window(s, path, max_bytes);

	/* A second flush, after more: the window moved on, the state with it
	   (B is gone from it now, C is part of it). */
	for (int i = 0; i < 3000; i++) {
		alloc(0, 100, 0, 0x3000 + (uint64_t)(i % 5) * 64 + 8, 40);
		free_(0, 100, 0x3000 + (uint64_t)(i % 5) * 64 + 8);
	}
	snprintf(path, sizeof(path), "%s/w2.htr", dir);
	check_window(s, path, max_bytes);
	model_blocks((uint32_t)ht__ring_keep_stats(k)->dropped);
	bool has_c = false, has_b = false;
	for (unsigned j = 0; j < nlive; j++) {
		has_c |= live[j].addr == 0x4000;
		has_b |= live[j].addr == 0x2000;
	}
	CHECK(has_c && !has_b);

	/* Memory stays bounded however much goes through. */
	for (int i = 0; i < 150000; i++) {
		alloc(0, 100, 0, 0x8000, 16);
		free_(0, 100, 0x8000);
		nfed -= 2; /* not modelled: only the accounting is checked below */
	}
	const struct ht__ring_keep_stats *st = ht__ring_keep_stats(k);
	CHECK(st->peak_bytes <= max_bytes);
	CHECK(st->bytes >= max_bytes - 2 * st->block_size);
	CHECK_U64(st->state_blocks, 4); /* A, C, the pool's block, none of the churn */
	CHECK_U64(st->state_ranges, 1);
	ht__ring_keep_free(k);

	/* --ring-time: blocks older than the limit go; the window covers it. */
	struct ht__ring_keep_config tc = {.max_bytes = 1 << 20, .max_ns = 500000};
	CHECK_EQ(ht__ring_keep_new(&k, &tc), 0);
	nfed = 0;
	feed((struct ht_event){.type = HT_EV_PROCESS_START, .process = 0, .pid = 100}, &proc);
	for (int i = 0; i < 20000; i++)
		alloc(0, 100, 0, 0x10000 + (uint64_t)i * 16, 8);
	st = ht__ring_keep_stats(k);
	uint64_t newest = fed[nfed - 1].ts;
	CHECK(st->dropped > 0);
	CHECK(st->window_start_ns <= newest - tc.max_ns);    /* covers T */
	CHECK(fed[st->dropped - 1].ts < newest - tc.max_ns); /* only older ones went */
	CHECK(st->bytes <= 3 * st->block_size);		     /* not the whole MiB */
	CHECK_U64(st->state_blocks, st->dropped - 1);
	ht__ring_keep_free(k);

	ht__session_destroy(s);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	CHECK_EQ(system(path), 0);
	CHECK_DONE();
}
