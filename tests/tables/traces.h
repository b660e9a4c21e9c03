/*
 * traces.h - small traces with known contents for the tables tests, built
 * with the trace writer: one heap trace (two heaps, two threads, blocks on
 * both sides of a window's edges) and one commit trace (partial munmap,
 * mremap growth, mprotect commit and decommit). The expected values in the
 * tests are worked out by hand from these events.
 */
#ifndef HT_TESTS_TABLES_TRACES_H
#define HT_TESTS_TABLES_TRACES_H

#include <stdint.h>
#include <string.h>

#include "format/writer.h"
#include "heaptrail/trace.h"

static const char *const tr_argv[] = {"/usr/bin/app"};

/* Module 0 is the program, 1 libc; frames 0 malloc, 1 leaky, 2 temp, 3 main, 4 other, 5 mmap. */
static inline int tr_begin(struct ht__writer **w, const char *path)
{
	struct ht__trace_meta meta = {0};
	meta.argc = 1;
	meta.argv = tr_argv;
	meta.hostname = "test";
	int rc = ht__writer_open(w, path, &meta);
	if (rc < 0)
		return rc;
	ht__writer_module(*w, 0, "/usr/bin/app", NULL, 0);
	ht__writer_module(*w, 1, "/lib/x86_64-linux-gnu/libc.so.6", NULL, 0);
	ht__writer_frame(*w, 0, 1, 0x100);
	ht__writer_frame(*w, 1, 0, 0x1000);
	ht__writer_frame(*w, 2, 0, 0x2000);
	ht__writer_frame(*w, 3, 0, 0x3000);
	ht__writer_frame(*w, 4, 0, 0x4000);
	ht__writer_frame(*w, 5, 1, 0x500);
	static const uint32_t s1[] = {0, 1, 3}, s2[] = {0, 2, 3}, s3[] = {0, 4, 3};
	static const uint32_t s4[] = {5, 3}, s5[] = {5, 2, 3}, s6[] = {5, 4, 3};
	ht__writer_stack(*w, 1, s1, 3);
	ht__writer_stack(*w, 2, s2, 3);
	ht__writer_stack(*w, 3, s3, 3);
	ht__writer_stack(*w, 4, s4, 2);
	ht__writer_stack(*w, 5, s5, 3);
	ht__writer_stack(*w, 6, s6, 3);
	struct ht_process proc = {.pid = 100,
				  .ppid = 1,
				  .parent = UINT32_MAX,
				  .flags = HT_PROCF_ROOT,
				  .exe = "/usr/bin/app",
				  .argc = 1,
				  .argv = tr_argv};
	struct ht_event ev = {.type = HT_EV_PROCESS_START, .pid = 100, .tid = 100};
	return ht__writer_event(*w, &ev, &proc);
}

static inline int tr_end(struct ht__writer *w, uint64_t duration)
{
	static const char *const names[] = {"malloc", "leaky", "temp", "main", "other", "mmap"};
	for (uint32_t f = 0; f < 6; f++) {
		struct ht__symbol sym = {names[f], NULL, 0};
		ht__writer_symbols(w, f, &sym, 1);
	}
	return ht__writer_finish(w, duration, 0, HT_TRACEF_SYMBOLS);
}

static inline void tr_ev(struct ht__writer *w, uint8_t type, uint64_t ts, uint64_t addr,
			 uint64_t size, uint32_t stack)
{
	struct ht_event ev = {.type = type,
			      .pid = 100,
			      .tid = 100,
			      .ts = ts,
			      .addr = addr,
			      .size = size,
			      .stack = stack};
	if (type == HT_EV_FREE)
		ev.func = HT_FN_FREE;
	else if (type == HT_EV_ALLOC)
		ev.func = HT_FN_MALLOC;
	ht__writer_event(w, &ev, NULL);
}

/*
 * The heap trace, duration 20000 ns. Against the window [4000, 10000):
 *   A 0x1000 100 B  stack leaky   1000 -> never  AOFO
 *   B 0x2000 1000 B stack temp    2000 -> 3000   outside
 *   G 0x3000 300 B  stack other   3500 -> 4000   AOFI (freed at T1)
 *   C 0x4000 40 B   stack leaky   5000 -> never  AIFO
 *   D 0x5000 500 B  stack other   6000 -> 9000   AIFI, thread 101
 *   F 0x6000 64 B   stack other   7000 -> never  AIFO, heap 0x5000
 *   E 0x7000 2000 B stack temp    8000 -> 12000  AIFO
 *   H 0x8000 7 B    stack leaky  10000 -> never  outside (allocated at T2)
 * RSS samples: 4096 at 1500, 8192 at 11000; the process exits at 19000.
 */
static inline int tr_heap(const char *path)
{
	struct ht__writer *w;
	int rc = tr_begin(&w, path);
	if (rc < 0)
		return rc;
	tr_ev(w, HT_EV_ALLOC, 1000, 0x1000, 100, 1);
	tr_ev(w, HT_EV_RSS, 1500, 0, 4096, 0);
	tr_ev(w, HT_EV_ALLOC, 2000, 0x2000, 1000, 2);
	tr_ev(w, HT_EV_FREE, 3000, 0x2000, 0, 0);
	tr_ev(w, HT_EV_ALLOC, 3500, 0x3000, 300, 3);
	tr_ev(w, HT_EV_FREE, 4000, 0x3000, 0, 0);
	tr_ev(w, HT_EV_ALLOC, 5000, 0x4000, 40, 1);
	struct ht_event d = {.type = HT_EV_ALLOC,
			     .func = HT_FN_MALLOC,
			     .pid = 100,
			     .tid = 101,
			     .ts = 6000,
			     .addr = 0x5000,
			     .size = 500,
			     .stack = 3};
	ht__writer_event(w, &d, NULL);
	struct ht_event f = {.type = HT_EV_ALLOC,
			     .func = HT_FN_HEAP_API,
			     .pid = 100,
			     .tid = 100,
			     .ts = 7000,
			     .heap = 0x5000,
			     .addr = 0x6000,
			     .size = 64,
			     .stack = 3};
	ht__writer_event(w, &f, NULL);
	tr_ev(w, HT_EV_ALLOC, 8000, 0x7000, 2000, 2);
	d.type = HT_EV_FREE;
	d.func = HT_FN_FREE;
	d.ts = 9000;
	d.size = 0;
	d.stack = 0;
	ht__writer_event(w, &d, NULL);
	tr_ev(w, HT_EV_ALLOC, 10000, 0x8000, 7, 1);
	tr_ev(w, HT_EV_RSS, 11000, 0, 8192, 0);
	tr_ev(w, HT_EV_FREE, 12000, 0x7000, 0, 0);
	tr_ev(w, HT_EV_PROCESS_EXIT, 19000, 0, 0, 0);
	return tr_end(w, 20000);
}

/* The start of the heap trace without a footer (a recording that did not finish): flushed, then
 * abandoned. */
static inline int tr_unfinished(const char *path)
{
	struct ht__writer *w;
	int rc = tr_begin(&w, path);
	if (rc < 0)
		return rc;
	tr_ev(w, HT_EV_ALLOC, 1000, 0x1000, 100, 1);
	tr_ev(w, HT_EV_ALLOC, 2000, 0x2000, 1000, 2);
	tr_ev(w, HT_EV_FREE, 3000, 0x2000, 0, 0);
	rc = ht__writer_flush(w);
	ht__writer_abort(w);
	return rc;
}

static inline void tr_map(struct ht__writer *w, uint8_t type, uint64_t ts, uint64_t addr,
			  uint64_t size, uint32_t prot, uint32_t stack)
{
	struct ht_event ev = {.type = type,
			      .pid = 100,
			      .tid = 100,
			      .ts = ts,
			      .addr = addr,
			      .size = size,
			      .prot = prot,
			      .stack = stack,
			      .fd = -1};
	ev.func = type == HT_EV_MMAP	 ? HT_FN_MMAP
		  : type == HT_EV_MUNMAP ? HT_FN_MUNMAP
					 : HT_FN_MPROTECT;
	if (type == HT_EV_MMAP)
		ev.mflags = 0x22; /* MAP_PRIVATE | MAP_ANONYMOUS */
	ht__writer_event(w, &ev, NULL);
}

/*
 * The commit trace, duration 20000 ns:
 *   1000  mmap 1 MB RW at 0x10000000 (main)           commits
 *   2000  mmap 64 KB PROT_NONE at 0x20000000          reserves
 *   3000  mprotect 16 KB of it RW (temp)              commits 16 KB
 *   5000  munmap 4 KB at 0x10080000                   decommits the middle page
 *   7000  mremap 0x10081000 + 0x7f000 -> 0x30000000 + 0xff000 (other): moves, grows 0x80000
 *   9000  munmap 0x30000000 + 0xff000                 decommits the moved and grown parts
 *   9500  mprotect 0x20000000 + 16 KB PROT_NONE       decommits 16 KB
 *   0x10000000 + 0x80000 stays committed until the process exits at 19000.
 */
static inline int tr_commit(const char *path)
{
	struct ht__writer *w;
	int rc = tr_begin(&w, path);
	if (rc < 0)
		return rc;
	tr_map(w, HT_EV_MMAP, 1000, 0x10000000, 0x100000, 3, 4);
	tr_map(w, HT_EV_MMAP, 2000, 0x20000000, 0x10000, 0, 4);
	tr_map(w, HT_EV_MPROTECT, 3000, 0x20000000, 0x4000, 3, 5);
	tr_map(w, HT_EV_MUNMAP, 5000, 0x10080000, 0x1000, 0, 0);
	struct ht_event ev = {.type = HT_EV_MREMAP,
			      .func = HT_FN_MREMAP,
			      .pid = 100,
			      .tid = 100,
			      .ts = 7000,
			      .old_addr = 0x10081000,
			      .old_size = 0x7f000,
			      .addr = 0x30000000,
			      .size = 0xff000,
			      .mflags = 1,
			      .stack = 6,
			      .fd = -1};
	ht__writer_event(w, &ev, NULL);
	tr_map(w, HT_EV_MUNMAP, 9000, 0x30000000, 0xff000, 0, 0);
	tr_map(w, HT_EV_MPROTECT, 9500, 0x20000000, 0x4000, 0, 0);
	tr_ev(w, HT_EV_PROCESS_EXIT, 19000, 0, 0, 0);
	return tr_end(w, 20000);
}

/* An event of process image index process (pid), thread pid. */
static inline void tr_pev(struct ht__writer *w, uint8_t type, uint32_t process, int32_t pid,
			  uint64_t ts, uint64_t addr, uint64_t size, uint32_t stack)
{
	struct ht_event ev = {.type = type,
			      .process = process,
			      .pid = pid,
			      .tid = pid,
			      .ts = ts,
			      .addr = addr,
			      .size = size,
			      .stack = stack,
			      .fd = -1};
	if (type == HT_EV_ALLOC)
		ev.func = HT_FN_MALLOC;
	else if (type == HT_EV_FREE)
		ev.func = HT_FN_FREE;
	else if (type == HT_EV_MMAP) {
		ev.func = HT_FN_MMAP;
		ev.prot = 3;	  /* PROT_READ | PROT_WRITE */
		ev.mflags = 0x22; /* MAP_PRIVATE | MAP_ANONYMOUS */
	}
	struct ht_process proc = {.ppid = 100,
				  .parent = 0,
				  .flags = type == HT_EV_PROCESS_START ? HT_PROCF_FORK : 0,
				  .exe = "/usr/bin/app",
				  .argc = 1,
				  .argv = tr_argv};
	ht__writer_event(w, &ev, &proc);
}

/*
 * Two processes, one ending before the other, duration 20000 ns:
 *      0  pid 100 starts (image 0)
 *    500  pid 101 starts, forked (image 1)
 *   1000  image 0 allocates 0x1000 100 B (leaky)        live when image 0 execs at 6000
 *   1500  image 1 allocates 0x2000 200 B (temp)         live when image 1 exits at 5000
 *   2000  image 1 maps 0x10000000 1 MB RW (mmap)        committed when image 1 exits
 *   2500  image 0 allocates 0x3000 50 B (other), freed at 3000
 *   5000  image 1 exits
 *   6000  pid 100 execs (image 2)
 *   7000  image 2 allocates 0x4000 10 B (leaky)         live at the end of the trace
 */
static inline int tr_two(const char *path)
{
	struct ht__writer *w;
	int rc = tr_begin(&w, path);
	if (rc < 0)
		return rc;
	tr_pev(w, HT_EV_PROCESS_START, 1, 101, 500, 0, 0, 0);
	tr_pev(w, HT_EV_ALLOC, 0, 100, 1000, 0x1000, 100, 1);
	tr_pev(w, HT_EV_ALLOC, 1, 101, 1500, 0x2000, 200, 2);
	tr_pev(w, HT_EV_MMAP, 1, 101, 2000, 0x10000000, 0x100000, 4);
	tr_pev(w, HT_EV_ALLOC, 0, 100, 2500, 0x3000, 50, 3);
	tr_pev(w, HT_EV_FREE, 0, 100, 3000, 0x3000, 0, 0);
	tr_pev(w, HT_EV_PROCESS_EXIT, 1, 101, 5000, 0, 0, 0);
	tr_pev(w, HT_EV_PROCESS_EXEC, 2, 100, 6000, 0, 0, 0);
	tr_pev(w, HT_EV_ALLOC, 2, 100, 7000, 0x4000, 10, 1);
	return tr_end(w, 20000);
}

#endif
