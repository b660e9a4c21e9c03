/*
 * stall_lib.c - libhtstall.so, a realloc between the recorder and libc for
 * realloc_stall.c: after the real call has freed the old block it calls the
 * program's callback, so the recorder's REALLOC record stays busy (begun
 * before the call, docs/session-protocol.md "Time order") for as long as
 * the callback takes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

static void *(*next_realloc)(void *, size_t);
static size_t stall_size;
static void (*stall_cb)(void *old, void *p);

__attribute__((constructor)) static void find_next(void)
{
	next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
}

/* From now on a realloc to size calls cb(old, new) after the real call. */
__attribute__((visibility("default"))) void stall_on_realloc(size_t size,
							     void (*cb)(void *, void *))
{
	stall_size = size;
	stall_cb = cb;
}

__attribute__((visibility("default"))) void *realloc(void *old, size_t size)
{
	if (!next_realloc)
		find_next();
	void *p = next_realloc(old, size);
	if (size == stall_size && stall_cb)
		stall_cb(old, p);
	return p;
}
