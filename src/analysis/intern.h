/*
 * intern.h - interned strings (frame texts, module names, file names): each
 * distinct text gets a small id, so the aggregator and the exporters compare
 * and hash ids instead of strings. Internal to the analysis core.
 */
#ifndef HT_ANALYSIS_INTERN_H
#define HT_ANALYSIS_INTERN_H

#include <stddef.h>
#include <stdint.h>

#include "base/vec.h"

#define HT__NO_ID UINT32_MAX

/* Zero-initialised is empty. strs[id] is the text of id. */
struct ht__intern {
	char **strs;
	uint32_t count, alloc;
	struct ht__hindex ix; /* of strs */
};

/* The id of text s, adding a copy when new; HT__NO_ID when out of memory. */
uint32_t ht__intern_id(struct ht__intern *in, const char *s);
void ht__intern_release(struct ht__intern *in);

/* Hashing: ht__mix64() and ht__hash_str() of vec.h. */

#endif
