/*
 * heaptrail/heap.h - declare your own heaps (pools, arenas, slab allocators)
 * and their allocations to heaptrail, so they show in the trace next to the
 * glibc heap, each with its own handle.
 *
 * Costs nothing when the program is not traced and needs no library at link
 * time: the recorder's functions are declared weak, and every call below first
 * checks that the symbol is there (one load and a branch). When the program
 * runs under `heaptrail record`, libheaptrail.so is preloaded and provides
 * them. When heaptrail attaches to the running program (`record -p`, `start
 * --pid`), the recorder points the program's references at them itself, and
 * leaves them so when it detaches (then dormant, it returns at once;
 * docs/attach.md, "Custom heaps"). The program must be position-independent
 * (PIE, the default on most distributions, or a shared library), so the weak
 * references are resolved at load time.
 *
 * A handle is any non-zero 64-bit value that names one heap for the life of
 * the process, usually the address of the pool object. Handle 0
 * (HT_HEAP_PROCESS) is the glibc heap, which heaptrail traces by itself.
 *
 * Example:
 *
 *     #include <heaptrail/heap.h>
 *
 *     struct pool *pool_new(void) {
 *         struct pool *p = ...;
 *         ht_heap_create(p, "parser pool");
 *         return p;
 *     }
 *     void *pool_alloc(struct pool *p, size_t n) {
 *         void *r = ...carve n bytes...;
 *         ht_heap_alloc(p, r, n);        // r == NULL records a failure
 *         return r;
 *     }
 *     void pool_free(struct pool *p, void *r) {
 *         ht_heap_free(p, r);            // before the block can be reused
 *         ...give r back...;
 *     }
 *     void pool_destroy(struct pool *p) {
 *         ht_heap_destroy(p);            // everything still in it is freed
 *         ...;
 *     }
 *
 * Call ht_heap_alloc() after the block is carved and ht_heap_free() before it
 * can be handed out again, as heaptrail does for malloc, so the time order of
 * events on one address stays consistent. ht_heap_realloc(h, old, new, size)
 * records a resize (old == NULL: an allocation; new == NULL with size 0: old is
 * freed). The functions are thread-safe, async-signal-safe in the sense that a
 * call from a signal handler interrupting heaptrail is simply not recorded,
 * and preserve errno. Which events carry a call stack is chosen by the
 * session: heaptrail record --stacks heap-create,alloc,realloc,free,heap-destroy
 * (the event names the CLI accepts; "all" takes every one).
 */
#ifndef HEAPTRAIL_HEAP_H
#define HEAPTRAIL_HEAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef HT_HEAP_PROCESS
#define HT_HEAP_PROCESS 0 /* the glibc heap */
#endif

/* Provided by libheaptrail.so when the program is traced; NULL otherwise. */
extern void ht_rec_heap_create(uint64_t heap, const char *name) __attribute__((weak));
extern void ht_rec_heap_destroy(uint64_t heap) __attribute__((weak));
extern void ht_rec_heap_alloc(uint64_t heap, const void *ptr, size_t size) __attribute__((weak));
extern void ht_rec_heap_realloc(uint64_t heap, const void *old_ptr, const void *new_ptr,
				size_t size) __attribute__((weak));
extern void ht_rec_heap_free(uint64_t heap, const void *ptr) __attribute__((weak));

/* Non-zero when the program runs under heaptrail, or did since an attach. */
static inline int ht_heap_traced(void)
{
	return ht_rec_heap_alloc != NULL;
}

/* A heap with this handle now exists; name (at most 255 bytes kept) labels it. */
#define ht_heap_create(heap, name)                                                                 \
	do {                                                                                       \
		if (ht_rec_heap_create)                                                            \
			ht_rec_heap_create((uint64_t)(uintptr_t)(heap), (name));                   \
	} while (0)

/* The heap is gone, and with it every block still allocated in it. */
#define ht_heap_destroy(heap)                                                                      \
	do {                                                                                       \
		if (ht_rec_heap_destroy)                                                           \
			ht_rec_heap_destroy((uint64_t)(uintptr_t)(heap));                          \
	} while (0)

/* size bytes at ptr were allocated from heap (ptr NULL: the request failed). */
#define ht_heap_alloc(heap, ptr, size)                                                             \
	do {                                                                                       \
		if (ht_rec_heap_alloc)                                                             \
			ht_rec_heap_alloc((uint64_t)(uintptr_t)(heap), (ptr), (size));             \
	} while (0)

/* old_ptr was resized to size bytes, now at new_ptr. */
#define ht_heap_realloc(heap, old_ptr, new_ptr, size)                                              \
	do {                                                                                       \
		if (ht_rec_heap_realloc)                                                           \
			ht_rec_heap_realloc((uint64_t)(uintptr_t)(heap), (old_ptr), (new_ptr),     \
					    (size));                                               \
	} while (0)

/* ptr goes back to heap (NULL is ignored). */
#define ht_heap_free(heap, ptr)                                                                    \
	do {                                                                                       \
		if (ht_rec_heap_free)                                                              \
			ht_rec_heap_free((uint64_t)(uintptr_t)(heap), (ptr));                      \
	} while (0)

#ifdef __cplusplus
}
#endif

#endif
