/*
 * temporary.h - heaptrack's temporary allocations: a block is temporary when
 * it is freed before the thread that allocated it allocates again (the
 * pattern of a buffer made and dropped at once). The tracker follows each
 * thread's latest allocation; a consumer of lifetimes asks it about each
 * block as the block ends.
 *
 * Use: for every event, ht__life_event() first (its callbacks may call
 * ht__temp_is()), then ht__temp_event(). Memory grows with the number of
 * threads. Not thread-safe.
 */
#ifndef HT_ANALYSIS_TEMPORARY_H
#define HT_ANALYSIS_TEMPORARY_H

#include <stdbool.h>

#include "analysis/lifetime.h"
#include "heaptrail/trace.h"

struct ht__temp_tracker;

/* NULL when out of memory. */
struct ht__temp_tracker *ht__temp_new(void);
void ht__temp_free(struct ht__temp_tracker *t);

/* Note the allocation an event makes (alloc, realloc). Returns 0 or HT_ERR_NOMEM. */
int ht__temp_event(struct ht__temp_tracker *t, const struct ht_event *ev);

/* Whether an ended block is temporary: freed (not live at the end, not held
   at its process's exit) and still
   the latest allocation of its thread. */
bool ht__temp_is(const struct ht__temp_tracker *t, const struct ht__life *life);

#endif
