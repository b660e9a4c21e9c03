/*
 * temporary.c - the latest allocation of each thread, in an open-addressing
 * table keyed by tid (tids are unique among the threads alive at one time,
 * and a reused tid simply takes the entry over).
 */
#include "analysis/temporary.h"

#include <stdlib.h>

struct last {
	int32_t tid; /* 0: empty */
	uint32_t process;
	uint64_t heap;
	uint64_t addr;
	uint64_t ts;
};

struct ht__temp_tracker {
	struct last *tab;
	size_t cap, count;
};

struct ht__temp_tracker *ht__temp_new(void)
{
	return calloc(1, sizeof(struct ht__temp_tracker));
}

void ht__temp_free(struct ht__temp_tracker *t)
{
	if (!t)
		return;
	free(t->tab);
	free(t);
}

static size_t slot(const struct last *tab, size_t cap, int32_t tid)
{
	size_t i = ((uint32_t)tid * 2654435761u) & (cap - 1);
	while (tab[i].tid && tab[i].tid != tid)
		i = (i + 1) & (cap - 1);
	return i;
}

int ht__temp_event(struct ht__temp_tracker *t, const struct ht_event *ev)
{
	bool made = (ev->type == HT_EV_ALLOC && ev->addr) ||
		    (ev->type == HT_EV_REALLOC && ev->addr && !(ev->flags & HT_EVF_FAILED));
	if (!made || !ev->tid)
		return 0;
	if ((t->count + 1) * 2 > t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		struct last *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			return HT_ERR_NOMEM;
		for (size_t i = 0; i < t->cap; i++)
			if (t->tab[i].tid)
				nt[slot(nt, ncap, t->tab[i].tid)] = t->tab[i];
		free(t->tab);
		t->tab = nt;
		t->cap = ncap;
	}
	struct last *l = &t->tab[slot(t->tab, t->cap, ev->tid)];
	if (!l->tid)
		t->count++;
	*l = (struct last){ev->tid, ev->process, ev->heap, ev->addr, ev->ts};
	return 0;
}

bool ht__temp_is(const struct ht__temp_tracker *t, const struct ht__life *life)
{
	/* A block its process still held at exit was never freed (lifetime.h). */
	if (life->free_ts == HT_TS_NEVER || life->at_exit || !t->cap || !life->tid)
		return false;
	const struct last *l = &t->tab[slot(t->tab, t->cap, life->tid)];
	return l->tid == life->tid && l->addr == life->addr && l->ts == life->alloc_ts &&
	       l->process == life->process && l->heap == life->heap;
}
