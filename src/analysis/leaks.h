/*
 * leaks.h - the core of the leak gate ('heaptrail check', 'record
 * --fail-on-leak'): the blocks still allocated at the end of a trace, grouped
 * by stack after the default cull (as 'analyze -stacks so'), less the ones a
 * suppression matches, biggest first.
 *
 * Suppressions use LeakSanitizer's format: "leak:PATTERN" lines, '#'
 * comments. A stack is suppressed when PATTERN matches the function, the
 * module (file name or path) or the source file of any of its frames; '*'
 * matches any text, '^' and '$' anchor at the start and end, and without them
 * the pattern may match anywhere in the name. The built-in list covers the C
 * and C++ runtimes' one-time allocations (ht__supp_defaults).
 *
 * Example:
 *
 *     struct ht__supp s;
 *     ht__supp_init(&s);
 *     ht__supp_add_defaults(&s);
 *     struct ht__leak_report rep;
 *     rc = ht__leaks_run(&rep, reader, &s);
 *     for (size_t i = 0; i < rep.count; i++) if (rep.items[i].rule < 0) ...
 *     ht__leaks_release(&rep);
 *     ht__supp_release(&s);
 *
 * Ownership: the report keeps pointers into the reader, which must outlive
 * it. Not thread-safe.
 */
#ifndef HT_ANALYSIS_LEAKS_H
#define HT_ANALYSIS_LEAKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heaptrail/trace.h"

struct ht__agg;

/* One suppression and what it matched in the last run. */
struct ht__supp_rule {
	char *pattern;
	const char *why; /* built-in rules: what they cover; NULL for a file's */
	uint64_t bytes, count;
};

struct ht__supp {
	struct ht__supp_rule *rules;
	size_t count, alloc;
};

/* The built-in rules, pattern and reason, ended by {NULL, NULL}. */
extern const struct ht__supp_default {
	const char *pattern;
	const char *why;
} ht__supp_defaults[];

void ht__supp_init(struct ht__supp *s);
/* Adds the built-in rules. Returns 0 or HT_ERR_NOMEM. */
int ht__supp_add_defaults(struct ht__supp *s);
/* Adds one pattern (without "leak:"). Returns 0, HT_ERR_INVALID or HT_ERR_NOMEM. */
int ht__supp_add(struct ht__supp *s, const char *pattern, const char *why);
/*
 * Reads a LeakSanitizer suppression file. Lines of other kinds ("race:",
 * "thread:") are skipped and counted in *skipped. Returns 0, HT_ERR_INVALID
 * with the line number in *bad_line, or the error of opening or reading it
 * (errno set).
 */
int ht__supp_add_file(struct ht__supp *s, const char *path, unsigned *bad_line, unsigned *skipped);
void ht__supp_release(struct ht__supp *s);

/* Does pattern match text, as LeakSanitizer matches its patterns? */
bool ht__supp_match(const char *pattern, const char *text);

/* The blocks never freed that share one culled stack. */
struct ht__leak {
	uint64_t bytes, count;
	const uint32_t *frames; /* culled stack, innermost first (owned by the report) */
	uint32_t nframes;
	int rule; /* index of the suppression that matched, or -1 */
};

struct ht__leak_report {
	struct ht__leak *items; /* leaked first, then suppressed; biggest first in each */
	size_t count;
	size_t leaked_stacks;		     /* items[0..leaked_stacks) are not suppressed */
	uint64_t leaked_bytes, leaked_count; /* not suppressed */
	uint64_t suppressed_bytes, suppressed_count;
	struct ht__agg *agg;
	void *query; /* the aggregator's query */
};

/*
 * Reads the whole trace (from where the reader is) and fills *out; counts
 * each rule's matches into s. Returns 0 or a negative error of the reader or
 * HT_ERR_NOMEM.
 */
int ht__leaks_run(struct ht__leak_report *out, struct ht_reader *r, struct ht__supp *s);
/* A frame as analyze names it ("module!function"). */
const char *ht__leaks_frame_text(struct ht__leak_report *rep, uint32_t frame);
void ht__leaks_release(struct ht__leak_report *rep);

#endif
