/*
 * temporary.c - the latest allocation of each thread, found by tid through
 * vec.h's hash index (tids are unique among the threads alive at one time,
 * and a reused tid simply takes the entry over).
 */
#include "analysis/temporary.h"

#include <stdlib.h>

#include "base/vec.h"

struct last {
	int32_t tid;
	uint32_t process;
	uint64_t heap;
	uint64_t addr;
	uint64_t ts;
};

struct ht__temp_tracker {
	HT_VEC(struct last) threads;
	struct ht__hindex by_tid;
};

struct ht__temp_tracker *ht__temp_new(void)
{
	return calloc(1, sizeof(struct ht__temp_tracker));
}

void ht__temp_free(struct ht__temp_tracker *t)
{
	if (!t)
		return;
	ht__vec_release(&t->threads);
	ht__hindex_release(&t->by_tid);
	free(t);
}

static uint64_t tid_hash(int32_t tid)
{
	return ht__mix64((uint32_t)tid);
}

static uint64_t rehash(const void *ctx, uint32_t id)
{
	return tid_hash(((const struct ht__temp_tracker *)ctx)->threads.v[id].tid);
}

/* The entry of thread tid, or NULL. */
static struct last *find(const struct ht__temp_tracker *t, int32_t tid)
{
	for (uint32_t *s = ht__hindex_find(&t->by_tid, tid_hash(tid)); *s;
	     s = ht__hindex_next(&t->by_tid, s))
		if (t->threads.v[*s - 1].tid == tid)
			return &t->threads.v[*s - 1];
	return NULL;
}

int ht__temp_event(struct ht__temp_tracker *t, const struct ht_event *ev)
{
	bool made = (ev->type == HT_EV_ALLOC && ev->addr) ||
		    (ev->type == HT_EV_REALLOC && ev->addr && !(ev->flags & HT_EVF_FAILED));
	if (!made || !ev->tid)
		return 0;
	struct last now = {ev->tid, ev->process, ev->heap, ev->addr, ev->ts};
	struct last *l = find(t, ev->tid);
	if (l) {
		*l = now;
		return 0;
	}
	uint32_t id = (uint32_t)t->threads.len;
	if (ht__vec_push(&t->threads, now) < 0 ||
	    ht__hindex_insert(&t->by_tid, tid_hash(ev->tid), id, rehash, t) < 0)
		return HT_ERR_NOMEM;
	return 0;
}

bool ht__temp_is(const struct ht__temp_tracker *t, const struct ht__life *life)
{
	/* A block its process still held at exit was never freed (lifetime.h). */
	if (life->free_ts == HT_TS_NEVER || life->at_exit || !life->tid)
		return false;
	const struct last *l = find(t, life->tid);
	return l && l->addr == life->addr && l->ts == life->alloc_ts &&
	       l->process == life->process && l->heap == life->heap;
}
