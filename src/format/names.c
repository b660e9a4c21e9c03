/*
 * names.c - the stable names of error codes, functions and event types. The
 * event and function names appear in dump and JSON output, so they never change.
 */
#include "heaptrail/trace.h"

const char *ht_strerror(int err)
{
	switch (err) {
	case HT_OK:
		return "success";
	case HT_ERR_IO:
		return "input/output error";
	case HT_ERR_NOT_TRACE:
		return "not a heaptrail trace";
	case HT_ERR_VERSION:
		return "trace format version not supported by this build (it reads format 2)";
	case HT_ERR_CORRUPT:
		return "trace is damaged";
	case HT_ERR_NOMEM:
		return "out of memory";
	case HT_ERR_INVALID:
		return "invalid argument";
	case HT_ERR_EXISTS:
		return "already exists";
	case HT_ERR_NOT_FOUND:
		return "not found";
	case HT_ERR_PERM:
		return "permission denied";
	case HT_ERR_FLAGS:
		return "invalid flags or event list";
	case HT_ERR_NOSPACE:
		return "no space left on device";
	default:
		return "unknown error";
	}
}

static const char *const func_names[HT_FN__COUNT] = {
    [HT_FN_NONE] = "none",
    [HT_FN_MALLOC] = "malloc",
    [HT_FN_CALLOC] = "calloc",
    [HT_FN_REALLOC] = "realloc",
    [HT_FN_REALLOCARRAY] = "reallocarray",
    [HT_FN_FREE] = "free",
    [HT_FN_POSIX_MEMALIGN] = "posix_memalign",
    [HT_FN_ALIGNED_ALLOC] = "aligned_alloc",
    [HT_FN_MEMALIGN] = "memalign",
    [HT_FN_VALLOC] = "valloc",
    [HT_FN_PVALLOC] = "pvalloc",
    [HT_FN_MMAP] = "mmap",
    [HT_FN_MMAP64] = "mmap64",
    [HT_FN_MUNMAP] = "munmap",
    [HT_FN_MREMAP] = "mremap",
    [HT_FN_MPROTECT] = "mprotect",
    [HT_FN_BRK] = "brk",
    [HT_FN_SBRK] = "sbrk",
    [HT_FN_HEAP_API] = "heap_api",
    [HT_FN_NEW] = "new",
    [HT_FN_NEW_ARRAY] = "new[]",
    [HT_FN_DELETE] = "delete",
    [HT_FN_DELETE_ARRAY] = "delete[]",
    [HT_FN_MALLOCX] = "mallocx",
    [HT_FN_RALLOCX] = "rallocx",
    [HT_FN_XALLOCX] = "xallocx",
    [HT_FN_DALLOCX] = "dallocx",
    [HT_FN_SDALLOCX] = "sdallocx",
    [HT_FN_TCMALLOC] = "tcmalloc",
    [HT_FN_MIMALLOC] = "mimalloc",
    [HT_FN_MAPS_HEAP] = "maps_heap",
    [HT_FN_MAPS_STACK] = "maps_stack",
    [HT_FN_MAPS] = "maps",
};

const char *ht_func_name(unsigned func)
{
	if (func >= HT_FN__COUNT || !func_names[func])
		return "?";
	return func_names[func];
}

static const char *const event_names[HT_EV__COUNT] = {
    [HT_EV_ALLOC] = "alloc",
    [HT_EV_ALLOC_FAIL] = "alloc_fail",
    [HT_EV_REALLOC] = "realloc",
    [HT_EV_FREE] = "free",
    [HT_EV_MMAP] = "mmap",
    [HT_EV_MUNMAP] = "munmap",
    [HT_EV_MREMAP] = "mremap",
    [HT_EV_MPROTECT] = "mprotect",
    [HT_EV_BRK] = "brk",
    [HT_EV_HEAP_CREATE] = "heap_create",
    [HT_EV_HEAP_DESTROY] = "heap_destroy",
    [HT_EV_PROCESS_START] = "process_start",
    [HT_EV_PROCESS_EXEC] = "process_exec",
    [HT_EV_PROCESS_EXIT] = "process_exit",
    [HT_EV_THREAD_START] = "thread_start",
    [HT_EV_THREAD_EXIT] = "thread_exit",
    [HT_EV_THREAD_NAME] = "thread_name",
    [HT_EV_MODULE_LOAD] = "module_load",
    [HT_EV_MODULE_UNLOAD] = "module_unload",
    [HT_EV_RSS] = "rss",
};

const char *ht_event_name(unsigned type)
{
	if (type >= HT_EV__COUNT || !event_names[type])
		return "?";
	return event_names[type];
}
