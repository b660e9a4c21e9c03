/*
 * test_match.c - unit tests of frame matching, culling, cull list files, the
 * default cull list and the query rules, on in-memory frames (a fake reader
 * below stands in for a trace).
 */
#include <stdlib.h>
#include <unistd.h>

#include "analysis/match.h"
#include "analysis/query.h"
#include "check.h"

/* A fake reader: the matcher only asks for frames and modules. */
struct ht_reader {
	const struct ht_frame *frames;
	uint32_t nframes;
	const struct ht_module *modules;
	uint32_t nmodules;
};

const struct ht_frame *ht_reader_frame(const struct ht_reader *r, uint32_t id)
{
	return id < r->nframes ? &r->frames[id] : NULL;
}

const struct ht_module *ht_reader_module(const struct ht_reader *r, uint32_t id)
{
	return id < r->nmodules ? &r->modules[id] : NULL;
}

uint32_t ht_reader_frame_count(const struct ht_reader *r)
{
	return r->nframes;
}

static struct ht__match_frame mf(const char *name, const char *path, const char *fn, uint64_t rel)
{
	struct ht__match_frame f = {name, path, fn, rel};
	return f;
}

static bool match1(const char *spec, struct ht__match_frame f)
{
	struct ht__match_list l = HT_MATCH_LIST_INIT;
	if (ht__match_list_add(&l, spec) < 0) {
		fprintf(stderr, "cannot add '%s'\n", spec);
		check_failures++;
		return false;
	}
	bool hit = ht__match_frame(&l, &f);
	ht__match_list_release(&l);
	return hit;
}

static void test_forms(void)
{
	struct ht__match_frame libc =
	    mf("libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "malloc", 0x9a0f0);
	struct ht__match_frame app =
	    mf("app", "/home/u/app", "Parser::parse(char const*) const", 0x1234);

	/* module! */
	CHECK(match1("libc.so.6!", libc));
	CHECK(match1("LIBC.SO.6!", libc));
	CHECK(match1("/usr/lib/x86_64-linux-gnu/libc.so.6!", libc));
	CHECK(match1("/USR/lib/x86_64-linux-gnu/LIBC.so.6!", libc));
	CHECK(match1("libc!", libc));
	CHECK(!match1("libc.so!", libc));
	CHECK(!match1("app!", libc));
	CHECK(!match1("lib!", libc));
	CHECK(match1("lib*!", libc));
	CHECK(match1("/usr/lib/*!", libc));

	/* module!symbol */
	CHECK(match1("libc.so.6!malloc", libc));
	CHECK(match1("LibC.so.6!MALLOC", libc));
	CHECK(!match1("libc.so.6!calloc", libc));
	CHECK(!match1("app!malloc", libc));
	CHECK(match1("app!parser::parse", app));
	CHECK(match1("app!Parser::parse(char const*) const", app));
	CHECK(!match1("app!Parser::parse(int)", app));

	/* symbol, any module */
	CHECK(match1("malloc", libc));
	CHECK(match1("Malloc", libc));
	CHECK(!match1("mall", libc));
	CHECK(match1("mall*", libc));
	CHECK(match1("PARSER::*", app));
	CHECK(match1("parser::parse", app));
	CHECK(!match1("parser", app));
	CHECK(match1("*!malloc", libc));

	/* offsets, with and without symbols */
	struct ht__match_frame nosym = mf("libfoo.so", "/opt/libfoo.so", NULL, 0x1f30);
	CHECK(match1("libfoo.so!0x1f30", nosym));
	CHECK(match1("libfoo.so!0x1F30", nosym));
	CHECK(!match1("libfoo.so!0x1f31", nosym));
	CHECK(match1("libfoo.so!", nosym));
	CHECK(!match1("libfoo.so!foo", nosym));
	CHECK(!match1("foo*", nosym));
	CHECK(match1("app!0x1234", app));

	/* a frame in no module is "?" */
	struct ht__match_frame nomod = mf(NULL, NULL, NULL, 0x7f0000001000);
	CHECK(match1("?!", nomod));
	CHECK(!match1("libc.so.6!", nomod));

	/* operator new and names with nested parentheses */
	struct ht__match_frame opnew = mf("libstdc++.so.6", NULL, "operator new(unsigned long)", 1);
	struct ht__match_frame opcall = mf("app", NULL, "Cmp::operator()(int, int) const", 1);
	CHECK(match1("operator new", opnew));
	CHECK(!match1("operator new[]", opnew));
	CHECK(match1("cmp::operator()", opcall));
	CHECK(!match1("cmp::operator", opcall));

	/* ELF symbol versions are not part of the name. */
	struct ht__match_frame ver = mf("libc.so.6", NULL, "malloc@@GLIBC_2.2.5", 1);
	struct ht__match_frame ver2 = mf("libc.so.6", NULL, "pthread_create@GLIBC_2.2.5", 1);
	CHECK(match1("malloc", ver));
	CHECK(match1("MALLOC", ver));
	CHECK(match1("libc.so.6!malloc", ver));
	CHECK(match1("malloc@@GLIBC_2.2.5", ver));
	CHECK(!match1("mallo", ver));
	CHECK(!match1("malloc@@GLIBC_2.3", ver));
	CHECK(match1("pthread_create", ver2));
	CHECK(match1("pthread_*", ver2));

	/* bad items */
	struct ht__match_list l = HT_MATCH_LIST_INIT;
	CHECK_U64(ht__match_list_add(&l, ""), (uint64_t)HT_ERR_INVALID);
	CHECK_U64(ht__match_list_add(&l, "  "), (uint64_t)HT_ERR_INVALID);
	CHECK_U64(ht__match_list_add(&l, "!"), (uint64_t)HT_ERR_INVALID);
	CHECK_U64(ht__match_list_add(&l, "*"), (uint64_t)HT_ERR_INVALID);
	CHECK_U64(ht__match_list_add(&l, "*!"), (uint64_t)HT_ERR_INVALID);
	CHECK_U64(l.count, 0);
	CHECK_U64(ht__match_list_add(&l, "  libc.so.6!free  "), 0);
	CHECK_STR(l.items[0].module, "libc.so.6");
	CHECK_STR(l.items[0].symbol, "free");
	CHECK(!ht__match_frame(&l, &libc));
	ht__match_list_release(&l);
	CHECK(!ht__match_frame(&l, &libc));
}

static void test_defaults(void)
{
	struct ht__match_list l = HT_MATCH_LIST_INIT;
	CHECK_U64(ht__match_list_add_defaults(&l), 0);
	const char *culled[][2] = {
	    {"libheaptrail.so", "malloc"},
	    {"libheaptrail.so", NULL},
	    {"libc.so.6", "malloc"},
	    {"libc.so.6", "__libc_calloc"},
	    {"libc.so.6", "realloc"},
	    {"libc.so.6", "posix_memalign"},
	    {"libc.so.6", "aligned_alloc"},
	    {"libc.so.6", "strdup"},
	    {"libstdc++.so.6", "operator new(unsigned long)"},
	    {"libstdc++.so.6", "operator new[](unsigned long)"},
	    {"libstdc++.so.6", "operator new(unsigned long, std::nothrow_t const&)"},
	    {"libstdc++.so.6", "operator new(unsigned long, std::align_val_t)"},
	    {"libstdc++.so.6", "_Znwm"},
	    {"libstdc++.so.6", "_ZnamRKSt9nothrow_t"},
	    {"libc.so.6", "mmap64"},
	    {"libc.so.6", "munmap"},
	    {"libc.so.6", "mremap"},
	    {"libc.so.6", "sbrk"},
	    {"app", "std::allocator<int>::allocate(unsigned long)"},
	    {"app", "std::allocator_traits<std::allocator<int> >::allocate(std::allocator<int>&, "
		    "unsigned long)"},
	    {"app", "std::__new_allocator<int>::allocate(unsigned long, void const*)"},
	    {"app", "__gnu_cxx::new_allocator<int>::allocate(unsigned long, void const*)"},
	    {"app", "alloc::alloc::alloc"},
	    {"app", "alloc::alloc::Global::alloc_impl_runtime"},
	    {"app", "<alloc::alloc::Global>::alloc_impl_runtime"},
	    {"app", "<alloc::alloc::Global as core::alloc::Allocator>::allocate"},
	    {"app", "alloc::raw_vec::RawVec<T,A>::grow_one"},
	    {"app", "<alloc::raw_vec::RawVecInner>::finish_grow"},
	    {"app", "__rust_alloc"},
	    {"app", "__rdl_realloc"},
	};
	for (size_t i = 0; i < sizeof(culled) / sizeof(culled[0]); i++) {
		struct ht__match_frame f = mf(culled[i][0], NULL, culled[i][1], 0x10);
		if (!ht__match_frame(&l, &f)) {
			fprintf(stderr, "default list does not cull %s!%s\n", culled[i][0],
				culled[i][1] ? culled[i][1] : "(none)");
			check_failures++;
		}
	}
	const char *kept[][2] = {
	    {"app", "main"},
	    {"app", "my_malloc"},
	    {"libstdc++.so.6", "std::string::_M_create(unsigned long&, unsigned long)"},
	    {"libc.so.6", NULL},
	    {"libstdc++.so.6", "operator delete(void*)"},
	    {"app", "std::vector<int, std::allocator<int> >::push_back(int const&)"},
	    {"app", "alloc::vec::Vec<T,A>::push"},
	    {"app", "<alloc::vec::Vec<u64>>::push"},
	    {"app", "vecgrow::fill"},
	};
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		struct ht__match_frame f = mf(kept[i][0], NULL, kept[i][1], 0x10);
		if (ht__match_frame(&l, &f)) {
			fprintf(stderr, "default list culls %s!%s\n", kept[i][0],
				kept[i][1] ? kept[i][1] : "(none)");
			check_failures++;
		}
	}
	ht__match_list_release(&l);
}

static void test_cull_index(void)
{
	bool none[] = {false, false, false};
	bool two[] = {true, true, false, true};
	bool all[] = {true, true, true};
	bool one[] = {true};
	CHECK_U64(ht__match_cull_index(none, 3), 0);
	CHECK_U64(ht__match_cull_index(two, 4), 2);
	CHECK_U64(ht__match_cull_index(all, 3), 2); /* only the bottom frame stays */
	CHECK_U64(ht__match_cull_index(one, 1), 0);
	CHECK_U64(ht__match_cull_index(NULL, 0), 0);
}

static void test_file(void)
{
	char dir[] = "/tmp/ht-test-match-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		check_failures++;
		return;
	}
	char path[256];
	snprintf(path, sizeof(path), "%s/cull.txt", dir);
	FILE *f = fopen(path, "w");
	fputs("# allocation wrappers\n\n   \nlibapp.so!xmalloc\n  # indented comment\n"
	      "Pool::*\r\n\tlibz.so.1!\n# last",
	      f);
	fclose(f);

	struct ht__match_list l = HT_MATCH_LIST_INIT;
	CHECK_U64(ht__match_list_add_file(&l, path), 3);
	CHECK_U64(l.count, 3);
	struct ht__match_frame a = mf("libapp.so", NULL, "xmalloc", 1);
	struct ht__match_frame b = mf("libapp.so", NULL, "Pool::grow(unsigned long)", 1);
	struct ht__match_frame c = mf("libz.so.1", NULL, NULL, 5);
	struct ht__match_frame d = mf("libapp.so", NULL, "allocated_comment", 1);
	CHECK(ht__match_frame(&l, &a));
	CHECK(ht__match_frame(&l, &b));
	CHECK(ht__match_frame(&l, &c));
	CHECK(!ht__match_frame(&l, &d));

	char missing[300];
	snprintf(missing, sizeof(missing), "%s/nope.txt", dir);
	CHECK_U64(ht__match_list_add_file(&l, missing), (uint64_t)HT_ERR_NOT_FOUND);
	CHECK(ht__match_list_add_file(&l, dir) < 0); /* a directory */
	CHECK_U64(l.count, 3);
	ht__match_list_release(&l);

	unlink(path);
	rmdir(dir);
}

static void test_matcher(void)
{
	static const struct ht_module mods[] = {
	    {"/usr/lib/libheaptrail.so", "libheaptrail.so", ""},
	    {"/usr/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6", ""},
	    {"/home/u/app", "app", ""},
	};
	static const struct ht_frame frames[] = {
	    {0, 0, 0x100, "malloc", NULL, 0},		    /* 0 */
	    {1, 0, 0x200, "malloc", NULL, 0},		    /* 1 */
	    {2, 12, 0x300, "make_node", "app.c", 0},	    /* 2 */
	    {2, 30, 0x400, "main", "app.c", 0},		    /* 3 */
	    {2, 0, 0x500, NULL, NULL, 0},		    /* 4 */
	    {HT_MODULE_NONE, 0, 0x7f00dead, NULL, NULL, 0}, /* 5 */
	    {2, 0, 0x600, "evil\x1b[2J\n", NULL, 0},	    /* 6 */
	};
	struct ht_reader r = {frames, 7, mods, 3};
	struct ht__match_list cull = HT_MATCH_LIST_INIT, req = HT_MATCH_LIST_INIT;
	ht__match_list_add_defaults(&cull);
	ht__match_list_add(&req, "APP!Make_Node");
	struct ht__frame_matcher *mc, *mr;
	CHECK_U64(ht__frame_matcher_new(&mc, &cull, &r), 0);
	CHECK_U64(ht__frame_matcher_new(&mr, &req, &r), 0);

	uint32_t s1[] = {0, 1, 2, 3};
	uint32_t s2[] = {0, 1};
	uint32_t s3[] = {4, 3};
	CHECK_U64(ht__frame_matcher_cull(mc, s1, 4), 2);
	CHECK_U64(ht__frame_matcher_cull(mc, s2, 2), 1);
	CHECK_U64(ht__frame_matcher_cull(mc, s3, 2), 0);
	CHECK_U64(ht__frame_matcher_cull(mc, s3, 0), 0);
	CHECK(ht__frame_matcher_any(mr, s1, 4));
	CHECK(!ht__frame_matcher_any(mr, s2, 2));
	CHECK(!ht__frame_matcher_any(mr, s3, 2));
	/* Cached answers stay the same. */
	CHECK(ht__frame_matcher_test(mr, 2));
	CHECK(ht__frame_matcher_test(mr, 2));
	CHECK(!ht__frame_matcher_test(mr, 99));
	ht__frame_matcher_free(mc);
	ht__frame_matcher_free(mr);

	char buf[64];
	CHECK_U64(ht__frame_text(&r, 2, true, buf, sizeof(buf)), 13);
	CHECK_STR(buf, "app!make_node");
	ht__frame_text(&r, 2, false, buf, sizeof(buf));
	CHECK_STR(buf, "app!0x300");
	ht__frame_text(&r, 4, true, buf, sizeof(buf));
	CHECK_STR(buf, "app!0x500");
	ht__frame_text(&r, 5, true, buf, sizeof(buf));
	CHECK_STR(buf, "?!0x7f00dead");
	CHECK_U64(ht__frame_text(&r, 1, true, buf, 5), 16);
	CHECK_STR(buf, "libc");
	/* Control bytes come out escaped, and the length counts the escapes. */
	CHECK_U64(ht__frame_text(&r, 6, true, buf, sizeof(buf)), 19);
	CHECK_STR(buf, "app!evil\\x1b[2J\\x0a");
	CHECK_U64(ht__frame_text(&r, 6, true, buf, 11), 19);
	CHECK_STR(buf, "app!evil");
	ht__match_list_release(&cull);
	ht__match_list_release(&req);
}

static struct ht__life life(uint64_t alloc_ts, uint64_t free_ts, uint64_t size)
{
	struct ht__life l = {0};
	l.alloc_ts = alloc_ts;
	l.free_ts = free_ts;
	l.size = l.block_size = size;
	l.count = 1;
	return l;
}

static void test_query(void)
{
	struct ht__query q;
	enum ht__sort s;
	ht__query_init(&q);
	CHECK_U64(ht__sort_parse("so", &s), 0);
	CHECK_U64(s, HT_SORT_SO);
	CHECK_U64(ht__sort_parse("SOC", &s), 0);
	CHECK_U64(s, HT_SORT_SOC);
	CHECK_U64(ht__sort_parse("src", &s), 0);
	CHECK_U64(s, HT_SORT_SRC);
	CHECK_U64(ht__sort_parse("sx", &s), (uint64_t)HT_ERR_INVALID);
	CHECK_U64(ht__sort_parse("", &s), (uint64_t)HT_ERR_INVALID);
	CHECK_STR(ht__sort_name(HT_SORT_STC), "stc");

	CHECK_U64(ht__query_add_pid(&q, 10), 0);
	CHECK_U64(ht__query_add_pid(&q, 10), 0);
	CHECK_U64(ht__query_add_pid(&q, 12), 0);
	CHECK_U64(q.pid_count, 2);
	CHECK(ht__query_wants_pid(&q, 12));
	CHECK(!ht__query_wants_pid(&q, 11));

	/* Validation and the default cull list, added once. */
	CHECK_U64(ht__query_prepare(&q), 0);
	size_t n = q.cull.count;
	CHECK(n > 10);
	CHECK_U64(ht__query_prepare(&q), 0);
	CHECK_U64(q.cull.count, n);
	q.has_range = true;
	q.range_start = 100;
	q.range_end = 100;
	CHECK_U64(ht__query_prepare(&q), (uint64_t)HT_ERR_INVALID);
	q.range_end = 200;
	CHECK_U64(ht__query_prepare(&q), 0);
	q.size_min = 5;
	q.size_max = 4;
	CHECK_U64(ht__query_prepare(&q), (uint64_t)HT_ERR_INVALID);
	q.size_min = 0;
	q.size_max = UINT64_MAX;
	ht__query_release(&q);

	ht__query_init(&q);
	q.default_cull = false;
	CHECK_U64(ht__query_prepare(&q), 0);
	CHECK_U64(q.cull.count, 0);

	/* No range: outstanding = never freed. */
	bool out = false;
	struct ht__life a = life(10, 20, 8), b = life(10, HT_TS_NEVER, 8);
	CHECK(ht__query_accepts(&q, &a, 1000, &out) && !out);
	CHECK(ht__query_accepts(&q, &b, 1000, &out) && out);

	/* Range [100, 200): alloc at 99 out, 100 in, 199 in, 200 out. */
	q.has_range = true;
	q.range_start = 100;
	q.range_end = 200;
	struct ht__life r99 = life(99, HT_TS_NEVER, 1), r100 = life(100, 150, 1),
			r199 = life(199, HT_TS_NEVER, 1), r200 = life(200, 201, 1),
			r_free_at_end = life(150, 200, 1), r_free_before_end = life(150, 199, 1);
	CHECK(!ht__query_accepts(&q, &r99, 1000, &out));
	CHECK(ht__query_accepts(&q, &r100, 1000, &out) && !out);
	CHECK(ht__query_accepts(&q, &r199, 1000, &out) && out);
	CHECK(!ht__query_accepts(&q, &r200, 1000, &out));
	/* A free at T2 is outside the range: still outstanding. */
	CHECK(ht__query_accepts(&q, &r_free_at_end, 1000, &out) && out);
	CHECK(ht__query_accepts(&q, &r_free_before_end, 1000, &out) && !out);

	/* Lifetime [50, 100): an unfreed block lives to the range's end. */
	q.life_min = 50;
	q.life_max = 100;
	struct ht__life l49 = life(100, 149, 1), l50 = life(100, 150, 1), l99 = life(100, 199, 1),
			open100 = life(100, HT_TS_NEVER, 1), open150 = life(150, HT_TS_NEVER, 1),
			freed_late = life(140, 500, 1);
	CHECK(!ht__query_accepts(&q, &l49, 1000, &out));
	CHECK(ht__query_accepts(&q, &l50, 1000, &out));
	CHECK(ht__query_accepts(&q, &l99, 1000, &out));
	CHECK(!ht__query_accepts(&q, &open100, 1000, &out));	      /* 100: not < 100 */
	CHECK(ht__query_accepts(&q, &open150, 1000, &out) && out);    /* 50 */
	CHECK(ht__query_accepts(&q, &freed_late, 1000, &out) && out); /* 60 up to T2 */
	/* The trace ending before T2 ends the lifetime there. */
	CHECK(ht__query_accepts(&q, &open100, 160, &out) && out); /* 60 */

	/* Size [8, 16). */
	q.has_range = false;
	q.life_min = 0;
	q.life_max = UINT64_MAX;
	q.size_min = 8;
	q.size_max = 16;
	struct ht__life s7 = life(0, 1, 7), s8 = life(0, 1, 8), s15 = life(0, 1, 15),
			s16 = life(0, 1, 16);
	CHECK(!ht__query_accepts(&q, &s7, 10, &out));
	CHECK(ht__query_accepts(&q, &s8, 10, &out));
	CHECK(ht__query_accepts(&q, &s15, 10, &out));
	CHECK(!ht__query_accepts(&q, &s16, 10, &out));
	ht__query_release(&q);
}

int main(void)
{
	test_forms();
	test_defaults();
	test_cull_index();
	test_file();
	test_matcher();
	test_query();
	CHECK_DONE();
}
