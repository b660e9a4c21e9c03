/*
 * mktrace.c - writes small traces with known contents for the golden tests of
 * 'heaptrail info' and 'heaptrail dump' (golden.sh):
 *   mktrace demo FILE      a finished trace: two processes, heap, mappings,
 *                          threads, symbols with an inline frame, 5 lost events
 *   mktrace partial FILE   the same events without finish (no footer)
 * golden/README.md lists the numbers info must derive from it.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "format/writer.h"

static struct ht__writer *w;
static int failed;

static void put(struct ht_event e, const struct ht_process *p)
{
	if (ht__writer_event(w, &e, p) < 0)
		failed = 1;
}

static struct ht_event ev(uint8_t type, uint64_t ts, uint32_t process, int32_t pid, int32_t tid)
{
	struct ht_event e = {.type = type, .ts = ts, .process = process, .pid = pid, .tid = tid};
	switch (type) {
	case HT_EV_ALLOC:
		e.func = HT_FN_MALLOC;
		break;
	case HT_EV_REALLOC:
		e.func = HT_FN_REALLOC;
		break;
	case HT_EV_FREE:
		e.func = HT_FN_FREE;
		break;
	case HT_EV_MMAP:
		e.func = HT_FN_MMAP;
		break;
	case HT_EV_MUNMAP:
		e.func = HT_FN_MUNMAP;
		break;
	case HT_EV_MPROTECT:
		e.func = HT_FN_MPROTECT;
		break;
	}
	return e;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "demo") && strcmp(argv[1], "partial"))) {
		fprintf(stderr, "usage: mktrace demo|partial FILE\n");
		return 2;
	}
	int finish = !strcmp(argv[1], "demo");
	static const char *const cmd[] = {"demo", "--run", "two words"};
	static const char *const child_argv[] = {"demo", "--child"};
	struct ht__trace_meta meta = {
	    .start_realtime_ns = 1700000000000000000ull, /* 2023-11-14 22:13:20 UTC */
	    .stack_mask = 0xf,
	    .argc = 3,
	    .argv = cmd,
	    .hostname = "buildhost",
	};
	int rc = ht__writer_open(&w, argv[2], &meta);
	if (rc < 0) {
		fprintf(stderr, "mktrace: cannot create '%s': %s\n", argv[2], ht_strerror(rc));
		return 1;
	}
	static const uint8_t bid[] = {0x12, 0x34, 0xab};
	ht__writer_module(w, 0, "/usr/bin/demo", bid, sizeof(bid));
	ht__writer_module(w, 1, "/lib/x86_64-linux-gnu/libc.so.6", NULL, 0);
	ht__writer_frame(w, 0, 1, 0x2a0f0); /* malloc */
	ht__writer_frame(w, 1, 0, 0x1150);  /* helper inlined into main */
	ht__writer_frame(w, 2, 0, 0x1200);  /* main, no symbols */
	ht__writer_frame(w, 3, HT_MODULE_NONE, 0x7ffff7fc1000ull);
	uint32_t s1[] = {0, 1, 2}, s2[] = {0, 2, 3};
	ht__writer_stack(w, 1, s1, 3);
	ht__writer_stack(w, 2, s2, 3);

	struct ht_process root = {.ppid = 1,
				  .parent = UINT32_MAX,
				  .flags = HT_PROCF_ROOT,
				  .exe = "/usr/bin/demo",
				  .argc = 3,
				  .argv = cmd};
	struct ht_process child = {.ppid = 100,
				   .parent = 0,
				   .flags = HT_PROCF_FORK,
				   .exe = "/usr/bin/demo",
				   .argc = 2,
				   .argv = child_argv};
	struct ht_event e;
	put(ev(HT_EV_PROCESS_START, 0, 0, 100, 100), &root);
	e = ev(HT_EV_MODULE_LOAD, 10, 0, 100, 100);
	e.module = 0;
	e.addr = 0x555555554000ull;
	e.size = 0x5000;
	e.old_addr = 0x555555554000ull;
	put(e, NULL);
	e = ev(HT_EV_ALLOC, 100, 0, 100, 100);
	e.addr = 0x1000, e.size = 100, e.stack = 1;
	put(e, NULL);
	e = ev(HT_EV_ALLOC, 200, 0, 100, 100);
	e.func = HT_FN_CALLOC, e.addr = 0x2000, e.size = 400, e.stack = 2;
	put(e, NULL);
	e = ev(HT_EV_REALLOC, 300, 0, 100, 100);
	e.old_addr = 0x1000, e.addr = 0x3000, e.size = 1000, e.stack = 1;
	put(e, NULL);
	e = ev(HT_EV_FREE, 400, 0, 100, 100);
	e.addr = 0x2000;
	put(e, NULL);
	e = ev(HT_EV_ALLOC, 500, 0, 100, 100);
	e.addr = 0x4000, e.size = 50;
	put(e, NULL);
	e = ev(HT_EV_FREE, 600, 0, 100, 100);
	e.addr = 0x9999;
	put(e, NULL);
	e = ev(HT_EV_REALLOC, 700, 0, 100, 100);
	e.flags = HT_EVF_FAILED, e.old_addr = 0x3000, e.size = 1ull << 40;
	put(e, NULL);
	e = ev(HT_EV_MMAP, 800, 0, 100, 100);
	e.addr = 0x7f0000000000ull, e.size = 2 << 20, e.prot = PROT_READ | PROT_WRITE;
	e.mflags = MAP_PRIVATE | MAP_ANONYMOUS, e.fd = -1, e.stack = 2;
	put(e, NULL);
	e = ev(HT_EV_MUNMAP, 900, 0, 100, 100);
	e.addr = 0x7f0000100000ull, e.size = 1 << 20;
	put(e, NULL);
	e = ev(HT_EV_MMAP, 1000, 0, 100, 100);
	e.addr = 0x7f1000000000ull, e.size = 1 << 20, e.prot = PROT_NONE;
	e.mflags = MAP_PRIVATE | MAP_ANONYMOUS, e.fd = -1;
	put(e, NULL);
	e = ev(HT_EV_MPROTECT, 1100, 0, 100, 100);
	e.addr = 0x7f1000000000ull, e.size = 64 << 10, e.prot = PROT_READ | PROT_WRITE;
	put(e, NULL);
	e = ev(HT_EV_THREAD_START, 1200, 0, 100, 102);
	e.name = "worker \"1\"";
	put(e, NULL);
	e = ev(HT_EV_ALLOC, 1300, 0, 100, 102);
	e.addr = 0x5000, e.size = 2000, e.stack = 1;
	put(e, NULL);
	put(ev(HT_EV_PROCESS_START, 1400, 1, 101, 101), &child);
	e = ev(HT_EV_ALLOC, 1500, 1, 101, 101);
	e.addr = 0x1000, e.size = 10, e.stack = 2;
	put(e, NULL);
	e = ev(HT_EV_PROCESS_EXIT, 1600, 1, 101, 101);
	e.value = 3;
	put(e, NULL);
	e = ev(HT_EV_FREE, 1700, 0, 100, 102);
	e.addr = 0x5000;
	put(e, NULL);
	put(ev(HT_EV_THREAD_EXIT, 1800, 0, 100, 102), NULL);
	e = ev(HT_EV_RSS, 1900, 0, 100, 0);
	e.size = 4 << 20;
	put(e, NULL);
	put(ev(HT_EV_PROCESS_EXIT, 2000, 0, 100, 100), NULL);
	if (!finish) {
		ht__writer_abort(w);
		return failed;
	}
	struct ht__symbol malloc_sym[] = {{"malloc", NULL, 0}};
	struct ht__symbol f1[] = {{"helper(int)", "/src/demo.c", 7}, {"main", "/src/demo.c", 21}};
	ht__writer_symbols(w, 0, malloc_sym, 1);
	ht__writer_symbols(w, 1, f1, 2);
	if (ht__writer_finish(w, 2100, 5, 0) < 0)
		failed = 1;
	return failed;
}
