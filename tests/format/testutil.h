/*
 * testutil.h - what the format tests share besides tests/check.h: a private
 * temporary directory that is removed at exit, and the result line.
 */
#ifndef HT_TESTS_FORMAT_TESTUTIL_H
#define HT_TESTS_FORMAT_TESTUTIL_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

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
	if (check_failures) {
		fprintf(stderr, "%s: %d failure(s)\n", name, check_failures);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}

#endif
