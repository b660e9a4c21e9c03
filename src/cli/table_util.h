/*
 * table_util.h - what 'heaptrail table' and 'heaptrail timeline' share:
 * output time units, sizes in KB/MB/GB, the --range, --pid and frame-list
 * options (as 'analyze' spells them) and the default window of a trace.
 * Parsing functions die() with a clear message on bad input.
 */
#ifndef HT_CLI_TABLE_UTIL_H
#define HT_CLI_TABLE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/query.h"
#include "analysis/window.h"
#include "heaptrail/trace.h"

/* An output time unit: "s", "ms", "us" or "ns". */
struct tu_unit {
	const char *name;
	uint64_t ns;	  /* ns per unit */
	int text_digits;  /* decimals in text */
	int exact_digits; /* decimals that keep every ns (csv) */
};

/*
 * Options spelled as 'heaptrail analyze' takes them: '-range' for '--range'
 * and '--top=5' for '--top 5'. Returns the arguments with every long option
 * in the '--name' form and '=' values split off; -cullFrames, -cullLists and
 * -requireFrames keep their xperf spelling. The result lives until
 * tu_args_release().
 */
char **tu_normalize_args(int argc, char **argv, int *out_argc);
void tu_args_release(void);

/* Returns 0, or -1 for an unknown unit. */
int tu_parse_unit(const char *s, struct tu_unit *out);

/* ns in the unit, with the text decimals ("1.250000") or every ns ("1.250000000"). */
void tu_time(char *buf, size_t len, uint64_t ns, const struct tu_unit *u);
void tu_time_exact(char *buf, size_t len, uint64_t ns, const struct tu_unit *u);

/* Bytes for people: "40 B", "46.9 KB", "10.0 MB", "1.50 GB" (powers of 1024), signed. */
void tu_size(char *buf, size_t len, int64_t bytes);

/* The file name part of a path ("?" for NULL). */
const char *tu_basename(const char *path);

/* Parses T1 and T2 (microseconds or with a suffix); dies when malformed or T2 <= T1. */
void tu_parse_range(const char *a, const char *b, uint64_t *t1, uint64_t *t2);

/* "--pid 12,34": adds the pids to q; dies when malformed. */
void tu_parse_pids(const char *opt, const char *v, struct ht__query *q);

/* A count >= 0; dies when malformed. */
uint64_t tu_parse_count(const char *opt, const char *v);

/*
 * -cullFrames F..., -cullLists FILE..., -requireFrames F... (every following
 * argument up to the next one starting with '-'; commas split items too) and
 * --no-default-cull. Returns true when argv[*i] was one of them (and moves *i
 * to its last argument); dies on a bad item or unreadable file.
 */
bool tu_parse_frames_option(struct ht__query *q, int argc, char **argv, int *i);

/*
 * The window of a table or timeline: [t1, t2) when given, else the whole
 * trace. Dies when the window starts after the trace's end. When the trace's
 * end is not known yet (an unfinished trace), the whole-trace window ends at
 * UINT64_MAX; call tu_window_check() after reading.
 */
struct ht__window tu_window(const struct ht_reader *r, bool has_range, uint64_t t1, uint64_t t2);

/* After reading: dies when a given window starts after the trace's end; fixes an open end. */
void tu_window_check(const struct ht_reader *r, bool has_range, struct ht__window *w);

#endif
