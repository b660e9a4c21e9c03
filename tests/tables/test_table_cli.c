/*
 * test_table_cli.c - 'heaptrail table' and 'heaptrail timeline' on traces
 * built with the writer (traces.h): exact groups, rows, timeline points and
 * the SVG, and one clear error line with a non-zero exit for bad input.
 * Usage: test_table_cli PATH_TO_HEAPTRAIL
 */
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "traces.h"

static const char *heaptrail;
static char dir[] = "/tmp/ht-tables-XXXXXX";
static char heap_trace[256], commit_trace[256];

struct result {
	int status;
	char out[65536];
	char err[4096];
};

static void slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;
	buf[n] = 0;
	if (f)
		fclose(f);
}

/* Runs heaptrail with the arguments (a printf format), capturing stdout and stderr. */
static void run(struct result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void run(struct result *r, const char *fmt, ...)
{
	char args[2048], cmd[4096], out[300], err[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	snprintf(cmd, sizeof(cmd), "'%s' %s >'%s' 2>'%s'", heaptrail, args, out, err);
	int st = system(cmd);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	slurp(out, r->out, sizeof(r->out));
	slurp(err, r->err, sizeof(r->err));
	unlink(out);
	unlink(err);
}

#define CHECK_OUT(r, expected)                                                                     \
	do {                                                                                       \
		CHECK_EQ((r)->status, 0);                                                          \
		if (strcmp((r)->out, expected)) {                                                  \
			fprintf(stderr, "%s:%d: output:\n%s\nexpected:\n%s\nstderr: %s\n",         \
				__FILE__, __LINE__, (r)->out, expected, (r)->err);                 \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

#define CHECK_CONTAINS(hay, needle)                                                                \
	do {                                                                                       \
		if (!strstr(hay, needle)) {                                                        \
			fprintf(stderr, "%s:%d: '%s' not found in:\n%s\n", __FILE__, __LINE__,     \
				needle, hay);                                                      \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

/* One error line, exit status 2. */
#define CHECK_FAILS(r, needle)                                                                     \
	do {                                                                                       \
		CHECK_EQ((r)->status, 2);                                                          \
		CHECK_CONTAINS((r)->err, needle);                                                  \
		CHECK(strchr((r)->err, '\n') == (r)->err + strlen((r)->err) - 1);                  \
		CHECK_STR((r)->out, "");                                                           \
	} while (0)

static const char GROUP_HEADER[] =
    "depth,process,pid,handle,heap_name,type,impacting_type,stack,frame,image,"
    "thread,count,impacting_size,size\n";

static void test_heap_groups(void)
{
	static struct result r;
	char expect[4096];
	run(&r, "table heap '%s' --range 4 10 --format csv --group-by process,impacting-type,stack",
	    heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,4,1804,2604\n"
		 "1,app,100,,,,,,,,,4,1804,2604\n"
		 "2,app,100,,,,Impacting,,,,,3,1804,2104\n"
		 "3,app,100,,,,Impacting,app!temp <- app!main,,,,1,2000,2000\n"
		 "3,app,100,,,,Impacting,app!leaky <- app!main,,,,1,40,40\n"
		 "3,app,100,,,,Impacting,app!other <- app!main,,,,1,-236,64\n"
		 "2,app,100,,,,Transient,,,,,1,0,500\n"
		 "3,app,100,,,,Transient,app!other <- app!main,,,,1,0,500\n");
	CHECK_OUT(&r, expect);

	/* The default levels, cut at depth 2: the two heap handles. */
	run(&r, "table heap '%s' --range 4us 10000ns --format csv --depth 2", heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,4,1804,2604\n"
		 "1,app,100,,,,,,,,,4,1804,2604\n"
		 "2,app,100,0,malloc,,,,,,,3,1740,2540\n"
		 "2,app,100,20480,,,,,,,,1,64,64\n");
	CHECK_OUT(&r, expect);

	run(&r, "table heap '%s' -range 0.004ms 0.01ms --format=csv -group-by thread,type",
	    heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,4,1804,2604\n"
		 "1,,,,,,,,,,100,3,1804,2104\n"
		 "2,,,,,AIFO,,,,,100,3,2104,2104\n"
		 "2,,,,,AOFO,,,,,100,0,0,0\n"
		 "2,,,,,AOFI,,,,,100,0,-300,0\n"
		 "1,,,,,,,,,,101,1,0,500\n"
		 "2,,,,,AIFI,,,,,101,1,0,500\n");
	CHECK_OUT(&r, expect);

	/* Frame and image: the topmost frame after culling malloc, as analyze -frames. */
	run(&r, "table heap '%s' --range 4 10 --format csv --group-by frame,image", heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,4,1804,2604\n"
		 "1,,,,,,,,app!temp,,,1,2000,2000\n"
		 "2,,,,,,,,app!temp,app,,1,2000,2000\n"
		 "1,,,,,,,,app!leaky,,,1,40,40\n"
		 "2,,,,,,,,app!leaky,app,,1,40,40\n"
		 "1,,,,,,,,app!other,,,2,-236,564\n"
		 "2,,,,,,,,app!other,app,,2,-236,564\n");
	CHECK_OUT(&r, expect);

	/* Sort by count, top 1 per level. */
	run(&r, "table heap '%s' --range 4 10 --format csv --group-by frame --sort count --top 1",
	    heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,4,1804,2604\n"
		 "1,,,,,,,,app!other,,,2,-236,564\n");
	CHECK_OUT(&r, expect);

	/* Without culling, every stack starts at malloc. */
	run(&r, "table heap '%s' --range 4 10 --format csv --group-by frame --no-default-cull",
	    heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,4,1804,2604\n"
		 "1,,,,,,,,libc.so.6!malloc,,,4,1804,2604\n");
	CHECK_OUT(&r, expect);

	/* -cullFrames takes app!temp off E's stack; -requireFrames keeps stacks with leaky. */
	run(&r,
	    "table heap '%s' --range 4 10 --format csv --group-by stack -cullFrames app!temp "
	    "--sort size",
	    heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,4,1804,2604\n"
		 "1,,,,,,,app!main,,,,1,2000,2000\n"
		 "1,,,,,,,app!other <- app!main,,,,2,-236,564\n"
		 "1,,,,,,,app!leaky <- app!main,,,,1,40,40\n");
	CHECK_OUT(&r, expect);
	run(&r, "table heap '%s' --range 4 10 --format csv --group-by stack -requireFrames leaky",
	    heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,1,40,40\n"
		 "1,,,,,,,app!leaky <- app!main,,,,1,40,40\n");
	CHECK_OUT(&r, expect);

	/*
	 * The whole trace: what the process never freed ended at its exit at
	 * 19000, inside the window, as its committed ranges do: nothing is
	 * impacting. Before the exit, it is (below).
	 */
	run(&r, "table heap '%s' --format csv --group-by process", heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,8,0,4011\n"
		 "1,app,100,,,,,,,,,8,0,4011\n");
	CHECK_OUT(&r, expect);
	run(&r, "table heap '%s' --format csv --group-by process --range 0 19", heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,8,211,4011\n"
		 "1,app,100,,,,,,,,,8,211,4011\n");
	CHECK_OUT(&r, expect);
	run(&r, "table heap '%s' --format csv --group-by process --pid 7", heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER, "0,,,,,,,,,,,0,0,0\n");
	CHECK_OUT(&r, expect);
	/* Depth 0: the total alone. */
	run(&r, "table heap '%s' --range 4 10 --format csv --depth 0", heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER, "0,,,,,,,,,,,4,1804,2604\n");
	CHECK_OUT(&r, expect);
	run(&r, "table heap '%s' --range 4 10 --depth 0", heap_trace);
	CHECK_CONTAINS(r.out,
		       "Count 4, Impacting Size 1.8 KiB, Size 2.5 KiB, 6 blocks in the window\n");
	CHECK(!strstr(r.out, "Address"));
}

/*
 * The same question to 'heaptrail analyze': its range counts the allocations
 * made inside (the table's Count and Size) and calls outstanding what is not
 * freed inside (the table's AIFO: C 40 + F 64 + E 2000).
 */
static void test_agrees_with_analyze(void)
{
	static struct result r;
	char expect[4096];
	run(&r, "analyze '%s' -range 4 10 --format json", heap_trace);
	CHECK_EQ(r.status, 0);
	CHECK_CONTAINS(r.out, "\"alloc_count\": 4,\n    \"alloc_bytes\": 2604,");
	CHECK_CONTAINS(r.out, "\"outstanding_count\": 3,\n    \"outstanding_bytes\": 2104\n");
	run(&r, "table heap '%s' --range 4 10 --format csv --group-by type --depth 1", heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,4,1804,2604\n"
		 "1,,,,,AIFO,,,,,,3,2104,2104\n"
		 "1,,,,,AIFI,,,,,,1,0,500\n"
		 "1,,,,,AOFO,,,,,,0,0,0\n"
		 "1,,,,,AOFI,,,,,,0,-300,0\n");
	CHECK_OUT(&r, expect);
	/* Per stack: analyze's total bytes are the table's Size. */
	run(&r, "analyze '%s' -range 4 10 -stacks --format csv", heap_trace);
	CHECK_OUT(
	    &r, "outstanding_bytes,outstanding_count,total_bytes,total_count,realloc_count,stack\n"
		"2000,1,2000,1,0,app!temp <- app!main\n"
		"64,1,564,2,0,app!other <- app!main\n"
		"40,1,40,1,0,app!leaky <- app!main\n");
	run(&r, "table heap '%s' --range 4 10 --format csv --group-by stack --sort size",
	    heap_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,4,1804,2604\n"
		 "1,,,,,,,app!temp <- app!main,,,,1,2000,2000\n"
		 "1,,,,,,,app!other <- app!main,,,,2,-236,564\n"
		 "1,,,,,,,app!leaky <- app!main,,,,1,40,40\n");
	CHECK_OUT(&r, expect);
}

static void test_heap_rows(void)
{
	static struct result r;
	run(&r, "table heap '%s' --range 4 10 --format csv --group-by none --time-unit ns",
	    heap_trace);
	CHECK_OUT(
	    &r,
	    "process,pid,handle,heap_name,type,impacting_type,thread,address,alloc_time_ns,free_"
	    "time_"
	    "ns,lifetime_ns,"
	    "size,stack\n"
	    "app,100,0,malloc,AOFO,Impacting,100,4096,1000,19000,18000,100,app!leaky <- app!main\n"
	    "app,100,0,malloc,AOFI,Impacting,100,12288,3500,4000,500,300,app!other <- app!main\n"
	    "app,100,0,malloc,AIFO,Impacting,100,16384,5000,19000,14000,40,app!leaky <- app!main\n"
	    "app,100,0,malloc,AIFI,Transient,101,20480,6000,9000,3000,500,app!other <- app!main\n"
	    "app,100,20480,,AIFO,Impacting,100,24576,7000,19000,12000,64,app!other <- "
	    "app!main\n"
	    "app,100,0,malloc,AIFO,Impacting,100,28672,8000,12000,4000,2000,app!temp <- "
	    "app!main\n");
	run(&r,
	    "table heap '%s' --range 4 10 --format csv --group-by none --time-unit us --pid 100",
	    heap_trace);
	CHECK_CONTAINS(r.out, "alloc_time_us,free_time_us,lifetime_us,");
	CHECK_CONTAINS(r.out, "app,100,0,malloc,AIFI,Transient,101,20480,6.000,9.000,3.000,500,app!"
			      "other <- app!main\n");

	/* JSON: the window, the total and a node of each level. */
	run(&r,
	    "table heap '%s' --range 4 10 --format json --group-by process,impacting-type,stack "
	    "--rows",
	    heap_trace);
	CHECK_EQ(r.status, 0);
	CHECK_CONTAINS(r.out, "\"window\": {\n    \"start_ns\": 4000,\n    \"end_ns\": 10000\n  }");
	CHECK_CONTAINS(
	    r.out,
	    "\"process\": {\n        \"pid\": 100,\n        \"exe\": \"/usr/bin/app\"\n      }");
	CHECK_CONTAINS(r.out, "\"impacting_type\": \"Transient\",\n");
	CHECK_CONTAINS(
	    r.out, "\"stack\": [\n                \"app!temp\",\n                \"app!main\"\n"
		   "              ],\n              \"count\": 1,\n              \"size\": 2000,\n"
		   "              \"impacting_size\": 2000,");
	CHECK_CONTAINS(r.out, "\"alloc_ns\": 8000,");
	/* Never freed: it ended with its process at 19000. */
	CHECK_CONTAINS(r.out, "\"free_ns\": 19000,");

	/* Text: the tree with sizes for people and the stack on one line. */
	run(&r, "table heap '%s' --range 4 10 --group-by impacting-type,stack", heap_trace);
	CHECK_EQ(r.status, 0);
	CHECK_CONTAINS(r.out, "Heap Allocations, window [0.000004 s, 0.000010 s), grouped by "
			      "impacting-type, stack\n");
	CHECK_CONTAINS(r.out, "         4         1.8 KiB      2.5 KiB  Total\n");
	CHECK_CONTAINS(r.out, "         1          -236 B         64 B      app!other\n"
			      "                                               app!main\n");
}

/* Partial munmap, mremap growth and mprotect commit/decommit (traces.h has the events). */
static void test_commit(void)
{
	static struct result r;
	char expect[4096];
	/* Pieces end separately; the 1 MB mapping's pieces count as one commit. */
	run(&r, "table commit '%s' --group-by none --format csv --time-unit ns", commit_trace);
	CHECK_OUT(
	    &r,
	    "process,pid,handle,heap_name,type,impacting_type,thread,address,commit_time_ns,"
	    "decommit_time_ns,"
	    "lifetime_ns,size,stack,unseen\n"
	    "app,100,,,AIFI,Transient,100,268435456,1000,19000,18000,524288,app!main,0\n"
	    "app,100,,,AIFI,Transient,100,268959744,1000,5000,4000,4096,app!main,0\n"
	    "app,100,,,AIFI,Transient,100,805306368,1000,9000,8000,520192,app!main,0\n"
	    "app,100,,,AIFI,Transient,100,536870912,3000,9500,6500,16384,app!temp <- app!main,0\n"
	    "app,100,,,AIFI,Transient,100,805826560,7000,9000,2000,524288,app!other <- "
	    "app!main,0\n");
	run(&r, "table commit '%s' --format csv", commit_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,3,0,1589248\n"
		 "1,app,100,,,,,,,,,3,0,1589248\n"
		 "2,app,100,,,,Transient,,,,,3,0,1589248\n"
		 "3,app,100,,,,Transient,app!main,,,,1,0,1048576\n"
		 "3,app,100,,,,Transient,app!other <- app!main,,,,1,0,524288\n"
		 "3,app,100,,,,Transient,app!temp <- app!main,,,,1,0,16384\n");
	CHECK_OUT(&r, expect);
	/* Until the exit, the first half of the 1 MB mapping is still committed. */
	run(&r, "table commit '%s' --range 0 19 --format csv --depth 2", commit_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,3,524288,1589248\n"
		 "1,app,100,,,,,,,,,3,524288,1589248\n"
		 "2,app,100,,,,Impacting,,,,,0,524288,524288\n"
		 "2,app,100,,,,Transient,,,,,3,0,1064960\n");
	CHECK_OUT(&r, expect);
	run(&r, "table commit '%s' --range 6 10 --format csv --group-by type", commit_trace);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER,
		 "0,,,,,,,,,,,1,-536576,524288\n"
		 "1,,,,,AIFI,,,,,,1,0,524288\n"
		 "1,,,,,AOFO,,,,,,0,0,0\n"
		 "1,,,,,AOFI,,,,,,0,-536576,0\n");
	CHECK_OUT(&r, expect);
	run(&r, "table commit '%s' --range 6 10 --format json --group-by type --rows",
	    commit_trace);
	CHECK_CONTAINS(r.out, "\"commit_ns\": 7000,");
	CHECK_CONTAINS(r.out, "\"decommit_ns\": 9000,");
	CHECK_CONTAINS(r.out, "\"table\": \"commit\",");
	/* Committed bytes over time: the mprotect commit, the middle page, the mremap growth. */
	run(&r, "timeline '%s' --series commit --interval 2us --format csv --time-unit ns",
	    commit_trace);
	CHECK_OUT(&r,
		  "time_ns,commit\n0,0\n2000,1048576\n4000,1064960\n6000,1060864\n8000,1585152\n"
		  "10000,524288\n12000,524288\n14000,524288\n16000,524288\n18000,524288\n20000,0\n"
		  "22000,0\n");
}

/* A trace without a footer: its end is the last event read, the window is checked after reading. */
static void test_unfinished(void)
{
	static struct result r;
	char path[300], expect[1024];
	snprintf(path, sizeof(path), "%s/unfinished.htr", dir);
	CHECK_EQ(tr_unfinished(path), 0);
	run(&r, "table heap '%s' --format json --depth 0", path);
	CHECK_CONTAINS(r.out, "\"start_ns\": 0,\n    \"end_ns\": 3001\n");
	CHECK_CONTAINS(r.err, "no footer");
	run(&r, "table heap '%s' --format csv --depth 0", path);
	snprintf(expect, sizeof(expect), "%s%s", GROUP_HEADER, "0,,,,,,,,,,,2,100,1100\n");
	CHECK_OUT(&r, expect);
	run(&r, "timeline '%s' --series heap --interval 1us --format csv --time-unit ns", path);
	CHECK_OUT(&r, "time_ns,heap\n0,0\n1000,0\n2000,100\n3000,1100\n4000,100\n");
	run(&r, "table heap '%s' --range 5 6", path);
	CHECK_EQ(r.status, 2);
	CHECK_CONTAINS(
	    r.err, "heaptrail: error: the window starts after the end of the trace (0.000003 s)");
	unlink(path);
}

/* Times in text are rounded to the digits shown, not truncated. */
static void test_rounding(void)
{
	static struct result r;
	char path[300];
	snprintf(path, sizeof(path), "%s/rounding.htr", dir);
	struct ht__writer *w;
	CHECK_EQ(tr_begin(&w, path), 0);
	tr_ev(w, HT_EV_ALLOC, 1655015900, 0x1000, 100, 1);
	CHECK_EQ(tr_end(w, 1655015900), 0);
	run(&r, "table heap '%s' --range 2s 3s", path);
	CHECK_CONTAINS(
	    r.err, "heaptrail: error: the window starts after the end of the trace (1.655016 s)");
	run(&r, "info '%s'", path);
	CHECK_CONTAINS(r.out, "duration:   1.655 s\n");
	unlink(path);
}

static void test_bad_input(void)
{
	static struct result r;
	run(&r, "table heap '%s' --range 10 5", heap_trace);
	CHECK_FAILS(&r, "T2 must be after T1");
	run(&r, "table heap '%s' --range 5 5", heap_trace);
	CHECK_FAILS(&r, "T2 must be after T1");
	run(&r, "table commit '%s' --range 100s 200s", heap_trace);
	CHECK_FAILS(&r, "the window starts after the end of the trace");
	run(&r, "timeline '%s' --range 100s 200s", heap_trace);
	CHECK_FAILS(&r, "the window starts after the end of the trace");
	run(&r, "table heap '%s' --group-by process,bogus", heap_trace);
	CHECK_FAILS(&r, "unknown group-by key 'bogus'");
	run(&r, "table commit '%s' --group-by handle", heap_trace);
	CHECK_FAILS(&r, "'handle' does not apply to commit");
	run(&r, "table heapx '%s'", heap_trace);
	CHECK_FAILS(&r, "unknown table 'heapx'");
	run(&r, "table heap '%s' --range 1x 5", heap_trace);
	CHECK_FAILS(&r, "invalid time '1x'");
	run(&r, "table heap '%s' --sort big", heap_trace);
	CHECK_FAILS(&r, "unknown sort key 'big'");
	run(&r, "table heap '%s/missing.htr'", dir);
	CHECK_FAILS(&r, "cannot open");
	run(&r, "timeline '%s' --series heap,swap", heap_trace);
	CHECK_FAILS(&r, "unknown series 'swap'");
	run(&r, "timeline '%s' --interval 0", heap_trace);
	CHECK_FAILS(&r, "invalid interval '0'");
	run(&r, "timeline '%s' --by thread", heap_trace);
	CHECK_FAILS(&r, "unknown split 'thread'");
}

static void test_timeline(void)
{
	static struct result r;
	run(&r, "timeline '%s' --series heap --interval 2us --format csv --time-unit ns",
	    heap_trace);
	CHECK_OUT(
	    &r,
	    "time_ns,heap\n0,0\n2000,100\n4000,400\n6000,140\n8000,704\n10000,2204\n12000,2211\n"
	    "14000,211\n16000,211\n18000,211\n20000,0\n22000,0\n");
	/* What the process never freed ended with it at 19 us, as in the tables. */
	/* The table's Impacting Size over [4 us, 10 us) is value(10 us) - value(4 us): 2204 - 400.
	 */
	run(&r,
	    "timeline '%s' --series heap --by handle --interval 5us --format csv --time-unit us",
	    heap_trace);
	CHECK_OUT(&r, "time_us,heap:100:0x0 "
		      "(malloc),heap:100:0x5000\n0.000,0,0\n5.000,100,0\n10.000,2140,64\n"
		      "15.000,147,64\n20.000,0,0\n25.000,0,0\n");
	/* RSS: the samples hold until the next one; the exit at 19 us drops it, and the heap. */
	run(&r,
	    "timeline '%s' --series rss,heap --by process --interval 5us --format csv --time-unit "
	    "ns",
	    heap_trace);
	CHECK_OUT(
	    &r, "time_ns,heap:100,rss:100\n0,0,0\n5000,100,4096\n10000,2204,4096\n15000,211,8192\n"
		"20000,0,0\n25000,0,0\n");
	run(&r,
	    "timeline '%s' --series heap --by process --range 4 10 --interval 3us --format json",
	    heap_trace);
	CHECK_OUT(&r, "{\"interval_ns\":3000,\"start_ns\":4000,\"peak\":false,\"series\":[{"
		      "\"name\":\"heap\",\"process\":"
		      "{\"pid\":100,\"exe\":\"/usr/bin/"
		      "app\"},\"points\":[[4000,400],[7000,640],[10000,2204]]}]}\n");

	/* --peak: the highest value since the previous point (B's 1000 bytes live 2 to 3 us). */
	run(&r, "timeline '%s' --series heap,rss --interval 2us --format csv --time-unit ns --peak",
	    heap_trace);
	CHECK_OUT(
	    &r,
	    "time_ns,heap,rss\n0,0,0\n2000,100,4096\n4000,1100,4096\n6000,400,4096\n8000,704,4096\n"
	    "10000,2704,4096\n12000,2211,8192\n14000,2211,8192\n16000,211,8192\n18000,211,8192\n"
	    "20000,211,8192\n22000,0,0\n");
	run(&r, "timeline '%s' --series commit --interval 2us --format csv --time-unit ns --peak",
	    commit_trace);
	CHECK_OUT(
	    &r,
	    "time_ns,commit\n0,0\n2000,1048576\n4000,1064960\n6000,1064960\n8000,1585152\n"
	    "10000,1585152\n12000,524288\n14000,524288\n16000,524288\n18000,524288\n20000,524288\n"
	    "22000,0\n");
	/* One point for the whole trace: the peak of each. */
	run(&r, "timeline '%s' --interval 1s --format csv --time-unit ns --peak --by process",
	    commit_trace);
	CHECK_OUT(&r, "time_ns,commit:100\n0,0\n1000000000,1585152\n");

	char svg[300];
	snprintf(svg, sizeof(svg), "%s/t.svg", dir);
	run(&r, "timeline '%s' --series heap,commit --interval 1us --svg '%s'", heap_trace, svg);
	CHECK_EQ(r.status, 0);
	CHECK_STR(r.out, "");
	static char buf[65536];
	slurp(svg, buf, sizeof(buf));
	CHECK_CONTAINS(buf, "<svg xmlns=\"http://www.w3.org/2000/svg\"");
	CHECK_CONTAINS(buf, "data-name=\"heap\"");
	CHECK_CONTAINS(buf, "data-name=\"commit\"");
	CHECK_CONTAINS(buf, ">2 KiB</text>");
	CHECK_CONTAINS(buf, ">0.00001 s</text>");
	CHECK_CONTAINS(buf, "</svg>\n");
	unlink(svg);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_table_cli HEAPTRAIL\n");
		return 2;
	}
	heaptrail = argv[1];
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(heap_trace, sizeof(heap_trace), "%s/heap.htr", dir);
	snprintf(commit_trace, sizeof(commit_trace), "%s/commit.htr", dir);
	CHECK_EQ(tr_heap(heap_trace), 0);
	CHECK_EQ(tr_commit(commit_trace), 0);
	test_heap_groups();
	test_agrees_with_analyze();
	test_heap_rows();
	test_commit();
	test_unfinished();
	test_bad_input();
	test_rounding();
	test_timeline();
	unlink(heap_trace);
	unlink(commit_trace);
	rmdir(dir);
	CHECK_DONE();
}
