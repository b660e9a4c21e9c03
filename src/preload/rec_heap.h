/*
 * The records of the process heap (ALLOC, ALLOC_FAIL, REALLOC, FREE), inlined
 * into every hook that writes them: the malloc family (hooks_malloc.c) and the
 * allocators with their own API (hooks_alloc_ext.c). Called with the guard set.
 * ht__put_*() write a record; ht__rec_*() first ask the sampling (sample.c)
 * whether to.
 */
#ifndef HT_PRELOAD_REC_HEAP_H
#define HT_PRELOAD_REC_HEAP_H

#include "internal.h"

/*
 * The ring's side of ht__put_alloc() (not snapshot mode). It leaves errno
 * as it was: its inline part only loads and stores, and the calls it may
 * make, a stack that needs a walk (ht__stack_capture) or a ring without
 * room (ht__rec_room), keep errno themselves. So the hottest hooks need
 * not save it around the record when neither sampling nor snapshot mode,
 * whose cold paths may not keep it, is on (ht__rec_alloc_keep).
 */
static inline __attribute__((always_inline)) void
ht__ring_alloc(struct ht__thread *t, unsigned func, void *p, uint64_t size)
{
	uint32_t stack = ht__stack_for(t, HT_STK_ALLOC);
	uint64_t next;
	struct ht__rec_alloc *r = (struct ht__rec_alloc *)ht__rec_open(
	    t, p ? HT_REC_ALLOC : HT_REC_ALLOC_FAIL, func, sizeof *r, stack, &next);
	if (HT_LIKELY(r != NULL)) {
		r->addr = (uint64_t)(uintptr_t)p;
		r->size = size;
		ht__rec_close(t, next);
	}
}

/* Always inlined: an allocation's record is the hot path, and a call
   would add a frame for the stack capture to walk past. */
static inline __attribute__((always_inline)) void ht__put_alloc(struct ht__thread *t, unsigned func,
								void *p, uint64_t size)
{
	if (HT_UNLIKELY(ht__g.snap != NULL)) { /* snapshot mode: no record */
		if (p)
			ht__snap_alloc_at(t, p, size, ht__stack_for(t, HT_STK_ALLOC));
		return;
	}
	ht__ring_alloc(t, func, p, size);
}

static inline void ht__put_realloc(struct ht__thread *t, unsigned func, void *old, void *p,
				   uint64_t size)
{
	if (HT_UNLIKELY(ht__g.snap != NULL)) {
		if (!p && size)
			return; /* failed: old stays */
		if (old)
			ht__snap_free(t, old);
		if (p)
			ht__snap_alloc(t, p, size, HT_STK_REALLOC);
		return;
	}
	uint32_t stack = ht__stack_for(t, HT_STK_REALLOC);
	if (!p && size)
		func |= HT_RECF_FAILED;
	struct ht__rec_realloc *r =
	    (struct ht__rec_realloc *)ht__rec_begin(t, HT_REC_REALLOC, func, sizeof *r, stack);
	if (HT_LIKELY(r != NULL)) {
		r->old_addr = (uint64_t)(uintptr_t)old;
		r->new_addr = (uint64_t)(uintptr_t)p;
		r->size = size;
		r->end = 0;
		ht__rec_commit(t);
	}
}

/* The ring's side of ht__put_free(): keeps errno as ht__ring_alloc() does. */
static inline __attribute__((always_inline)) void ht__ring_free(struct ht__thread *t, unsigned func,
								void *p)
{
	uint32_t stack = ht__stack_for(t, HT_STK_FREE);
	uint64_t next;
	struct ht__rec_free *r =
	    (struct ht__rec_free *)ht__rec_open(t, HT_REC_FREE, func, sizeof *r, stack, &next);
	if (HT_LIKELY(r != NULL)) {
		r->addr = (uint64_t)(uintptr_t)p;
		ht__rec_close(t, next);
	}
}

/* Always inlined too: the free hook's record, on the hot path. */
static inline __attribute__((always_inline)) void ht__put_free(struct ht__thread *t, unsigned func,
							       void *p)
{
	if (HT_UNLIKELY(ht__g.snap != NULL)) {
		ht__snap_free(t, p);
		return;
	}
	ht__ring_free(t, func, p);
}

/*
 * Snapshot mode's side of a realloc that may move the block (realloc_hook in
 * hooks_malloc.c, the allocators' own in hooks_alloc_ext.c): old leaves the
 * address table before the real call (ht__snap_realloc_begin), because once
 * the real call has freed it another thread may be given its address and
 * insert it first; after the call (ht__snap_realloc_end) it is counted freed
 * from its stack when it is gone (moved, or freed by a failing reallocf:
 * old_gone), or put back when the call failed and kept it. Between the two no
 * counter moves, so a snapshot taken meanwhile still counts old, exactly.
 */
struct ht__snap_rlc {
	uint64_t old, val;
	int had;
};

static inline void ht__snap_realloc_begin(struct ht__snap_rlc *r, const void *old)
{
	r->old = (uint64_t)(uintptr_t)old;
	r->had = old && ht__snap_take(r->old, &r->val);
}

static inline void ht__snap_realloc_end(struct ht__thread *t, struct ht__snap_rlc *r, void *p,
					uint64_t size, int old_gone)
{
	if (r->had && (p || old_gone))
		ht__snap_freed(t, r->val);
	else if (r->had)
		ht__snap_put_back(t, r->old, r->val);
	r->had = 0;
	if (p)
		ht__snap_alloc(t, p, size, HT_STK_REALLOC);
}

/* An allocation that returned p (NULL: ALLOC_FAIL of the size asked for). */
static inline __attribute__((always_inline)) void ht__rec_alloc(struct ht__thread *t, unsigned func,
								void *p, uint64_t size)
{
	if (HT_LIKELY(!p || ht__sample_keep(t, (uint64_t)(uintptr_t)p, size)))
		ht__put_alloc(t, func, p, size);
}

/*
 * ht__rec_alloc() for a hook that leaves errno as the real call set it: the
 * record keeps errno by itself unless sampling or snapshot mode is on
 * (ht__ring_alloc); then it is saved around it here.
 */
static inline __attribute__((always_inline)) void
ht__rec_alloc_keep(struct ht__thread *t, unsigned func, void *p, uint64_t size)
{
	if (HT_LIKELY(!ht__g.sample_rate && ht__g.snap == NULL)) {
		ht__ring_alloc(t, func, p, size);
		return;
	}
	int e = ht__errno_get();
	ht__rec_alloc(t, func, p, size);
	ht__errno_set(e);
}

/* old -> p of size; p NULL with a size is a failure that kept old. */
static inline void ht__rec_realloc(struct ht__thread *t, unsigned func, void *old, void *p,
				   uint64_t size)
{
	if (HT_LIKELY(!ht__g.sample_rate)) {
		ht__put_realloc(t, func, old, p, size);
		return;
	}
	switch (ht__sample_realloc(t, 0, old, p, size)) {
	case HT_SR_REALLOC:
		ht__put_realloc(t, func, old, p, size);
		break;
	case HT_SR_FREE:
		ht__put_free(t, func, old);
		break;
	case HT_SR_ALLOC:
		ht__put_alloc(t, func, p, size);
		break;
	case HT_SR_NONE:
		break;
	}
}

/*
 * A realloc of a block (old not NULL, size not 0) is a free and an
 * allocation: the real call frees old, and another thread may be given its
 * address and stamp that allocation before a record stamped after the call.
 * So the REALLOC record is begun before the call, busy across it (as
 * munmap's), and carries when the call returned in end: the session puts
 * the event between the two (docs/session-protocol.md, "Time order").
 * ht__realloc_begin() returns the record (NULL when dropped or not begun)
 * with *after 0, or *after 1 when it is made after the call the usual way
 * (snapshot mode, which has its own order). Errno is the caller's to keep.
 *
 * Sampling decides before the call too: whether old was sampled (it leaves
 * the set now, and comes back if the call keeps it) and whether the new
 * block is (the decision needs its size alone; its address, known after
 * the call, is then remembered). A sampled old begins the record before
 * the call: a REALLOC when the new block is sampled too, else the free of
 * old (a REALLOC to NULL of size 0, as realloc(old, 0) is); a failure
 * makes it a failed REALLOC, old kept. Only the new block sampled: an
 * allocation recorded after the call, as any. A call that makes no block
 * gives its bytes back to the thread's counter when it was not sampled, so
 * the counter runs over the bytes allocated only (when it was, the next
 * distance was drawn afresh: the sampling stays a Poisson process).
 */
#define HT_RLC_ON 1u  /* decided before the call (sampling) */
#define HT_RLC_OLD 2u /* old was sampled (and forgotten until the call returns) */
#define HT_RLC_NEW 4u /* the new block is sampled */

static inline struct ht__rec_realloc *ht__realloc_begin(struct ht__thread *t, unsigned func,
							const void *old, uint64_t size, int *after)
{
	*after = ht__g.snap != NULL;
	if (HT_UNLIKELY(*after))
		return NULL;
	if (HT_UNLIKELY(ht__g.sample_rate)) {
		uint64_t key = ht__sample_key(0, old);
		int new_sampled = ht__sample_decide(t, size);
		t->rlc = HT_RLC_ON | (ht__sample_free(key) ? HT_RLC_OLD : 0) |
			 (new_sampled ? HT_RLC_NEW : 0);
		t->rlc_old = key;
		t->rlc_undo = new_sampled ? 0 : (int64_t)size;
		if (!(t->rlc & HT_RLC_OLD))
			return NULL; /* nothing to stamp before the call */
	}
	uint32_t stack = ht__stack_for(t, HT_STK_REALLOC);
	return (struct ht__rec_realloc *)ht__rec_begin(t, HT_REC_REALLOC, func,
						       sizeof(struct ht__rec_realloc), stack);
}

/* A call begun by ht__realloc_begin() threw: old is as it was. */
static inline void ht__realloc_thrown(struct ht__thread *t)
{
	if (t->rlc & HT_RLC_OLD)
		ht__sample_remember(t->rlc_old);
	t->sample_left += t->rlc_undo;
	t->rlc = 0;
}

/* The call returned p (NULL with a size: failed, old kept). */
static inline void ht__realloc_end(struct ht__thread *t, struct ht__rec_realloc *r, int after,
				   unsigned func, void *old, void *p, uint64_t size)
{
	if (HT_UNLIKELY(after)) {
		ht__rec_realloc(t, func, old, p, size);
		return;
	}
	unsigned rlc = t->rlc;
	if (HT_UNLIKELY(rlc)) {
		t->rlc = 0;
		if (!p) {
			t->sample_left += t->rlc_undo;
			if (size && (rlc & HT_RLC_OLD))
				ht__sample_remember(t->rlc_old); /* failed: old stays */
		} else if (rlc & HT_RLC_NEW) {
			ht__sample_remember(ht__sample_key(0, p));
		}
		if (!(rlc & HT_RLC_OLD)) {
			if (p && (rlc & HT_RLC_NEW))
				ht__put_alloc(t, func, p, size);
			return;
		}
		if (p && !(rlc & HT_RLC_NEW))
			p = NULL, size = 0; /* only old was sampled: its free */
	}
	if (HT_LIKELY(r != NULL)) {
		if (!p && size)
			r->h.func |= HT_RECF_FAILED;
		r->old_addr = (uint64_t)(uintptr_t)old;
		r->new_addr = (uint64_t)(uintptr_t)p;
		r->size = size;
		r->end = ht__stamp(0);
		ht__rec_commit(t);
	}
}

/* A free of p, stamped before the real free is made. */
static inline void ht__rec_free(struct ht__thread *t, unsigned func, void *p)
{
	if (HT_LIKELY(ht__sample_free((uint64_t)(uintptr_t)p)))
		ht__put_free(t, func, p);
}

#endif
