/*
 * testutil.h - the little the format tests share: CHECK macros that report
 * the failing expression and values, and a private temporary directory that
 * is removed at exit.
 */
#ifndef HT_TESTS_FORMAT_TESTUTIL_H
#define HT_TESTS_FORMAT_TESTUTIL_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int test_failures;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
			test_failures++;                                                           \
		}                                                                                  \
	} while (0)

#define CHECK_EQ(a, b)                                                                             \
	do {                                                                                       \
		unsigned long long va_ = (unsigned long long)(a);                                  \
		unsigned long long vb_ = (unsigned long long)(b);                                  \
		if (va_ != vb_) {                                                                  \
			fprintf(stderr, "%s:%d: %s == %s failed: %llu != %llu\n", __FILE__,        \
				__LINE__, #a, #b, va_, vb_);                                       \
			test_failures++;                                                           \
		}                                                                                  \
	} while (0)

#define CHECK_STR(a, b)                                                                            \
	do {                                                                                       \
		const char *sa_ = (a), *sb_ = (b);                                                 \
		if (!sa_ || !sb_ || strcmp(sa_, sb_)) {                                            \
			fprintf(stderr, "%s:%d: %s == %s failed: '%s' != '%s'\n", __FILE__,        \
				__LINE__, #a, #b, sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");     \
			test_failures++;                                                           \
		}                                                                                  \
	} while (0)

static char test_dir[256];

static inline void test_dir_remove(void)
{
	if (test_dir[0]) {
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", test_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", test_dir);
	}
}

/* A fresh directory under $TMPDIR (or /tmp), removed at exit. */
static inline const char *test_tmpdir(void)
{
	if (!test_dir[0]) {
		const char *base = getenv("TMPDIR");
		snprintf(test_dir, sizeof(test_dir), "%s/htfmt.XXXXXX",
			 base && *base ? base : "/tmp");
		if (!mkdtemp(test_dir)) {
			perror("mkdtemp");
			exit(2);
		}
		atexit(test_dir_remove);
	}
	return test_dir;
}

/* path = tmpdir/name, in a static buffer per call site is not needed: caller's buffer. */
static inline void test_path(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", test_tmpdir(), name);
}

static inline int test_result(const char *name)
{
	if (test_failures) {
		fprintf(stderr, "%s: %d failure(s)\n", name, test_failures);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}

#endif
