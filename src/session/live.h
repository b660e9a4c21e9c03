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

/* The same by cause: lossy drops, no free buffer, in a signal handler. */
void ht__session_losses_now(struct ht__session *s, uint64_t *lossy, uint64_t *no_buffer,
			    uint64_t *in_handler);

/* Buffers (rings) not free right now. */
uint32_t ht__session_rings_in_use(struct ht__session *s);

/* Pids of live traced process images into out (room for max); returns how many there are. */
unsigned ht__session_live_pids(struct ht__session *s, pid_t *out, unsigned max);

/*
 * Every module, frame and stack defined so far, handed to `to` (modules,
 * then frames, then stacks, so each comes before its first use): the
 * flight recorder writes them with each window (docs/modes.md). 0 or the
 * first error of a callback.
 */
int ht__session_defs_to(struct ht__session *s, const struct ht__sink *to, void *ctx);

/* The symbols of every frame defined so far, to to->symbols (through the
   symbol cache); the session's own stats are left alone. */
int ht__session_symbols_to(struct ht__session *s, const struct ht__sink *to, void *ctx);

#endif
