/*
 * intern.c - the string interning of intern.h: an array of copies and an
 * open-addressing table of ids, kept at most half full.
 */
#include "analysis/intern.h"

#include <stdlib.h>
#include <string.h>

#include "heaptrail/trace.h"

uint64_t ht__mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

uint64_t ht__hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return ht__mix64(h);
}

/* Grows the table so that count + 1 entries keep it at most half full. */
static int grow(struct ht__intern *in)
{
	size_t ncap = in->cap ? in->cap * 2 : 1024;
	uint32_t *nt = calloc(ncap, sizeof(*nt));
	if (!nt)
		return HT_ERR_NOMEM;
	for (uint32_t id = 0; id < in->count; id++) {
		size_t i = ht__hash_str(in->strs[id]) & (ncap - 1);
		while (nt[i])
			i = (i + 1) & (ncap - 1);
		nt[i] = id + 1;
	}
	free(in->tab);
	in->tab = nt;
	in->cap = ncap;
	return 0;
}

uint32_t ht__intern_id(struct ht__intern *in, const char *s)
{
	if ((in->count + 1) * 2 > in->cap && grow(in) < 0)
		return HT__NO_ID;
	size_t i = ht__hash_str(s) & (in->cap - 1);
	while (in->tab[i]) {
		uint32_t id = in->tab[i] - 1;
		if (!strcmp(in->strs[id], s))
			return id;
		i = (i + 1) & (in->cap - 1);
	}
	if (in->count == in->alloc) {
		uint32_t na = in->alloc ? in->alloc * 2 : 1024;
		char **ns = realloc(in->strs, na * sizeof(*ns));
		if (!ns)
			return HT__NO_ID;
		in->strs = ns;
		in->alloc = na;
	}
	char *copy = strdup(s);
	if (!copy)
		return HT__NO_ID;
	in->strs[in->count] = copy;
	in->tab[i] = ++in->count;
	return in->count - 1;
}

void ht__intern_release(struct ht__intern *in)
{
	for (uint32_t i = 0; i < in->count; i++)
		free(in->strs[i]);
	free(in->strs);
	free(in->tab);
	memset(in, 0, sizeof(*in));
}
