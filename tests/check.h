/*
 * check.h - the assertion macros every C test shares: a failed check prints
 * where it is, the expression and both values, counts in check_failures and
 * lets the test go on; CHECK_DONE() ends main with 1 if anything failed.
 */
#ifndef HT_TESTS_CHECK_H
#define HT_TESTS_CHECK_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

/* Equality of two integers of up to 64 bits, printed signed. */
#define CHECK_EQ(got, want)                                                                        \
	do {                                                                                       \
		int64_t g_ = (int64_t)(got), w_ = (int64_t)(want);                                 \
		if (g_ != w_) {                                                                    \
			fprintf(stderr, "%s:%d: %s is %" PRId64 ", want %s = %" PRId64 "\n",       \
				__FILE__, __LINE__, #got, g_, #want, w_);                          \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

/* The same, printed unsigned (sizes, addresses). */
#define CHECK_U64(got, want)                                                                       \
	do {                                                                                       \
		uint64_t g_ = (uint64_t)(got), w_ = (uint64_t)(want);                              \
		if (g_ != w_) {                                                                    \
			fprintf(stderr, "%s:%d: %s is %" PRIu64 ", want %s = %" PRIu64 "\n",       \
				__FILE__, __LINE__, #got, g_, #want, w_);                          \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

/* Two strings equal; a NULL on either side fails. */
#define CHECK_STR(got, want)                                                                       \
	do {                                                                                       \
		const char *g_ = (got), *w_ = (want);                                              \
		if (!g_ || !w_ || strcmp(g_, w_)) {                                                \
			fprintf(stderr, "%s:%d: %s is \"%s\", want \"%s\"\n", __FILE__, __LINE__,  \
				#got, g_ ? g_ : "(null)", w_ ? w_ : "(null)");                     \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

#define CHECK_DONE()                                                                               \
	do {                                                                                       \
		if (check_failures)                                                                \
			fprintf(stderr, "%d check(s) failed\n", check_failures);                   \
		return check_failures ? 1 : 0;                                                     \
	} while (0)

#endif
