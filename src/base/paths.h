/*
 * paths.h - where heaptrail's own files are, found from where the running
 * code is, so any install prefix works and so does the build tree:
 *
 *     installed:  PREFIX/bin/heaptrail, PREFIX/lib/heaptrail/libheaptrail.so,
 *                 PREFIX/lib/libheaptrail-api.so.0.2, PREFIX/share/heaptrail/
 *     build tree: BUILD/bin/heaptrail, BUILD/lib/libheaptrail.so,
 *                 BUILD/lib/libheaptrail-api.so.0.2, BUILD/share/heaptrail/
 *
 * The starting points are the directory of the running program
 * (/proc/self/exe) and that of the object holding this code (a program
 * linking libheaptrail-api from anywhere finds the recorder next to it).
 */
#ifndef HT_BASE_PATHS_H
#define HT_BASE_PATHS_H

#include <stddef.h>

/*
 * The real path of the library `name` (libheaptrail.so, libheaptrail-ifeo.so)
 * in out. Returns 0, or HT_ERR_NOT_FOUND with the first place looked at in
 * out (for the message).
 */
int ht__lib_path(const char *name, char *out, size_t n);

/* The same for a data file under share/heaptrail/ (report.html). */
int ht__share_path(const char *name, char *out, size_t n);

#endif
