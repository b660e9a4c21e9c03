/*
 * The per-user symbol cache (docs/symbol-cache.md): the symbols of the
 * frames some recording needed, per module build-id, so that the next
 * recording of the same binary does not open its DWARF again.
 */
#ifndef HT_SESSION_SYMCACHE_H
#define HT_SESSION_SYMCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "format/writer.h"

struct ht__symcache {
	char *path; /* NULL: no cache for this module */
	uint8_t debug_present;
	uint8_t *buf; /* the file as read (records from byte 16) */
	size_t len;
	struct ht__symcache_ent *idx; /* sorted by rel */
	size_t n;
	uint8_t *add; /* records resolved now, appended at close */
	size_t add_len, add_cap;
};

/* Opens the cache of the module with this build-id (none when len is 0). */
void ht__symcache_open(struct ht__symcache *c, const uint8_t *build_id, int len);
/* The cached symbols of rel into out (at most max), their number, or -1. */
int ht__symcache_get(const struct ht__symcache *c, uint64_t rel, struct ht__symbol *out, int max);
/* Remembers what rel resolved to. */
void ht__symcache_put(struct ht__symcache *c, uint64_t rel, const struct ht__symbol *syms, int n);
/* Writes the file when frames were added, and frees everything. */
void ht__symcache_close(struct ht__symcache *c);

#endif
