/*
 * heapnames.c - the names heap.h gives custom heaps, read through the trace
 * pass, and the label every output prints for a heap (heapnames.h).
 */
#include "analysis/heapnames.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/match.h"
#include "analysis/pass.h"
#include "base/vec.h"
#include "heaptrail/heap.h"

struct entry {
	uint32_t process;
	uint64_t heap;
	char *name;
};

struct ht__heap_names {
	HT_VEC(struct entry) v;
};

int ht__heap_names_new(struct ht__heap_names **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : HT_ERR_NOMEM;
}

void ht__heap_names_free(struct ht__heap_names *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->v.len; i++)
		free(n->v.v[i].name);
	ht__vec_release(&n->v);
	free(n);
}

static int on_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	(void)p;
	struct ht__heap_names *n = ctx;
	if (!ev->name)
		return 0;
	/* heap.h keeps at most 255 bytes; each may become \xHH. */
	char buf[4 * 256];
	snprintf(buf, sizeof(buf), "%s", ev->name);
	ht__escape_control(buf, sizeof(buf));
	char *name = strdup(buf);
	if (!name || ht__vec_push(&n->v, ((struct entry){ev->process, ev->heap, name})) < 0) {
		free(name);
		return HT_ERR_NOMEM;
	}
	return 0;
}

static const struct ht__consumer names_consumer = {
    .name = "heap names",
    .events = HT_PASS_EV(HT_EV_HEAP_CREATE),
    .event = on_event,
};

int ht__heap_names_attach(struct ht__pass *p, struct ht__heap_names *n, uint64_t ts)
{
	int id = ht__pass_add(p, &names_consumer, n);
	if (id >= 0 && ts != UINT64_MAX)
		ht__pass_stop_at(p, id, ts);
	return id;
}

const char *ht__heap_name(const struct ht__heap_names *n, uint32_t process, uint64_t heap)
{
	if (heap == HT_HEAP_PROCESS)
		return "malloc";
	const char *found = NULL; /* the last create wins: a handle can be reused */
	for (size_t i = 0; n && i < n->v.len; i++)
		if ((process == HT__ANY_PROCESS || n->v.v[i].process == process) &&
		    n->v.v[i].heap == heap)
			found = n->v.v[i].name;
	return found;
}

size_t ht__heap_names_count(const struct ht__heap_names *n)
{
	return n ? n->v.len : 0;
}

const char *ht__heap_names_get(const struct ht__heap_names *n, size_t i, uint32_t *process,
			       uint64_t *heap)
{
	*process = n->v.v[i].process;
	*heap = n->v.v[i].heap;
	return n->v.v[i].name;
}

const char *ht__heap_label(const struct ht__heap_names *n, uint32_t process, uint64_t heap,
			   char *buf, size_t len)
{
	const char *name = ht__heap_name(n, process, heap);
	if (name)
		snprintf(buf, len, "0x%" PRIx64 " (%s)", heap, name);
	else
		snprintf(buf, len, "0x%" PRIx64, heap);
	return buf;
}
