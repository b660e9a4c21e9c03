/*
 * live.h - what a running session tells about itself between ticks (live.c),
 * for the daemon of named sessions. Call from the thread driving the session.
 */
#ifndef HT_SESSION_LIVE_H
#define HT_SESSION_LIVE_H

#include <stdint.h>
#include <sys/types.h>

#include "session/session.h"

/* Events lost so far: lossy drops, events that found no free buffer, and
   events of signal handlers that interrupted a hook. */
uint64_t ht__session_lost_now(struct ht__session *s);

/* Buffers (rings) not free right now. */
uint32_t ht__session_rings_in_use(struct ht__session *s);

/* Pids of live traced process images into out (room for max); returns how many there are. */
unsigned ht__session_live_pids(struct ht__session *s, pid_t *out, unsigned max);

#endif
