/*
 * fixture.c - the test traces of the analysis tests (see fixture.h). Times
 * are written in microseconds (ts = us * 1000) so the end-to-end tests can use
 * xperf's default unit.
 *
 * "basic": modules 0 libheaptrail.so, 1 libc.so.6, 2 libstdc++.so.6, 3 the app
 * (/home/u/app), 4 libfoo.so (no symbols). Stacks (innermost first):
 *   1: hook malloc, libc malloc, app make_node (0x1000), app main
 *   2: hook malloc, libstdc++ operator new(unsigned long), app Parser::parse(char const*), app main
 *   3: hook malloc, libc malloc, libfoo.so 0x1f30, app load_config, app main
 *   4: hook malloc, libc realloc, app grow_buffer, app main
 *   5: hook malloc, libc malloc (culled whole: only libc malloc stays)
 *   6: hook malloc, libc malloc, app make_node (0x1008), app main
 * Process 0 is pid 100 (/home/u/app), process 1 pid 200 (/home/u/worker).
 * Blocks (us): pid 100, heap 0:
 *   A1 100 B s1 at 10, freed 50     A2 200 B s1 at 20        A3 1000 B s2 at 30
 *   A4 64 B s3 at 40, freed 60      R1 10 B s4 at 70 -> realloc at 80 to R2 20 B
 *   -> realloc in place at 90 to R3 30 B   B5 5 B s5 at 100   B6 300 B s6 at 110
 *   B7 7 B without stack at 120
 * pid 100, heap 0xabc: H 50 B s1 at 130. pid 200: P1 4096 B s1 at 140,
 * P2 16 B s2 at 150 freed 160. Trace ends at 200.
 */
#include "fixture.h"

#include <stdbool.h>
#include <string.h>

#include "format/writer.h"

#define US 1000ull

struct fx {
	struct ht__writer *w;
	int rc;
};

static void check(struct fx *f, int rc)
{
	if (rc < 0 && !f->rc)
		f->rc = rc;
}

static void event(struct fx *f, uint8_t type, uint32_t process, uint64_t ts_us, uint32_t stack,
		  uint64_t heap, uint64_t addr, uint64_t size, uint64_t old_addr)
{
	struct ht_event ev = {0};
	ev.type = type;
	ev.func = type == HT_EV_REALLOC ? HT_FN_REALLOC
		  : type == HT_EV_FREE	? HT_FN_FREE
					: HT_FN_MALLOC;
	if (heap)
		ev.func = HT_FN_HEAP_API;
	ev.process = process;
	ev.pid = process ? 200 : 100;
	ev.tid = ev.pid;
	ev.ts = ts_us * US;
	ev.stack = stack;
	ev.heap = heap;
	ev.addr = addr;
	ev.size = size;
	ev.old_addr = old_addr;
	check(f, ht__writer_event(f->w, &ev, NULL));
}

static void process_start(struct fx *f, uint32_t index, int32_t pid, const char *exe,
			  uint64_t ts_us)
{
	struct ht_event ev = {0};
	const char *argv[] = {exe};
	struct ht_process p = {0};
	p.pid = pid;
	p.ppid = index ? 100 : 1;
	p.parent = index ? 0 : UINT32_MAX;
	p.flags = index ? HT_PROCF_FORK : HT_PROCF_ROOT;
	p.exe = exe;
	p.argc = 1;
	p.argv = argv;
	ev.type = HT_EV_PROCESS_START;
	ev.process = index;
	ev.pid = pid;
	ev.tid = pid;
	ev.ts = ts_us * US;
	check(f, ht__writer_event(f->w, &ev, &p));
}

static void frame(struct fx *f, uint32_t id, uint32_t module, uint64_t rel)
{
	check(f, ht__writer_frame(f->w, id, module, rel));
}

static void stack(struct fx *f, uint32_t id, const uint32_t *frames, uint32_t n)
{
	check(f, ht__writer_stack(f->w, id, frames, n));
}

static void symbol(struct fx *f, uint32_t frame, const char *fn, const char *file, uint32_t line)
{
	struct ht__symbol s = {fn, file, line};
	check(f, ht__writer_symbols(f->w, frame, &s, 1));
}

static int open_fx(struct fx *f, const char *path)
{
	struct ht__trace_meta meta = {0};
	const char *argv[] = {"/home/u/app"};
	meta.argc = 1;
	meta.argv = argv;
	meta.hostname = "test";
	f->rc = 0;
	return ht__writer_open(&f->w, path, &meta);
}

static int finish_fx(struct fx *f, uint64_t end_us, bool symbols)
{
	if (f->rc) {
		ht__writer_abort(f->w);
		return f->rc;
	}
	return ht__writer_finish(f->w, end_us * US, 0, symbols ? HT_TRACEF_SYMBOLS : 0);
}

static int write_basic(const char *path, bool symbols)
{
	struct fx f;
	int rc = open_fx(&f, path);
	if (rc < 0)
		return rc;
	check(&f, ht__writer_module(f.w, 0, "/usr/lib/libheaptrail.so", NULL, 0));
	check(&f, ht__writer_module(f.w, 1, "/usr/lib/x86_64-linux-gnu/libc.so.6", NULL, 0));
	check(&f, ht__writer_module(f.w, 2, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", NULL, 0));
	check(&f, ht__writer_module(f.w, 3, "/home/u/app", NULL, 0));
	check(&f, ht__writer_module(f.w, 4, "/opt/lib/libfoo.so", NULL, 0));
	frame(&f, 0, 0, 0x100);	  /* hook malloc */
	frame(&f, 1, 1, 0x200);	  /* libc malloc */
	frame(&f, 2, 2, 0x300);	  /* operator new */
	frame(&f, 3, 3, 0x1000);  /* make_node */
	frame(&f, 4, 3, 0x1100);  /* Parser::parse */
	frame(&f, 5, 3, 0x1200);  /* main */
	frame(&f, 6, 4, 0x1f30);  /* libfoo, no symbol */
	frame(&f, 7, 3, 0x1300);  /* load_config */
	frame(&f, 8, 1, 0x400);	  /* libc realloc */
	frame(&f, 9, 3, 0x1400);  /* grow_buffer */
	frame(&f, 10, 3, 0x1008); /* make_node, another call site */
	static const uint32_t s1[] = {0, 1, 3, 5}, s2[] = {0, 2, 4, 5}, s3[] = {0, 1, 6, 7, 5},
			      s4[] = {0, 8, 9, 5}, s5[] = {0, 1}, s6[] = {0, 1, 10, 5};
	stack(&f, 1, s1, 4);
	stack(&f, 2, s2, 4);
	stack(&f, 3, s3, 5);
	stack(&f, 4, s4, 4);
	stack(&f, 5, s5, 2);
	stack(&f, 6, s6, 4);

	process_start(&f, 0, 100, "/home/u/app", 0);
	event(&f, HT_EV_ALLOC, 0, 10, 1, 0, 0x1000, 100, 0);	   /* A1 */
	event(&f, HT_EV_ALLOC, 0, 20, 1, 0, 0x2000, 200, 0);	   /* A2 */
	event(&f, HT_EV_ALLOC, 0, 30, 2, 0, 0x3000, 1000, 0);	   /* A3 */
	event(&f, HT_EV_ALLOC, 0, 40, 3, 0, 0x4000, 64, 0);	   /* A4 */
	event(&f, HT_EV_FREE, 0, 50, 0, 0, 0x1000, 0, 0);	   /* A1 */
	event(&f, HT_EV_FREE, 0, 60, 0, 0, 0x4000, 0, 0);	   /* A4 */
	event(&f, HT_EV_ALLOC, 0, 70, 4, 0, 0x5000, 10, 0);	   /* R1 */
	event(&f, HT_EV_REALLOC, 0, 80, 4, 0, 0x6000, 20, 0x5000); /* R2 */
	event(&f, HT_EV_REALLOC, 0, 90, 4, 0, 0x6000, 30, 0x6000); /* R3 */
	event(&f, HT_EV_ALLOC, 0, 100, 5, 0, 0x7000, 5, 0);	   /* B5 */
	event(&f, HT_EV_ALLOC, 0, 110, 6, 0, 0x8000, 300, 0);	   /* B6 */
	event(&f, HT_EV_ALLOC, 0, 120, 0, 0, 0x9000, 7, 0);	   /* B7 */
	event(&f, HT_EV_ALLOC, 0, 130, 1, 0xabc, 0x10000, 50, 0);  /* H */
	process_start(&f, 1, 200, "/home/u/worker", 135);
	event(&f, HT_EV_ALLOC, 1, 140, 1, 0, 0x1000, 4096, 0); /* P1 */
	event(&f, HT_EV_ALLOC, 1, 150, 2, 0, 0x2000, 16, 0);   /* P2 */
	event(&f, HT_EV_FREE, 1, 160, 0, 0, 0x2000, 0, 0);     /* P2 */

	if (symbols) {
		symbol(&f, 0, "malloc", "hooks_malloc.c", 40);
		symbol(&f, 1, "malloc", NULL, 0);
		symbol(&f, 2, "operator new(unsigned long)", NULL, 0);
		symbol(&f, 3, "make_node", "app.c", 12);
		symbol(&f, 4, "Parser::parse(char const*)", "parse.cc", 40);
		symbol(&f, 5, "main", "app.c", 30);
		symbol(&f, 7, "load_config", "app.c", 50);
		symbol(&f, 8, "realloc", NULL, 0);
		symbol(&f, 9, "grow_buffer", "app.c", 70);
		symbol(&f, 10, "make_node", "app.c", 13);
	}
	return finish_fx(&f, 200, symbols);
}

/*
 * "ties": four stacks of one app frame each, all with 8 outstanding bytes in
 * one block: app!b, app!a, app!c (written in that order) and app!d, which
 * also has a freed 8-byte block (so a larger total size).
 */
static int write_ties(const char *path)
{
	struct fx f;
	int rc = open_fx(&f, path);
	if (rc < 0)
		return rc;
	check(&f, ht__writer_module(f.w, 0, "/home/u/app", NULL, 0));
	static const char *const names[] = {"b", "a", "c", "d"};
	for (uint32_t i = 0; i < 4; i++) {
		frame(&f, i, 0, 0x100 * (i + 1));
		stack(&f, i + 1, &i, 1);
	}
	process_start(&f, 0, 100, "/home/u/app", 0);
	for (uint32_t i = 0; i < 4; i++)
		event(&f, HT_EV_ALLOC, 0, 10 + i, i + 1, 0, 0x1000 * (i + 1), 8, 0);
	event(&f, HT_EV_ALLOC, 0, 20, 4, 0, 0x9000, 8, 0);
	event(&f, HT_EV_FREE, 0, 21, 0, 0, 0x9000, 0, 0);
	for (uint32_t i = 0; i < 4; i++)
		symbol(&f, i, names[i], "ties.c", i + 1);
	return finish_fx(&f, 30, true);
}

/*
 * "inline": one block of 40 bytes whose stack is app 0x100 (helper inlined
 * into caller, helper.h:3 and app.c:20), then app 0x200 (main).
 */
static int write_inline(const char *path)
{
	struct fx f;
	int rc = open_fx(&f, path);
	if (rc < 0)
		return rc;
	check(&f, ht__writer_module(f.w, 0, "/home/u/app", NULL, 0));
	frame(&f, 0, 0, 0x100);
	frame(&f, 1, 0, 0x200);
	static const uint32_t s1[] = {0, 1};
	stack(&f, 1, s1, 2);
	process_start(&f, 0, 100, "/home/u/app", 0);
	event(&f, HT_EV_ALLOC, 0, 10, 1, 0, 0x1000, 40, 0);
	static const struct ht__symbol inl[] = {{"helper", "helper.h", 3}, {"caller", "app.c", 20}};
	check(&f, ht__writer_symbols(f.w, 0, inl, 2));
	symbol(&f, 1, "main", "app.c", 30);
	return finish_fx(&f, 20, true);
}

/* "many": 10005 stacks of one frame each, stack i holding one block of i bytes. */
static int write_many(const char *path)
{
	struct fx f;
	int rc = open_fx(&f, path);
	if (rc < 0)
		return rc;
	check(&f, ht__writer_module(f.w, 0, "/home/u/app", NULL, 0));
	for (uint32_t i = 0; i < 10005; i++) {
		frame(&f, i, 0, 0x10 * (i + 1));
		stack(&f, i + 1, &i, 1);
	}
	process_start(&f, 0, 100, "/home/u/app", 0);
	for (uint32_t i = 0; i < 10005; i++)
		event(&f, HT_EV_ALLOC, 0, 10, i + 1, 0, 0x100000 + 0x10000ull * i, i + 1, 0);
	return finish_fx(&f, 20, false);
}

/* "nostack": recorded with --stacks none: two blocks of 100 and 28 bytes, one freed, no stack. */
static int write_nostack(const char *path)
{
	struct fx f;
	int rc = open_fx(&f, path);
	if (rc < 0)
		return rc;
	process_start(&f, 0, 100, "/home/u/app", 0);
	event(&f, HT_EV_ALLOC, 0, 10, 0, 0, 0x1000, 100, 0);
	event(&f, HT_EV_ALLOC, 0, 11, 0, 0, 0x2000, 28, 0);
	event(&f, HT_EV_FREE, 0, 12, 0, 0, 0x1000, 0, 0);
	return finish_fx(&f, 20, false);
}

int fixture_write(const char *path, const char *name)
{
	if (!strcmp(name, "basic"))
		return write_basic(path, true);
	if (!strcmp(name, "nosym"))
		return write_basic(path, false);
	if (!strcmp(name, "ties"))
		return write_ties(path);
	if (!strcmp(name, "inline"))
		return write_inline(path);
	if (!strcmp(name, "many"))
		return write_many(path);
	if (!strcmp(name, "nostack"))
		return write_nostack(path);
	return HT_ERR_INVALID;
}
