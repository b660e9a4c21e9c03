/*
 * live.c - what a running session can tell about itself between ticks, for
 * the session daemon of named sessions (`heaptrail sessions`): the events
 * lost so far and the processes it traces right now; and its definitions
 * and symbols so far, for the flight recorder's windows. Kept apart from
 * session.c so the collector's own files stay as they are.
 */
#include "session/internal.h"
#include "session/live.h"

void ht__session_losses_now(struct ht__session *s, uint64_t *lossy, uint64_t *no_buffer,
			    uint64_t *in_handler)
{
	*lossy = s->lost_freed;
	uint32_t reached = ht__rings_reached(s->hdr, s->ring_count);
	for (uint32_t i = 0; i < reached; i++)
		*lossy += atomic_load(&ht__ring_at(s, i)->lost);
	*no_buffer = atomic_load(&s->hdr->rings_exhausted);
	*in_handler = atomic_load(&s->hdr->reentered);
}

uint64_t ht__session_lost_now(struct ht__session *s)
{
	uint64_t a, b, c;
	ht__session_losses_now(s, &a, &b, &c);
	return a + b + c;
}

uint32_t ht__session_rings_in_use(struct ht__session *s)
{
	uint32_t n = 0, reached = ht__rings_reached(s->hdr, s->ring_count);
	for (uint32_t i = 0; i < reached; i++)
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

int ht__session_defs_to(struct ht__session *s, const struct ht__sink *to, void *ctx)
{
	int rc = 0;
	for (uint32_t i = 0; i < s->nmods && rc >= 0; i++)
		rc = to->module(ctx, i, s->mods[i].path, s->mods[i].build_id,
				s->mods[i].build_id_len);
	for (uint32_t i = 0; i < s->nframes && rc >= 0; i++)
		rc = to->frame(ctx, i, s->frames[i].module, s->frames[i].rel);
	for (uint32_t id = 1; id <= s->nstacks && rc >= 0; id++)
		rc = to->stack(ctx, id, s->stack_frames + s->stack_off[id], s->stack_len[id]);
	return rc < 0 ? rc : 0;
}

int ht__session_symbols_to(struct ht__session *s, const struct ht__sink *to, void *ctx)
{
	struct ht__symbolize_job job = {
	    .mods = s->mods,
	    .nmods = s->nmods,
	    .frames = s->frames,
	    .nframes = s->nframes,
	    .symbols = to->symbols,
	    .ctx = ctx,
	};
	int rc = ht__symbolize_frames(&job);
	if (job.missing)
		s->stats.symbols_missing = job.missing;
	return rc;
}
