/*
 * Hooks of the mapping calls a program makes itself: mmap, munmap, mremap,
 * mprotect, brk and sbrk (glibc's malloc uses internal entry points that do
 * not come through here, so these are the program's own commits).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

static void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

/* libunwind's caches are the recorder's memory: placed with it. */
static HT_COLD void *unwind_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (!addr && (flags & MAP_ANONYMOUS) && !(flags & MAP_FIXED))
		return ht__own_mmap(len, prot, flags);
	return sys_mmap(addr, len, prot, flags, fd, off);
}

/* Calls made by libunwind for its caches belong to the recorder. */
#define HT_FROM_UNWIND()                                                                           \
	((uintptr_t)__builtin_return_address(0) - ht__g.unw_start < ht__g.unw_end - ht__g.unw_start)

static inline void *mmap_hook(unsigned func, void *(*fn)(void *, size_t, int, int, int, off_t),
			      void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(!ht__enter_inner(t)))
		return fn ? fn(addr, len, prot, flags, fd, off)
			  : sys_mmap(addr, len, prot, flags, fd, off);
	void *p = fn(addr, len, prot, flags, fd, off);
	int e = errno;
	uint32_t stack = ht__stack_for(t, HT_STK_MMAP);
	if (p == MAP_FAILED)
		func |= HT_RECF_FAILED;
	struct ht__rec_mmap *r =
	    (struct ht__rec_mmap *)ht__rec_begin(t, HT_REC_MMAP, func, sizeof *r, stack);
	if (r) {
		r->addr = p == MAP_FAILED ? 0 : (uint64_t)(uintptr_t)p;
		r->len = len;
		r->prot = (uint32_t)prot;
		r->flags = (uint32_t)flags;
		r->fd = fd;
		r->pad = 0;
		r->offset = (uint64_t)off;
		ht__rec_commit(t);
	}
	errno = e;
	ht__leave_inner(t);
	return p;
}

HT_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (HT_UNLIKELY(HT_FROM_UNWIND()))
		return unwind_mmap(addr, len, prot, flags, fd, off);
	return mmap_hook(HT_FN_MMAP, ht__real.mmap, addr, len, prot, flags, fd, off);
}

HT_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap_hook(HT_FN_MMAP64, ht__real.mmap64 ? ht__real.mmap64 : ht__real.mmap, addr, len,
			 prot, flags, fd, off);
}

/*
 * munmap releases memory, so it is stamped before the real call; the record
 * stays open (busy) across the call so it can carry the result.
 */
HT_EXPORT int munmap(void *addr, size_t len)
{
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(HT_FROM_UNWIND() || !ht__enter_inner(t)))
		return ht__real.munmap ? ht__real.munmap(addr, len)
				       : (int)syscall(SYS_munmap, addr, len);
	int e = errno;
	uint32_t stack = ht__stack_for(t, HT_STK_MUNMAP);
	struct ht__rec_range *r =
	    (struct ht__rec_range *)ht__rec_begin(t, HT_REC_MUNMAP, HT_FN_MUNMAP, sizeof *r, stack);
	errno = e;
	int rc = ht__real.munmap(addr, len);
	e = errno;
	if (r) {
		r->addr = (uint64_t)(uintptr_t)addr;
		r->len = len;
		r->prot = 0;
		r->result = rc == 0 ? 0 : -e;
		ht__rec_commit(t);
	}
	errno = e;
	ht__leave_inner(t);
	return rc;
}

HT_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *want = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		want = va_arg(ap, void *);
		va_end(ap);
	}
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(!ht__enter_inner(t)))
		return ht__real.mremap
			   ? ht__real.mremap(old, old_len, new_len, flags, want)
			   : (void *)syscall(SYS_mremap, old, old_len, new_len, flags, want);
	void *p = ht__real.mremap(old, old_len, new_len, flags, want);
	int e = errno;
	uint32_t stack = ht__stack_for(t, HT_STK_MMAP);
	unsigned func = HT_FN_MREMAP | (p == MAP_FAILED ? HT_RECF_FAILED : 0);
	struct ht__rec_mremap *r =
	    (struct ht__rec_mremap *)ht__rec_begin(t, HT_REC_MREMAP, func, sizeof *r, stack);
	if (r) {
		r->old_addr = (uint64_t)(uintptr_t)old;
		r->old_len = old_len;
		r->new_addr = p == MAP_FAILED ? 0 : (uint64_t)(uintptr_t)p;
		r->new_len = new_len;
		r->flags = (uint32_t)flags;
		r->pad = 0;
		ht__rec_commit(t);
	}
	errno = e;
	ht__leave_inner(t);
	return p;
}

HT_EXPORT int mprotect(void *addr, size_t len, int prot)
{
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(!ht__enter_inner(t)))
		return ht__real.mprotect ? ht__real.mprotect(addr, len, prot)
					 : (int)syscall(SYS_mprotect, addr, len, prot);
	int rc = ht__real.mprotect(addr, len, prot);
	int e = errno;
	uint32_t stack = ht__stack_for(t, HT_STK_MPROTECT);
	struct ht__rec_range *r = (struct ht__rec_range *)ht__rec_begin(
	    t, HT_REC_MPROTECT, HT_FN_MPROTECT, sizeof *r, stack);
	if (r) {
		r->addr = (uint64_t)(uintptr_t)addr;
		r->len = len;
		r->prot = (uint32_t)prot;
		r->result = rc == 0 ? 0 : -e;
		ht__rec_commit(t);
	}
	errno = e;
	ht__leave_inner(t);
	return rc;
}

static void rec_brk(struct ht__thread *t, unsigned func, void *old_brk, void *new_brk)
{
	uint32_t stack = ht__stack_for(t, HT_STK_MMAP);
	struct ht__rec_brk *r =
	    (struct ht__rec_brk *)ht__rec_begin(t, HT_REC_BRK, func, sizeof *r, stack);
	if (r) {
		r->old_brk = (uint64_t)(uintptr_t)old_brk;
		r->new_brk = (uint64_t)(uintptr_t)new_brk;
		ht__rec_commit(t);
	}
}

HT_EXPORT int brk(void *addr)
{
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(!ht__enter_inner(t)))
		return ht__real.brk ? ht__real.brk(addr) : -1;
	void *old = ht__real.sbrk(0);
	int rc = ht__real.brk(addr);
	int e = errno;
	rec_brk(t, HT_FN_BRK | (rc ? HT_RECF_FAILED : 0), old, ht__real.sbrk(0));
	errno = e;
	ht__leave_inner(t);
	return rc;
}

HT_EXPORT void *sbrk(intptr_t incr)
{
	struct ht__thread *t = &ht__t;
	if (HT_UNLIKELY(!ht__enter_inner(t)))
		return ht__real.sbrk ? ht__real.sbrk(incr) : (void *)-1;
	/* sbrk(0) only asks where the break is: not an event. */
	if (incr == 0) {
		ht__leave_inner(t);
		return ht__real.sbrk(0);
	}
	void *old = ht__real.sbrk(incr);
	int e = errno;
	int failed = old == (void *)-1;
	void *now = ht__real.sbrk(0);
	rec_brk(t, HT_FN_SBRK | (failed ? HT_RECF_FAILED : 0), failed ? now : old, now);
	errno = e;
	ht__leave_inner(t);
	return old;
}
