/*
 * Where a realloc that moved its block goes among the other threads' events
 * (docs/session-protocol.md, "Time order"). Its record is stamped before the
 * real call, so its free of the old block is before any allocation that
 * reuses that address; but the new block may be one another thread freed
 * after that stamp. The record also says when the call returned (end): the
 * merge holds it back until an event at or after end, or one that must
 * follow it, and writes it then, after the frees of its new address.
 */
#include <stdlib.h>
#include <string.h>

#include "base/vec.h"
#include "session/internal.h"

/* A record the merge holds back: copies of it and of its slot's binding
   (the slot may be freed and bound to another thread before it is written). */
struct ht__held {
	struct ht__rec_realloc rec;
	struct ht__slot sl;
};

static inline bool moved(const struct ht__rec_realloc *r)
{
	return r->end > r->h.ts && r->old_addr && r->new_addr && r->old_addr != r->new_addr;
}

static inline bool same_image(const struct ht__slot *x, const struct ht__slot *y)
{
	return x->pid == y->pid && x->instance == y->instance;
}

/* Writes held record i, after the held ones that free its new block. */
static int emit_held(struct ht__session *s, uint32_t i)
{
	struct ht__held h = s->held[i];
	s->held[i] = s->held[--s->nheld];
	for (uint32_t j = 0; j < s->nheld;) {
		const struct ht__held *o = &s->held[j];
		if (o->rec.old_addr == h.rec.new_addr && same_image(&o->sl, &h.sl)) {
			int rc = emit_held(s, j);
			if (rc < 0)
				return rc;
			j = 0; /* the array changed */
			continue;
		}
		j++;
	}
	/* Not before what was written meanwhile: so never earlier than its
	   stamp, and never later than its call's end. */
	uint64_t last = s->hdr->t0_ns + s->last_ts;
	if (h.rec.h.ts < last)
		h.rec.h.ts = last;
	return ht__translate(s, &h.sl, &h.rec.h);
}

/* The oldest held record whose call ended before t, or UINT32_MAX. */
static uint32_t oldest_due(const struct ht__session *s, uint64_t t)
{
	uint32_t k = UINT32_MAX;
	for (uint32_t i = 0; i < s->nheld; i++)
		if (s->held[i].rec.end < t &&
		    (k == UINT32_MAX || s->held[i].rec.h.ts < s->held[k].rec.h.ts))
			k = i;
	return k;
}

int ht__order_rec(struct ht__session *s, struct ht__slot *sl, const struct ht__rec *rec)
{
	if (s->nheld) {
		/* Before rec: held reallocs whose call ended by its stamp, the one
		   whose old block rec allocates, and all of an image rec ends. */
		uint64_t made = 0;
		int32_t ends = 0;
		if (rec->type == HT_REC_ALLOC)
			made = ((const struct ht__rec_alloc *)rec)->addr;
		else if (rec->type == HT_REC_REALLOC && !moved((const struct ht__rec_realloc *)rec))
			/* A realloc that is held itself took its block somewhere
			   up to its end, not at its stamp: the held one that freed
			   that address goes just before it when it is written
			   (emit_held), not now. */
			made = ((const struct ht__rec_realloc *)rec)->new_addr;
		else if (rec->type == HT_REC_PROCESS_EXIT)
			ends = ((const struct ht__rec_exit *)rec)->pid;
		else if (rec->type == HT_REC_PROCESS_START)
			ends = sl->pid;
		uint32_t k;
		int rc;
		while ((k = oldest_due(s, rec->ts + 1)) != UINT32_MAX)
			if ((rc = emit_held(s, k)) < 0)
				return rc;
		for (uint32_t i = 0; i < s->nheld;) {
			const struct ht__held *h = &s->held[i];
			if ((made && made == h->rec.old_addr && same_image(&h->sl, sl)) ||
			    (ends && h->sl.pid == ends)) {
				if ((rc = emit_held(s, i)) < 0)
					return rc;
				i = 0;
				continue;
			}
			i++;
		}
		/* A free of a held realloc's new block simply goes first. */
	}
	if (rec->type == HT_REC_REALLOC && moved((const struct ht__rec_realloc *)rec)) {
		if (ht__grow((void **)&s->held, &s->held_cap, s->nheld + 1, sizeof(*s->held)) < 0)
			return HT_ERR_NOMEM;
		memcpy(&s->held[s->nheld].rec, rec, sizeof(struct ht__rec_realloc));
		s->held[s->nheld++].sl = *sl;
		return 0;
	}
	return ht__translate(s, sl, rec);
}

int ht__order_flush(struct ht__session *s, uint64_t wm)
{
	uint32_t k;
	while ((k = oldest_due(s, wm)) != UINT32_MAX) {
		int rc = emit_held(s, k);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void ht__order_free(struct ht__session *s)
{
	free(s->held);
	s->held = NULL;
	s->nheld = 0;
	s->held_cap = 0;
}
