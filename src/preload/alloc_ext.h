/*
 * The entry points of allocators with their own API that the recorder hooks
 * (hooks_alloc_ext.c; docs/session-protocol.md lists them): one list, so the
 * hooks, the real functions and attach mode's GOT redirection (attach.c) agree.
 */
#ifndef HT_PRELOAD_ALLOC_EXT_H
#define HT_PRELOAD_ALLOC_EXT_H

/* clang-format off */
#define HT_EXT_LIST(X)                                                                             \
	/* C++ operators: recorded only when they are the allocator's own. */                      \
	X(_Znwm) X(_Znam) X(_ZnwmRKSt9nothrow_t) X(_ZnamRKSt9nothrow_t)                            \
	X(_ZnwmSt11align_val_t) X(_ZnamSt11align_val_t)                                            \
	X(_ZnwmSt11align_val_tRKSt9nothrow_t) X(_ZnamSt11align_val_tRKSt9nothrow_t)                \
	X(_ZdlPv) X(_ZdaPv) X(_ZdlPvm) X(_ZdaPvm) X(_ZdlPvSt11align_val_t) X(_ZdaPvSt11align_val_t) \
	X(_ZdlPvmSt11align_val_t) X(_ZdaPvmSt11align_val_t) X(_ZdlPvRKSt9nothrow_t)                \
	X(_ZdaPvRKSt9nothrow_t) X(_ZdlPvSt11align_val_tRKSt9nothrow_t)                             \
	X(_ZdaPvSt11align_val_tRKSt9nothrow_t)                                                     \
	/* jemalloc */                                                                             \
	X(mallocx) X(rallocx) X(xallocx) X(dallocx) X(sdallocx)                                    \
	/* tcmalloc (gperftools) */                                                                \
	X(tc_malloc) X(tc_malloc_skip_new_handler) X(tc_calloc) X(tc_memalign) X(tc_valloc)        \
	X(tc_pvalloc) X(tc_posix_memalign) X(tc_realloc) X(tc_free) X(tc_free_sized) X(tc_cfree)   \
	X(tc_new) X(tc_new_nothrow) X(tc_newarray) X(tc_newarray_nothrow) X(tc_new_aligned)        \
	X(tc_new_aligned_nothrow) X(tc_newarray_aligned) X(tc_newarray_aligned_nothrow)            \
	X(tc_delete) X(tc_delete_sized) X(tc_delete_nothrow) X(tc_deletearray)                     \
	X(tc_deletearray_sized) X(tc_deletearray_nothrow) X(tc_delete_aligned)                     \
	X(tc_delete_sized_aligned) X(tc_delete_aligned_nothrow) X(tc_deletearray_aligned)          \
	X(tc_deletearray_sized_aligned) X(tc_deletearray_aligned_nothrow)                          \
	/* mimalloc */                                                                             \
	X(mi_malloc) X(mi_calloc) X(mi_zalloc) X(mi_malloc_small) X(mi_zalloc_small) X(mi_mallocn) \
	X(mi_malloc_aligned) X(mi_malloc_aligned_at) X(mi_zalloc_aligned) X(mi_zalloc_aligned_at)  \
	X(mi_calloc_aligned) X(mi_calloc_aligned_at) X(mi_memalign) X(mi_valloc) X(mi_pvalloc)     \
	X(mi_aligned_alloc) X(mi_posix_memalign) X(mi_new) X(mi_new_nothrow) X(mi_new_aligned)     \
	X(mi_new_aligned_nothrow) X(mi_new_n) X(mi_heap_malloc) X(mi_heap_zalloc)                  \
	X(mi_heap_calloc) X(mi_heap_mallocn) X(mi_heap_malloc_small) X(mi_heap_malloc_aligned)     \
	X(mi_heap_malloc_aligned_at) X(mi_heap_zalloc_aligned) X(mi_heap_zalloc_aligned_at)        \
	X(mi_heap_calloc_aligned) X(mi_heap_calloc_aligned_at) X(mi_heap_alloc_new)                \
	X(mi_heap_alloc_new_n) X(mi_strdup) X(mi_strndup) X(mi_heap_strdup) X(mi_heap_strndup)     \
	X(mi_realpath) X(mi_heap_realpath) X(mi_wcsdup) X(mi_mbsdup) X(mi_realloc) X(mi_reallocn)  \
	X(mi_reallocf) X(mi_rezalloc) X(mi_recalloc) X(mi_realloc_aligned) X(mi_realloc_aligned_at) \
	X(mi_rezalloc_aligned) X(mi_rezalloc_aligned_at) X(mi_recalloc_aligned)                    \
	X(mi_recalloc_aligned_at) X(mi_aligned_recalloc) X(mi_aligned_offset_recalloc)             \
	X(mi_reallocarray) X(mi_reallocarr) X(mi_new_realloc) X(mi_new_reallocn) X(mi_heap_realloc) \
	X(mi_heap_reallocn) X(mi_heap_reallocf) X(mi_heap_rezalloc) X(mi_heap_recalloc)            \
	X(mi_heap_realloc_aligned) X(mi_heap_realloc_aligned_at) X(mi_heap_rezalloc_aligned)       \
	X(mi_heap_rezalloc_aligned_at) X(mi_heap_recalloc_aligned) X(mi_heap_recalloc_aligned_at)  \
	X(mi_expand) X(mi__expand) X(mi_free) X(mi_cfree) X(mi_free_size) X(mi_free_aligned)       \
	X(mi_free_size_aligned) X(mi_heap_destroy) X(mi_heap_new) X(mi_heap_new_in_arena)       \
	X(mi_heap_delete)
/* clang-format on */

#define HT_EXT_ENUM(n) HT_X_##n,
enum { HT_EXT_LIST(HT_EXT_ENUM) HT_EXT_COUNT };
#undef HT_EXT_ENUM

/* Index of name in the list, or -1. */
int ht__ext_index(const char *name);
const char *ht__ext_name(unsigned i);
/* Attach mode: the real function of entry i, found by attach.c... */
void ht__ext_set_real(unsigned i, void *real);
/* ...then this, once all are set, before any GOT entry points at a hook. */
void ht__ext_ready(void);

#endif
