/*
 * names.c - the stable names of error codes, functions and event types. The
 * event and function names appear in dump and JSON output, so they never change.
 */
#include "heaptrail/trace.h"
#include "format/codec.h"

/* The versions ht_strerror(HT_ERR_VERSION) names. */
_Static_assert(HT__FILE_VERSION_OLDEST == 2 && HT__FILE_VERSION == 14,
	       "update the versions in the HT_ERR_VERSION message");

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
		return "trace format version not supported by this build "
		       "(it reads formats 2 to 14)";
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

#define FUNC_NAME(id, value, name) [HT_FN_##id] = name,
static const char *const func_names[HT_FN__COUNT] = {HT_FUNCS(FUNC_NAME)};

const char *ht_func_name(unsigned func)
{
	if (func >= HT_FN__COUNT || !func_names[func])
		return "?";
	return func_names[func];
}

#define EVENT_NAME(id, value, name, func, fields) [HT_EV_##id] = name,
static const char *const event_names[HT_EV__COUNT] = {HT_EVENT_TYPES(EVENT_NAME)};

const char *ht_event_name(unsigned type)
{
	if (type >= HT_EV__COUNT || !event_names[type])
		return "?";
	return event_names[type];
}
