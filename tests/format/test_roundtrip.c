/*
 * test_roundtrip.c - writes traces with the writer and reads them back with
 * the reader: every event type and field, the tables (modules, logical frames
 * from inline symbols, stacks, processes, meta), many chunks, an unfinished
 * trace read from its inline definitions, and the file's creation rules.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include <zstd.h>

#include "format/codec.h"
#include "format/writer.h"
#include "heaptrail/trace.h"
#include "testutil.h"

#define NEV 64
static struct ht_event evs[NEV];
static int nev;

static struct ht_event *ev_add(uint8_t type, uint32_t process, int32_t pid, int32_t tid,
			       uint64_t ts)
{
	struct ht_event *e = &evs[nev++];
	memset(e, 0, sizeof(*e));
	e->type = type;
	e->process = process;
	e->pid = pid;
	e->tid = tid;
	e->ts = ts;
	switch (type) {
	case HT_EV_ALLOC:
	case HT_EV_ALLOC_FAIL:
		e->func = HT_FN_MALLOC;
		break;
	case HT_EV_REALLOC:
		e->func = HT_FN_REALLOC;
		break;
	case HT_EV_FREE:
		e->func = HT_FN_FREE;
		break;
	case HT_EV_MMAP:
		e->func = HT_FN_MMAP;
		break;
	case HT_EV_MUNMAP:
		e->func = HT_FN_MUNMAP;
		break;
	case HT_EV_MREMAP:
		e->func = HT_FN_MREMAP;
		break;
	case HT_EV_MPROTECT:
		e->func = HT_FN_MPROTECT;
		break;
	case HT_EV_BRK:
		e->func = HT_FN_BRK;
		break;
	}
	return e;
}

static const char *const root_argv[] = {"./app", "-x", "arg with space"};
static const char *const child_argv[] = {"/bin/true", "--version"};

/* Builds the events of the main test trace into evs[]. */
static void build_events(void)
{
	struct ht_event *e;
	nev = 0;
	ev_add(HT_EV_PROCESS_START, 0, 100, 100, 0);
	e = ev_add(HT_EV_THREAD_START, 0, 100, 100, 5);
	e->name = "main";
	e = ev_add(HT_EV_MODULE_LOAD, 0, 100, 100, 10);
	e->module = 1;
	e->addr = 0x7f0000000000ull;
	e->size = 0x200000;
	e->old_addr = 0x7f0000000000ull;
	e = ev_add(HT_EV_ALLOC, 0, 100, 100, 1000);
	e->addr = 0x5555aaaa0010ull;
	e->size = 100;
	e->stack = 1;
	e = ev_add(HT_EV_ALLOC, 0, 100, 100, 1001);
	e->func = HT_FN_CALLOC;
	e->addr = 0x5555aaaa0080ull;
	e->size = 400;
	e->stack = 2;
	e = ev_add(HT_EV_ALLOC_FAIL, 0, 100, 100, 1002);
	e->size = 1ull << 40;
	e = ev_add(HT_EV_REALLOC, 0, 100, 100, 2000);
	e->old_addr = 0x5555aaaa0010ull;
	e->addr = 0x5555aaab0000ull;
	e->size = 5000;
	e->stack = 1;
	e = ev_add(HT_EV_REALLOC, 0, 100, 100, 2001);
	e->flags = HT_EVF_FAILED;
	e->old_addr = 0x5555aaab0000ull;
	e->size = 1ull << 50;
	e = ev_add(HT_EV_FREE, 0, 100, 100, 2002);
	e->addr = 0x5555aaaa0080ull;
	e = ev_add(HT_EV_MMAP, 0, 100, 102, 3000); /* another thread */
	e->addr = 0x7f1234560000ull;
	e->size = 1 << 20;
	e->prot = 3;
	e->mflags = 0x22;
	e->fd = -1;
	e->stack = 2;
	e = ev_add(HT_EV_MMAP, 0, 100, 102, 3001);
	e->flags = HT_EVF_FAILED;
	e->size = 1ull << 46;
	e->prot = 3;
	e->mflags = 0x22;
	e->fd = -1;
	e = ev_add(HT_EV_MUNMAP, 0, 100, 100, 3002);
	e->addr = 0x7f1234560000ull;
	e->size = 4096;
	e = ev_add(HT_EV_MREMAP, 0, 100, 102, 3003);
	e->old_addr = 0x7f1234561000ull;
	e->old_size = 0x1000;
	e->addr = 0x7f2000000000ull;
	e->size = 0x10000;
	e->mflags = 1;
	e = ev_add(HT_EV_MPROTECT, 0, 100, 102, 3004);
	e->addr = 0x7f2000000000ull;
	e->size = 0x1000;
	e = ev_add(HT_EV_BRK, 0, 100, 100, 3005);
	e->func = HT_FN_SBRK;
	e->old_addr = 0x555555560000ull;
	e->addr = 0x555555581000ull;
	e = ev_add(HT_EV_HEAP_CREATE, 0, 100, 100, 4000);
	e->func = HT_FN_HEAP_API;
	e->heap = 0x1000;
	e->name = "pool";
	e = ev_add(HT_EV_ALLOC, 0, 100, 100, 4001);
	e->func = HT_FN_HEAP_API;
	e->heap = 0x1000;
	e->addr = 0x600000;
	e->size = 32;
	e = ev_add(HT_EV_HEAP_DESTROY, 0, 100, 100, 4002);
	e->func = HT_FN_HEAP_API;
	e->heap = 0x1000;
	ev_add(HT_EV_PROCESS_START, 1, 101, 101, 5000);
	e = ev_add(HT_EV_ALLOC, 1, 101, 101, 5001);
	e->addr = 0x5555aaaa0010ull; /* same address, other process */
	e->size = 7;
	ev_add(HT_EV_PROCESS_EXEC, 2, 101, 101, 6000);
	e = ev_add(HT_EV_THREAD_NAME, 0, 100, 102, 6001);
	e->name = "worker-with-a-long-name";
	ev_add(HT_EV_THREAD_EXIT, 0, 100, 102, 6002);
	e = ev_add(HT_EV_MODULE_UNLOAD, 0, 100, 100, 6003);
	e->module = 1;
	e = ev_add(HT_EV_RSS, 0, 100, 0, 6004);
	e->size = 123456789;
	e = ev_add(HT_EV_PROCESS_EXIT, 2, 101, 101, 7000);
	e->value = 3;
	e = ev_add(HT_EV_PROCESS_EXIT, 0, 100, 100, 8000);
	e->flags = HT_EVF_SIGNAL;
	e->value = 9;
}

static const struct ht_process *proc_for(int i)
{
	static struct ht_process root, child, exec;
	root = (struct ht_process){.pid = 100,
				   .ppid = 1,
				   .parent = UINT32_MAX,
				   .flags = HT_PROCF_ROOT,
				   .exe = "/home/u/app",
				   .argc = 3,
				   .argv = root_argv};
	child = (struct ht_process){.pid = 101,
				    .ppid = 100,
				    .parent = 0,
				    .flags = HT_PROCF_FORK,
				    .exe = "/home/u/app",
				    .argc = 3,
				    .argv = root_argv};
	exec = (struct ht_process){.pid = 101,
				   .ppid = 100,
				   .parent = 0,
				   .flags = HT_PROCF_EXEC,
				   .exe = "/bin/true",
				   .argc = 2,
				   .argv = child_argv};
	if (evs[i].type == HT_EV_PROCESS_START)
		return evs[i].process == 0 ? &root : &child;
	if (evs[i].type == HT_EV_PROCESS_EXEC)
		return &exec;
	return NULL;
}

static const uint8_t bid[] = {0xde, 0xad, 0xbe, 0xef, 0x01};

/* Writes the definitions and events; finish or not. */
static void write_trace(const char *path, int finish)
{
	struct ht__trace_meta meta = {
	    .start_realtime_ns = 1700000000123456789ull,
	    .stack_mask = 0x1b,
	    .flags = HT_TRACEF_ATTACHED,
	    .argc = 3,
	    .argv = root_argv,
	    .hostname = "testhost",
	};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	CHECK_EQ(ht__writer_module(w, 0, "/home/u/app", bid, sizeof(bid)), 0);
	CHECK_EQ(ht__writer_module(w, 1, "/usr/lib/libc.so.6", NULL, 0), 0);
	CHECK_EQ(ht__writer_frame(w, 0, 0, 0x1234), 0);
	CHECK_EQ(ht__writer_frame(w, 1, 0, 0x5678), 0);
	CHECK_EQ(ht__writer_frame(w, 2, 1, 0x9abc), 0);
	CHECK_EQ(ht__writer_frame(w, 3, HT_MODULE_NONE, 0x7fff0000ull), 0);
	uint32_t s1[] = {0, 2}, s2[] = {1, 0, 3};
	CHECK_EQ(ht__writer_stack(w, 1, s1, 2), 0);
	CHECK_EQ(ht__writer_stack(w, 2, s2, 3), 0);
	for (int i = 0; i < nev; i++)
		CHECK_EQ(ht__writer_event(w, &evs[i], proc_for(i)), 0);
	if (!finish) {
		ht__writer_abort(w);
		return;
	}
	struct ht__symbol f0[] = {{"inner", "a.c", 10}, {"outer(int)", "a.c", 20}};
	struct ht__symbol f2[] = {{"malloc", NULL, 0}};
	CHECK_EQ(ht__writer_symbols(w, 0, f0, 2), 0);
	CHECK_EQ(ht__writer_symbols(w, 2, f2, 1), 0);
	ht__writer_set_losses(w, 10, 5, 2);
	CHECK_EQ(ht__writer_finish(w, 9000, 17, 0), 0);
}

static void check_events(struct ht_reader *r)
{
	struct ht_event ev;
	int i = 0, rc;
	while ((rc = ht_reader_next(r, &ev)) > 0) {
		if (i >= nev) {
			i++;
			continue;
		}
		const struct ht_event *x = &evs[i];
		CHECK_EQ(ev.type, x->type);
		CHECK_EQ(ev.func, x->func);
		CHECK_EQ(ev.flags, x->flags);
		CHECK_EQ(ev.process, x->process);
		CHECK_EQ(ev.pid, x->pid);
		CHECK_EQ(ev.tid, x->tid);
		CHECK_EQ(ev.ts, x->ts);
		CHECK_EQ(ev.stack, x->stack);
		CHECK_EQ(ev.module, x->module);
		CHECK_EQ(ev.heap, x->heap);
		CHECK_EQ(ev.addr, x->addr);
		CHECK_EQ(ev.size, x->size);
		CHECK_EQ(ev.old_addr, x->old_addr);
		CHECK_EQ(ev.old_size, x->old_size);
		CHECK_EQ(ev.prot, x->prot);
		CHECK_EQ(ev.mflags, x->mflags);
		CHECK_EQ(ev.fd, x->fd);
		CHECK_EQ(ev.value, x->value);
		if (x->name)
			CHECK_STR(ev.name, x->name);
		else
			CHECK(ev.name == NULL);
		if (check_failures) {
			fprintf(stderr, "  at event %d (%s)\n", i, ht_event_name(x->type));
			break;
		}
		i++;
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(i, nev);
}

static void check_processes(struct ht_reader *r, uint64_t end)
{
	CHECK_EQ(ht_reader_process_count(r), 3);
	const struct ht_process *p = ht_reader_process(r, 0);
	CHECK_EQ(p->pid, 100);
	CHECK_EQ(p->ppid, 1);
	CHECK_EQ(p->parent, UINT32_MAX);
	CHECK_EQ(p->flags, HT_PROCF_ROOT | HT_PROCF_SIGNALED);
	CHECK_EQ(p->signal, 9);
	CHECK_EQ(p->start_ts, 0);
	CHECK_EQ(p->end_ts, 8000);
	CHECK_STR(p->exe, "/home/u/app");
	CHECK_EQ(p->argc, 3);
	CHECK_STR(p->argv[2], "arg with space");
	CHECK(p->argv[3] == NULL);
	p = ht_reader_process(r, 1);
	CHECK_EQ(p->pid, 101);
	CHECK_EQ(p->parent, 0);
	CHECK_EQ(p->flags, HT_PROCF_FORK | HT_PROCF_EXECED);
	CHECK_EQ(p->start_ts, 5000);
	CHECK_EQ(p->end_ts, 6000);
	p = ht_reader_process(r, 2);
	CHECK_EQ(p->pid, 101);
	CHECK_EQ(p->flags, HT_PROCF_EXEC | HT_PROCF_EXITED);
	CHECK_EQ(p->exit_code, 3);
	CHECK_EQ(p->start_ts, 6000);
	CHECK_EQ(p->end_ts, 7000);
	CHECK_STR(p->exe, "/bin/true");
	CHECK_EQ(p->argc, 2);
	CHECK_STR(p->argv[1], "--version");
	CHECK(ht_reader_process(r, 3) == NULL);
	(void)end;
}

static void test_finished(void)
{
	char path[300];
	test_path(path, sizeof(path), "full.htr");
	build_events();
	write_trace(path, 1);

	struct stat st;
	CHECK_EQ(stat(path, &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0600);

	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	CHECK(ht_reader_warning(r) == NULL);
	const struct ht_trace_info *in = ht_reader_info(r);
	CHECK_EQ(in->version, HT__FILE_VERSION);
	CHECK_EQ(in->start_realtime_ns, 1700000000123456789ull);
	CHECK_EQ(in->duration_ns, 9000);
	CHECK_EQ(in->events_lost, 17);
	CHECK_EQ(in->lost_lossy, 10);
	CHECK_EQ(in->lost_no_buffer, 5);
	CHECK_EQ(in->lost_in_handler, 2);
	CHECK_EQ(in->stack_mask, 0x1b);
	CHECK_EQ(in->flags,
		 HT_TRACEF_COMPLETE | HT_TRACEF_SYMBOLS | HT_TRACEF_LOSSY | HT_TRACEF_ATTACHED);
	CHECK_EQ(in->argc, 3);
	CHECK_STR(in->argv[0], "./app");
	CHECK_STR(in->argv[2], "arg with space");
	CHECK(in->argv[3] == NULL);
	CHECK_STR(in->hostname, "testhost");

	CHECK_EQ(ht_reader_module_count(r), 2);
	CHECK_STR(ht_reader_module(r, 0)->path, "/home/u/app");
	CHECK_STR(ht_reader_module(r, 0)->name, "app");
	CHECK_STR(ht_reader_module(r, 0)->build_id, "deadbeef01");
	CHECK_STR(ht_reader_module(r, 1)->name, "libc.so.6");
	CHECK_STR(ht_reader_module(r, 1)->build_id, "");

	/* Physical 0 has two symbols (inline first), 2 has one, 1 and 3 none. */
	CHECK_EQ(ht_reader_frame_count(r), 5);
	const struct ht_frame *f = ht_reader_frame(r, 0);
	CHECK_STR(f->function, "inner");
	CHECK_STR(f->file, "a.c");
	CHECK_EQ(f->line, 10);
	CHECK_EQ(f->inlined, 1);
	CHECK_EQ(f->module, 0);
	CHECK_EQ(f->rel, 0x1234);
	f = ht_reader_frame(r, 1);
	CHECK_STR(f->function, "outer(int)");
	CHECK_EQ(f->line, 20);
	CHECK_EQ(f->inlined, 0);
	CHECK_EQ(f->rel, 0x1234);
	f = ht_reader_frame(r, 2);
	CHECK(f->function == NULL && f->file == NULL);
	CHECK_EQ(f->rel, 0x5678);
	f = ht_reader_frame(r, 3);
	CHECK_STR(f->function, "malloc");
	CHECK(f->file == NULL);
	CHECK_EQ(f->module, 1);
	f = ht_reader_frame(r, 4);
	CHECK_EQ(f->module, HT_MODULE_NONE);
	CHECK_EQ(f->rel, 0x7fff0000ull);

	CHECK_EQ(ht_reader_stack_count(r), 3);
	const uint32_t *fr;
	CHECK_EQ(ht_reader_stack(r, 1, &fr), 3);
	CHECK_EQ(fr[0], 0);
	CHECK_EQ(fr[1], 1);
	CHECK_EQ(fr[2], 3);
	CHECK_EQ(ht_reader_stack(r, 2, &fr), 4);
	CHECK_EQ(fr[0], 2);
	CHECK_EQ(fr[1], 0);
	CHECK_EQ(fr[2], 1);
	CHECK_EQ(fr[3], 4);
	CHECK_EQ(ht_reader_stack(r, 0, &fr), 0);
	CHECK_EQ(ht_reader_stack(r, 99, &fr), 0);

	check_processes(r, 9000);
	check_events(r);
	/* A second pass gives the same events and leaves the tables alone. */
	CHECK_EQ(ht_reader_rewind(r), 0);
	check_events(r);
	check_processes(r, 9000);
	CHECK(ht_reader_warning(r) == NULL);
	ht_reader_close(r);

	/* The writer never overwrites. */
	struct ht__trace_meta meta = {0};
	struct ht__writer *w = (void *)1;
	CHECK_EQ(ht__writer_open(&w, path, &meta), HT_ERR_EXISTS);
	CHECK(w == NULL);
}

static void test_unfinished(void)
{
	char path[300];
	test_path(path, sizeof(path), "partial.htr");
	build_events();
	write_trace(path, 0);

	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	CHECK(ht_reader_warning(r) != NULL);
	const struct ht_trace_info *in = ht_reader_info(r);
	CHECK_EQ(in->flags, HT_TRACEF_TRUNCATED | HT_TRACEF_ATTACHED);
	CHECK_EQ(in->argc, 3);
	CHECK_STR(in->argv[1], "-x");
	CHECK_STR(in->hostname, "testhost");
	CHECK_EQ(in->start_realtime_ns, 1700000000123456789ull);
	/* The tables fill in while events are read. */
	check_events(r);
	CHECK_EQ(in->duration_ns, 8000);
	check_processes(r, 8000);
	CHECK_EQ(ht_reader_module_count(r), 2);
	CHECK_STR(ht_reader_module(r, 0)->build_id, "deadbeef01");
	CHECK_EQ(ht_reader_frame_count(r), 4);
	CHECK(ht_reader_frame(r, 0)->function == NULL);
	CHECK_EQ(ht_reader_frame(r, 3)->rel, 0x7fff0000ull);
	const uint32_t *fr;
	CHECK_EQ(ht_reader_stack(r, 2, &fr), 3);
	CHECK_EQ(fr[0], 1);
	CHECK_EQ(fr[2], 3);
	CHECK_EQ(ht_reader_rewind(r), 0);
	check_events(r);
	check_processes(r, 8000);
	ht_reader_close(r);
}

/* Deterministic pseudo-random numbers for the many-chunk test. */
static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void test_many_chunks(void)
{
	char path[300];
	test_path(path, sizeof(path), "many.htr");
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	const int n = 400000;
	uint32_t frames[3];
	uint64_t ts = 0;
	rng = 88172645463325252ull;
	for (int i = 0; i < n; i++) {
		if (i % 1000 == 0) { /* definitions keep coming between events */
			uint32_t id = (uint32_t)(i / 1000);
			ht__writer_frame(w, id, HT_MODULE_NONE, 0x400000 + id);
			frames[0] = id;
			frames[1] = id / 2;
			frames[2] = 0;
			ht__writer_stack(w, id + 1, frames, 3);
		}
		uint64_t x = next_rand();
		struct ht_event e = {0};
		e.type = (x & 1) ? HT_EV_ALLOC : HT_EV_FREE;
		e.func = (x & 1) ? HT_FN_MALLOC : HT_FN_FREE;
		e.process = (uint32_t)(x >> 8) & 1;
		e.pid = 10 + (int32_t)e.process;
		e.tid = 1000 + (int32_t)((x >> 9) & 7);
		ts += (x >> 12) & 0xfff;
		e.ts = ts;
		e.addr = 0x55550000000ull + ((x >> 20) & 0xffffff) * 16;
		e.size = (x & 1) ? (x >> 44) & 0xffff : 0;
		e.stack = (x & 1) ? (uint32_t)(i / 1000) + 1 : 0;
		CHECK_EQ(ht__writer_event(w, &e, NULL), 0);
	}
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);

	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	CHECK_EQ(ht_reader_info(r)->duration_ns, ts);
	CHECK_EQ(ht_reader_stack_count(r), n / 1000 + 1);
	const uint32_t *fr;
	CHECK_EQ(ht_reader_stack(r, 300, &fr), 3);
	CHECK_EQ(fr[0], 299);
	CHECK_EQ(fr[1], 149);
	CHECK_EQ(ht_reader_frame(r, 299)->rel, 0x400000 + 299);
	rng = 88172645463325252ull;
	struct ht_event ev;
	int i = 0, bad = 0;
	uint64_t t2 = 0;
	while (ht_reader_next(r, &ev) > 0) {
		uint64_t x = next_rand();
		t2 += (x >> 12) & 0xfff;
		if (ev.type != ((x & 1) ? HT_EV_ALLOC : HT_EV_FREE) || ev.ts != t2 ||
		    ev.tid != 1000 + (int32_t)((x >> 9) & 7) ||
		    ev.pid != 10 + (int32_t)((x >> 8) & 1) ||
		    ev.addr != 0x55550000000ull + ((x >> 20) & 0xffffff) * 16 ||
		    ev.size != ((x & 1) ? (x >> 44) & 0xffff : 0))
			bad++;
		i++;
	}
	CHECK_EQ(i, n);
	CHECK_EQ(bad, 0);
	CHECK(ht_reader_warning(r) == NULL);
	ht_reader_close(r);
}

/*
 * A malloc-like stream: per thread LIFO free lists by size class, in-place
 * and moving reallocs, failed reallocs, realloc(p, 0), frees of blocks from
 * earlier chunks, custom-heap blocks at the same addresses, small chunks.
 * Every event must come back exactly; reuse must make it small.
 */
#define PRED_N 300000
/* Raw bytes of the streams in mask (1 << HT__S_*) of a trace's events
   chunks. */
static uint64_t stream_bytes(const char *path, unsigned mask)
{
	FILE *f = fopen(path, "rb");
	static uint8_t comp[2 << 20], raw[2 << 20];
	uint8_t hb[HT__CHUNK_HEADER_SIZE];
	struct ht__chunk_header h;
	long off = HT__HEADER_SIZE;
	uint64_t bytes = 0;
	while (f && fseek(f, off, SEEK_SET) == 0 && fread(hb, 1, sizeof(hb), f) == sizeof(hb) &&
	       ht__chunk_header_parse(hb, &h) == 0 && h.comp_size <= sizeof(comp)) {
		off += HT__CHUNK_HEADER_SIZE + h.comp_size;
		if (h.kind != HT__CHUNK_EVENTS || fread(comp, 1, h.comp_size, f) != h.comp_size)
			continue;
		size_t n = ZSTD_decompress(raw, sizeof(raw), comp, h.comp_size);
		CHECK(!ZSTD_isError(n));
		if (ZSTD_isError(n))
			break;
		struct ht__cur cur[HT__NSTREAMS];
		static uint8_t *planes;
		static size_t planes_cap;
		const char *why;
		CHECK_EQ(ht__streams_open(raw, raw + n, HT__FILE_VERSION, cur, &planes, &planes_cap,
					  &why),
			 0);
		for (int i = 0; i < HT__NSTREAMS; i++)
			if (mask >> i & 1)
				bytes += (uint64_t)(cur[i].end - cur[i].p);
	}
	if (f)
		fclose(f);
	return bytes;
}

/* Raw bytes of the address codes: of new blocks in ADDR, of blocks
   leaving in FREE. */
/* What check_read_back compares besides type and address. */
enum {
	RB_OLD = 1 << 0,
	RB_SIZE = 1 << 1,
	RB_TS = 1 << 2,
	RB_TID = 1 << 3,
	RB_STACK = 1 << 4,
	RB_NO_WARNING = 1 << 5, /* and the reader must have no warning */
};

/* Reads the trace at PATH and checks that it holds exactly the N events
   WANT, on the fields FIELDS names. */
static void check_read_back(const char *path, const struct ht_event *want, int n, unsigned fields)
{
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	struct ht_event ev;
	int i = 0, bad = 0;
	while (ht_reader_next(r, &ev) > 0 && i < n) {
		const struct ht_event *x = &want[i++];
		bad += ev.type != x->type || ev.addr != x->addr ||
		       ((fields & RB_OLD) && ev.old_addr != x->old_addr) ||
		       ((fields & RB_SIZE) && ev.size != x->size) ||
		       ((fields & RB_TS) && ev.ts != x->ts) ||
		       ((fields & RB_TID) && ev.tid != x->tid) ||
		       ((fields & RB_STACK) && ev.stack != x->stack);
	}
	CHECK_EQ(i, n);
	CHECK_EQ(bad, 0);
	if (fields & RB_NO_WARNING)
		CHECK(ht_reader_warning(r) == NULL);
	ht_reader_close(r);
}

static uint64_t addr_stream_bytes(const char *path)
{
	return stream_bytes(path, 1u << HT__S_ADDR | 1u << HT__S_FREE);
}

static struct ht_event pred[PRED_N];

static void test_predicted_addresses(void)
{
	char path[300];
	test_path(path, sizeof(path), "pred.htr");
	enum { TH = 3, CL = 40, DEPTH = 64 };
	static uint64_t freelist[TH][CL + 2][DEPTH];
	static int nfree[TH][CL + 2];
	static uint64_t live[TH][512];
	static uint64_t live_size[TH][512];
	uint64_t top = 0x555555560000ull;
	memset(nfree, 0, sizeof(nfree));
	memset(live, 0, sizeof(live));
	rng = 12345;
	uint64_t ts = 0;
	for (int i = 0; i < PRED_N; i++) {
		struct ht_event *e = &pred[i];
		memset(e, 0, sizeof(*e));
		uint64_t x = next_rand();
		int t = (int)((x >> 5) % TH);
		if ((i / 1000) % 2)
			t = 0; /* long single-thread stretches */
		e->pid = 7;
		e->tid = 70 + t;
		ts += 20 + (x >> 40) % 60;
		e->ts = ts;
		e->stack = 1 + (uint32_t)((x >> 20) % 5);
		int slot = (int)((x >> 8) % 512);
		uint64_t size = 8 + (x >> 30) % 600;
		int cl = (int)(((size + 8 + 15) & ~15ull) / 16); /* glibc's bins */
		uint64_t r = (x >> 50) % 100;
		if (live[t][slot] && r < 10) { /* realloc, in place when the class allows */
			e->type = HT_EV_REALLOC;
			e->func = HT_FN_REALLOC;
			e->old_addr = live[t][slot];
			if (r == 0) {
				e->flags = HT_EVF_FAILED;
				e->size = 1ull << 45;
			} else if (r == 1) {
				e->size = 0; /* realloc(p, 0) */
				live[t][slot] = 0;
			} else if (((size + 23) & ~15ull) == ((live_size[t][slot] + 23) & ~15ull)) {
				e->addr = e->old_addr;
				e->size = size;
				live_size[t][slot] = size;
			} else {
				e->addr = top;
				top += (size + 31) & ~15ull;
				e->size = size;
				live[t][slot] = e->addr;
				live_size[t][slot] = size;
			}
		} else if (live[t][slot]) {
			e->type = HT_EV_FREE;
			e->func = HT_FN_FREE;
			e->addr = live[t][slot];
			int c = (int)(((live_size[t][slot] + 8 + 15) & ~15ull) / 16);
			if (nfree[t][c] < DEPTH)
				freelist[t][c][nfree[t][c]++] = e->addr;
			live[t][slot] = 0;
		} else {
			e->type = HT_EV_ALLOC;
			e->func = r < 20 ? HT_FN_CALLOC : HT_FN_MALLOC;
			e->size = size;
			if (nfree[t][cl])
				e->addr = freelist[t][cl][--nfree[t][cl]];
			else {
				e->addr = top;
				top += (size + 31) & ~15ull;
			}
			if (r == 99)
				e->heap = 0x1000; /* a custom heap block: not tracked as live */
			else {
				live[t][slot] = e->addr;
				live_size[t][slot] = size;
			}
		}
	}
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	CHECK_EQ(ht__writer_set_chunk_size(w, 512 << 10), 0);
	for (uint32_t s = 1; s <= 5; s++) {
		ht__writer_frame(w, s - 1, HT_MODULE_NONE, s * 0x100);
		uint32_t f = s - 1;
		ht__writer_stack(w, s, &f, 1);
	}
	for (int i = 0; i < PRED_N; i++)
		CHECK_EQ(ht__writer_event(w, &pred[i], NULL), 0);
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);

	struct ht_reader *rd;
	CHECK_EQ(ht_reader_open(&rd, path), 0);
	if (!rd)
		return;
	struct ht_event ev;
	int i = 0, bad = 0;
	while (ht_reader_next(rd, &ev) > 0) {
		const struct ht_event *x = &pred[i < PRED_N ? i : 0];
		if (ev.type != x->type || ev.addr != x->addr || ev.old_addr != x->old_addr ||
		    ev.size != x->size || ev.ts != x->ts || ev.tid != x->tid ||
		    ev.heap != x->heap || ev.flags != x->flags || ev.func != x->func ||
		    ev.stack != x->stack) {
			if (!bad)
				fprintf(
				    stderr,
				    "event %d: %s addr %llx old %llx, want %s addr %llx old %llx\n",
				    i, ht_event_name(ev.type), (unsigned long long)ev.addr,
				    (unsigned long long)ev.old_addr, ht_event_name(x->type),
				    (unsigned long long)x->addr, (unsigned long long)x->old_addr);
			bad++;
		}
		i++;
	}
	CHECK_EQ(i, PRED_N);
	CHECK_EQ(bad, 0);
	CHECK(ht_reader_warning(rd) == NULL);
	ht_reader_close(rd);
	/* The address stream, raw: predicted addresses take a byte or two,
	   where deltas between scattered blocks would take four or five. */
	uint64_t addr_bytes = addr_stream_bytes(path);
	double per = (double)addr_bytes / PRED_N;
	if (per > 2.0 || per < 0.5) { /* raw deltas here take 3 to 4 bytes */
		fprintf(stderr, "%.2f raw address bytes per event: prediction does not work\n",
			per);
		check_failures++;
	}
}

/* More threads than a chunk takes: the writer starts new chunks. */
/* More threads than a group's slots (HT__MAX_SLOTS), from the first
   chunk on: the writer starts a group, with the compression's thread too
   (async), whose other set of streams had no memory yet. */
static void many_threads(bool async)
{
	char path[300];
	test_path(path, sizeof(path), async ? "threads-async.htr" : "threads.htr");
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	if (!w)
		return;
	ht__writer_set_async(w, async);
	const int n = 10000;
	for (int i = 0; i < n; i++) {
		struct ht_event e = {.type = HT_EV_ALLOC, .func = HT_FN_MALLOC, .pid = 5};
		e.tid = 100 + i;
		e.ts = (uint64_t)i;
		e.addr = 0x1000 + (uint64_t)i * 32;
		e.size = 16;
		CHECK_EQ(ht__writer_event(w, &e, NULL), 0);
	}
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	struct ht_event ev;
	int i = 0, bad = 0;
	while (ht_reader_next(r, &ev) > 0) {
		bad += ev.tid != 100 + i || ev.addr != 0x1000 + (uint64_t)i * 32 ||
		       ev.ts != (uint64_t)i;
		i++;
	}
	CHECK_EQ(i, n);
	CHECK_EQ(bad, 0);
	CHECK(ht_reader_warning(r) == NULL);
	ht_reader_close(r);
}

static void test_many_threads(void)
{
	many_threads(false);
	many_threads(true);
}

static int events_chunks(const char *path, long *off, uint8_t *flags, int max);
static void set_chunk_flags(const char *path, long off, uint8_t flags);

/* The next time of test_time_packing's events: a delta of 0 to 3 mostly,
   then up to 300, huge, and back in time. */
static uint64_t tpack_next(uint64_t ts)
{
	uint64_t x = next_rand(), k = x % 100;
	ts += k < 75 ? (x >> 8) & 3 : k < 95 ? (x >> 8) % 300 : k < 97 ? 1ull << 40 : 0;
	return k >= 97 ? ts - (x >> 8) % 100 : ts;
}

/* 3002 frees at path, step ns apart from 7 steps on. */
static void tpack_frees(const char *path, const struct ht__trace_meta *meta, uint64_t step)
{
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, meta), 0);
	if (!w)
		return;
	for (int j = 0; j < 3002; j++) {
		struct ht_event e = {.type = HT_EV_FREE, .func = HT_FN_FREE, .pid = 5, .tid = 5};
		e.ts = (7 + (uint64_t)j) * step;
		e.addr = 0x1000 + (uint64_t)j * 32;
		CHECK_EQ(ht__writer_event(w, &e, NULL), 0);
	}
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
}

/*
 * Time deltas packed in TIME (version 11): in the chunks that pack
 * (HT__CHUNK_TPACK: the first at a resolution coarser than 1 ns, the
 * others when three quarters of the deltas of the chunk before were
 * small) deltas of 0
 * to 3 three to a varint, a pair or a single when a larger or negative
 * delta comes or a chunk ends, the others alone. Times come back exactly
 * across 4 KiB chunks that end with deltas held, packed or not; 3002
 * events 100 ns apart at 100 ns take 1001 bytes of TIME (1000 triples,
 * then a pair at the chunk's end) where one varint each took 3002; a
 * chunk whose events end with deltas pending is damage.
 */
static void test_time_packing(void)
{
	char path[300];
	test_path(path, sizeof(path), "tpack.htr");
	struct ht__trace_meta meta = {0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	if (!w)
		return;
	CHECK_EQ(ht__writer_set_chunk_size(w, 4096), 0);
	const int n = 100000;
	uint64_t ts = 1000000;
	rng = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < n; i++) {
		ts = tpack_next(ts);
		struct ht_event e = {.type = HT_EV_ALLOC, .func = HT_FN_MALLOC, .pid = 5, .tid = 5};
		e.ts = ts;
		e.addr = 0x1000 + (uint64_t)i * 32;
		e.size = 16;
		CHECK_EQ(ht__writer_event(w, &e, NULL), 0);
	}
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	struct ht_event ev;
	int i = 0, bad = 0;
	ts = 1000000;
	rng = 0x9e3779b97f4a7c15ull;
	while (ht_reader_next(r, &ev) > 0) {
		ts = tpack_next(ts);
		bad += ev.ts != ts || ev.addr != 0x1000 + (uint64_t)i * 32;
		i++;
	}
	CHECK_EQ(i, n);
	CHECK_EQ(bad, 0);
	CHECK(ht_reader_warning(r) == NULL);
	ht_reader_close(r);

	test_path(path, sizeof(path), "tpack2.htr");
	struct ht__trace_meta meta100 = {.ts_unit_ns = 100};
	tpack_frees(path, &meta100, 100);
	CHECK_EQ(stream_bytes(path, 1u << HT__S_TIME), 1001);
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	i = 0;
	bad = 0;
	while (ht_reader_next(r, &ev) > 0)
		bad += ev.ts != 700 + (uint64_t)i++ * 100;
	CHECK_EQ(i, 3002);
	CHECK_EQ(bad, 0);
	ht_reader_close(r);

	/* The same 3002 events at 1 ns: the chunk does not pack (TIME holds
	   3002 zigzag deltas of 1). Flagged TPACK, each varint (2) reads as
	   three deltas: the events end with one pending, which is damage. */
	test_path(path, sizeof(path), "tpack3.htr");
	tpack_frees(path, &meta, 1);
	CHECK_EQ(stream_bytes(path, 1u << HT__S_TIME), 3002);
	long off[2];
	uint8_t flags[2];
	CHECK_EQ(events_chunks(path, off, flags, 2), 1);
	CHECK_EQ(flags[0] & HT__CHUNK_TPACK, 0);
	set_chunk_flags(path, off[0], flags[0] | HT__CHUNK_TPACK);
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	while (ht_reader_next(r, &ev) > 0)
		;
	const char *warn = ht_reader_warning(r);
	CHECK(warn && strstr(warn, "time deltas left at the chunk's end"));
	CHECK(ht_reader_info(r)->flags & HT_TRACEF_TRUNCATED);
	ht_reader_close(r);
}

/* Thread A's allocation i of round k in test_relative_frees: addresses
   far apart (no prediction, raw codes of three bytes or more). */
static uint64_t frel_addr(int k, int i)
{
	return 0x100000000ull + (uint64_t)k * (64ull << 20) +
	       (((uint64_t)i * 2654435761u) & 0xfffff) * 64;
}

/*
 * Frees relative to the thread's previous one (version 12, HT__CHUNK_FREL).
 * Each round, in a chunk of its own: thread A allocates 100 blocks and
 * frees them newest first; from round 8 on thread B allocates one block
 * first and, after A, frees the one it made in the round before (the
 * rounds before 8 decode with A alone, the reader's own_solo). Round 0's
 * chunk has one tag bit: A's distances back 1 to 63 take a byte, 64 to 100
 * two (137 bytes). Every later chunk is flagged (the group's first chunk
 * found its codes shorter with two tag bits; the second group's first
 * keeps that choice), and each free takes a byte: A's first by distance
 * 1, the others one before the previous free, and B's by either form.
 * All events come back exactly, across two groups of 64 chunks. A chunk
 * 0 flagged by hand reads its first code (distance 1, 3) as the position
 * before A's free position 0, which it never made: damage.
 */
static void test_relative_frees(void)
{
	char path[300];
	test_path(path, sizeof(path), "frel.htr");
	struct ht__trace_meta meta = {0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	if (!w)
		return;
	enum {
		ROUNDS = HT__GROUP_CHUNKS_V14 + 4,
		R = 100,
		B_FROM = 8,
		MAXEV = ROUNDS * (2 * R + 2)
	};
	static struct ht_event want[MAXEV];
	int nev = 0, bfrees = 0;
	for (int k = 0; k < ROUNDS; k++) {
		struct ht_event a = {
		    .type = HT_EV_ALLOC, .func = HT_FN_MALLOC, .pid = 5, .size = 40};
		struct ht_event f = {.type = HT_EV_FREE, .func = HT_FN_FREE, .pid = 5, .tid = 5};
		if (k >= B_FROM) {
			want[nev] = a;
			want[nev].tid = 6;
			want[nev++].addr = 0x7000000000ull + (uint64_t)k * 4096;
		}
		for (int i = 0; i < R; i++) {
			want[nev] = a;
			want[nev].tid = 5;
			want[nev++].addr = frel_addr(k, i);
		}
		for (int i = R - 1; i >= 0; i--) {
			want[nev] = f;
			want[nev++].addr = frel_addr(k, i);
		}
		if (k > B_FROM) {
			want[nev] = f;
			want[nev].tid = 6;
			want[nev++].addr = 0x7000000000ull + (uint64_t)(k - 1) * 4096;
			bfrees++;
		}
	}
	for (int i = 0, k = 0; i < nev; i++) {
		want[i].ts = 1000 + (uint64_t)i;
		CHECK_EQ(ht__writer_event(w, &want[i], NULL), 0);
		/* a round ends after A's last free, or B's free after it */
		if (i + 1 == nev ||
		    (want[i + 1].type == HT_EV_ALLOC && want[i].type == HT_EV_FREE)) {
			CHECK_EQ(ht__writer_flush(w), 0);
			k++;
		}
	}
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
	/* + 1: B's free in the second group's first chunk names a block of
	   the first group, raw (4096 bytes back: 2 bytes) */
	CHECK_EQ(stream_bytes(path, 1u << HT__S_FREE), 137 + (ROUNDS - 1) * R + bfrees + 1);
	long off[ROUNDS + 1];
	uint8_t flags[ROUNDS + 1];
	CHECK_EQ(events_chunks(path, off, flags, ROUNDS + 1), ROUNDS);
	int flagged = 0;
	for (int k = 0; k < ROUNDS; k++)
		flagged += (flags[k] & HT__CHUNK_FREL) != 0;
	CHECK_EQ(flags[0] & HT__CHUNK_FREL, 0);
	CHECK_EQ(flagged, ROUNDS - 1);
	CHECK_EQ(flags[HT__GROUP_CHUNKS_V14] & HT__CHUNK_CONT, 0); /* a second group */
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	struct ht_event ev;
	int n = 0, bad = 0;
	while (n < nev && ht_reader_next(r, &ev) > 0) {
		const struct ht_event *x = &want[n++];
		bad += ev.type != x->type || ev.tid != x->tid || ev.addr != x->addr ||
		       ev.ts != x->ts || (x->type == HT_EV_ALLOC && ev.size != x->size);
	}
	CHECK_EQ(n, nev);
	CHECK_EQ(bad, 0);
	CHECK(ht_reader_next(r, &ev) == 0);
	CHECK(ht_reader_warning(r) == NULL);
	ht_reader_close(r);

	set_chunk_flags(path, off[0], flags[0] | HT__CHUNK_FREL);
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	n = 0;
	while (ht_reader_next(r, &ev) > 0)
		n++;
	CHECK_EQ(n, R); /* chunk 0's allocations, then its first free is damage */
	const char *warn = ht_reader_warning(r);
	CHECK(warn && strstr(warn, "does not parse"));
	CHECK(ht_reader_info(r)->flags & HT_TRACEF_TRUNCATED);
	ht_reader_close(r);
}

/* A coarser timestamp unit: times come back rounded down, nothing else changes. */
static void test_ts_unit(void)
{
	char path[300];
	test_path(path, sizeof(path), "unit.htr");
	struct ht__trace_meta meta = {.ts_unit_ns = 16};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	CHECK_EQ(ht__writer_set_chunk_size(w, 4096), 0);
	const int n = 20000;
	uint64_t ts = 5;
	for (int i = 0; i < n; i++) {
		struct ht_event e = {.type = HT_EV_ALLOC, .func = HT_FN_MALLOC, .pid = 5, .tid = 5};
		ts += (uint64_t)(i % 37) * 3;
		e.ts = ts;
		e.addr = 0x1000 + (uint64_t)i * 32;
		e.size = (uint64_t)i;
		CHECK_EQ(ht__writer_event(w, &e, NULL), 0);
	}
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	CHECK_EQ(ht_reader_info(r)->duration_ns, ts); /* exact: from the footer */
	struct ht_event ev;
	int i = 0, bad = 0;
	ts = 5;
	while (ht_reader_next(r, &ev) > 0) {
		ts += (uint64_t)(i % 37) * 3;
		bad += ev.ts != ts / 16 * 16 || ev.size != (uint64_t)i ||
		       ev.addr != 0x1000 + (uint64_t)i * 32;
		i++;
	}
	CHECK_EQ(i, n);
	CHECK_EQ(bad, 0);
	ht_reader_close(r);
	struct ht__trace_meta bad_meta = {.ts_unit_ns = 2000000};
	test_path(path, sizeof(path), "unit2.htr");
	CHECK_EQ(ht__writer_open(&w, path, &bad_meta), HT_ERR_INVALID);
}

/* The kinds of a trace's chunks, a bit each. */
static unsigned chunk_kinds(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t hb[HT__CHUNK_HEADER_SIZE];
	struct ht__chunk_header h;
	long off = HT__HEADER_SIZE;
	unsigned kinds = 0;
	while (f && fseek(f, off, SEEK_SET) == 0 && fread(hb, 1, sizeof(hb), f) == sizeof(hb) &&
	       ht__chunk_header_parse(hb, &h) == 0) {
		kinds |= 1u << (h.kind & 31);
		off += HT__CHUNK_HEADER_SIZE + h.comp_size;
	}
	if (f)
		fclose(f);
	return kinds;
}

/* Stacks that share outer frames with the previous one, across many small
   chunks (in one group, or in groups of 4 KiB: the previous stack starts
   afresh in each): every stack reads back whole, from the DEFS streams
   that DEFINDEX points at in a finished trace and from the DEFS streams as
   the events come in an unfinished one. */
static void check_shared_stacks(const char *path, int finish, uint32_t group)
{
	enum { NS = 3000, NF = 40 };
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	if (!w)
		return;
	CHECK_EQ(ht__writer_set_chunk_size(w, 1024), 0);
	if (group)
		CHECK_EQ(ht__writer_set_group_size(w, group), 0);
	for (uint32_t f = 0; f < NF; f++)
		CHECK_EQ(ht__writer_frame(w, f, HT_MODULE_NONE, 0x1000 + f), 0);
	uint32_t frames[NF];
	for (uint32_t s = 1; s <= NS; s++) {
		/* depth 1..NF; inner frames vary, the outer ones are 0, 1, 2, ... */
		uint32_t n = 1 + s % NF;
		for (uint32_t i = 0; i < n; i++)
			frames[i] = n - 1 - i;
		frames[0] = (s * 7) % NF;
		CHECK_EQ(ht__writer_stack(w, s, frames, n), 0);
		struct ht_event e = {.type = HT_EV_ALLOC,
				     .func = HT_FN_MALLOC,
				     .pid = 1,
				     .tid = 1,
				     .ts = s,
				     .stack = s,
				     .addr = 0x10000 + s * 64,
				     .size = 8};
		CHECK_EQ(ht__writer_event(w, &e, NULL), 0);
	}
	if (finish)
		CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
	else
		ht__writer_abort(w);
	/* Version 9: the definitions once, in the events chunks; at the end
	   an index of them, no DEFS table. */
	unsigned kinds = chunk_kinds(path);
	CHECK(!(kinds & 1u << HT__CHUNK_DEFS));
	CHECK_EQ(!!(kinds & 1u << HT__CHUNK_DEFINDEX), finish);
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	if (finish) /* every stack known at open */
		CHECK_EQ(ht_reader_stack_count(r), NS + 1);
	CHECK_EQ(ht_reader_warning(r) == NULL, finish);
	struct ht_event ev;
	int nev = 0;
	while (ht_reader_next(r, &ev) > 0)
		nev++;
	CHECK_EQ(nev, NS);
	int bad = 0;
	for (uint32_t s = 1; s <= NS; s++) {
		const uint32_t *lf;
		uint32_t n = ht_reader_stack(r, s, &lf);
		bad += n != 1 + s % NF;
		for (uint32_t i = 0; i < n && !bad; i++) {
			uint32_t want = i ? n - 1 - i : (s * 7) % NF;
			bad += ht_reader_frame(r, lf[i])->rel != 0x1000 + want;
		}
	}
	CHECK_EQ(bad, 0);
	ht_reader_close(r);
}

static void test_shared_stacks(void)
{
	char path[300];
	test_path(path, sizeof(path), "shared.htr");
	check_shared_stacks(path, 1, 0);
	test_path(path, sizeof(path), "shared-partial.htr");
	check_shared_stacks(path, 0, 0);
	test_path(path, sizeof(path), "shared-groups.htr");
	check_shared_stacks(path, 1, 4096);
	test_path(path, sizeof(path), "shared-groups-partial.htr");
	check_shared_stacks(path, 0, 4096);
}

/* A finished trace at path of the n events ev, without stacks or processes. */
static void write_events(const char *path, const struct ht_event *ev, int n)
{
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	for (int i = 0; i < n; i++)
		CHECK_EQ(ht__writer_event(w, &ev[i], NULL), 0);
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
}

/* The new-block codes of version 2: a block carved right after the previous
   fresh one although reused blocks came in between (FRESH), a realloc that
   grows in place into another size class (OLD). Values come back exact, and
   the address stream stays at one byte per address. */
static void test_fresh_and_old(void)
{
	char path[300];
	test_path(path, sizeof(path), "fresh.htr");
	enum { N = 3000 };
	static struct ht_event evs2[N];
	uint64_t fresh = 0x7f0000001000ull, small = 0x7f0000000040ull, ts = 0;
	int n = 0;
	struct ht_event b = {.type = HT_EV_ALLOC,
			     .func = HT_FN_MALLOC,
			     .pid = 2,
			     .tid = 2,
			     .ts = ++ts,
			     .addr = small,
			     .size = 24};
	evs2[n++] = b;
	while (n + 4 <= N) {
		/* a fresh block right after the previous fresh one (FRESH: the
		   reused small block came in between), shrunk in place into
		   another size class (OLD), then the small block freed and
		   taken again (a ring) */
		struct ht_event a = {.type = HT_EV_ALLOC,
				     .func = HT_FN_MALLOC,
				     .pid = 2,
				     .tid = 2,
				     .ts = ++ts,
				     .addr = fresh,
				     .size = 200};
		evs2[n++] = a;
		struct ht_event rl = {.type = HT_EV_REALLOC,
				      .func = HT_FN_REALLOC,
				      .pid = 2,
				      .tid = 2,
				      .ts = ++ts,
				      .old_addr = fresh,
				      .addr = fresh,
				      .size = 150};
		evs2[n++] = rl;
		struct ht_event f = {.type = HT_EV_FREE,
				     .func = HT_FN_FREE,
				     .pid = 2,
				     .tid = 2,
				     .ts = ++ts,
				     .addr = small};
		evs2[n++] = f;
		b.ts = ++ts;
		evs2[n++] = b;
		fresh += ht__chunk_size(200);
	}
	write_events(path, evs2, n);
	check_read_back(path, evs2, n, RB_OLD | RB_SIZE | RB_TS);
	/* One events chunk: its address stream has one code per address. */
	uint64_t addr_bytes = addr_stream_bytes(path);
	/* 5 addresses per 4 events, one byte each; the first two raw. */
	CHECK(addr_bytes <= (uint64_t)(n - 1) / 4 * 5 + 16);
}

/* Version 13's END codes: a thread carving R regions in turn (glibc
   handing out the remainders of split chunks between other blocks), so
   each new block is right after the R-th new block back, neither TOP nor
   FRESH. With R of 2, 3 and 15 (codes 19, 20 and 32, the last one a code
   names) every address comes back exact and, after the first R, costs
   one byte; with 16 regions they are raw, far apart, several bytes. */
/* n allocations at times 1..n, the i-th of size class i % R carved in turn
   from that class's region (base + class << 20), each right after the
   previous block of its class: R interleaved runs of adjacent blocks.
   Returns n. */
static int put_region_allocs(struct ht_event *evs, int n, int R, uint64_t base, uint32_t pid,
			     uint32_t tid)
{
	uint64_t next[32];
	CHECK(R <= 32);
	for (int k = 0; k < R; k++)
		next[k] = base + ((uint64_t)k << 20);
	for (int i = 0; i < n; i++) {
		int k = i % R;
		uint64_t size = 24 + 16 * (uint64_t)k;
		evs[i] = (struct ht_event){.type = HT_EV_ALLOC,
					   .func = HT_FN_MALLOC,
					   .pid = pid,
					   .tid = tid,
					   .ts = (uint64_t)i + 1,
					   .addr = next[k],
					   .size = size};
		next[k] += ht__chunk_size(size);
	}
	return n;
}

static void test_block_ends(void)
{
	static const int regions[] = {2, 3, 15, 16};
	for (unsigned t = 0; t < sizeof(regions) / sizeof(regions[0]); t++) {
		int R = regions[t];
		char path[300], name[32];
		snprintf(name, sizeof(name), "ends%d.htr", R);
		test_path(path, sizeof(path), name);
		enum { N = 1700 };
		static struct ht_event evs[N];
		put_region_allocs(evs, N, R, 0x7f0000000000ull, 2, 2);
		write_events(path, evs, N);
		check_read_back(path, evs, N, RB_SIZE | RB_TS);
		uint64_t addr_bytes = addr_stream_bytes(path);
		if (R < (int)HT__ADDR_ENDS)
			CHECK(addr_bytes <= (uint64_t)N + 10 * (uint64_t)R);
		else
			CHECK(addr_bytes >= 3 * (uint64_t)N);
	}
}

/*
 * Two threads interleaved event by event, each freeing its own blocks and
 * sometimes the other's: a free names its block among its own thread's
 * allocations (version 3), so the other thread's allocations in between do
 * not make its code longer, and a block of the other thread is named past
 * them. Every address comes back exactly.
 */
static void test_thread_frees(void)
{
	char path[300];
	test_path(path, sizeof(path), "tfree.htr");
	enum { STEPS = 4000, LAG = 50 };
	static struct ht_event ev2[4 * STEPS];
	static uint64_t made[2][STEPS];
	static int freed[2][STEPS];
	memset(freed, 0, sizeof(freed));
	uint64_t top[2] = {0x7f1000000000ull, 0x7f2000000000ull}, ts = 0;
	int n = 0, cross = 0, own = 0;
	for (int i = 0; i < STEPS; i++) {
		for (int t = 0; t < 2; t++) {
			struct ht_event a = {.type = HT_EV_ALLOC,
					     .func = HT_FN_MALLOC,
					     .pid = 3,
					     .tid = 30 + t,
					     .ts = ++ts,
					     .addr = top[t],
					     .size = 40};
			made[t][i] = top[t];
			top[t] += ht__chunk_size(40);
			ev2[n++] = a;
			/* own block LAG allocations ago; every 10th step thread 1
			   frees thread 0's block of 30 steps ago instead */
			int other = t == 1 && i % 10 == 0 && i >= 30;
			int from = other ? 0 : t, at = other ? i - 30 : i - LAG;
			if (at < 0 || freed[from][at])
				continue;
			freed[from][at] = 1;
			struct ht_event f = {.type = HT_EV_FREE,
					     .func = HT_FN_FREE,
					     .pid = 3,
					     .tid = 30 + t,
					     .ts = ++ts,
					     .addr = made[from][at]};
			ev2[n++] = f;
			cross += other;
			own += !other;
		}
	}
	write_events(path, ev2, n);
	check_read_back(path, ev2, n, RB_TID | RB_TS | RB_NO_WARNING);
	CHECK(cross > 300 && own > 7000);
	/* Allocations are TOP codes (a byte), own frees are 50 back among the
	   thread's own (a byte; 100 back among all allocations would take two),
	   frees of the other thread's blocks take two bytes. */
	uint64_t addr_bytes = addr_stream_bytes(path);
	CHECK(addr_bytes <= (uint64_t)(2 * STEPS + own + 2 * cross + 16));
}

/* The events chunks of a trace: their offsets and header flags; how many. */
static int events_chunks(const char *path, long *off, uint8_t *flags, int max)
{
	FILE *f = fopen(path, "rb");
	uint8_t hb[HT__CHUNK_HEADER_SIZE];
	struct ht__chunk_header h;
	long at = HT__HEADER_SIZE;
	int n = 0;
	while (f && fseek(f, at, SEEK_SET) == 0 && fread(hb, 1, sizeof(hb), f) == sizeof(hb) &&
	       ht__chunk_header_parse(hb, &h) == 0) {
		if (h.kind == HT__CHUNK_EVENTS && n < max) {
			off[n] = at;
			flags[n++] = h.flags;
		}
		at += HT__CHUNK_HEADER_SIZE + h.comp_size;
	}
	if (f)
		fclose(f);
	return n;
}

/* Sets the flags of the chunk at off (its CRC made right again). */
static void set_chunk_flags(const char *path, long off, uint8_t flags)
{
	FILE *f = fopen(path, "r+b");
	uint8_t hb[HT__CHUNK_HEADER_SIZE];
	CHECK(f && fseek(f, off, SEEK_SET) == 0 && fread(hb, 1, sizeof(hb), f) == sizeof(hb));
	hb[5] = flags;
	ht__put_le32(hb + 44, ht__crc32(hb, 44));
	CHECK(fseek(f, off, SEEK_SET) == 0 && fwrite(hb, 1, sizeof(hb), f) == sizeof(hb));
	if (f)
		fclose(f);
}

/* Reads path with `threads` decoding threads: events equal to ev2[0..n)
   (all of them), or the warning when why is set. */
static void check_group_read(const char *path, const char *threads, const struct ht_event *ev2,
			     int n, const char *why)
{
	setenv("HT_READER_THREADS", threads, 1);
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	unsetenv("HT_READER_THREADS");
	if (!r)
		return;
	struct ht_event ev;
	int i = 0, bad = 0;
	while (ht_reader_next(r, &ev) > 0 && i < n) {
		const struct ht_event *x = &ev2[i++];
		bad += ev.type != x->type || ev.addr != x->addr || ev.tid != x->tid ||
		       ev.ts != x->ts || ev.size != x->size || ev.stack != x->stack;
	}
	CHECK_EQ(bad, 0);
	if (why) {
		CHECK(i < n);
		CHECK(ht_reader_warning(r) && strstr(ht_reader_warning(r), why));
	} else {
		CHECK_EQ(i, n);
		CHECK(ht_reader_warning(r) == NULL);
	}
	ht_reader_close(r);
}

/* Version 14's raw free codes from a recent raw free: a thread frees
   the blocks of R regions in turn, each region in the order it was made
   (jq tearing down two structures at once), every block made in an
   earlier group, so every free is raw. With R of 1 or 2 each free
   counts from the last address or from the raw free before the latest
   (b = 1) and costs one byte; with 3 the deltas jump between regions 1
   MiB apart and cost three. Addresses come back exact, on the caller's
   thread and on a decoding thread. */
static void test_free_bases(void)
{
	static const int regions[] = {1, 2, 3};
	for (unsigned t = 0; t < sizeof(regions) / sizeof(regions[0]); t++) {
		int R = regions[t];
		char path[300], name[32];
		snprintf(name, sizeof(name), "fbases%d.htr", R);
		test_path(path, sizeof(path), name);
		enum { N = 2000 };
		static struct ht_event evs[2 * N];
		int n = put_region_allocs(evs, N, R, 0x7f4000000000ull, 5, 50);
		for (int i = 0; i < N; i++, n++)
			evs[n] = (struct ht_event){.type = HT_EV_FREE,
						   .func = HT_FN_FREE,
						   .pid = 5,
						   .tid = 50,
						   .ts = (uint64_t)n + 1,
						   .addr = evs[i].addr};
		struct ht__trace_meta meta = {.argc = 0};
		struct ht__writer *w;
		CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
		CHECK_EQ(ht__writer_set_group_size(w, 0), 0); /* a group per chunk */
		for (int i = 0; i < n; i++) {
			if (i == N) /* the frees in a later group than their blocks */
				CHECK_EQ(ht__writer_flush(w), 0);
			CHECK_EQ(ht__writer_event(w, &evs[i], NULL), 0);
		}
		CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
		check_group_read(path, "0", evs, n, NULL);
		check_group_read(path, "1", evs, n, NULL);
		uint64_t free_bytes = stream_bytes(path, 1u << HT__S_FREE);
		if (R <= 2)
			CHECK(free_bytes <= (uint64_t)N + 10 * (uint64_t)R);
		else
			CHECK(free_bytes >= 3 * (uint64_t)N);
	}
}

/*
 * Raw heap address codes count in 16 bytes (format version 10): blocks
 * 1 MiB apart cost 3 bytes each (65536 units; 4 bytes in bytes), blocks
 * 1 MiB + 8 apart take the escape and 4 bytes; both read back exactly.
 */
static void test_heap_grain(void)
{
	enum { N = 2000 };
	static struct ht_event ev2[2 * N];
	for (int k = 0; k < 2; k++) {
		char path[300];
		test_path(path, sizeof(path), k ? "grain8.htr" : "grain.htr");
		uint64_t step = (1u << 20) + (k ? 8 : 0), ts = 0;
		int n = 0;
		for (int i = 0; i < N; i++) {
			uint64_t a = 0x7f1000000000ull + step * (uint64_t)i;
			ev2[n++] = (struct ht_event){.type = HT_EV_ALLOC,
						     .func = HT_FN_MALLOC,
						     .pid = 3,
						     .tid = 30,
						     .ts = ++ts,
						     .addr = a,
						     .size = 100};
			if (i % 2)
				ev2[n++] = (struct ht_event){.type = HT_EV_FREE,
							     .func = HT_FN_FREE,
							     .pid = 3,
							     .tid = 30,
							     .ts = ++ts,
							     .addr = a - step};
		}
		write_events(path, ev2, n);
		check_group_read(path, "0", ev2, n, NULL);
		/* Each allocation after a free is 2 MiB on from it, raw; each
		   free names the allocation before by index (a byte). */
		uint64_t bytes = addr_stream_bytes(path);
		if (k)
			CHECK(bytes >= (uint64_t)(4 * N + N / 2));
		else
			CHECK(bytes <= (uint64_t)(3 * N + N / 2 + 16));
	}
}

/*
 * The reader keeps a group's allocations as address and size class in one
 * word, and those at 2^56 and above aside: blocks there and below, of many
 * classes, freed by index from up to 600 allocations back (some taken from
 * the rings again, some reallocated), read back exactly on the caller's
 * thread and on a decoding thread.
 */
static void test_far_addresses(void)
{
	enum { N = 3000, BACK = 600 };
	static struct ht_event ev2[3 * N];
	static uint64_t live[N];
	char path[300];
	test_path(path, sizeof(path), "far.htr");
	uint64_t ts = 0, seed = 11, top[2] = {0x7f2000000000ull, 0xff00000000000000ull};
	int n = 0;
	for (int i = 0; i < N; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t r = (uint32_t)(seed >> 33);
		uint64_t size = 16 * (1 + r % 70), a;
		int back = i - 1 - (int)(r >> 8) % BACK;
		if (back >= 0 && live[back] && (r & 0x10000)) {
			a = live[back]; /* malloc reuses what it freed: a ring entry */
			ev2[n++] = (struct ht_event){.type = HT_EV_FREE,
						     .func = HT_FN_FREE,
						     .pid = 4,
						     .tid = 40,
						     .ts = ++ts,
						     .addr = a};
			live[back] = 0;
		} else {
			a = top[r & 1];
			top[r & 1] += ht__chunk_size(size);
		}
		ev2[n++] = (struct ht_event){.type = HT_EV_ALLOC,
					     .func = HT_FN_MALLOC,
					     .pid = 4,
					     .tid = 40,
					     .ts = ++ts,
					     .addr = a,
					     .size = size};
		live[i] = a;
		if (i % 7 == 3) {
			ev2[n++] = (struct ht_event){.type = HT_EV_REALLOC,
						     .func = HT_FN_REALLOC,
						     .pid = 4,
						     .tid = 40,
						     .ts = ++ts,
						     .old_addr = a,
						     .addr = a,
						     .size = size};
		}
	}
	write_events(path, ev2, n);
	check_group_read(path, "0", ev2, n, NULL);
	check_group_read(path, "1", ev2, n, NULL);
}

/*
 * Chunk groups (format version 7): two threads free blocks allocated 300
 * allocations back, over chunks of 4 KiB, with stacks defined between
 * events. Written as groups of 16 KiB and as lone chunks, both read back
 * exactly, on the caller's thread and on decoding threads; in groups the
 * frees of blocks of earlier chunks take an index instead of a raw
 * address, and a group holds at most 64 chunks (version 14; chunks of 2
 * KiB there, to have more). A chunk that claims to continue a group it
 * does not follow (the first events chunk, or a 65th) is damage.
 */
static void test_chunk_groups(void)
{
	char lone[300], grouped[300], big[300], bad[300];
	test_path(lone, sizeof(lone), "lone.htr");
	test_path(grouped, sizeof(grouped), "grouped.htr");
	test_path(big, sizeof(big), "bigroup.htr");
	test_path(bad, sizeof(bad), "badgroup.htr");
	enum { STEPS = 6000, LAG = 300 };
	static struct ht_event ev2[4 * STEPS];
	static uint64_t made[2][STEPS];
	uint64_t top[2] = {0x7f1000000000ull, 0x7f2000000000ull}, ts = 0;
	int n = 0;
	for (int i = 0; i < STEPS; i++) {
		for (int t = 0; t < 2; t++) {
			made[t][i] = top[t];
			ev2[n++] = (struct ht_event){.type = HT_EV_ALLOC,
						     .func = HT_FN_MALLOC,
						     .pid = 3,
						     .tid = 30 + t,
						     .ts = ts += 1 + i % 7,
						     .addr = top[t],
						     .size = 24 + 16 * (uint64_t)(i % 5),
						     .stack = 1 + (uint32_t)(i / 500)};
			top[t] += 4096 + 64 * (uint64_t)(i % 13); /* no TOP code */
			/* the blocks about LAG allocations back, in a shuffled
			   order within each run of 64: far from the thread's
			   recent frees, so a raw code is long (version 14) */
			int j = i - LAG;
			if (j >= 0)
				ev2[n++] =
				    (struct ht_event){.type = HT_EV_FREE,
						      .func = HT_FN_FREE,
						      .pid = 3,
						      .tid = 30 + t,
						      .ts = ts += 1,
						      .addr = made[t][(j & ~63) | ((j * 37) & 63)]};
		}
	}
	const char *paths[3] = {lone, grouped, big};
	const uint32_t group[3] = {0, 16384, UINT32_MAX};
	for (int k = 0; k < 3; k++) {
		struct ht__trace_meta meta = {.argc = 0};
		struct ht__writer *w;
		CHECK_EQ(ht__writer_open(&w, paths[k], &meta), 0);
		CHECK_EQ(ht__writer_set_chunk_size(w, k == 2 ? 2048 : 4096), 0);
		CHECK_EQ(ht__writer_set_group_size(w, group[k]), 0);
		uint32_t stacks = 0;
		for (int i = 0; i < n; i++) {
			while (ev2[i].stack > stacks) { /* stacks share outer frames */
				uint32_t fr[3] = {stacks, 1000, 1001};
				ht__writer_frame(w, stacks, HT_MODULE_NONE, 0x400000 + stacks);
				if (!stacks) {
					ht__writer_frame(w, 1000, HT_MODULE_NONE, 0x500000);
					ht__writer_frame(w, 1001, HT_MODULE_NONE, 0x500010);
				}
				CHECK_EQ(ht__writer_stack(w, ++stacks, fr, 3), 0);
			}
			CHECK_EQ(ht__writer_event(w, &ev2[i], NULL), 0);
		}
		CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
		check_group_read(paths[k], "0", ev2, n, NULL);
		check_group_read(paths[k], "3", ev2, n, NULL);
	}
	/* Lone chunks never continue; groups of 16 KiB go on to 32 KiB, 8
	   or 9 chunks of 4 KiB (600 live blocks, more than an eighth of a
	   group's allocations: group_goes_on); groups without a byte limit
	   stop at 64 chunks. */
	static long off[3][512];
	static uint8_t flags[3][512];
	int nc[3];
	for (int k = 0; k < 3; k++) {
		nc[k] = events_chunks(paths[k], off[k], flags[k], 512);
		CHECK(nc[k] > 32 && nc[k] < 512);
		CHECK_EQ(flags[k][0], 0);
		int run = 1, longest = 1, heads = 1;
		for (int i = 1; i < nc[k]; i++) {
			run = flags[k][i] & HT__CHUNK_CONT ? run + 1 : 1;
			heads += run == 1;
			longest = run > longest ? run : longest;
		}
		if (k == 0)
			CHECK_EQ(heads, nc[k]);
		if (k == 1)
			CHECK(longest >= 8 && longest <= 9 && heads >= nc[k] / 9);
		if (k == 2)
			CHECK(nc[k] > (int)HT__GROUP_CHUNKS_V14 &&
			      longest == (int)HT__GROUP_CHUNKS_V14 && heads == (nc[k] + 63) / 64);
	}
	/* The frees of blocks about 300 allocations back (600 events: about
	   1.2 chunks of 4 KiB) reach an earlier chunk: as lone chunks each
	   is a raw address of 3 bytes (1.3 MB back, in 16 bytes, or up to
	   64 blocks from the thread's recent frees; as is each allocation,
	   1.3 MB from the block freed before it); in groups an index of 2
	   bytes but in the first chunk or so of each group (lone chunks 6.1
	   bytes a pair, groups of 16 KiB 0.87 of that, of 64 chunks of 2
	   KiB 0.84). */
	uint64_t lone_b = addr_stream_bytes(lone), grouped_b = addr_stream_bytes(grouped),
		 big_b = addr_stream_bytes(big);
	CHECK(lone_b >= 6 * (uint64_t)(n - 2 * STEPS)); /* 3 bytes a free, 3 the allocation after */
	CHECK(grouped_b * 100 < lone_b * 95);
	CHECK(big_b * 100 < lone_b * 88);
	/* Damage: the first events chunk says it continues; the 65th (a new
	   group's first) says it continues a group that has 64 already. */
	const char *why = "continues a group it does not follow";
	for (int c = 0; c < 2; c++) {
		char cmd[700];
		snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", big, bad);
		CHECK_EQ(system(cmd), 0);
		set_chunk_flags(bad, off[2][c ? HT__GROUP_CHUNKS_V14 : 0], HT__CHUNK_CONT);
		check_group_read(bad, "0", ev2, n, why);
		check_group_read(bad, "3", ev2, n, why);
	}
}

/* A group past its bytes goes on to twice them while an eighth of its
   allocations are live (the frees of those would be raw in the next
   group), and stops at them when few are: one thread allocating blocks
   of 64 bytes and freeing each LAG allocations later, in chunks of 4 KiB
   and groups of 16 KiB. With all but the last 16 freed the groups are 4
   or 5 chunks; with every block live, 8 or 9. */
static void test_group_live(void)
{
	for (int all_live = 0; all_live < 2; all_live++) {
		char path[300];
		test_path(path, sizeof(path), all_live ? "glive.htr" : "gfreed.htr");
		enum { N = 30000, LAG = 16 };
		static struct ht_event evs[2 * N];
		int n = 0;
		for (int i = 0; i < N; i++) {
			uint64_t a = 0x7f3000000000ull + 4096 * (uint64_t)i;
			evs[n++] = (struct ht_event){.type = HT_EV_ALLOC,
						     .func = HT_FN_MALLOC,
						     .pid = 4,
						     .tid = 40,
						     .ts = 2 * (uint64_t)i + 1,
						     .addr = a,
						     .size = 64};
			if (!all_live && i >= LAG)
				evs[n++] = (struct ht_event){.type = HT_EV_FREE,
							     .func = HT_FN_FREE,
							     .pid = 4,
							     .tid = 40,
							     .ts = 2 * (uint64_t)i + 2,
							     .addr = a - 4096 * LAG};
		}
		struct ht__trace_meta meta = {.argc = 0};
		struct ht__writer *w;
		CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
		CHECK_EQ(ht__writer_set_chunk_size(w, 4096), 0);
		CHECK_EQ(ht__writer_set_group_size(w, 16384), 0);
		for (int i = 0; i < n; i++)
			CHECK_EQ(ht__writer_event(w, &evs[i], NULL), 0);
		CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
		check_group_read(path, "0", evs, n, NULL);
		static long off[512];
		static uint8_t flags[512];
		int nc = events_chunks(path, off, flags, 512);
		CHECK(nc > 20 && nc < 512);
		int run = 1, longest = 1;
		for (int i = 1; i < nc; i++) {
			run = flags[i] & HT__CHUNK_CONT ? run + 1 : 1;
			longest = run > longest ? run : longest;
		}
		if (all_live)
			CHECK(longest >= 8 && longest <= 9);
		else
			CHECK(longest >= 4 && longest <= 5);
	}
}

/*
 * A group with 200 000 live blocks: the writer's address map grows past
 * 2 MiB into the mapping it then doubles in place, twice, moving its
 * entries within it (amap_grow). Every block is still found when it is
 * freed: the blocks lie gigabytes apart, so a block the map had lost
 * would cost a raw code of six bytes where its free by distance back
 * costs three at most.
 */
static void test_map_growth(void)
{
	char path[300];
	test_path(path, sizeof(path), "mapgrow.htr");
	enum { N = 200000 };
	static struct ht_event evs[2 * N];
	int n = 0;
	for (int i = 0; i < 2 * N; i++) {
		uint32_t k = (uint32_t)(i < N ? i : i - N) * 2654435761u; /* distinct */
		evs[n++] = (struct ht_event){.type = i < N ? HT_EV_ALLOC : HT_EV_FREE,
					     .func = i < N ? HT_FN_MALLOC : HT_FN_FREE,
					     .pid = 5,
					     .tid = 50,
					     .ts = (uint64_t)i + 1,
					     .addr = 0x100000000000ull + ((uint64_t)k << 4),
					     .size = i < N ? 48 : 0};
	}
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	for (int i = 0; i < n; i++)
		CHECK_EQ(ht__writer_event(w, &evs[i], NULL), 0);
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
	check_read_back(path, evs, n, RB_SIZE | RB_TS | RB_NO_WARNING);
	static long off[64];
	static uint8_t flags[64];
	int nc = events_chunks(path, off, flags, 64);
	CHECK(nc > 1);
	for (int i = 1; i < nc; i++)
		CHECK(flags[i] & HT__CHUNK_CONT); /* one group */
	/* The k-th free names the block N - k allocations back: d << 1 | 1. */
	uint64_t want = 0;
	uint8_t v[10];
	for (uint64_t d = 1; d <= N; d++)
		want += (uint64_t)(ht__put_varint(v, d << 1 | 1) - v);
	CHECK_EQ(stream_bytes(path, 1u << HT__S_FREE), want);
}

/*
 * A new block found at each of the sixteen places of its size class's
 * ring: sixteen blocks a megabyte apart are made, freed, and made again
 * in the order they were made, so the first comes back from the ring's
 * last place and each next one from the place before. Each costs a code
 * of one byte (a block the ring search missed would cost a raw code of
 * three), so the address codes of the whole trace are 16 bytes longer
 * than without the last sixteen, and it reads back exactly.
 */
static void test_ring_places(void)
{
	enum { K = HT__RING_DEPTH };
	static struct ht_event evs[3 * K];
	int n = 0;
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < K; i++)
			evs[n++] =
			    (struct ht_event){.type = round == 1 ? HT_EV_FREE : HT_EV_ALLOC,
					      .func = round == 1 ? HT_FN_FREE : HT_FN_MALLOC,
					      .pid = 6,
					      .tid = 60,
					      .ts = (uint64_t)n + 1,
					      .addr = 0x7f0000000000ull + ((uint64_t)i << 20),
					      .size = round == 1 ? 0 : 40};
	char path[300], part[300];
	test_path(path, sizeof(path), "ringplaces.htr");
	test_path(part, sizeof(part), "ringplaces2.htr");
	write_events(path, evs, n);
	write_events(part, evs, n - K);
	check_read_back(path, evs, n, RB_SIZE | RB_TS | RB_NO_WARNING);
	CHECK_EQ(addr_stream_bytes(path) - addr_stream_bytes(part), (uint64_t)K);
}

/* The whole file at path, in a buffer of its own; *n its length. */
static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = NULL;
	*n = 0;
	if (f && fseek(f, 0, SEEK_END) == 0) {
		long len = ftell(f);
		b = len > 0 ? malloc((size_t)len) : NULL;
		if (b && fseek(f, 0, SEEK_SET) == 0 && fread(b, 1, (size_t)len, f) == (size_t)len)
			*n = (size_t)len;
	}
	if (f)
		fclose(f);
	return b;
}

/* Is e what ht__writer_heap_plain() takes: malloc or free, no flags? */
static bool plain_event(const struct ht_event *e)
{
	return !e->flags && ((e->type == HT_EV_ALLOC && e->func == HT_FN_MALLOC) ||
			     (e->type == HT_EV_FREE && e->func == HT_FN_FREE));
}

/*
 * ht__writer_heap_event() and ht__writer_heap_plain() write what
 * ht__writer_event() writes for the same allocations and frees, byte for
 * byte: on their fast path (the thread of the previous event) and off it
 * (another thread, a chunk's first event, a failed allocation, another
 * function), among events they do not take; heap_plain's runs are each
 * thread's plain events in a row, up to 64 (as the collector hands them).
 */
static void test_heap_events(void)
{
	char a[300], b[300], c[300];
	test_path(a, sizeof(a), "heapev-a.htr");
	test_path(b, sizeof(b), "heapev-b.htr");
	test_path(c, sizeof(c), "heapev-c.htr");
	enum { N = 20000 };
	static struct ht_event ev[N];
	uint64_t ts = 0, live[2][64] = {{0}};
	for (int i = 0; i < N; i++) {
		int t = (i / 7) % 2, k = (i * 5) % 64;
		struct ht_event e = {.pid = 4, .tid = 40 + t, .ts = ts += 1 + i % 3};
		if (i % 500 == 499) {
			e.type = HT_EV_MMAP; /* not a heap event */
			e.func = HT_FN_MMAP;
			e.addr = 0x7f0000000000ull + (uint64_t)i * 4096;
			e.size = 4096;
			e.fd = -1;
		} else if (live[t][k]) {
			e.type = HT_EV_FREE;
			e.func = HT_FN_FREE;
			e.addr = live[t][k];
			live[t][k] = 0;
		} else {
			e.type = HT_EV_ALLOC;
			e.func = i % 11 == 0 ? HT_FN_CALLOC : HT_FN_MALLOC;
			e.size = 16 + (uint64_t)(i % 9) * 24;
			e.stack = 1 + (uint32_t)(i % 3);
			if (i % 97 == 0) { /* failed: no block */
				e.type = HT_EV_ALLOC_FAIL;
			} else {
				e.addr = 0x10000000ull + (uint64_t)t * 0x1000000 + (uint64_t)i * 48;
				live[t][k] = e.addr;
			}
		}
		ev[i] = e;
	}
	for (int k = 0; k < 3; k++) {
		struct ht__trace_meta meta = {.argc = 0};
		struct ht__writer *w;
		CHECK_EQ(ht__writer_open(&w, k == 2 ? c : k ? b : a, &meta), 0);
		CHECK_EQ(ht__writer_set_chunk_size(w, 8192), 0);
		for (uint32_t f = 0; f < 3; f++)
			ht__writer_frame(w, f, HT_MODULE_NONE, 0x400000 + f);
		for (uint32_t id = 1; id <= 3; id++) {
			uint32_t fr[2] = {id - 1, 0};
			CHECK_EQ(ht__writer_stack(w, id, fr, 2), 0);
		}
		for (int i = 0; i < N; i++) {
			const struct ht_event *e = &ev[i];
			if (k == 2 && plain_event(e)) {
				struct ht__heap_plain h[64];
				uint32_t n = 0;
				for (;
				     i < N && n < 64 && plain_event(&ev[i]) && ev[i].tid == e->tid;
				     i++, n++)
					h[n] = (struct ht__heap_plain){.type = ev[i].type,
								       .ts = ev[i].ts,
								       .stack = ev[i].stack,
								       .addr = ev[i].addr,
								       .size = ev[i].size};
				i--;
				CHECK_EQ(ht__writer_heap_plain(w, e->process, e->pid, e->tid, h, n),
					 0);
			} else if (k == 1 && (e->type == HT_EV_ALLOC || e->type == HT_EV_FREE)) {
				struct ht__heap_event h = {.type = e->type,
							   .func = e->func,
							   .process = e->process,
							   .pid = e->pid,
							   .tid = e->tid,
							   .ts = e->ts,
							   .stack = e->stack,
							   .addr = e->addr,
							   .size = e->size};
				CHECK_EQ(ht__writer_heap_event(w, &h), 0);
			} else {
				CHECK_EQ(ht__writer_event(w, e, NULL), 0);
			}
		}
		CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
	}
	size_t na, nb, nc;
	uint8_t *fa = slurp(a, &na), *fb = slurp(b, &nb), *fc = slurp(c, &nc);
	CHECK(na > 4 * 8192 / 3); /* several chunks */
	CHECK_EQ(na, nb);
	CHECK(fa && fb && na == nb && memcmp(fa, fb, na) == 0);
	CHECK_EQ(na, nc);
	CHECK(fa && fc && na == nc && memcmp(fa, fc, na) == 0);
	free(fa);
	free(fb);
	free(fc);
	check_group_read(b, "0", ev, N, NULL);
	check_group_read(c, "0", ev, N, NULL);
}

/* Stack codes 0 in the STACK streams of a trace's events chunks. */
static uint64_t stack_zero_codes(const char *path)
{
	FILE *f = fopen(path, "rb");
	static uint8_t comp[2 << 20], raw[2 << 20];
	uint8_t hb[HT__CHUNK_HEADER_SIZE];
	struct ht__chunk_header h;
	long off = HT__HEADER_SIZE;
	uint64_t zeros = 0;
	while (f && fseek(f, off, SEEK_SET) == 0 && fread(hb, 1, sizeof(hb), f) == sizeof(hb) &&
	       ht__chunk_header_parse(hb, &h) == 0 && h.comp_size <= sizeof(comp)) {
		off += HT__CHUNK_HEADER_SIZE + h.comp_size;
		if (h.kind != HT__CHUNK_EVENTS || fread(comp, 1, h.comp_size, f) != h.comp_size)
			continue;
		size_t n = ZSTD_decompress(raw, sizeof(raw), comp, h.comp_size);
		CHECK(!ZSTD_isError(n));
		if (ZSTD_isError(n))
			break;
		struct ht__cur cur[HT__NSTREAMS];
		static uint8_t *planes;
		static size_t planes_cap;
		const char *why;
		CHECK_EQ(ht__streams_open(raw, raw + n, HT__FILE_VERSION, cur, &planes, &planes_cap,
					  &why),
			 0);
		while (cur[HT__S_STACK].p < cur[HT__S_STACK].end)
			zeros += ht__get_varint(&cur[HT__S_STACK]) == 0;
	}
	if (f)
		fclose(f);
	return zeros;
}

/*
 * Predicted stacks (format version 8): three threads allocate sizes of a
 * few classes, each (thread, class) mostly from one stack that changes now
 * and then, with frees (no size) and an mmap (a size) in between. Every
 * event comes back exactly, and the STACK stream has a 0 exactly where the
 * stack equals its thread's previous one of that size class.
 */
static void test_stack_prediction(void)
{
	char path[300];
	test_path(path, sizeof(path), "stackpred.htr");
	enum { N = 6000 };
	static struct ht_event ev2[2 * N];
	static uint32_t last[3][HT__RING_CLASSES];
	memset(last, 0, sizeof(last));
	static const uint64_t sizes[] = {24, 40, 100, 1000, 5000, 1 << 20};
	int n = 0;
	uint64_t want_zeros = 0, ts = 0;
	rng = 88172645463325252ull;
	for (int i = 0; i < N; i++) {
		uint64_t x = next_rand();
		int t = (int)(x % 3);
		uint64_t size = sizes[(x >> 8) % 6];
		/* a stack per (thread, size) that changes every 700 events, one
		   in 8 from elsewhere */
		uint32_t stack = (x >> 16) % 8 ? 1 + (uint32_t)(t * 10 + (x >> 8) % 6 + i / 700)
					       : 100 + (uint32_t)((x >> 20) % 50);
		int mmap = size == 1 << 20;
		ev2[n++] = (struct ht_event){.type = mmap ? HT_EV_MMAP : HT_EV_ALLOC,
					     .func = mmap ? HT_FN_MMAP : HT_FN_MALLOC,
					     .pid = 5,
					     .tid = 50 + t,
					     .ts = ++ts,
					     .addr = 0x7f0000000000ull + (uint64_t)i * 0x200000,
					     .size = size,
					     .prot = mmap ? 3 : 0,
					     .stack = stack};
		uint32_t *l = &last[t][ht__size_class(size)];
		want_zeros += *l == stack;
		*l = stack;
		if (x >> 40 & 1)
			ev2[n++] = (struct ht_event){.type = HT_EV_FREE,
						     .func = HT_FN_FREE,
						     .pid = 5,
						     .tid = 50 + t,
						     .ts = ++ts,
						     .addr = ev2[n - 1].addr,
						     .stack = 200};
	}
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	for (uint32_t f = 0; f <= 250; f++)
		ht__writer_frame(w, f, HT_MODULE_NONE, 0x400000 + f);
	for (uint32_t id = 1; id <= 250; id++)
		CHECK_EQ(ht__writer_stack(w, id, &id, 1), 0);
	for (int i = 0; i < n; i++)
		CHECK_EQ(ht__writer_event(w, &ev2[i], NULL), 0);
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
	check_group_read(path, "0", ev2, n, NULL);
	check_group_read(path, "3", ev2, n, NULL);
	CHECK(want_zeros > N / 3); /* 5000 and 1 MiB share class 63: they alternate */
	CHECK_EQ(stack_zero_codes(path), want_zeros);
}

/*
 * Blocks of 993 to 1007 bytes (size class 64, the last ring) freed and taken
 * again by two threads, over many small chunks: each comes back from its own
 * thread's ring exactly (the writer once kept the class in 6 bits and
 * pushed these on ring 0 while the reader used ring 64).
 */
static void test_class_64(void)
{
	char path[300];
	test_path(path, sizeof(path), "class64.htr");
	enum { N = 6000 };
	static struct ht_event e64[N];
	uint64_t base[2] = {0x7f3000000000ull, 0x7f4000000000ull}, ts = 0;
	int n = 0;
	for (int i = 0; n + 3 <= N; i++) {
		int t = i % 2;
		uint64_t size = 993 + (uint64_t)(i % 15), a = base[t] + (uint64_t)(i % 3) * 1024;
		struct ht_event al = {.type = HT_EV_ALLOC,
				      .func = HT_FN_MALLOC,
				      .pid = 4,
				      .tid = 40 + t,
				      .ts = ++ts,
				      .addr = a,
				      .size = size};
		struct ht_event fr = al;
		fr.type = HT_EV_FREE;
		fr.func = HT_FN_FREE;
		fr.size = 0;
		fr.ts = ++ts;
		e64[n++] = al;
		e64[n++] = fr;
		al.ts = ++ts; /* the same block again: ring 64, entry 0 */
		e64[n++] = al;
		fr.ts = ++ts;
		if (n < N)
			e64[n++] = fr;
	}
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	CHECK_EQ(ht__writer_set_chunk_size(w, 4096), 0);
	for (int i = 0; i < n; i++)
		CHECK_EQ(ht__writer_event(w, &e64[i], NULL), 0);
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
	check_read_back(path, e64, n, RB_SIZE | RB_TID | RB_NO_WARNING);
	/* The second allocation of each block is a one-byte ring code. */
	CHECK(addr_stream_bytes(path) < (uint64_t)n * 3);
}

/*
 * Blocks of no bytes (malloc(0), calloc of no bytes, realloc of NULL to 0)
 * have a ring of their own since version 14, the writer's ring 0: a reader
 * that took the class of size 0 (2, a 32-byte chunk's) pushed such a
 * block's free on the ring of the 8-byte blocks, and the next new block
 * coded by its place in that ring came back as the block of no bytes
 * (bash's regcomp: a malloc(0) freed, then malloc(13) of the block freed
 * before it; 28 wrong addresses in a bash -c of two [[ =~ ]]).
 */
static void test_size0(void)
{
	const uint64_t a = 0x55cff5d051e0ull, b = 0x55cff5d048f0ull, c = 0x55cff5d04910ull;
	struct ht_event evs[] = {
	    {.type = HT_EV_ALLOC, .func = HT_FN_MALLOC, .addr = a, .size = 8},
	    {.type = HT_EV_FREE, .func = HT_FN_FREE, .addr = a},
	    {.type = HT_EV_ALLOC, .func = HT_FN_MALLOC, .addr = b, .size = 0},
	    {.type = HT_EV_FREE, .func = HT_FN_FREE, .addr = b},
	    {.type = HT_EV_ALLOC, .func = HT_FN_MALLOC, .addr = a, .size = 13},
	    {.type = HT_EV_ALLOC, .func = HT_FN_CALLOC, .addr = b, .size = 0},
	    {.type = HT_EV_REALLOC, .func = HT_FN_REALLOC, .addr = c, .size = 0},
	    {.type = HT_EV_FREE, .func = HT_FN_FREE, .addr = a},
	    {.type = HT_EV_FREE, .func = HT_FN_FREE, .addr = c},
	    {.type = HT_EV_FREE, .func = HT_FN_FREE, .addr = b},
	    {.type = HT_EV_ALLOC, .func = HT_FN_MALLOC, .addr = c, .size = 0},
	    {.type = HT_EV_ALLOC, .func = HT_FN_MALLOC, .addr = a, .size = 16},
	    {.type = HT_EV_ALLOC, .func = HT_FN_MALLOC, .addr = b, .size = 0},
	};
	int n = (int)(sizeof(evs) / sizeof(evs[0]));
	for (int i = 0; i < n; i++) {
		evs[i].pid = 9;
		evs[i].tid = 90;
		evs[i].ts = (uint64_t)i + 1;
	}
	char path[300];
	test_path(path, sizeof(path), "size0.htr");
	write_events(path, evs, n);
	check_read_back(path, evs, n, RB_SIZE | RB_OLD | RB_NO_WARNING);
	/* Each new block again, but the first, is a ring code (one byte). */
	CHECK(addr_stream_bytes(path) < 40);
}

/*
 * The writer against the reader on histories a model of glibc makes: per
 * thread and chunk size a list of freed blocks reused newest first (mostly),
 * sizes of 0 to 2000 bytes with many of no bytes, calloc and realloc of
 * NULL, frees by another thread, small chunks: every address and size reads
 * back (what the size-0 ring mismatch broke; test_size0 is its one case).
 */
static void test_model_histories(void)
{
	enum { N = 20000, T = 4, NS = 12, MAXLIVE = 4096 };
	static const uint64_t sizes[NS] = {0, 0, 0, 1, 8, 13, 16, 24, 40, 100, 1000, 2000};
	static struct ht_event evs[N];
	static uint64_t live[MAXLIVE], freed[T][128][256]; /* by chunk / 16 */
	static uint64_t live_size[MAXLIVE];
	static int nfreed[T][128];
	char path[300];
	test_path(path, sizeof(path), "model.htr");
	for (int seed = 0; seed < 6; seed++) {
		rng = 88172645463325252ull + (uint64_t)seed * 7919;
		int threads = 1 + seed % T, nlive = 0;
		uint64_t top[T];
		for (int t = 0; t < T; t++)
			top[t] = 0x560000000000ull + ((uint64_t)t << 24);
		memset(nfreed, 0, sizeof(nfreed));
		for (int i = 0; i < N; i++) {
			uint64_t x = next_rand();
			int t = (int)(x % (uint64_t)threads);
			struct ht_event *e = &evs[i];
			*e = (struct ht_event){.pid = 7, .tid = 70 + t, .ts = (uint64_t)i + 1};
			if ((x >> 8) % 2 || !nlive) {
				uint64_t size = sizes[(x >> 16) % NS], chunk = ht__chunk_size(size);
				unsigned c = (unsigned)(chunk >> 4);
				int *nf = &nfreed[t][c];
				uint64_t a;
				if (*nf && (x >> 24) % 10) {
					int k = (x >> 32) % 10 < 7
						    ? *nf - 1
						    : (int)((x >> 40) % (uint64_t)*nf);
					a = freed[t][c][k];
					memmove(&freed[t][c][k], &freed[t][c][k + 1],
						(size_t)(*nf - k - 1) * sizeof(uint64_t));
					--*nf;
				} else {
					a = top[t];
					top[t] += chunk;
				}
				unsigned kind = (x >> 48) % 20;
				e->type = kind == 0 ? HT_EV_REALLOC : HT_EV_ALLOC;
				e->func = kind == 0  ? HT_FN_REALLOC
					  : kind < 3 ? HT_FN_CALLOC
						     : HT_FN_MALLOC;
				e->addr = a;
				e->size = size;
				if (nlive ==
				    MAXLIVE) { /* the model forgets place 0: live to the end */
					live[0] = live[--nlive];
					live_size[0] = live_size[nlive];
				}
				live_size[nlive] = size;
				live[nlive++] = a;
			} else {
				int k = (int)((x >> 16) % (uint64_t)nlive);
				uint64_t a = live[k];
				unsigned c = (unsigned)(ht__chunk_size(live_size[k]) >> 4);
				live[k] = live[--nlive];
				live_size[k] = live_size[nlive];
				int ft =
				    (x >> 32) % 10 < 3 ? (int)((x >> 40) % (uint64_t)threads) : t;
				e->tid = 70 + ft;
				e->type = HT_EV_FREE;
				e->func = HT_FN_FREE;
				e->addr = a;
				if (nfreed[ft][c] < 256)
					freed[ft][c][nfreed[ft][c]++] = a;
			}
		}
		struct ht__trace_meta meta = {.argc = 0};
		struct ht__writer *w;
		unlink(path);
		CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
		if (!w)
			return;
		CHECK_EQ(ht__writer_set_chunk_size(w, 4096u << (seed % 3)), 0);
		int rc = 0;
		for (int i = 0; i < N && rc == 0; i++)
			rc = ht__writer_event(w, &evs[i], NULL);
		CHECK_EQ(rc, 0);
		CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
		check_read_back(path, evs, N, RB_SIZE | RB_TID | RB_NO_WARNING);
	}
}

/* A trace of a format version this build does not read (1, or one from the
   future) is refused, never misread; version 2 is read (format.golden). */
static void test_other_version(void)
{
	char path[300];
	test_path(path, sizeof(path), "v1.htr");
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
	FILE *f = fopen(path, "r+b");
	uint8_t h[HT__HEADER_SIZE];
	CHECK(f && fread(h, 1, sizeof(h), f) == sizeof(h));
	CHECK_EQ(ht__get_le32(h + 8), HT__FILE_VERSION);
	static const uint32_t refused[] = {0, 1, HT__FILE_VERSION + 1};
	for (unsigned i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		uint32_t v = refused[i];
		ht__put_le32(h + 8, v);
		ht__put_le32(h + 60, ht__crc32(h, 60)); /* a sound header of version v */
		fseek(f, 0, SEEK_SET);
		fwrite(h, 1, sizeof(h), f);
		fflush(f);
		struct ht_reader *r = (void *)1;
		CHECK_EQ(ht_reader_open(&r, path), HT_ERR_VERSION);
		CHECK(r == NULL);
	}
	fclose(f);
	CHECK(strstr(ht_strerror(HT_ERR_VERSION), "version") != NULL);
}

/* Makes the trace at path a sound header of version v; 0 when it cannot. */
static int set_version(const char *path, uint32_t v)
{
	FILE *f = fopen(path, "r+b");
	uint8_t h[HT__HEADER_SIZE];
	int ok = f && fread(h, 1, sizeof(h), f) == sizeof(h);
	CHECK(ok);
	if (ok) {
		ht__put_le32(h + 8, v);
		ht__put_le32(h + 60, ht__crc32(h, 60));
		fseek(f, 0, SEEK_SET);
		ok = fwrite(h, 1, sizeof(h), f) == sizeof(h);
	}
	if (f)
		fclose(f);
	return ok;
}

/*
 * A heap snapshot trace: its SNAPSHOT events read back field for
 * field; only such a trace takes them, and the rule for older versions
 * (code 21 unknown there) ends the events instead of misreading.
 */
static void test_snapshot(void)
{
	char path[300];
	test_path(path, sizeof(path), "snap.htr");
	struct ht__trace_meta meta = {.flags = HT_TRACEF_SNAPSHOT};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	if (!w)
		return;
	struct ht_event begin = {.type = HT_EV_SNAPSHOT,
				 .flags = HT_EVF_SNAPSHOT_BEGIN,
				 .pid = 7,
				 .tid = 7,
				 .ts = 1000,
				 .value = 1,
				 .size = 64,
				 .addr = 2};
	/* 10 ns after begin, and pool 10 ns after it: each time delta then
	   has a TIME varint of its own (version 11 packs deltas of 0 to 3),
	   which the version-5 reading below parses, as another time. */
	struct ht_event one = {.type = HT_EV_SNAPSHOT,
			       .pid = 7,
			       .tid = 7,
			       .ts = 1010,
			       .value = 1,
			       .size = 123456,
			       .addr = 77,
			       .old_size = 9876543210ull,
			       .old_addr = 5000000000ull};
	/* A custom heap's stack (version 6). */
	struct ht_event pool = one;
	pool.heap = 0x7f0012345678ull;
	pool.ts = 1020;
	pool.stack = 3;
	pool.size = 300;
	pool.addr = 3;
	CHECK_EQ(ht__writer_event(w, &begin, NULL), 0);
	CHECK_EQ(ht__writer_event(w, &one, NULL), 0);
	CHECK_EQ(ht__writer_event(w, &pool, NULL), 0);
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	CHECK_EQ(ht_reader_info(r)->version, HT__FILE_VERSION);
	CHECK(ht_reader_info(r)->flags & HT_TRACEF_SNAPSHOT);
	struct ht_event ev;
	CHECK_EQ(ht_reader_next(r, &ev), 1);
	CHECK(ev.type == HT_EV_SNAPSHOT && ev.flags == HT_EVF_SNAPSHOT_BEGIN && ev.value == 1 &&
	      ev.size == 64 && ev.addr == 2 && ev.ts == 1000);
	CHECK_EQ(ht_reader_next(r, &ev), 1);
	CHECK(ev.type == HT_EV_SNAPSHOT && ev.flags == 0 && ev.value == 1 && ev.size == 123456 &&
	      ev.addr == 77 && ev.old_size == 9876543210ull && ev.old_addr == 5000000000ull &&
	      ev.heap == 0);
	CHECK_EQ(ht_reader_next(r, &ev), 1);
	CHECK(ev.type == HT_EV_SNAPSHOT && ev.heap == 0x7f0012345678ull && ev.stack == 3 &&
	      ev.size == 300 && ev.addr == 3);
	CHECK_EQ(ht_reader_next(r, &ev), 0);
	ht_reader_close(r);

	/* Made version 5, the custom heap's stack ends the events (an older
	   reader would have shown it in the process heap): the two before it
	   read. */
	if (!set_version(path, HT__FILE_VERSION_SNAPHEAP - 1))
		return;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	CHECK_EQ(ht_reader_next(r, &ev), 1);
	CHECK_EQ(ht_reader_next(r, &ev), 1);
	CHECK(ev.heap == 0 && ev.size == 123456);
	CHECK(ht_reader_next(r, &ev) <= 0);
	CHECK(ht_reader_info(r)->flags & HT_TRACEF_TRUNCATED);
	ht_reader_close(r);

	/* Not a snapshot trace: no SNAPSHOT event goes in. */
	test_path(path, sizeof(path), "nosnap.htr");
	struct ht__trace_meta plain = {.argc = 0};
	CHECK_EQ(ht__writer_open(&w, path, &plain), 0);
	if (!w)
		return;
	CHECK_EQ(ht__writer_event(w, &one, NULL), HT_ERR_INVALID);
	ht__writer_abort(w);

	/* The snapshot trace with its header made version 3: the reader stops
	   (damaged) rather than misread (the event is unknown there, and a
	   version-5 stream table is not a version-3 one). */
	test_path(path, sizeof(path), "snap.htr");
	if (!set_version(path, 3))
		return;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (!r)
		return;
	CHECK(ht_reader_next(r, &ev) <= 0);
	CHECK(ht_reader_info(r)->flags & HT_TRACEF_TRUNCATED);
	ht_reader_close(r);
}

/* An events payload of seven streams, all empty but SIZE: the planes of
   len bytes at split, the first lo bytes long. Returns its end. */
static uint8_t *planes_payload(uint8_t *out, const uint8_t *split, size_t len, size_t lo)
{
	uint8_t *t = ht__put_varint(out, HT__NSTREAMS);
	for (int i = 0; i < HT__NSTREAMS; i++) {
		t = ht__put_varint(t, i == HT__S_SIZE ? (uint64_t)len << 1 | 1 : 0);
		if (i == HT__S_SIZE)
			t = ht__put_varint(t, lo);
	}
	memcpy(t, split, len);
	return t + len;
}

/*
 * Planes (version 5): varints split into first bytes and the bytes after,
 * joined back exactly by the reader's stream table; planes that do not pair
 * up are damage. Then a trace of random sizes and far frees, whose SIZE and
 * FREE streams the writer stores as planes, reads back event for event.
 */
/* Planes split one byte at a time, as docs/trace-format.md says. */
static size_t planes_ref(const uint8_t *in, size_t len, uint8_t *lo, uint8_t *hi)
{
	size_t nlo = 0, nhi = 0;
	int first = 1;
	for (size_t i = 0; i < len; i++) {
		if (first)
			lo[nlo++] = in[i];
		else
			hi[nhi++] = in[i];
		first = !(in[i] & 0x80);
	}
	return nlo;
}

/* ht__planes_split (eight bytes at a time where the CPU has a fast pext)
   and ht__planes_split_plain (a byte at a time, as elsewhere) against a
   plain split: varints of 1 to 10 bytes in runs of each length
   and mixed, and any bytes at all, cut at every length up to 300. */
static void test_planes_split(void)
{
	static uint8_t in[3000], lo[3000], hi[3000], rlo[3000], rhi[3000];
	uint64_t x = 88172645463325252ull;
	for (int kind = 0; kind < 12; kind++) {
		size_t n = 0;
		while (n + 10 <= sizeof(in)) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			if (kind == 11) { /* any bytes */
				in[n++] = (uint8_t)x;
				continue;
			}
			unsigned bytes =
			    kind < 10 ? (unsigned)kind + 1 : 1 + (unsigned)(x >> 60) % 10;
			uint64_t v =
			    bytes == 10 ? x | 1ull << 63 : (x >> 1) & ((1ull << (7 * bytes)) - 1);
			v |= bytes > 1 && bytes < 10 ? 1ull << (7 * bytes - 7) : 0;
			n = (size_t)(ht__put_varint(in + n, v) - in);
		}
		for (size_t len = 0; len <= 300; len++) {
			size_t rnlo = planes_ref(in + n - len, len, rlo, rhi);
			for (int plain = 0; plain < 2; plain++) {
				memset(lo, 0, len), memset(hi, 0, len);
				size_t nlo = plain
						 ? ht__planes_split_plain(in + n - len, len, lo, hi)
						 : ht__planes_split(in + n - len, len, lo, hi);
				CHECK_EQ(nlo, rnlo);
				CHECK(!memcmp(lo, rlo, nlo) && !memcmp(hi, rhi, len - nlo));
			}
		}
	}
}

/* ht__varints_skip() against n ht__get_varint() calls: where the n
   varints end, or NULL for one of more than 10 bytes or one cut by the end,
   on varints of 1 to 10 bytes and runs of 9 to 12 continuation bytes, at
   every offset of the SSE2 blocks. */
static void test_varints_skip(void)
{
	static uint8_t in[160];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	int nulls = 0, whole = 0;
	for (int round = 0; round < 200; round++) {
		size_t n = 0;
		while (n + 12 <= sizeof(in)) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			unsigned pick = (unsigned)(x >> 56);
			if (round % 4 == 3 && pick < 6) { /* a run of 9 to 12 continuation bytes */
				unsigned run = 9 + (pick & 3);
				memset(in + n, 0x80 | (uint8_t)(x & 0x7f), run);
				n += run;
				in[n++] = (uint8_t)(x >> 8) & 0x7f;
				continue;
			}
			unsigned bytes = pick < 128 ? 1 : pick < 220 ? 2 : 3 + (pick % 8);
			uint64_t v =
			    bytes == 10 ? x | 1ull << 63 : (x >> 1) & ((1ull << (7 * bytes)) - 1);
			v |= bytes > 1 && bytes < 10 ? 1ull << (7 * bytes - 7) : 0;
			n = (size_t)(ht__put_varint(in + n, v) - in);
		}
		for (size_t from = 0; from < 17; from++) {
			size_t end = n - (size_t)(x >> (from * 3) & 7);
			for (uint64_t k = 0; k < 120; k++) {
				struct ht__cur c = {in + from, in + end, 0, NULL, NULL};
				for (uint64_t i = 0; i < k && !c.bad; i++)
					ht__get_varint(&c);
				const uint8_t *want = c.bad ? NULL : c.p;
				const uint8_t *got = ht__varints_skip(in + from, in + end, k);
				CHECK(got == want);
				nulls += !want;
				whole += want && want == in + end;
			}
		}
	}
	CHECK(nulls > 1000); /* both ways taken */
	CHECK(whole > 0);
}

static void test_planes(void)
{
	static const uint64_t vals[] = {0, 1, 127, 128, 300, 16383, 16384, 1ull << 40, UINT64_MAX};
	enum { NV = sizeof(vals) / sizeof(vals[0]) };
	uint8_t in[NV * 10], split[NV * 10], hi[NV * 10], payload[16 + NV * 10], *p = in;
	for (int i = 0; i < NV; i++)
		p = ht__put_varint(p, vals[i]);
	size_t len = (size_t)(p - in), lo = ht__planes_split(in, len, split, hi);
	CHECK_EQ(lo, (size_t)NV);
	memcpy(split + lo, hi, len - lo);
	struct ht__cur cur[HT__NSTREAMS];
	uint8_t *buf = NULL;
	size_t cap = 0;
	const char *why = NULL;
	uint8_t *end = planes_payload(payload, split, len, lo);
	CHECK_EQ(ht__streams_open(payload, end, HT__FILE_VERSION, cur, &buf, &cap, &why), 0);
	for (int i = 0; i < NV; i++)
		CHECK_EQ(ht__get_varint(&cur[HT__S_SIZE]), vals[i]);
	CHECK(cur[HT__S_SIZE].p == cur[HT__S_SIZE].end && !cur[HT__S_SIZE].bad);
	CHECK(cur[HT__S_FREE].p == cur[HT__S_FREE].end);
	/* The first plane one byte longer (a continuation byte of the second
	   taken as a first byte): they no longer pair up. */
	end = planes_payload(payload, split, len, lo + 1);
	CHECK_EQ(ht__streams_open(payload, end, HT__FILE_VERSION, cur, &buf, &cap, &why),
		 HT_ERR_CORRUPT);
	CHECK(why && strstr(why, "planes"));
	/* Read in place from the planes (the reader's decode of events): the
	   same values, and the same damage for planes cut or grown at either
	   end, shifted, or with a tail's last byte saying more follow. */
	end = planes_payload(payload, split, len, lo);
	CHECK_EQ(ht__streams_open_direct(payload, end, HT__FILE_VERSION, cur, &buf, &cap,
					 1u << HT__S_SIZE, &why),
		 0);
	CHECK(cur[HT__S_SIZE].hi != NULL);
	for (int i = 0; i < NV; i++)
		CHECK_EQ(ht__get_varint(&cur[HT__S_SIZE]), vals[i]);
	CHECK(cur[HT__S_SIZE].p == cur[HT__S_SIZE].end && !cur[HT__S_SIZE].bad);
	CHECK(cur[HT__S_SIZE].hi == cur[HT__S_SIZE].hend);
	CHECK(ht__get_varint(&cur[HT__S_SIZE]) == 0 && cur[HT__S_SIZE].bad);
	int damaged = 0;
	for (size_t cut = 0; cut < 4; cut++)
		for (size_t l = lo - 2; l <= lo + 2; l++) {
			uint8_t mut[sizeof(split)];
			memcpy(mut, split, len);
			if (cut == 1)
				mut[len - 1] |= 0x80; /* the last tail goes on */
			if (cut == 2)
				mut[l] &= 0x7f; /* a tail ends early */
			size_t n = len - (cut == 3);
			int joined = ht__streams_open(payload, planes_payload(payload, mut, n, l),
						      HT__FILE_VERSION, cur, &buf, &cap, &why);
			int direct = ht__streams_open_direct(
			    payload, planes_payload(payload, mut, n, l), HT__FILE_VERSION, cur,
			    &buf, &cap, 1u << HT__S_SIZE, &why);
			CHECK_EQ(direct, joined);
			if (cut == 0 && l == lo)
				CHECK_EQ(joined, 0);
			damaged += joined == HT_ERR_CORRUPT;
		}
	CHECK_EQ(damaged, 18);
	free(buf);

	char path[300];
	test_path(path, sizeof(path), "planes.htr");
	enum { N = 60000, LIVE = 2048 };
	static struct ht_event evs[2 * N];
	static uint64_t live[LIVE];
	uint64_t top = 0x7f5000000000ull, seed = 7, ts = 0;
	int n = 0;
	for (int i = 0; i < N; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t r = (uint32_t)(seed >> 33), at = r % LIVE;
		if (live[at])
			evs[n++] = (struct ht_event){.type = HT_EV_FREE,
						     .func = HT_FN_FREE,
						     .pid = 5,
						     .tid = 5,
						     .ts = ts += 150,
						     .addr = live[at]};
		uint64_t size = 8 + (r >> 16) % 2000;
		evs[n++] = (struct ht_event){.type = HT_EV_ALLOC,
					     .func = HT_FN_MALLOC,
					     .pid = 5,
					     .tid = 5,
					     .ts = ts += 150,
					     .addr = top,
					     .size = size,
					     .stack = 1 + (r >> 12) % 3};
		live[at] = top;
		top += ht__chunk_size(size);
	}
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	if (!w)
		return;
	for (int i = 0; i < n; i++)
		CHECK_EQ(ht__writer_event(w, &evs[i], NULL), 0);
	CHECK_EQ(ht__writer_finish(w, 0, 0, 0), 0);
	/* The first events chunk's table marks SIZE and FREE as planes. */
	FILE *f = fopen(path, "rb");
	static uint8_t comp[2 << 20], raw[2 << 20];
	struct ht__chunk_header h = {0};
	uint8_t hb[HT__CHUNK_HEADER_SIZE];
	long off = HT__HEADER_SIZE;
	while (f && fseek(f, off, SEEK_SET) == 0 && fread(hb, 1, sizeof(hb), f) == sizeof(hb) &&
	       ht__chunk_header_parse(hb, &h) == 0 && h.kind != HT__CHUNK_EVENTS)
		off += HT__CHUNK_HEADER_SIZE + h.comp_size;
	CHECK(h.kind == HT__CHUNK_EVENTS && h.comp_size <= sizeof(comp) &&
	      fread(comp, 1, h.comp_size, f) == h.comp_size);
	if (f)
		fclose(f);
	size_t rn = ZSTD_decompress(raw, sizeof(raw), comp, h.comp_size);
	CHECK(!ZSTD_isError(rn));
	struct ht__cur c = {raw, raw + rn, 0};
	CHECK_EQ(ht__get_varint(&c), HT__NSTREAMS);
	int planes = 0;
	for (int i = 0; i < HT__NSTREAMS && !c.bad; i++) {
		uint64_t v = ht__get_varint(&c);
		if (v & 1) {
			ht__get_varint(&c);
			planes |= 1 << i;
		}
	}
	CHECK(planes & (1 << HT__S_SIZE));
	CHECK(planes & (1 << HT__S_FREE));
	check_read_back(path, evs, n, RB_SIZE | RB_STACK | RB_TS | RB_NO_WARNING);
}

static void test_names(void)
{
	CHECK_STR(ht_event_name(HT_EV_ALLOC), "alloc");
	CHECK_STR(ht_event_name(HT_EV_RSS), "rss");
	CHECK_STR(ht_event_name(0), "?");
	CHECK_STR(ht_event_name(HT_EV__COUNT), "?");
	CHECK_STR(ht_func_name(HT_FN_POSIX_MEMALIGN), "posix_memalign");
	CHECK_STR(ht_func_name(200), "?");
	CHECK_STR(ht_strerror(HT_ERR_NOT_TRACE), "not a heaptrail trace");
	CHECK_STR(ht_strerror(-1000), "unknown error");
	for (unsigned t = 1; t < HT_EV__COUNT; t++)
		CHECK(strcmp(ht_event_name(t), "?") != 0);
	for (unsigned f = 0; f < HT_FN__COUNT; f++)
		CHECK(strcmp(ht_func_name(f), "?") != 0);
}

static void test_open_errors(void)
{
	char path[300];
	struct ht_reader *r = (void *)1;
	test_path(path, sizeof(path), "missing.htr");
	CHECK_EQ(ht_reader_open(&r, path), HT_ERR_NOT_FOUND);
	CHECK(r == NULL);
	test_path(path, sizeof(path), "text.htr");
	FILE *f = fopen(path, "w");
	fputs("this is not a trace, but it is long enough to have a header of 64 bytes.....\n", f);
	fclose(f);
	CHECK_EQ(ht_reader_open(&r, path), HT_ERR_NOT_TRACE);
	test_path(path, sizeof(path), "empty.htr");
	f = fopen(path, "w");
	fclose(f);
	CHECK_EQ(ht_reader_open(&r, path), HT_ERR_NOT_TRACE);
	CHECK_EQ(ht_reader_open(&r, test_tmpdir()), HT_ERR_NOT_TRACE);
}

/* Stacks whose logical frames (a physical frame with inlined callers is
   several) number 512, 513 and 601: the reader's table expands each whole
   and in order, whether it fits its buffer of 512 or not (def_stack). */
static void test_long_stacks(void)
{
	char path[300];
	test_path(path, sizeof(path), "long-stacks.htr");
	struct ht__trace_meta meta = {.argc = 0};
	struct ht__writer *w;
	CHECK_EQ(ht__writer_open(&w, path, &meta), 0);
	CHECK_EQ(ht__writer_module(w, 0, "/app", NULL, 0), 0);
	CHECK_EQ(ht__writer_frame(w, 0, 0, 0x10), 0);
	CHECK_EQ(ht__writer_frame(w, 1, 0, 0x20), 0);
	static uint32_t st[3][301];
	const uint32_t pairs[3] = {255, 256, 300}, len[3] = {257, 257, 301};
	for (int s = 0; s < 3; s++) {
		for (uint32_t i = 0; i < pairs[s]; i++)
			st[s][i] = 0; /* two logical frames each */
		for (uint32_t i = pairs[s]; i < len[s]; i++)
			st[s][i] = 1;
		CHECK_EQ(ht__writer_stack(w, (uint32_t)s + 1, st[s], len[s]), 0);
	}
	struct ht__symbol f0[] = {{"inner", "a.c", 1}, {"outer", "a.c", 2}};
	CHECK_EQ(ht__writer_symbols(w, 0, f0, 2), 0);
	CHECK_EQ(ht__writer_finish(w, 1000, 1, 0), 0);

	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	const uint32_t want[3] = {512, 513, 601};
	for (int s = 0; s < 3; s++) {
		const uint32_t *fr;
		CHECK_EQ(ht_reader_stack(r, (uint32_t)s + 1, &fr), want[s]);
		int bad = 0;
		for (uint32_t i = 0; i < want[s]; i++)
			bad += fr[i] != (i < 2 * pairs[s] ? i % 2 : 2);
		CHECK_EQ(bad, 0);
	}
	ht_reader_close(r);
}

int main(void)
{
	test_names();
	test_finished();
	test_unfinished();
	test_many_chunks();
	test_predicted_addresses();
	test_many_threads();
	test_ts_unit();
	test_time_packing();
	test_relative_frees();
	test_shared_stacks();
	test_fresh_and_old();
	test_block_ends();
	test_free_bases();
	test_thread_frees();
	test_chunk_groups();
	test_group_live();
	test_map_growth();
	test_ring_places();
	test_heap_events();
	test_heap_grain();
	test_far_addresses();
	test_stack_prediction();
	test_class_64();
	test_size0();
	test_model_histories();
	test_other_version();
	test_planes();
	test_planes_split();
	test_varints_skip();
	test_snapshot();
	test_open_errors();
	test_long_stacks();
	return test_result("test_roundtrip");
}
