/*
 * paths.c - heaptrail's own files, found relative to the running program and
 * to the object holding this code (see paths.h).
 */
#define _GNU_SOURCE
#include "base/paths.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heaptrail/trace.h"

/* The directory of the running program [0] and of this code's object [1]. */
static int start_dirs(char dirs[2][PATH_MAX])
{
	int n = 0;
	ssize_t len = readlink("/proc/self/exe", dirs[0], PATH_MAX - 1);
	if (len > 0) {
		dirs[0][len] = 0;
		n = 1;
	}
	Dl_info info;
	if (dladdr((void *)start_dirs, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
	    realpath(info.dli_fname, dirs[n]) && (n == 0 || strcmp(dirs[0], dirs[n])))
		n++;
	for (int i = 0; i < n; i++) {
		char *slash = strrchr(dirs[i], '/');
		if (slash)
			*slash = 0;
	}
	return n;
}

/* The first rel[i]/name under a start directory that exists and can be read. */
static int find(const char *const *rel, size_t nrel, const char *name, char *out, size_t n)
{
	char dirs[2][PATH_MAX];
	int nd = start_dirs(dirs);
	char first[PATH_MAX] = "";
	for (int d = 0; d < nd; d++) {
		for (size_t i = 0; i < nrel; i++) {
			char cand[PATH_MAX], real[PATH_MAX];
			if ((size_t)snprintf(cand, sizeof(cand), "%.*s/%s/%s", PATH_MAX / 2,
					     dirs[d], rel[i], name) >= sizeof(cand))
				continue;
			if (!first[0])
				memcpy(first, cand, sizeof(first));
			if (realpath(cand, real) && access(real, R_OK) == 0 && strlen(real) < n) {
				snprintf(out, n, "%s", real);
				return 0;
			}
		}
	}
	snprintf(out, n, "%s", first[0] ? first : name);
	return HT_ERR_NOT_FOUND;
}

int ht__lib_path(const char *name, char *out, size_t n)
{
	/*
	 * Installed program (bin/), installed library (lib/), then the build
	 * tree: its bin/ and lib/, and programs a level or two below it
	 * (BUILD/examples, BUILD/tests/x).
	 */
	static const char *const rel[] = {"../lib/heaptrail", "heaptrail",   "../lib", ".",
					  "../../lib",	      "../../../lib"};
	return find(rel, sizeof(rel) / sizeof(rel[0]), name, out, n);
}

int ht__share_path(const char *name, char *out, size_t n)
{
	static const char *const rel[] = {"../share/heaptrail", "../../share/heaptrail"};
	return find(rel, sizeof(rel) / sizeof(rel[0]), name, out, n);
}
