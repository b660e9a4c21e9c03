/*
 * intern.c - the string interning of intern.h: an array of copies and a hash
 * index of them (vec.h).
 */
#include "analysis/intern.h"

#include <stdlib.h>
#include <string.h>

#include "base/vec.h"

static uint64_t rehash(const void *ctx, uint32_t id)
{
	return ht__hash_str(((const struct ht__intern *)ctx)->strs[id]);
}

uint32_t ht__intern_id(struct ht__intern *in, const char *s)
{
	uint64_t h = ht__hash_str(s);
	for (uint32_t *slot = ht__hindex_find(&in->ix, h); *slot;
	     slot = ht__hindex_next(&in->ix, slot))
		if (!strcmp(in->strs[*slot - 1], s))
			return *slot - 1;
	if (ht__grow32((void **)&in->strs, &in->alloc, (size_t)in->count + 1, sizeof(*in->strs)) <
	    0)
		return HT__NO_ID;
	char *copy = strdup(s);
	if (!copy)
		return HT__NO_ID;
	in->strs[in->count] = copy;
	if (ht__hindex_insert(&in->ix, h, in->count, rehash, in) < 0) {
		free(copy);
		return HT__NO_ID;
	}
	return in->count++;
}

void ht__intern_release(struct ht__intern *in)
{
	for (uint32_t i = 0; i < in->count; i++)
		free(in->strs[i]);
	free(in->strs);
	ht__hindex_release(&in->ix);
	memset(in, 0, sizeof(*in));
}
