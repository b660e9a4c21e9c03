/*
 * The recorder's side of include/heaptrail/heap.h: custom heaps a program
 * declares itself become HEAP_* records with their own handles (in snapshot
 * mode, their blocks go to the snapshot's address table instead).
 */
#define _GNU_SOURCE
#include "heaptrail/heap.h"
#include "heaptrail/trace.h"
#include "internal.h"

HT_EXPORT void ht_rec_heap_create(uint64_t heap, const char *name)
{
	struct ht__thread *t = &ht__t;
	int e = errno;
	if (!ht__enter(t))
		return;
	size_t n = name ? strnlen(name, 255) : 0;
	uint32_t len = ht__rec_align((uint32_t)(sizeof(struct ht__rec_heap) + n + 1));
	uint32_t stack = ht__stack_for(t, HT_STK_HEAP_CREATE);
	struct ht__rec_heap *r =
	    (struct ht__rec_heap *)ht__rec_begin(t, HT_REC_HEAP_CREATE, HT_FN_HEAP_API, len, stack);
	if (r) {
		r->handle = heap;
		char *p = (char *)(r + 1);
		memcpy(p, name ? name : "", n);
		memset(p + n, 0, len - sizeof *r - n);
		ht__rec_commit(t);
	}
	ht__leave(t);
	errno = e;
}

HT_EXPORT void ht_rec_heap_destroy(uint64_t heap)
{
	struct ht__thread *t = &ht__t;
	int e = errno;
	if (!ht__enter(t))
		return;
	if (HT_UNLIKELY(ht__g.snap != NULL))
		ht__snap_heap_destroy(heap);
	uint32_t stack = ht__stack_for(t, HT_STK_HEAP_DESTROY);
	struct ht__rec_heap *r = (struct ht__rec_heap *)ht__rec_begin(
	    t, HT_REC_HEAP_DESTROY, HT_FN_HEAP_API, sizeof *r, stack);
	if (r) {
		r->handle = heap;
		ht__rec_commit(t);
	}
	ht__leave(t);
	errno = e;
}

/*
 * Sampling (sample.c): whether to record the operation, and as what (a
 * realloc may become the free of old or the allocation of p), the same rule
 * as the process heap's (rec_heap.h).
 */
static int sampled(struct ht__thread *t, unsigned *type, uint32_t *bit, uint64_t heap,
		   const void **old, const void **p, size_t *size)
{
	switch (*type) {
	case HT_REC_HEAP_ALLOC:
		return !*p || ht__sample_keep(t, ht__sample_key(heap, *p), *size);
	case HT_REC_HEAP_FREE:
		return ht__sample_free(ht__sample_key(heap, *p));
	}
	switch (ht__sample_realloc(t, heap, *old, *p, *size)) {
	case HT_SR_REALLOC:
		return 1;
	case HT_SR_FREE:
		*type = HT_REC_HEAP_FREE;
		*bit = HT_STK_FREE;
		*p = *old;
		*old = NULL;
		*size = 0;
		return 1;
	case HT_SR_ALLOC:
		*type = HT_REC_HEAP_ALLOC;
		*old = NULL;
		return 1;
	case HT_SR_NONE:
		break;
	}
	return 0;
}

/*
 * Snapshot mode (snapshot.c): no record, the block enters or leaves the
 * address table under its heap, as the process heap's do (rec_heap.h). A
 * failed call changes nothing; a realloc frees old and allocates p.
 */
static void snap_op(struct ht__thread *t, unsigned type, uint32_t bit, uint64_t heap,
		    const void *old, const void *p, size_t size)
{
	if (type == HT_REC_HEAP_FREE) {
		ht__snap_heap_free(t, heap, p);
		return;
	}
	if (!p && (size || type == HT_REC_HEAP_ALLOC))
		return;
	if (old)
		ht__snap_heap_free(t, heap, old);
	if (p)
		ht__snap_heap_alloc(t, heap, p, size, bit);
}

static void heap_op(unsigned type, uint32_t bit, uint64_t heap, const void *old, const void *p,
		    size_t size, unsigned flags)
{
	struct ht__thread *t = &ht__t;
	int e = errno;
	if (!ht__enter(t))
		return;
	if (HT_UNLIKELY(ht__g.snap != NULL)) {
		snap_op(t, type, bit, heap, old, p, size);
		ht__leave(t);
		errno = e;
		return;
	}
	if (HT_UNLIKELY(ht__g.sample_rate) && !sampled(t, &type, &bit, heap, &old, &p, &size)) {
		ht__leave(t);
		errno = e;
		return;
	}
	uint32_t stack = ht__stack_for(t, bit);
	struct ht__rec_heap_op *r = (struct ht__rec_heap_op *)ht__rec_begin(
	    t, type, HT_FN_HEAP_API | flags, sizeof *r, stack);
	if (r) {
		r->handle = heap;
		r->addr = (uint64_t)(uintptr_t)p;
		r->size = size;
		r->old_addr = (uint64_t)(uintptr_t)old;
		ht__rec_commit(t);
	}
	ht__leave(t);
	errno = e;
}

HT_EXPORT void ht_rec_heap_alloc(uint64_t heap, const void *ptr, size_t size)
{
	heap_op(HT_REC_HEAP_ALLOC, HT_STK_ALLOC, heap, NULL, ptr, size, ptr ? 0 : HT_RECF_FAILED);
}

HT_EXPORT void ht_rec_heap_realloc(uint64_t heap, const void *old_ptr, const void *new_ptr,
				   size_t size)
{
	heap_op(HT_REC_HEAP_REALLOC, HT_STK_REALLOC, heap, old_ptr, new_ptr, size,
		(!new_ptr && size) ? HT_RECF_FAILED : 0);
}

HT_EXPORT void ht_rec_heap_free(uint64_t heap, const void *ptr)
{
	if (!ptr)
		return;
	heap_op(HT_REC_HEAP_FREE, HT_STK_FREE, heap, NULL, ptr, 0, 0);
}
