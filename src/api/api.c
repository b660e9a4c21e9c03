/*
 * api.c - libheaptrail-api.so, the shared library of the public API: the
 * trace reader (include/heaptrail/trace.h) and the session control
 * (include/heaptrail/control.h). The code is the static libraries'; the
 * build pulls in exactly what the public functions need (-u for each) and a
 * version script generated from the two headers exports those and nothing
 * else. This file only records the library's version.
 */
const char ht__api_version[] = HT_VERSION;
