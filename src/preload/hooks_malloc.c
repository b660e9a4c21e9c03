/*
 * Hooks of the process heap (glibc malloc and its relatives). Allocations are
 * stamped after the real call returns, frees before the real call is made, so
 * that sorting by time gives a consistent history of every address. When
 * sampling, malloc, calloc and free first take the fast path of internal.h:
 * an allocation that is not sampled, or the free of a block that never
 * was, costs a few instructions beyond the real call.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>

#include "internal.h"
#include "rec_heap.h"

static uint64_t mul(size_t a, size_t b)
{
	size_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* Passing through before the real functions are known: boot memory; while
   the recorder's own call into libc runs: its scratch (internal.h). */
static HT_COLD void *pass_malloc(size_t size)
{
	if (HT_UNLIKELY(ht__t.scratch))
		return ht__scratch_realloc(&ht__t, NULL, size, 0);
	if (!ht__real.malloc)
		return ht__boot_alloc(size, 16);
	return ht__real.malloc(size);
}

/*
 * The bodies of malloc and calloc are functions of their own, one traced
 * and one sampling, so that the hook is a test and a jump without a frame
 * (the recorder keeps frame pointers).
 */
static __attribute__((noinline)) void *malloc_traced(struct ht__thread *t, size_t size)
{
	if (HT_UNLIKELY(!ht__enter(t)))
		return pass_malloc(size);
	ht__real_call(t);
	void *p = ht__real.malloc(size);
	ht__real_done(t);
	ht__rec_alloc_keep(t, HT_FN_MALLOC, p, size);
	ht__leave(t);
	return p;
}

static __attribute__((noinline)) void *malloc_sampling(struct ht__thread *t, size_t size)
{
	if (!ht__sample_skip_alloc(t, size))
		return malloc_traced(t, size);
	void *p = ht__real.malloc(size);
	if (HT_UNLIKELY(!p))
		ht__sample_failed(HT_FN_MALLOC, size);
	return p;
}

HT_EXPORT void *malloc(size_t size)
{
	if (HT_UNLIKELY(ht__g.sample_rate))
		return malloc_sampling(&ht__t, size);
	return malloc_traced(&ht__t, size);
}

static __attribute__((noinline)) void free_traced(struct ht__thread *t, void *p)
{
	if (HT_UNLIKELY(!ht__enter(t))) {
		if (HT_UNLIKELY(t->scratch) && ht__in_scratch(t, p))
			return;
		if (ht__real.free)
			ht__real.free(p);
		return;
	}
	if (HT_UNLIKELY(ht__g.snap != NULL)) {
		/* Snapshot mode keeps errno itself: only its cold paths call
		   out (snapshot.c). */
		ht__snap_free(t, p);
	} else if (HT_LIKELY(!ht__g.sample_rate)) {
		ht__ring_free(t, HT_FN_FREE, p); /* keeps errno (rec_heap.h) */
	} else {
		int e = ht__errno_get();
		ht__rec_free(t, HT_FN_FREE, p);
		ht__errno_set(e);
	}
	ht__real_call(t);
	ht__real.free(p);
	ht__leave(t);
}

HT_EXPORT void free(void *p)
{
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(!p || ht__is_boot(p)))
		return;
	if (ht__sample_skip_free(t, p)) {
		ht__real.free(p);
		return;
	}
	free_traced(t, p);
}

static HT_COLD void *pass_calloc(size_t n, size_t size)
{
	if (HT_UNLIKELY(ht__t.scratch) || !ht__real.calloc) {
		uint64_t total = mul(n, size);
		if (total == UINT64_MAX)
			return NULL;
		if (ht__t.scratch)
			return ht__scratch_realloc(&ht__t, NULL, total, 1);
		return ht__boot_alloc(total, 16); /* boot memory is zero */
	}
	return ht__real.calloc(n, size);
}

static __attribute__((noinline)) void *calloc_traced(struct ht__thread *t, size_t n, size_t size,
						     uint64_t total)
{
	if (HT_UNLIKELY(!ht__enter(t)))
		return pass_calloc(n, size);
	ht__real_call(t);
	void *p = ht__real.calloc(n, size);
	ht__real_done(t);
	ht__rec_alloc_keep(t, HT_FN_CALLOC, p, total);
	ht__leave(t);
	return p;
}

static __attribute__((noinline)) void *calloc_sampling(struct ht__thread *t, size_t n, size_t size,
						       uint64_t total)
{
	if (total == UINT64_MAX || !ht__sample_skip_alloc(t, total))
		return calloc_traced(t, n, size, total);
	void *p = ht__real.calloc(n, size);
	if (HT_UNLIKELY(!p))
		ht__sample_failed(HT_FN_CALLOC, total);
	return p;
}

HT_EXPORT void *calloc(size_t n, size_t size)
{
	uint64_t total = mul(n, size);
	if (HT_UNLIKELY(ht__g.sample_rate))
		return calloc_sampling(&ht__t, n, size, total);
	return calloc_traced(&ht__t, n, size, total);
}

/* realloc of a block from the boot buffer: move it to the real heap. */
static HT_COLD void *boot_realloc(void *old, size_t size)
{
	void *p = ht__real.malloc ? ht__real.malloc(size) : ht__boot_alloc(size, 16);
	if (p) {
		size_t n = ht__boot_size(old);
		memcpy(p, old, n < size ? n : size);
	}
	return p;
}

/* realloc's pass-through: the recorder's scratch, or the real one. */
static HT_COLD void *pass_realloc(struct ht__thread *t, void *old, size_t size)
{
	if (HT_UNLIKELY(t->scratch) && (!old || ht__in_scratch(t, old)))
		return ht__scratch_realloc(t, old, size, 0);
	return ht__real.realloc ? ht__real.realloc(old, size) : boot_realloc(old, size);
}

/* realloc and reallocarray: size 0 frees old, stamped before the real call;
   a block resized is stamped before it too, and says when it returned
   (rec_heap.h, ht__realloc_begin). */
static inline void *realloc_hook(struct ht__thread *t, unsigned func, void *old, size_t size,
				 void *(*fn)(void *, size_t))
{
	if (HT_UNLIKELY(old && size == 0)) {
		int e = ht__errno_get();
		ht__rec_realloc(t, func, old, NULL, 0);
		ht__errno_set(e);
		ht__real_call(t);
		void *p = fn(old, 0);
		ht__real_done(t);
		/* glibc frees and returns NULL; mimalloc and jemalloc return a
		   block of size 0, which is then an allocation of its own. */
		if (p) {
			e = ht__errno_get();
			ht__rec_alloc(t, func, p, 0);
			ht__errno_set(e);
		}
		ht__leave(t);
		return p;
	}
	if (HT_UNLIKELY(ht__g.snap != NULL) && old) {
		/* Snapshot mode: old leaves the table before the real call
		   (rec_heap.h). */
		struct ht__snap_rlc r;
		ht__snap_realloc_begin(&r, old);
		void *p = fn(old, size);
		int e = ht__errno_get();
		ht__snap_realloc_end(t, &r, p, size, 0);
		ht__errno_set(e);
		ht__leave(t);
		return p;
	}
	if (!old) { /* realloc(NULL, n) only allocates: stamped after */
		ht__real_call(t);
		void *p = fn(old, size);
		ht__real_done(t);
		int e = ht__errno_get();
		ht__rec_realloc(t, func, old, p, size);
		ht__errno_set(e);
		ht__leave(t);
		return p;
	}
	int e = ht__errno_get(), after;
	struct ht__rec_realloc *r = ht__realloc_begin(t, func, old, size, &after);
	ht__errno_set(e);
	t->guard = HT_GUARD_BUSY;
	void *p = fn(old, size);
	t->guard = HT_GUARD_POST;
	e = ht__errno_get();
	ht__realloc_end(t, r, after, func, old, p, size);
	ht__errno_set(e);
	ht__leave(t);
	return p;
}

HT_EXPORT void *realloc(void *old, size_t size)
{
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(old && ht__is_boot(old)))
		return boot_realloc(old, size);
	if (HT_UNLIKELY(!ht__enter(t)))
		return pass_realloc(t, old, size);
	return realloc_hook(t, HT_FN_REALLOC, old, size, ht__real.realloc);
}

HT_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
	struct ht__thread *t = &ht__t;
	uint64_t total = mul(n, size);
	if (HT_UNLIKELY(total == UINT64_MAX)) {
		errno = ENOMEM;
		return NULL;
	}
	if (HT_UNLIKELY(old && ht__is_boot(old)))
		return boot_realloc(old, total);
	if (HT_UNLIKELY(!ht__enter(t)))
		return pass_realloc(t, old, total);
	return realloc_hook(t, HT_FN_REALLOCARRAY, old, total, ht__real.realloc);
}

HT_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(!ht__enter(t))) {
		if (!ht__real.posix_memalign) {
			*out = ht__boot_alloc(size, align);
			return *out ? 0 : ENOMEM;
		}
		return ht__real.posix_memalign(out, align, size);
	}
	int e = ht__errno_get();
	ht__real_call(t);
	int rc = ht__real.posix_memalign(out, align, size);
	ht__real_done(t);
	ht__rec_alloc(t, HT_FN_POSIX_MEMALIGN, rc == 0 ? *out : NULL, size);
	ht__errno_set(e);
	ht__leave(t);
	return rc;
}

/* aligned_alloc, memalign, valloc, pvalloc: one shape, one body. */
#define HT_ALIGNED_HOOK(name, FN, params, args, align_expr)                                        \
	HT_EXPORT void *name params                                                                \
	{                                                                                          \
		struct ht__thread *t = &ht__t;                                                     \
		if (HT_UNLIKELY(!ht__enter(t)))                                                    \
			return ht__real.name ? ht__real.name args                                  \
					     : ht__boot_alloc(size, align_expr);                   \
		ht__real_call(t);                                                                  \
		void *p = ht__real.name args;                                                      \
		ht__real_done(t);                                                                  \
		ht__rec_alloc_keep(t, FN, p, size);                                                \
		ht__leave(t);                                                                      \
		return p;                                                                          \
	}

HT_ALIGNED_HOOK(aligned_alloc, HT_FN_ALIGNED_ALLOC, (size_t align, size_t size), (align, size),
		align)
HT_ALIGNED_HOOK(memalign, HT_FN_MEMALIGN, (size_t align, size_t size), (align, size), align)
HT_ALIGNED_HOOK(valloc, HT_FN_VALLOC, (size_t size), (size), 4096)
HT_ALIGNED_HOOK(pvalloc, HT_FN_PVALLOC, (size_t size), (size), 4096)
