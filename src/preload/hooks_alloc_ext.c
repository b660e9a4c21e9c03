/*
 * Hooks of the allocators' own entry points: C++ operator new and delete when
 * they are the allocator's own, jemalloc's *allocx, tcmalloc's tc_* and
 * mimalloc's mi_* functions (docs/session-protocol.md). They write the same
 * heap records as the malloc family, stamped the same way.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>

#include "alloc_ext.h"
#include "internal.h"
#include "rec_heap.h"

/* The real functions, and whether each is to be recorded here: always for
   the allocators' C API, for the C++ operators only when they come from the
   module of the real malloc (the C++ runtime's own call malloc). */
static void *ext_real[HT_EXT_COUNT];
static uint8_t ext_traced[HT_EXT_COUNT];
static _Atomic int ext_done;

#define HT_EXT_NAME(n) #n,
static const char *const ext_names[HT_EXT_COUNT] = {HT_EXT_LIST(HT_EXT_NAME)};

const char *ht__ext_name(unsigned i)
{
	return i < HT_EXT_COUNT ? ext_names[i] : NULL;
}

int ht__ext_index(const char *name)
{
	/* Most imported names are none of these: a cheap first filter. */
	if (strncmp(name, "_Zn", 3) && strncmp(name, "_Zd", 3) && strncmp(name, "mi_", 3) &&
	    strncmp(name, "tc_", 3) && !strstr(name, "allocx"))
		return -1;
	for (unsigned i = 0; i < HT_EXT_COUNT; i++)
		if (!strcmp(name, ext_names[i]))
			return (int)i;
	return -1;
}

void ht__ext_set_real(unsigned i, void *real)
{
	if (i < HT_EXT_COUNT)
		ext_real[i] = real;
}

/*
 * jemalloc's API when no jemalloc is loaded. A program that tests a weak
 * reference (`if (mallocx)`) finds our hook defined, so the hook must work:
 * through the standard functions, which record the events (as malloc, free).
 */
#define HT_JE_ALIGN(flags) ((flags)&0x3f ? (size_t)1 << ((flags)&0x3f) : 0)
#define HT_JE_ZERO 0x40

static void *je_mallocx(size_t size, int flags)
{
	void *p = NULL;
	if (HT_JE_ALIGN(flags) > 16) {
		if (posix_memalign(&p, HT_JE_ALIGN(flags), size))
			p = NULL;
	} else {
		p = malloc(size);
	}
	if (p && (flags & HT_JE_ZERO))
		memset(p, 0, size);
	return p;
}

static void *je_rallocx(void *p, size_t size, int flags)
{
	if (HT_JE_ALIGN(flags) <= 16 && !(flags & HT_JE_ZERO))
		return realloc(p, size);
	void *q = je_mallocx(size, flags);
	if (q && p) {
		size_t old = malloc_usable_size(p);
		memcpy(q, p, old < size ? old : size);
		free(p);
	}
	return q;
}

static size_t je_xallocx(void *p, size_t size, size_t extra, int flags)
{
	(void)size, (void)extra, (void)flags;
	return malloc_usable_size(p); /* never grows in place */
}

static void je_dallocx(void *p, int flags)
{
	(void)flags;
	free(p);
}

static void je_sdallocx(void *p, size_t size, int flags)
{
	(void)size, (void)flags;
	free(p);
}

/* The address range of the module holding addr (dladdr would also look
   for the symbol, which costs about 200k instructions in libstdc++). */
struct ht__span {
	uintptr_t addr, lo, hi;
};

static int span_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct ht__span *sp = data;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		lo = a < lo ? a : lo;
		hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
	}
	if (sp->addr < lo || sp->addr >= hi)
		return 0;
	sp->lo = lo;
	sp->hi = hi;
	return 1;
}

/* ht__ext_own(): the modules of the traced entry points' real functions
   (an allocator has one; a program may use a few). */
#define HT_OWN_SPANS 8
static struct {
	uintptr_t lo, hi;
} own_spans[HT_OWN_SPANS];
static _Atomic unsigned n_own_spans;

void ht__ext_ready(void)
{
	static const struct {
		unsigned i;
		void *fn;
	} je[] = {
	    {HT_X_mallocx, (void *)je_mallocx},	  {HT_X_rallocx, (void *)je_rallocx},
	    {HT_X_xallocx, (void *)je_xallocx},	  {HT_X_dallocx, (void *)je_dallocx},
	    {HT_X_sdallocx, (void *)je_sdallocx},
	};
	struct ht__span heap = {(uintptr_t)ht__real.malloc, 0, 0};
	if (heap.addr)
		dl_iterate_phdr(span_cb, &heap);
	for (unsigned i = 0; i < HT_EXT_COUNT; i++)
		/* A missing real function is traced too: the slow path fails it. */
		ext_traced[i] = ext_names[i][0] != '_' || !ext_real[i] ||
				((uintptr_t)ext_real[i] - heap.lo < heap.hi - heap.lo);
	for (unsigned k = 0; k < sizeof je / sizeof je[0]; k++)
		if (!ext_real[je[k].i]) {
			ext_real[je[k].i] = je[k].fn;
			ext_traced[je[k].i] = 0;
		}
	/* The code of the allocators whose entry points are traced, and the
	   C++ runtime's, which allocates the bad_alloc that operator new
	   throws. */
	unsigned n = 0;
	for (unsigned i = 0; i <= HT_EXT_COUNT && n < HT_OWN_SPANS; i++) {
		uintptr_t a = i < HT_EXT_COUNT
				  ? (ext_traced[i] ? (uintptr_t)ext_real[i] : 0)
				  : (uintptr_t)dlsym(RTLD_DEFAULT, "__cxa_allocate_exception");
		if (!a || ht__ext_own(a))
			continue;
		struct ht__span sp = {a, 0, 0};
		if (dl_iterate_phdr(span_cb, &sp)) {
			own_spans[n].lo = sp.lo;
			own_spans[n].hi = sp.hi;
			atomic_store_explicit(&n_own_spans, ++n, memory_order_release);
		}
	}
	atomic_store(&ext_done, 1);
}

int ht__ext_own(uintptr_t ra)
{
	unsigned n = atomic_load_explicit(&n_own_spans, memory_order_acquire);
	for (unsigned i = 0; i < n; i++)
		if (ra - own_spans[i].lo < own_spans[i].hi - own_spans[i].lo)
			return 1;
	return 0;
}

/* A traced call of these hooks may reach the program's allocator on purpose
   (operator new calls malloc): that re-entry is not a lost event, while a
   signal handler's is (HT_GUARD_EXT). */
static inline int ext_enter(struct ht__thread *t)
{
	if (!ht__enter_ext(t))
		return 0;
	t->guard = HT_GUARD_EXT;
	return 1;
}

/* Launch mode: at the first call of any of these hooks. Concurrent first
   calls find the same values. */
static HT_COLD void ext_resolve(void)
{
	ht__resolve();
	int save = errno;
	sigset_t old;
	ht__signals_hold(&old);
	ht__t.guard += HT_GUARD_OWN;
	struct ht__span self = {(uintptr_t)ext_resolve, 0, 0};
	dl_iterate_phdr(span_cb, &self);
	for (unsigned i = 0; i < HT_EXT_COUNT; i++) {
		void *p = dlsym(RTLD_DEFAULT, ext_names[i]);
		if (p && (uintptr_t)p - self.lo < self.hi - self.lo) /* our own hook */
			p = dlsym(RTLD_NEXT, ext_names[i]);
		ext_real[i] = p;
	}
	ht__ext_ready();
	ht__t.guard -= HT_GUARD_OWN;
	ht__signals_release(&old);
	errno = save;
}

static inline void *ext_get(unsigned i)
{
	if (HT_UNLIKELY(!atomic_load_explicit(&ext_done, memory_order_acquire)))
		ext_resolve();
	return ext_real[i];
}

/* A real function that exists nowhere: fail like an allocator out of memory. */
static HT_COLD void *ext_missing(void)
{
	errno = ENOMEM;
	return NULL;
}

/*
 * One traced call, ended by a cleanup that also runs while an exception
 * unwinds (this file is built with -fexceptions): operator new and its
 * relatives throw, and the guard must not stay set. A call that did not
 * return is an ALLOC_FAIL of the size asked for.
 */
struct ht__ext_call {
	struct ht__thread *t;
	unsigned func;
	uint64_t size;
	int done;
	struct ht__snap_rlc snap; /* snapshot mode's realloc: old, out of the table */
	int open;		  /* a record begun before the call (realloc) is not committed */
};

static inline void ext_end(struct ht__ext_call *c)
{
	if (HT_UNLIKELY(c->open)) /* the call threw: the record is given up */
		atomic_store_explicit(&c->t->ring->busy, 0, memory_order_relaxed);
	if (HT_UNLIKELY(!c->done))
		ht__rec_alloc(c->t, c->func, NULL, c->size);
	if (HT_UNLIKELY(c->snap.had)) /* it threw: old is as it was */
		ht__snap_put_back(c->t, c->snap.old, c->snap.val);
	if (HT_UNLIKELY(c->t->rlc)) /* likewise, sampling's decision */
		ht__realloc_thrown(c->t);
	ht__leave(c->t);
}

static inline uint64_t mul(size_t a, size_t b)
{
	size_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

#define HT_EXT_REAL(name) ((__typeof__(name) *)ext_get(HT_X_##name))

/*
 * The exported hook: once resolved, an entry point that is not recorded here
 * (the C++ runtime's operator new, which calls malloc) is one jump to the
 * real function, without a frame; everything else is name##_traced.
 */
#define HT_EXT_FAST(ret, name, params, args)                                                       \
	HT_EXPORT ret name params;                                                                 \
	static ret name##_traced params;                                                           \
	HT_EXPORT ret name params                                                                  \
	{                                                                                          \
		if (HT_LIKELY(atomic_load_explicit(&ext_done, memory_order_acquire)) &&            \
		    !ext_traced[HT_X_##name])                                                      \
			return ((__typeof__(name) *)ext_real[HT_X_##name])args;                    \
		return name##_traced args;                                                         \
	}

/* An allocation of size (from the arguments). */
#define HT_EXT_ALLOC(ret, name, fn, params, args, sz)                                              \
	HT_EXT_FAST(ret, name, params, args)                                                       \
	static __attribute__((noinline)) ret name##_traced params                                  \
	{                                                                                          \
		__typeof__(name) *real = HT_EXT_REAL(name);                                        \
		struct ht__thread *t = &ht__t;                                                     \
		if (HT_UNLIKELY(!real))                                                            \
			return ext_missing();                                                      \
		if (!ext_traced[HT_X_##name] || HT_UNLIKELY(!ext_enter(t)))                        \
			return real args;                                                          \
		struct ht__ext_call c __attribute__((cleanup(ext_end))) = {t, fn, (sz), 0};        \
		ret p = real args;                                                                 \
		int e = errno;                                                                     \
		c.done = 1;                                                                        \
		ht__rec_alloc(t, fn, p, c.size);                                                   \
		errno = e;                                                                         \
		return p;                                                                          \
	}

/* A copy (strdup and relatives): the size is that of the result. */
#define HT_EXT_DUP(ret, name, params, args, size_of_p)                                             \
	HT_EXPORT ret name params                                                                  \
	{                                                                                          \
		__typeof__(name) *real = HT_EXT_REAL(name);                                        \
		struct ht__thread *t = &ht__t;                                                     \
		if (HT_UNLIKELY(!real))                                                            \
			return ext_missing();                                                      \
		if (HT_UNLIKELY(!ext_enter(t)))                                                    \
			return real args;                                                          \
		ret p = real args;                                                                 \
		int e = errno;                                                                     \
		ht__rec_alloc(t, HT_FN_MIMALLOC, p, p ? (size_of_p) : 0);                          \
		errno = e;                                                                         \
		ht__leave(t);                                                                      \
		return p;                                                                          \
	}

/*
 * old -> new of size, begun before the call when old is a block (rec_heap.h,
 * ht__realloc_begin), recorded after it when old is NULL; in snapshot mode
 * old leaves the table before it instead. frees: the call frees old when it
 * fails (reallocf); a NULL result of size 0 freed it too. A throwing one
 * (mi_new_realloc) leaves old as it was: nothing to record (ext_end gives
 * a begun record up).
 */
#define HT_EXT_REALLOC(name, fn, params, args, old, sz, frees)                                     \
	HT_EXPORT void *name params                                                                \
	{                                                                                          \
		__typeof__(name) *real = HT_EXT_REAL(name);                                        \
		struct ht__thread *t = &ht__t;                                                     \
		if (HT_UNLIKELY(!real))                                                            \
			return ext_missing();                                                      \
		if (!ext_traced[HT_X_##name] || HT_UNLIKELY(!ext_enter(t)))                        \
			return real args;                                                          \
		struct ht__ext_call c __attribute__((cleanup(ext_end))) = {                        \
		    .t = t, .func = fn, .size = (sz), .done = 1};                                  \
		int e = errno, after = 1;                                                          \
		struct ht__rec_realloc *r = NULL;                                                  \
		if (HT_UNLIKELY(ht__g.snap != NULL))                                               \
			ht__snap_realloc_begin(&c.snap, old);                                      \
		else if (old)                                                                      \
			r = ht__realloc_begin(t, fn, old, c.size, &after);                         \
		c.open = r != NULL;                                                                \
		errno = e;                                                                         \
		void *np = real args;                                                              \
		e = errno;                                                                         \
		c.open = 0;                                                                        \
		if (HT_UNLIKELY(ht__g.snap != NULL))                                               \
			ht__snap_realloc_end(t, &c.snap, np, c.size, (frees) || !c.size);          \
		else                                                                               \
			ht__realloc_end(t, r, after, fn, old, np, (frees) && !np ? 0 : c.size);    \
		errno = e;                                                                         \
		return np;                                                                         \
	}

/* A free of ptr, stamped before the real call. */
#define HT_EXT_FREE(name, fn, params, args, ptr)                                                   \
	HT_EXT_FAST(void, name, params, args)                                                      \
	static __attribute__((noinline)) void name##_traced params                                 \
	{                                                                                          \
		__typeof__(name) *real = HT_EXT_REAL(name);                                        \
		struct ht__thread *t = &ht__t;                                                     \
		if (HT_UNLIKELY(!real))                                                            \
			return; /* nowhere to give it back: leak rather than crash */              \
		if (!ext_traced[HT_X_##name] || !(ptr) || HT_UNLIKELY(!ext_enter(t))) {            \
			if (!ht__is_boot(ptr))                                                     \
				real args;                                                         \
			return;                                                                    \
		}                                                                                  \
		if (HT_UNLIKELY(ht__is_boot(ptr))) {                                               \
			ht__leave(t);                                                              \
			return;                                                                    \
		}                                                                                  \
		int e = errno;                                                                     \
		ht__rec_free(t, fn, ptr);                                                          \
		errno = e;                                                                         \
		real args;                                                                         \
		ht__leave(t);                                                                      \
	}

typedef size_t ht__align_t;	   /* std::align_val_t */
typedef const void *ht__nothrow_t; /* const std::nothrow_t & */

/* ---- C++ operators ---- */

HT_EXT_ALLOC(void *, _Znwm, HT_FN_NEW, (size_t size), (size), size)
HT_EXT_ALLOC(void *, _Znam, HT_FN_NEW_ARRAY, (size_t size), (size), size)
HT_EXT_ALLOC(void *, _ZnwmRKSt9nothrow_t, HT_FN_NEW, (size_t size, ht__nothrow_t nt), (size, nt),
	     size)
HT_EXT_ALLOC(void *, _ZnamRKSt9nothrow_t, HT_FN_NEW_ARRAY, (size_t size, ht__nothrow_t nt),
	     (size, nt), size)
HT_EXT_ALLOC(void *, _ZnwmSt11align_val_t, HT_FN_NEW, (size_t size, ht__align_t al), (size, al),
	     size)
HT_EXT_ALLOC(void *, _ZnamSt11align_val_t, HT_FN_NEW_ARRAY, (size_t size, ht__align_t al),
	     (size, al), size)
HT_EXT_ALLOC(void *, _ZnwmSt11align_val_tRKSt9nothrow_t, HT_FN_NEW,
	     (size_t size, ht__align_t al, ht__nothrow_t nt), (size, al, nt), size)
HT_EXT_ALLOC(void *, _ZnamSt11align_val_tRKSt9nothrow_t, HT_FN_NEW_ARRAY,
	     (size_t size, ht__align_t al, ht__nothrow_t nt), (size, al, nt), size)

HT_EXT_FREE(_ZdlPv, HT_FN_DELETE, (void *p), (p), p)
HT_EXT_FREE(_ZdaPv, HT_FN_DELETE_ARRAY, (void *p), (p), p)
HT_EXT_FREE(_ZdlPvm, HT_FN_DELETE, (void *p, size_t n), (p, n), p)
HT_EXT_FREE(_ZdaPvm, HT_FN_DELETE_ARRAY, (void *p, size_t n), (p, n), p)
HT_EXT_FREE(_ZdlPvSt11align_val_t, HT_FN_DELETE, (void *p, ht__align_t al), (p, al), p)
HT_EXT_FREE(_ZdaPvSt11align_val_t, HT_FN_DELETE_ARRAY, (void *p, ht__align_t al), (p, al), p)
HT_EXT_FREE(_ZdlPvmSt11align_val_t, HT_FN_DELETE, (void *p, size_t n, ht__align_t al), (p, n, al),
	    p)
HT_EXT_FREE(_ZdaPvmSt11align_val_t, HT_FN_DELETE_ARRAY, (void *p, size_t n, ht__align_t al),
	    (p, n, al), p)
HT_EXT_FREE(_ZdlPvRKSt9nothrow_t, HT_FN_DELETE, (void *p, ht__nothrow_t nt), (p, nt), p)
HT_EXT_FREE(_ZdaPvRKSt9nothrow_t, HT_FN_DELETE_ARRAY, (void *p, ht__nothrow_t nt), (p, nt), p)
HT_EXT_FREE(_ZdlPvSt11align_val_tRKSt9nothrow_t, HT_FN_DELETE,
	    (void *p, ht__align_t al, ht__nothrow_t nt), (p, al, nt), p)
HT_EXT_FREE(_ZdaPvSt11align_val_tRKSt9nothrow_t, HT_FN_DELETE_ARRAY,
	    (void *p, ht__align_t al, ht__nothrow_t nt), (p, al, nt), p)

/* ---- jemalloc ---- */

HT_EXT_ALLOC(void *, mallocx, HT_FN_MALLOCX, (size_t size, int flags), (size, flags), size)
HT_EXT_REALLOC(rallocx, HT_FN_RALLOCX, (void *p, size_t size, int flags), (p, size, flags), p, size,
	       0)
HT_EXT_FREE(dallocx, HT_FN_DALLOCX, (void *p, int flags), (p, flags), p)
HT_EXT_FREE(sdallocx, HT_FN_SDALLOCX, (void *p, size_t size, int flags), (p, size, flags), p)

/* Resizes in place and returns the block's real size, which is below size
   when it could not grow: a REALLOC of the block to itself when it did. */
HT_EXPORT size_t xallocx(void *p, size_t size, size_t extra, int flags)
{
	__typeof__(xallocx) *real = HT_EXT_REAL(xallocx);
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(!real))
		return 0;
	if (!ext_traced[HT_X_xallocx] || HT_UNLIKELY(!ext_enter(t)))
		return real(p, size, extra, flags);
	size_t n = real(p, size, extra, flags);
	int e = errno;
	if (n >= size)
		ht__rec_realloc(t, HT_FN_XALLOCX, p, p, n);
	errno = e;
	ht__leave(t);
	return n;
}

/* ---- tcmalloc ---- */

#define TC HT_FN_TCMALLOC
HT_EXT_ALLOC(void *, tc_malloc, TC, (size_t size), (size), size)
HT_EXT_ALLOC(void *, tc_malloc_skip_new_handler, TC, (size_t size), (size), size)
HT_EXT_ALLOC(void *, tc_calloc, TC, (size_t n, size_t size), (n, size), mul(n, size))
HT_EXT_ALLOC(void *, tc_memalign, TC, (size_t al, size_t size), (al, size), size)
HT_EXT_ALLOC(void *, tc_valloc, TC, (size_t size), (size), size)
HT_EXT_ALLOC(void *, tc_pvalloc, TC, (size_t size), (size), size)
HT_EXT_ALLOC(void *, tc_new, TC, (size_t size), (size), size)
HT_EXT_ALLOC(void *, tc_new_nothrow, TC, (size_t size, ht__nothrow_t nt), (size, nt), size)
HT_EXT_ALLOC(void *, tc_newarray, TC, (size_t size), (size), size)
HT_EXT_ALLOC(void *, tc_newarray_nothrow, TC, (size_t size, ht__nothrow_t nt), (size, nt), size)
HT_EXT_ALLOC(void *, tc_new_aligned, TC, (size_t size, ht__align_t al), (size, al), size)
HT_EXT_ALLOC(void *, tc_new_aligned_nothrow, TC, (size_t size, ht__align_t al, ht__nothrow_t nt),
	     (size, al, nt), size)
HT_EXT_ALLOC(void *, tc_newarray_aligned, TC, (size_t size, ht__align_t al), (size, al), size)
HT_EXT_ALLOC(void *, tc_newarray_aligned_nothrow, TC,
	     (size_t size, ht__align_t al, ht__nothrow_t nt), (size, al, nt), size)
HT_EXT_REALLOC(tc_realloc, TC, (void *p, size_t size), (p, size), p, size, 0)
HT_EXT_FREE(tc_free, TC, (void *p), (p), p)
HT_EXT_FREE(tc_free_sized, TC, (void *p, size_t n), (p, n), p)
HT_EXT_FREE(tc_cfree, TC, (void *p), (p), p)
HT_EXT_FREE(tc_delete, TC, (void *p), (p), p)
HT_EXT_FREE(tc_delete_sized, TC, (void *p, size_t n), (p, n), p)
HT_EXT_FREE(tc_delete_nothrow, TC, (void *p, ht__nothrow_t nt), (p, nt), p)
HT_EXT_FREE(tc_deletearray, TC, (void *p), (p), p)
HT_EXT_FREE(tc_deletearray_sized, TC, (void *p, size_t n), (p, n), p)
HT_EXT_FREE(tc_deletearray_nothrow, TC, (void *p, ht__nothrow_t nt), (p, nt), p)
HT_EXT_FREE(tc_delete_aligned, TC, (void *p, ht__align_t al), (p, al), p)
HT_EXT_FREE(tc_delete_sized_aligned, TC, (void *p, size_t n, ht__align_t al), (p, n, al), p)
HT_EXT_FREE(tc_delete_aligned_nothrow, TC, (void *p, ht__align_t al, ht__nothrow_t nt), (p, al, nt),
	    p)
HT_EXT_FREE(tc_deletearray_aligned, TC, (void *p, ht__align_t al), (p, al), p)
HT_EXT_FREE(tc_deletearray_sized_aligned, TC, (void *p, size_t n, ht__align_t al), (p, n, al), p)
HT_EXT_FREE(tc_deletearray_aligned_nothrow, TC, (void *p, ht__align_t al, ht__nothrow_t nt),
	    (p, al, nt), p)

/* posix_memalign-shaped: the block through out, 0 or an error number. */
#define HT_EXT_MEMALIGN(name, fn)                                                                  \
	HT_EXPORT int name(void **out, size_t al, size_t size)                                     \
	{                                                                                          \
		__typeof__(name) *real = HT_EXT_REAL(name);                                        \
		struct ht__thread *t = &ht__t;                                                     \
		if (HT_UNLIKELY(!real))                                                            \
			return ENOMEM;                                                             \
		if (HT_UNLIKELY(!ext_enter(t)))                                                    \
			return real(out, al, size);                                                \
		int e = errno;                                                                     \
		int rc = real(out, al, size);                                                      \
		ht__rec_alloc(t, fn, rc == 0 ? *out : NULL, size);                                 \
		errno = e;                                                                         \
		ht__leave(t);                                                                      \
		return rc;                                                                         \
	}

HT_EXT_MEMALIGN(tc_posix_memalign, TC)
#undef TC

/* ---- mimalloc ---- */

#define MI HT_FN_MIMALLOC
typedef void ht__mi_heap; /* mi_heap_t */

HT_EXT_ALLOC(void *, mi_malloc, MI, (size_t size), (size), size)
HT_EXT_ALLOC(void *, mi_calloc, MI, (size_t n, size_t size), (n, size), mul(n, size))
HT_EXT_ALLOC(void *, mi_zalloc, MI, (size_t size), (size), size)
HT_EXT_ALLOC(void *, mi_malloc_small, MI, (size_t size), (size), size)
HT_EXT_ALLOC(void *, mi_zalloc_small, MI, (size_t size), (size), size)
HT_EXT_ALLOC(void *, mi_mallocn, MI, (size_t n, size_t size), (n, size), mul(n, size))
HT_EXT_ALLOC(void *, mi_malloc_aligned, MI, (size_t size, size_t al), (size, al), size)
HT_EXT_ALLOC(void *, mi_malloc_aligned_at, MI, (size_t size, size_t al, size_t off),
	     (size, al, off), size)
HT_EXT_ALLOC(void *, mi_zalloc_aligned, MI, (size_t size, size_t al), (size, al), size)
HT_EXT_ALLOC(void *, mi_zalloc_aligned_at, MI, (size_t size, size_t al, size_t off),
	     (size, al, off), size)
HT_EXT_ALLOC(void *, mi_calloc_aligned, MI, (size_t n, size_t size, size_t al), (n, size, al),
	     mul(n, size))
HT_EXT_ALLOC(void *, mi_calloc_aligned_at, MI, (size_t n, size_t size, size_t al, size_t off),
	     (n, size, al, off), mul(n, size))
HT_EXT_ALLOC(void *, mi_memalign, MI, (size_t al, size_t size), (al, size), size)
HT_EXT_ALLOC(void *, mi_valloc, MI, (size_t size), (size), size)
HT_EXT_ALLOC(void *, mi_pvalloc, MI, (size_t size), (size), size)
HT_EXT_ALLOC(void *, mi_aligned_alloc, MI, (size_t al, size_t size), (al, size), size)
HT_EXT_MEMALIGN(mi_posix_memalign, MI)
HT_EXT_ALLOC(void *, mi_new, MI, (size_t size), (size), size)
HT_EXT_ALLOC(void *, mi_new_nothrow, MI, (size_t size), (size), size)
HT_EXT_ALLOC(void *, mi_new_aligned, MI, (size_t size, size_t al), (size, al), size)
HT_EXT_ALLOC(void *, mi_new_aligned_nothrow, MI, (size_t size, size_t al), (size, al), size)
HT_EXT_ALLOC(void *, mi_new_n, MI, (size_t n, size_t size), (n, size), mul(n, size))
HT_EXT_ALLOC(void *, mi_heap_malloc, MI, (ht__mi_heap * h, size_t size), (h, size), size)
HT_EXT_ALLOC(void *, mi_heap_zalloc, MI, (ht__mi_heap * h, size_t size), (h, size), size)
HT_EXT_ALLOC(void *, mi_heap_calloc, MI, (ht__mi_heap * h, size_t n, size_t size), (h, n, size),
	     mul(n, size))
HT_EXT_ALLOC(void *, mi_heap_mallocn, MI, (ht__mi_heap * h, size_t n, size_t size), (h, n, size),
	     mul(n, size))
HT_EXT_ALLOC(void *, mi_heap_malloc_small, MI, (ht__mi_heap * h, size_t size), (h, size), size)
HT_EXT_ALLOC(void *, mi_heap_malloc_aligned, MI, (ht__mi_heap * h, size_t size, size_t al),
	     (h, size, al), size)
HT_EXT_ALLOC(void *, mi_heap_malloc_aligned_at, MI,
	     (ht__mi_heap * h, size_t size, size_t al, size_t off), (h, size, al, off), size)
HT_EXT_ALLOC(void *, mi_heap_zalloc_aligned, MI, (ht__mi_heap * h, size_t size, size_t al),
	     (h, size, al), size)
HT_EXT_ALLOC(void *, mi_heap_zalloc_aligned_at, MI,
	     (ht__mi_heap * h, size_t size, size_t al, size_t off), (h, size, al, off), size)
HT_EXT_ALLOC(void *, mi_heap_calloc_aligned, MI,
	     (ht__mi_heap * h, size_t n, size_t size, size_t al), (h, n, size, al), mul(n, size))
HT_EXT_ALLOC(void *, mi_heap_calloc_aligned_at, MI,
	     (ht__mi_heap * h, size_t n, size_t size, size_t al, size_t off), (h, n, size, al, off),
	     mul(n, size))
HT_EXT_ALLOC(void *, mi_heap_alloc_new, MI, (ht__mi_heap * h, size_t size), (h, size), size)
HT_EXT_ALLOC(void *, mi_heap_alloc_new_n, MI, (ht__mi_heap * h, size_t n, size_t size),
	     (h, n, size), mul(n, size))

static size_t wlen(const unsigned short *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

HT_EXT_DUP(char *, mi_strdup, (const char *s), (s), strlen(p) + 1)
HT_EXT_DUP(char *, mi_strndup, (const char *s, size_t n), (s, n), strlen(p) + 1)
HT_EXT_DUP(char *, mi_heap_strdup, (ht__mi_heap * h, const char *s), (h, s), strlen(p) + 1)
HT_EXT_DUP(char *, mi_heap_strndup, (ht__mi_heap * h, const char *s, size_t n), (h, s, n),
	   strlen(p) + 1)
HT_EXT_DUP(unsigned short *, mi_wcsdup, (const unsigned short *s), (s),
	   (wlen(p) + 1) * sizeof(unsigned short))
HT_EXT_DUP(unsigned char *, mi_mbsdup, (const unsigned char *s), (s), strlen((const char *)p) + 1)

/* realpath allocates only when not given a buffer. */
#define HT_EXT_REALPATH(name, params, args, given)                                                 \
	HT_EXPORT char *name params                                                                \
	{                                                                                          \
		__typeof__(name) *real = HT_EXT_REAL(name);                                        \
		struct ht__thread *t = &ht__t;                                                     \
		if (HT_UNLIKELY(!real))                                                            \
			return ext_missing();                                                      \
		if ((given) || HT_UNLIKELY(!ext_enter(t)))                                         \
			return real args;                                                          \
		char *p = real args;                                                               \
		int e = errno;                                                                     \
		if (p) /* a path that does not resolve is no allocation failure */                 \
			ht__rec_alloc(t, MI, p, strlen(p) + 1);                                    \
		errno = e;                                                                         \
		ht__leave(t);                                                                      \
		return p;                                                                          \
	}

HT_EXT_REALPATH(mi_realpath, (const char *f, char *buf), (f, buf), buf)
HT_EXT_REALPATH(mi_heap_realpath, (ht__mi_heap * h, const char *f, char *buf), (h, f, buf), buf)

HT_EXT_REALLOC(mi_realloc, MI, (void *p, size_t size), (p, size), p, size, 0)
HT_EXT_REALLOC(mi_reallocn, MI, (void *p, size_t n, size_t size), (p, n, size), p, mul(n, size), 0)
HT_EXT_REALLOC(mi_reallocf, MI, (void *p, size_t size), (p, size), p, size, 1)
HT_EXT_REALLOC(mi_rezalloc, MI, (void *p, size_t size), (p, size), p, size, 0)
HT_EXT_REALLOC(mi_recalloc, MI, (void *p, size_t n, size_t size), (p, n, size), p, mul(n, size), 0)
HT_EXT_REALLOC(mi_realloc_aligned, MI, (void *p, size_t size, size_t al), (p, size, al), p, size, 0)
HT_EXT_REALLOC(mi_realloc_aligned_at, MI, (void *p, size_t size, size_t al, size_t off),
	       (p, size, al, off), p, size, 0)
HT_EXT_REALLOC(mi_rezalloc_aligned, MI, (void *p, size_t size, size_t al), (p, size, al), p, size,
	       0)
HT_EXT_REALLOC(mi_rezalloc_aligned_at, MI, (void *p, size_t size, size_t al, size_t off),
	       (p, size, al, off), p, size, 0)
HT_EXT_REALLOC(mi_recalloc_aligned, MI, (void *p, size_t n, size_t size, size_t al),
	       (p, n, size, al), p, mul(n, size), 0)
HT_EXT_REALLOC(mi_recalloc_aligned_at, MI, (void *p, size_t n, size_t size, size_t al, size_t off),
	       (p, n, size, al, off), p, mul(n, size), 0)
HT_EXT_REALLOC(mi_aligned_recalloc, MI, (void *p, size_t n, size_t size, size_t al),
	       (p, n, size, al), p, mul(n, size), 0)
HT_EXT_REALLOC(mi_aligned_offset_recalloc, MI,
	       (void *p, size_t n, size_t size, size_t al, size_t off), (p, n, size, al, off), p,
	       mul(n, size), 0)
HT_EXT_REALLOC(mi_reallocarray, MI, (void *p, size_t n, size_t size), (p, n, size), p, mul(n, size),
	       0)
HT_EXT_REALLOC(mi_new_realloc, MI, (void *p, size_t size), (p, size), p, size, 0)
HT_EXT_REALLOC(mi_new_reallocn, MI, (void *p, size_t n, size_t size), (p, n, size), p, mul(n, size),
	       0)
HT_EXT_REALLOC(mi_heap_realloc, MI, (ht__mi_heap * h, void *p, size_t size), (h, p, size), p, size,
	       0)
HT_EXT_REALLOC(mi_heap_reallocn, MI, (ht__mi_heap * h, void *p, size_t n, size_t size),
	       (h, p, n, size), p, mul(n, size), 0)
HT_EXT_REALLOC(mi_heap_reallocf, MI, (ht__mi_heap * h, void *p, size_t size), (h, p, size), p, size,
	       1)
HT_EXT_REALLOC(mi_heap_rezalloc, MI, (ht__mi_heap * h, void *p, size_t size), (h, p, size), p, size,
	       0)
HT_EXT_REALLOC(mi_heap_recalloc, MI, (ht__mi_heap * h, void *p, size_t n, size_t size),
	       (h, p, n, size), p, mul(n, size), 0)
HT_EXT_REALLOC(mi_heap_realloc_aligned, MI, (ht__mi_heap * h, void *p, size_t size, size_t al),
	       (h, p, size, al), p, size, 0)
HT_EXT_REALLOC(mi_heap_realloc_aligned_at, MI,
	       (ht__mi_heap * h, void *p, size_t size, size_t al, size_t off),
	       (h, p, size, al, off), p, size, 0)
HT_EXT_REALLOC(mi_heap_rezalloc_aligned, MI, (ht__mi_heap * h, void *p, size_t size, size_t al),
	       (h, p, size, al), p, size, 0)
HT_EXT_REALLOC(mi_heap_rezalloc_aligned_at, MI,
	       (ht__mi_heap * h, void *p, size_t size, size_t al, size_t off),
	       (h, p, size, al, off), p, size, 0)
HT_EXT_REALLOC(mi_heap_recalloc_aligned, MI,
	       (ht__mi_heap * h, void *p, size_t n, size_t size, size_t al), (h, p, n, size, al), p,
	       mul(n, size), 0)
HT_EXT_REALLOC(mi_heap_recalloc_aligned_at, MI,
	       (ht__mi_heap * h, void *p, size_t n, size_t size, size_t al, size_t off),
	       (h, p, n, size, al, off), p, mul(n, size), 0)

/* BSD's reallocarr: the block through a pointer, 0 or an error number. */
HT_EXPORT int mi_reallocarr(void *pp, size_t n, size_t size)
{
	__typeof__(mi_reallocarr) *real = HT_EXT_REAL(mi_reallocarr);
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(!real))
		return ENOMEM;
	if (HT_UNLIKELY(!ext_enter(t)))
		return real(pp, n, size);
	void *old;
	memcpy(&old, pp, sizeof old);
	struct ht__snap_rlc snap;
	int e = errno, after = 1;
	struct ht__rec_realloc *r = NULL;
	if (HT_UNLIKELY(ht__g.snap != NULL))
		ht__snap_realloc_begin(&snap, old);
	else if (old)
		r = ht__realloc_begin(t, MI, old, mul(n, size), &after);
	errno = e;
	int rc = real(pp, n, size);
	e = errno;
	void *p;
	memcpy(&p, pp, sizeof p);
	if (HT_UNLIKELY(ht__g.snap != NULL))
		ht__snap_realloc_end(t, &snap, rc == 0 ? p : NULL, mul(n, size), 0);
	else
		ht__realloc_end(t, r, after, MI, old, rc == 0 ? p : NULL, mul(n, size));
	errno = e;
	ht__leave(t);
	return rc;
}

/* Grows or shrinks in place: the block itself, or NULL when it cannot. */
#define HT_EXT_EXPAND(name)                                                                        \
	HT_EXPORT void *name(void *p, size_t size)                                                 \
	{                                                                                          \
		__typeof__(name) *real = HT_EXT_REAL(name);                                        \
		struct ht__thread *t = &ht__t;                                                     \
		if (HT_UNLIKELY(!real))                                                            \
			return ext_missing();                                                      \
		if (HT_UNLIKELY(!ext_enter(t)))                                                    \
			return real(p, size);                                                      \
		void *r = real(p, size);                                                           \
		int e = errno;                                                                     \
		if (r)                                                                             \
			ht__rec_realloc(t, MI, p, r, size);                                        \
		errno = e;                                                                         \
		ht__leave(t);                                                                      \
		return r;                                                                          \
	}

HT_EXT_EXPAND(mi_expand)
HT_EXT_EXPAND(mi__expand)

HT_EXT_FREE(mi_free, MI, (void *p), (p), p)
HT_EXT_FREE(mi_cfree, MI, (void *p), (p), p)
HT_EXT_FREE(mi_free_size, MI, (void *p, size_t n), (p, n), p)
HT_EXT_FREE(mi_free_aligned, MI, (void *p, size_t al), (p, al), p)
HT_EXT_FREE(mi_free_size_aligned, MI, (void *p, size_t n, size_t al), (p, n, al), p)

/* mimalloc's block visitor (mi_block_visit_fun): a FREE for every block. */
static bool mi_visit(const ht__mi_heap *h, const void *area, void *block, size_t size, void *arg)
{
	(void)h, (void)area, (void)size;
	if (block)
		ht__rec_free(arg, MI, block);
	return true;
}

/* Frees every block of the heap at once: one FREE each, before the call. */
HT_EXPORT void mi_heap_destroy(ht__mi_heap *h)
{
	__typeof__(mi_heap_destroy) *real = HT_EXT_REAL(mi_heap_destroy);
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(!real))
		return;
	if (!h || HT_UNLIKELY(!ext_enter(t))) {
		real(h);
		return;
	}
	typedef bool visit_fn(const ht__mi_heap *, bool,
			      bool (*)(const ht__mi_heap *, const void *, void *, size_t, void *),
			      void *);
	visit_fn *visit = (visit_fn *)dlsym(RTLD_DEFAULT, "mi_heap_visit_blocks");
	int e = errno;
	if (visit)
		visit(h, true, mi_visit, t);
	errno = e;
	real(h);
	ht__leave(t);
}

/*
 * Creating and deleting a heap allocate and free its own bookkeeping through
 * mimalloc's public functions: under the guard, so that neither is an event
 * (mi_heap_delete moves the blocks to the default heap: they stay live).
 */
#define HT_EXT_OPAQUE(ret, name, params, args)                                                     \
	HT_EXPORT ret name params                                                                  \
	{                                                                                          \
		__typeof__(name) *real = HT_EXT_REAL(name);                                        \
		struct ht__thread *t = &ht__t;                                                     \
		if (HT_UNLIKELY(!real))                                                            \
			return (ret)ext_missing();                                                 \
		if (HT_UNLIKELY(!ext_enter(t)))                                                    \
			return real args;                                                          \
		ret r = real args;                                                                 \
		ht__leave(t);                                                                      \
		return r;                                                                          \
	}

HT_EXT_OPAQUE(ht__mi_heap *, mi_heap_new, (void), ())
HT_EXT_OPAQUE(ht__mi_heap *, mi_heap_new_in_arena, (int arena), (arena))

HT_EXPORT void mi_heap_delete(ht__mi_heap *h)
{
	__typeof__(mi_heap_delete) *real = HT_EXT_REAL(mi_heap_delete);
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(!real))
		return;
	if (HT_UNLIKELY(!ext_enter(t))) {
		real(h);
		return;
	}
	real(h);
	ht__leave(t);
}
#undef MI
