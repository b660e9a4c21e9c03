/*
 * live.c - what a running session can tell about itself between ticks, for
 * the session daemon of named sessions (`heaptrail sessions`): the events
 * lost so far and the processes it traces right now. Kept apart from
 * session.c so the collector's own files stay as they are.
 */
#include "session/internal.h"
#include "session/live.h"

uint64_t ht__session_lost_now(struct ht__session *s)
{
	uint64_t lost =
	    s->lost_freed + atomic_load(&s->hdr->rings_exhausted) + atomic_load(&s->hdr->reentered);
	for (uint32_t i = 0; i < s->ring_count; i++)
		lost += atomic_load(&ht__ring_at(s, i)->lost);
	return lost;
}

uint32_t ht__session_rings_in_use(struct ht__session *s)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < s->ring_count; i++)
		n += atomic_load(&ht__ring_at(s, i)->state) != HT_RING_FREE;
	return n;
}

unsigned ht__session_live_pids(struct ht__session *s, pid_t *out, unsigned max)
{
	unsigned n = 0;
	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct ht__proc *p = s->procs[i];
		if (p->replaced || p->dead || p->exited)
			continue;
		bool dup = false;
		for (unsigned k = 0; k < n && k < max; k++)
			dup |= out[k] == p->pid;
		if (dup)
			continue;
		if (n < max)
			out[n] = p->pid;
		n++;
	}
	return n;
}
