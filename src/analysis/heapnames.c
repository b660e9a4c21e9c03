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
	char *name; /* inherited entries share their parent's */
	int gone;   /* destroyed: a fork child made after it does not have it */
};

struct ht__heap_names {
	HT_VEC(struct entry) v;		/* declared, in trace order */
	HT_VEC(struct entry) inherited; /* a fork child's heaps of its parent, at the fork */
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
	ht__vec_release(&n->inherited);
	free(n);
}

/* The last entry of (process, heap) in v, or NULL. */
static struct entry *last_of(struct entry *v, size_t len, uint32_t process, uint64_t heap)
{
	for (size_t i = len; i-- > 0;)
		if (v[i].process == process && v[i].heap == heap)
			return &v[i];
	return NULL;
}

/*
 * A fork child has its parent's heaps as they were at the fork: it frees and
 * allocates in them without declaring them again, so it takes their names
 * (what the parent declared and had not destroyed, and what the parent had
 * itself from its own parent). An exec'd image starts without any.
 */
static int inherit(struct ht__heap_names *n, struct ht__pass *p, uint32_t child)
{
	const struct ht_process *c = ht_reader_process(ht__pass_reader(p), child);
	if (!c || !(c->flags & HT_PROCF_FORK) || c->parent == UINT32_MAX)
		return 0;
	for (int own = 0; own < 2; own++) {
		size_t len = own ? n->v.len : n->inherited.len;
		for (size_t i = 0; i < len; i++) {
			struct entry e = own ? n->v.v[i] : n->inherited.v[i];
			if (e.process != c->parent || e.gone)
				continue;
			/* Its own declaration of the handle, later in v, wins. */
			struct entry *last =
			    own ? last_of(n->v.v, n->v.len, e.process, e.heap)
				: last_of(n->inherited.v, n->inherited.len, e.process, e.heap);
			if (last != (own ? &n->v.v[i] : &n->inherited.v[i]))
				continue;
			e.process = child;
			if (ht__vec_push(&n->inherited, e) < 0)
				return HT_ERR_NOMEM;
		}
	}
	return 0;
}

static int on_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	struct ht__heap_names *n = ctx;
	if (ev->type == HT_EV_PROCESS_START)
		return inherit(n, p, ev->process);
	if (ev->type == HT_EV_HEAP_DESTROY) {
		struct entry *e = last_of(n->v.v, n->v.len, ev->process, ev->heap);
		if (!e)
			e = last_of(n->inherited.v, n->inherited.len, ev->process, ev->heap);
		if (e)
			e->gone = 1;
		return 0;
	}
	if (!ev->name)
		return 0;
	/* heap.h keeps at most 255 bytes; each may become \xHH. */
	char buf[4 * 256];
	snprintf(buf, sizeof(buf), "%s", ev->name);
	ht__escape_control(buf, sizeof(buf));
	char *name = strdup(buf);
	if (!name || ht__vec_push(&n->v, ((struct entry){ev->process, ev->heap, name, 0})) < 0) {
		free(name);
		return HT_ERR_NOMEM;
	}
	return 0;
}

static const struct ht__consumer names_consumer = {
    .name = "heap names",
    .events = HT_PASS_EV(HT_EV_HEAP_CREATE) | HT_PASS_EV(HT_EV_HEAP_DESTROY) |
	      HT_PASS_EV(HT_EV_PROCESS_START),
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
	/* A fork child's own declaration wins over what it inherited, where
	   its parent's own comes after what the parent inherited. */
	const char *inherited = NULL;
	for (size_t i = 0; n && !found && i < n->inherited.len; i++)
		if (n->inherited.v[i].process == process && n->inherited.v[i].heap == heap)
			inherited = n->inherited.v[i].name;
	return found ? found : inherited;
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
