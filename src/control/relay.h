/*
 * relay.h - collecting the in-memory buffers of programs that started
 * before their IFEO session (relay.c). One thread (the daemon's main
 * thread) drives a relay, between collector ticks.
 */
#ifndef HT_CONTROL_RELAY_H
#define HT_CONTROL_RELAY_H

#include <stdint.h>

#include "base/protocol.h"

struct ht__relay;

/*
 * A relay into the session whose shared header is session, in directory
 * dir: it adopts buffers of programs that would have looked for their
 * session there. 0 or HT_ERR_NOMEM.
 */
int ht__relay_new(struct ht__relay **out, struct ht__shm_header *session, const char *dir);

/* Looks for new buffers of this user's processes; returns how many were adopted. */
unsigned ht__relay_scan(struct ht__relay *r);

/* CLOCK_MONOTONIC start of the oldest buffer adopted, UINT64_MAX when none. */
uint64_t ht__relay_min_t0(const struct ht__relay *r);

/* Copies what the buffers hold into the session's rings. */
void ht__relay_pump(struct ht__relay *r);

/* The session ends: the programs stop tracing, what they wrote is copied,
   and the session's rings used for them are released. */
void ht__relay_stop(struct ht__relay *r);

void ht__relay_free(struct ht__relay *r);

#endif
