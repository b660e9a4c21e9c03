/*
 * check.h - the few assertion macros the analysis unit tests share: each
 * failed check prints where and what, and the test exits non-zero at the end.
 */
#ifndef HT_TESTS_ANALYSIS_CHECK_H
#define HT_TESTS_ANALYSIS_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond)                                                                        \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			check_failures++;                                                   \
		}                                                                           \
	} while (0)

#define CHECK_U64(got, want)                                                               \
	do {                                                                                \
		uint64_t g_ = (uint64_t)(got), w_ = (uint64_t)(want);                       \
		if (g_ != w_) {                                                             \
			fprintf(stderr, "%s:%d: %s is %" PRIu64 ", want %" PRIu64 "\n", __FILE__, \
				__LINE__, #got, g_, w_);                                    \
			check_failures++;                                                   \
		}                                                                           \
	} while (0)

#define CHECK_STR(got, want)                                                               \
	do {                                                                                \
		const char *g_ = (got), *w_ = (want);                                       \
		if (!g_ || strcmp(g_, w_)) {                                                \
			fprintf(stderr, "%s:%d: %s is \"%s\", want \"%s\"\n", __FILE__, __LINE__, \
				#got, g_ ? g_ : "(null)", w_);                              \
			check_failures++;                                                   \
		}                                                                           \
	} while (0)

#define CHECK_DONE()                                                                       \
	do {                                                                                \
		if (check_failures)                                                         \
			fprintf(stderr, "%d check(s) failed\n", check_failures);            \
		return check_failures ? 1 : 0;                                              \
	} while (0)

#endif
