/*
 * aggregate.c - counts heap blocks per stack id (or per process, heap handle
 * and stack) in one pass, then applies required frames and culling once per
 * distinct stack and merges stacks into the groups of the xperf heap actions
 * (see aggregate.h).
 */
#define _GNU_SOURCE /* qsort_r */
#include "analysis/aggregate.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/intern.h"
#include "analysis/temporary.h"
#include "base/vec.h"

#define NO_STACK_KEY "[no stack]"

/* A counter row of the handle grouping: (process, heap, stack) -> counts. */
struct hentry {
	struct ht__agg_counts c;
	uint64_t heap;
	uint32_t process;
	uint32_t stack;
};

/* A group being built at the end: its key is a sequence of interned ids. */
struct group {
	struct ht__agg_counts c;
	uint32_t stack;	       /* representative: the lowest stack id in the group */
	uint32_t seq, seq_len; /* key: ids at seqs[seq .. seq + seq_len), and the
				  representative's frames at frames[seq ...] */
	/* Or, when not NULL, the representative's frames as the reader keeps
	   them, and the key their text ids (ftext): a stack whose every frame is
	   kept is not copied, which halved the memory of a deep-stacked trace. */
	const uint32_t *rframes;
	uint64_t hash; /* hash_seq() of the key: the index grows without hashing it again */
};

struct ht__agg {
	const struct ht__query *q;
	struct ht_reader *r;
	bool symbols;
	bool handle_by_stack; /* handle rows need the stack for -requireFrames */
	bool at_alloc;	      /* totals counted at the allocation (counts_at_alloc()) */
	bool plain;	      /* no size or process filter: every allocation counts */

	struct ht__agg_counts *stacks; /* per stack id */
	size_t stacks_len;

	HT_VEC(struct hentry) hents;
	struct ht__hindex hix; /* of hents */

	uint8_t *pcache; /* per process index: 0 unknown, 1 wanted, 2 not */
	size_t pcache_len;

	struct ht__temp_tracker *temp; /* with q->temporary_only */

	uint32_t *ftext; /* per frame id: interned text id, HT__NO_ID unknown */
	size_t ftext_len;
	struct ht__intern in;

	/* finish */
	struct group *groups;
	size_t ngroups, groups_alloc;
	uint32_t *seqs;
	uint32_t *frames; /* parallel to seqs */
	size_t seqs_len, seqs_alloc;
	size_t frames_alloc;
	struct ht__hindex gix; /* of groups */
	uint32_t *rank;	       /* per interned id: its place in strcmp() order (sorting) */

	/* Grouping by stack with symbols, every stack's key made on a thread
	   of its own while the pass reads (keys_start()): the frames culled
	   and hash_frames() of the rest, per stack id below keys_n. The
	   thread owns ftext, in and keys_mc until finish joins it. */
	pthread_t keys_th;
	bool keys_running;
	int keys_rc;
	uint32_t keys_n;
	uint32_t *key_first;
	uint64_t *key_hash;
	struct ht__frame_matcher *keys_mc;
};

/*
 * The hash of a key sequence, one id at a time with a rotate and a multiply
 * (FxHash's step), mixed at the end: a full mix per id made hashing clang's
 * 50 thousand stacks of about 80 frames a third of sorting them.
 */
static uint64_t hash_seq(const uint32_t *v, uint32_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	for (uint32_t i = 0; i < n; i++)
		h = ((h << 5 | h >> 59) ^ v[i]) * 0x517cc1b727220a95ull;
	return ht__mix64(h);
}

/* The pass gives every heap block that ends; the end of the trace grows as it reads. */
static int life_end(void *ctx, struct ht__pass *p, const struct ht__life *life)
{
	return ht__agg_add(ctx, life, ht__pass_end_ts(p));
}

/* With --temporary: whether each block is temporary, then the count. */
static int life_end_temp(void *ctx, struct ht__pass *p, const struct ht__life *life)
{
	struct ht__agg *a = ctx;
	struct ht__life l = *life;
	l.temporary = ht__temp_is(a->temp, life);
	return ht__agg_add(a, &l, ht__pass_end_ts(p));
}

/* The allocations, after the blocks they end were judged (pass order). */
static int temp_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	(void)p;
	return ht__temp_event(((struct ht__agg *)ctx)->temp, ev);
}

static int keys_start(void *ctx, struct ht__pass *p);

static const struct ht__consumer agg_consumer = {
    .name = "aggregate",
    .begin = keys_start,
    .life = life_end,
};

static const struct ht__consumer agg_temp_consumer = {
    .name = "aggregate --temporary",
    .events = HT_PASS_EV(HT_EV_ALLOC) | HT_PASS_EV(HT_EV_REALLOC),
    .begin = keys_start,
    .event = temp_event,
    .life = life_end_temp,
};

static int alloc_event(void *ctx, struct ht__pass *p, const struct ht_event *ev);
static int life_unfreed(void *ctx, struct ht__pass *p, const struct ht__life *life);

/* With counts_at_alloc(): the allocations for the totals, the blocks never
   freed for Outstanding, and no call for the others. */
static const struct ht__consumer agg_alloc_consumer = {
    .name = "aggregate",
    .events = HT_PASS_EV(HT_EV_ALLOC) | HT_PASS_EV(HT_EV_REALLOC),
    .needs = HT_PASS_LIFE_UNFREED | HT_PASS_LIFE_NO_TS | HT_PASS_LIFE_NO_CALLER,
    .begin = keys_start,
    .event = alloc_event,
    .life = life_unfreed,
};

/*
 * Whether a's counts can be made without the lifetimes of freed blocks: a
 * query that keeps a block or not whatever its lifetime (no range, moment,
 * lifetime filter or --temporary) counts every allocation in the totals and
 * the blocks never freed in Outstanding, so the totals are counted from the
 * allocation events and only the unfreed blocks come from the tracker: the
 * pass then makes no call per freed block (python: a third of the calls).
 * Sampled traces keep the one path (the pass's estimates per life).
 */
static bool counts_at_alloc(const struct ht__agg *a)
{
	const struct ht__query *q = a->q;
	const struct ht_trace_info *info = ht_reader_info(a->r);
	return q->group != HT_GROUP_HANDLE && !q->has_range && !q->has_at && !q->temporary_only &&
	       !q->life_min && q->life_max == UINT64_MAX && !a->temp &&
	       !(info && info->sample_rate);
}

int ht__agg_attach(struct ht__agg *a, struct ht__pass *p)
{
	/* The query's snapshot of a heap snapshot trace (diff: one per side). */
	if (a->q->snapshot)
		ht__pass_snapshot(p, a->q->snapshot);
	a->at_alloc = counts_at_alloc(a);
	a->plain = a->q->size_min == 0 && a->q->size_max == UINT64_MAX && !a->q->pid_count &&
		   !a->q->has_at;
	int id = ht__pass_add(p,
			      a->at_alloc ? &agg_alloc_consumer
			      : a->temp	  ? &agg_temp_consumer
					  : &agg_consumer,
			      a);
	if (id < 0)
		return id;
	/*
	 * Past the range nothing can count any more: a block allocated in it
	 * and freed later is outstanding, which is what ending it at the end
	 * of the pass says.
	 */
	if (a->q->has_range)
		ht__pass_stop_at(p, id, a->q->range_end);
	/* At one moment, likewise: what is live then is ended as live. */
	if (a->q->has_at)
		ht__pass_stop_at(p, id, a->q->at_ts + 1);
	return 0;
}

int ht__agg_new(struct ht__agg **out, const struct ht__query *q, struct ht_reader *r)
{
	struct ht__agg *a = calloc(1, sizeof(*a));
	if (!a)
		return HT_ERR_NOMEM;
	a->q = q;
	a->r = r;
	const struct ht_trace_info *info = ht_reader_info(r);
	a->symbols = q->symbols < 0 ? (info && (info->flags & HT_TRACEF_SYMBOLS)) : q->symbols > 0;
	a->handle_by_stack = q->require.count > 0;
	if (q->temporary_only && !(a->temp = ht__temp_new())) {
		free(a);
		return HT_ERR_NOMEM;
	}
	*out = a;
	return 0;
}

static void keys_join(struct ht__agg *a)
{
	if (a->keys_running)
		pthread_join(a->keys_th, NULL);
	a->keys_running = false;
}

void ht__agg_free(struct ht__agg *a)
{
	if (!a)
		return;
	keys_join(a);
	free(a->key_first);
	free(a->key_hash);
	ht__frame_matcher_free(a->keys_mc);
	ht__temp_free(a->temp);
	free(a->stacks);
	ht__vec_release(&a->hents);
	ht__hindex_release(&a->hix);
	free(a->pcache);
	free(a->ftext);
	ht__intern_release(&a->in);
	free(a->groups);
	free(a->seqs);
	free(a->frames);
	ht__hindex_release(&a->gix);
	free(a->rank);
	free(a);
}

/* Whether process p had ended (exit, exec) by ts: its blocks are gone then. */
static bool ended_by(const struct ht_process *pr, uint64_t ts)
{
	return pr && (pr->flags & (HT_PROCF_EXITED | HT_PROCF_SIGNALED | HT_PROCF_EXECED)) &&
	       pr->end_ts <= ts;
}

/* Whether pid passes -pid, and with has_at whether the process still ran then. */
static bool process_passes(const struct ht__agg *a, const struct ht_process *pr)
{
	return pr && ht__query_wants_pid(a->q, pr->pid) &&
	       !(a->q->has_at && ended_by(pr, a->q->at_ts));
}

/* process_wanted() past its first test. */
static bool process_wanted_slow(struct ht__agg *a, uint32_t p)
{
	if (ht__grow_zero((void **)&a->pcache, &a->pcache_len, (size_t)p + 1, 1) < 0)
		return process_passes(a, ht_reader_process(a->r, p));
	if (!a->pcache[p])
		a->pcache[p] = process_passes(a, ht_reader_process(a->r, p)) ? 1 : 2;
	return a->pcache[p] == 1;
}

/* Whether blocks of process index p pass -pid (cached per index). */
static inline bool process_wanted(struct ht__agg *a, uint32_t p)
{
	return (!a->q->pid_count && !a->q->has_at) || process_wanted_slow(a, p);
}

static void counts_add(struct ht__agg_counts *c, const struct ht__life *life, bool outstanding)
{
	c->total_count += life->count;
	c->total_bytes += life->size;
	c->realloc_count += life->from_realloc ? life->count : 0;
	if (outstanding) {
		c->outstanding_count += life->count;
		c->outstanding_bytes += life->size;
	}
}

static void counts_sum(struct ht__agg_counts *to, const struct ht__agg_counts *c)
{
	to->outstanding_bytes += c->outstanding_bytes;
	to->outstanding_count += c->outstanding_count;
	to->total_bytes += c->total_bytes;
	to->total_count += c->total_count;
	to->realloc_count += c->realloc_count;
}

static uint64_t hentry_hash(uint32_t process, uint64_t heap, uint32_t stack)
{
	return ht__mix64(heap ^ ((uint64_t)process << 32 | stack) * 0x9e3779b97f4a7c15ull);
}

static uint64_t hentry_rehash(const void *ctx, uint32_t id)
{
	const struct ht__agg *a = ctx;
	const struct hentry *e = &a->hents.v[id];
	return hentry_hash(e->process, e->heap, e->stack);
}

static struct hentry *handle_entry(struct ht__agg *a, uint32_t process, uint64_t heap,
				   uint32_t stack)
{
	uint64_t h = hentry_hash(process, heap, stack);
	for (uint32_t *slot = ht__hindex_find(&a->hix, h); *slot;
	     slot = ht__hindex_next(&a->hix, slot)) {
		struct hentry *e = &a->hents.v[*slot - 1];
		if (e->process == process && e->heap == heap && e->stack == stack)
			return e;
	}
	struct hentry e = {.heap = heap, .process = process, .stack = stack};
	if (ht__vec_push(&a->hents, e) < 0 ||
	    ht__hindex_insert(&a->hix, h, (uint32_t)(a->hents.len - 1), hentry_rehash, a) < 0)
		return NULL;
	return &a->hents.v[a->hents.len - 1];
}

/* stack_counts() of a stack beyond the table. */
static struct ht__agg_counts *stack_counts_grow(struct ht__agg *a, uint32_t stack)
{
	/*
	 * A stack is defined before the first event that uses it, so an id
	 * the reader does not know is damage: count it as "no stack" rather
	 * than growing the table to a wild size.
	 */
	if (stack >= ht_reader_stack_count(a->r))
		stack = 0;
	if (stack >= a->stacks_len) {
		/* Sized for the stacks the reader knows: usually one growth does. */
		size_t need = ht_reader_stack_count(a->r);
		if (need <= stack)
			need = (size_t)stack + 1;
		if (ht__grow_zero((void **)&a->stacks, &a->stacks_len, need, sizeof(*a->stacks)) <
		    0)
			return NULL;
	}
	return &a->stacks[stack];
}

/* The counters of stack id stack (grown as stacks come); NULL when out of memory. */
static inline struct ht__agg_counts *stack_counts(struct ht__agg *a, uint32_t stack)
{
	return stack < a->stacks_len ? &a->stacks[stack] : stack_counts_grow(a, stack);
}

int ht__agg_add(struct ht__agg *a, const struct ht__life *life, uint64_t end_ts)
{
	if (!process_wanted(a, life->process))
		return 0;
	/*
	 * xperf's Outstanding is "never freed": a block its process still held
	 * at exit is outstanding, a leak, whatever the range.
	 */
	struct ht__life leaked;
	if (life->at_exit) {
		leaked = *life;
		leaked.free_ts = HT_TS_NEVER;
		life = &leaked;
	}
	bool outstanding;
	if (!ht__query_accepts(a->q, life, end_ts, &outstanding))
		return 0;
	if (a->q->group == HT_GROUP_HANDLE) {
		struct hentry *e = handle_entry(a, life->process, life->heap,
						a->handle_by_stack ? life->stack : 0);
		if (!e)
			return HT_ERR_NOMEM;
		counts_add(&e->c, life, outstanding);
		return 0;
	}
	struct ht__agg_counts *c = stack_counts(a, life->stack);
	if (!c)
		return HT_ERR_NOMEM;
	counts_add(c, life, outstanding);
	return 0;
}

/* Whether a block of size bytes passes the query's size filter. */
static bool size_passes(const struct ht__query *q, uint64_t size)
{
	return size >= q->size_min && size < q->size_max;
}

/* counts_at_alloc(): an allocation counts in the totals of its stack, as
   its block will in ht__agg_add() when it ends (the blocks the tracker
   makes: ht__life_event()). */
static int alloc_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	struct ht__agg *a = ctx;
	if (!ev->addr || (ev->type == HT_EV_REALLOC && (ev->flags & HT_EVF_FAILED)))
		return 0;
	if (!a->plain && (!size_passes(a->q, ev->size) || !process_wanted(a, ev->process)))
		return 0;
	struct ht__agg_counts *c = stack_counts(a, ev->stack);
	if (!c)
		return HT_ERR_NOMEM;
	(void)p; /* not sampled: an allocation is one block (ht__pass_event_count()) */
	c->total_count++;
	c->total_bytes += ev->size;
	c->realloc_count += ev->type == HT_EV_REALLOC;
	return 0;
}

/* counts_at_alloc(): a block never freed (live at the end, or at its
   image's end) is outstanding. */
static int life_unfreed(void *ctx, struct ht__pass *p, const struct ht__life *life)
{
	(void)p;
	struct ht__agg *a = ctx;
	if ((life->free_ts != HT_TS_NEVER && !life->at_exit) ||
	    !size_passes(a->q, life->block_size) || !process_wanted(a, life->process))
		return 0;
	struct ht__agg_counts *c = stack_counts(a, life->stack);
	if (!c)
		return HT_ERR_NOMEM;
	c->outstanding_count += life->count;
	c->outstanding_bytes += life->size;
	return 0;
}

int ht__agg_run(struct ht__agg *a, ht__agg_progress_fn progress, void *ctx)
{
	struct ht__pass *p;
	int rc = ht__pass_new(&p, a->r);
	if (rc < 0)
		return rc;
	if ((rc = ht__agg_attach(a, p)) == 0) {
		ht__pass_progress(p, progress, ctx);
		rc = ht__pass_run(p);
	}
	ht__pass_free(p);
	return rc;
}

/* a->ftext covers frames [0, need) (and every frame of the reader); 0 or
   HT_ERR_NOMEM. */
static int ftext_cover(struct ht__agg *a, size_t need)
{
	size_t old = a->ftext_len;
	if (need < ht_reader_frame_count(a->r))
		need = ht_reader_frame_count(a->r);
	if (need <= old)
		return 0;
	if (ht__grow((void **)&a->ftext, &a->ftext_len, need, sizeof(*a->ftext)) < 0)
		return HT_ERR_NOMEM;
	memset(a->ftext + old, 0xff, (a->ftext_len - old) * sizeof(*a->ftext)); /* HT__NO_ID */
	return 0;
}

/* frame_text_id() of a frame not seen yet. */
static uint32_t frame_text_id_new(struct ht__agg *a, uint32_t frame)
{
	if (frame >= a->ftext_len && ftext_cover(a, (size_t)frame + 1) < 0)
		return HT__NO_ID;
	if (a->ftext[frame] != HT__NO_ID)
		return a->ftext[frame];
	char buf[512];
	int len = ht__frame_text(a->r, frame, a->symbols, buf, sizeof(buf));
	uint32_t id;
	if (len < (int)sizeof(buf)) {
		id = ht__intern_id(&a->in, buf);
	} else {
		char *big = malloc((size_t)len + 1);
		if (!big)
			return HT__NO_ID;
		ht__frame_text(a->r, frame, a->symbols, big, (size_t)len + 1);
		id = ht__intern_id(&a->in, big);
		free(big);
	}
	a->ftext[frame] = id;
	return id;
}

/* Interned id of a frame's text (asked once per frame of every stack: the
   known ones are a load, python's 2.1 million took 60 M instructions as calls). */
static inline uint32_t frame_text_id(struct ht__agg *a, uint32_t frame)
{
	if (frame < a->ftext_len && a->ftext[frame] != HT__NO_ID)
		return a->ftext[frame];
	return frame_text_id_new(a, frame);
}

const char *ht__agg_frame_text(struct ht__agg *a, uint32_t frame)
{
	uint32_t id = frame_text_id(a, frame);
	return id == HT__NO_ID ? "?" : a->in.strs[id];
}

/* Id i of group g's key. */
static uint32_t group_key(const struct ht__agg *a, const struct group *g, uint32_t i)
{
	return g->rframes ? a->ftext[g->rframes[i]] : a->seqs[g->seq + i];
}

static const uint32_t *group_frames(const struct ht__agg *a, const struct group *g)
{
	return g->rframes ? g->rframes : a->frames + g->seq;
}

/* hash_seq() of g's key. */
static uint64_t group_rehash(const void *ctx, uint32_t id)
{
	return ((const struct ht__agg *)ctx)->groups[id].hash;
}

static int same_key(const struct ht__agg *a, const struct group *g, const uint32_t *key, uint32_t n)
{
	if (g->seq_len != n)
		return 0;
	if (!g->rframes)
		return !memcmp(a->seqs + g->seq, key, n * sizeof(*key));
	for (uint32_t i = 0; i < n; i++)
		if (a->ftext[g->rframes[i]] != key[i])
			return 0;
	return 1;
}

/* A new group of hash h for a key of n ids; NULL when out of memory. The
   caller fills its key. */
static struct group *group_new(struct ht__agg *a, uint64_t h, uint32_t n)
{
	if (ht__grow((void **)&a->groups, &a->groups_alloc, a->ngroups + 1, sizeof(*a->groups)) < 0)
		return NULL;
	struct group *g = &a->groups[a->ngroups];
	memset(g, 0, sizeof(*g));
	g->seq = (uint32_t)a->seqs_len;
	g->seq_len = n;
	g->hash = h;
	if (ht__hindex_insert(&a->gix, h, (uint32_t)a->ngroups, group_rehash, a) < 0)
		return NULL;
	a->ngroups++;
	g->stack = HT__NO_ID;
	return g;
}

/*
 * The group whose key is key[0..n), created when new with frames[0..n) as the
 * frames it shows; NULL when out of memory.
 */
static struct group *group_for(struct ht__agg *a, const uint32_t *key, const uint32_t *frames,
			       uint32_t n)
{
	uint64_t h = hash_seq(key, n);
	for (uint32_t *slot = ht__hindex_find(&a->gix, h); *slot;
	     slot = ht__hindex_next(&a->gix, slot)) {
		struct group *g = &a->groups[*slot - 1];
		if (same_key(a, g, key, n))
			return g;
	}
	if (ht__grow((void **)&a->seqs, &a->seqs_alloc, a->seqs_len + n, sizeof(*a->seqs)) < 0 ||
	    ht__grow((void **)&a->frames, &a->frames_alloc, a->seqs_len + n, sizeof(*a->frames)) <
		0)
		return NULL;
	struct group *g = group_new(a, h, n);
	if (g && n) { /* a trace without stacks has no sequences (and NULL arrays) */
		memcpy(a->seqs + a->seqs_len, key, n * sizeof(*key));
		memcpy(a->frames + a->seqs_len, frames, n * sizeof(*frames));
		a->seqs_len += n;
	}
	return g;
}

/*
 * hash_seq() of the text ids of the reader's frames[0..n), read as they are
 * hashed (no key copied): with symbols, grouping by stack keeps every frame
 * after the cull. a->ftext covers every frame (ftext_cover()). 0 or
 * HT_ERR_NOMEM.
 */
static int hash_frames(struct ht__agg *a, const uint32_t *frames, uint32_t n, uint64_t *out)
{
	const uint32_t *ft = a->ftext;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = ft[frames[i]];
		if (id == HT__NO_ID) {
			if ((id = frame_text_id_new(a, frames[i])) == HT__NO_ID)
				return HT_ERR_NOMEM;
			ft = a->ftext;
		}
		h = ((h << 5 | h >> 59) ^ id) * 0x517cc1b727220a95ull;
	}
	*out = ht__mix64(h);
	return 0;
}

/* The group of the reader's frames[0..n) whose texts hash to h, created
   pointing at them when new; NULL when out of memory. */
static struct group *group_for_frames(struct ht__agg *a, const uint32_t *frames, uint32_t n,
				      uint64_t h)
{
	const uint32_t *ft = a->ftext;
	for (uint32_t *slot = ht__hindex_find(&a->gix, h); *slot;
	     slot = ht__hindex_next(&a->gix, slot)) {
		struct group *g = &a->groups[*slot - 1];
		if (g->seq_len != n)
			continue;
		uint32_t i = 0;
		while (i < n && group_key(a, g, i) == ft[frames[i]])
			i++;
		if (i == n)
			return g;
	}
	struct group *g = group_new(a, h, n);
	if (g)
		g->rframes = frames;
	return g;
}

/* The keys' thread: every stack's cull and hash (the group lookups stay
   with finish, in stack order). */
static void *keys_main(void *arg)
{
	struct ht__agg *a = arg;
	int rc = ht__frame_matcher_new(&a->keys_mc, &a->q->cull, a->r);
	if (rc == 0)
		rc = ftext_cover(a, 0);
	for (uint32_t s = 0; s < a->keys_n && rc == 0; s++) {
		const uint32_t *frames = NULL;
		uint32_t n = s ? ht_reader_stack(a->r, s, &frames) : 0;
		uint32_t first = ht__frame_matcher_cull(a->keys_mc, frames, n);
		a->key_first[s] = first;
		rc = hash_frames(a, frames + first, n - first, &a->key_hash[s]);
	}
	a->keys_rc = rc;
	return NULL;
}

/*
 * The pass's .begin: grouping by stack with symbols, the keys are made on a
 * thread of their own while the pass reads (the stack table is whole from
 * the start when the trace has its tables), so that finish has only the
 * lookups left: clang++'s 55 thousand stacks of 3.7 million frames took
 * about 60 M instructions of culling, texts and hashing after the pass.
 * Without a thread (or its memory) finish makes them.
 */
static int keys_start(void *ctx, struct ht__pass *p)
{
	(void)p;
	struct ht__agg *a = ctx;
	const struct ht_trace_info *info = ht_reader_info(a->r);
	size_t n = ht_reader_stack_count(a->r);
	if (a->keys_running || a->key_hash || a->q->group != HT_GROUP_STACK || !a->symbols ||
	    !info || (info->flags & HT_TRACEF_TRUNCATED) || n < 2 || n > UINT32_MAX)
		return 0; /* without its tables, a trace's stacks come with its events */
	a->key_first = malloc(n * sizeof(*a->key_first));
	a->key_hash = malloc(n * sizeof(*a->key_hash));
	if (a->key_first && a->key_hash) {
		a->keys_n = (uint32_t)n;
		a->keys_running = pthread_create(&a->keys_th, NULL, keys_main, a) == 0;
	}
	if (!a->keys_running) {
		free(a->key_first);
		free(a->key_hash);
		a->key_first = NULL;
		a->key_hash = NULL;
		a->keys_n = 0;
	}
	return 0;
}

static uint64_t sort_metric(const struct ht__agg_counts *c, enum ht__sort s)
{
	switch (s) {
#define SORT_FIELD(id, key, title, field)                                                          \
	case HT_SORT_##id:                                                                         \
		return c->field;
		HT__SORT_KEYS(SORT_FIELD)
#undef SORT_FIELD
	default:
		return c->outstanding_bytes;
	}
}

static int cmp_texts(const void *pa, const void *pb, void *ctx)
{
	char *const *strs = ctx;
	return strcmp(strs[*(const uint32_t *)pa], strs[*(const uint32_t *)pb]);
}

/*
 * a->rank: every interned text's place in strcmp() order, so that sorting
 * the groups compares two numbers per frame instead of two strings (clang's
 * 50 thousand stacks tie on their sizes often, and their frames' texts
 * share long prefixes). Distinct ids are distinct texts: ranks never tie.
 */
static int rank_texts(struct ht__agg *a)
{
	uint32_t n = a->in.count;
	uint32_t *ids = malloc((n ? n : 1) * sizeof(*ids));
	a->rank = malloc((n ? n : 1) * sizeof(*a->rank));
	if (!ids || !a->rank) {
		free(ids);
		return HT_ERR_NOMEM;
	}
	for (uint32_t i = 0; i < n; i++)
		ids[i] = i;
	qsort_r(ids, n, sizeof(*ids), cmp_texts, a->in.strs);
	for (uint32_t i = 0; i < n; i++)
		a->rank[ids[i]] = i;
	free(ids);
	return 0;
}

/* A group's place in the sort by numbers: its sort metric and total size. */
struct sortkey {
	uint64_t metric, total;
	uint32_t group;
};

static int cmp_sortkeys(const void *pa, const void *pb)
{
	const struct sortkey *x = pa, *y = pb;
	if (x->metric != y->metric)
		return x->metric > y->metric ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return 0;
}

/* Frame d of group g's key as a number in text order: its text's rank + 1,
   0 past the key's end (a shorter stack first). */
static inline uint32_t key_at(const struct ht__agg *a, uint32_t g, uint32_t d)
{
	const struct group *x = &a->groups[g];
	return d < x->seq_len ? a->rank[group_key(a, x, d)] + 1 : 0;
}

/* Groups x and y by their keys' texts, from frame d on. */
static int cmp_keys_from(const struct ht__agg *a, uint32_t x, uint32_t y, uint32_t d)
{
	for (;; d++) {
		uint32_t kx = key_at(a, x, d), ky = key_at(a, y, d);
		if (kx != ky)
			return kx < ky ? -1 : 1;
		if (!kx)
			return 0;
	}
}

struct keyseg {
	uint32_t lo, n, depth;
};

/*
 * Sorts the groups v[0 .. n) by their keys' texts, frame by frame (in
 * strcmp() order, a shorter key first), as a multikey quicksort: each pass
 * splits by one frame, so the frames two keys share are read about once
 * rather than once per comparison (clang's stacks share dozens of frames
 * on the allocating side). Returns 0 or HT_ERR_NOMEM.
 */
static int sort_by_text(const struct ht__agg *a, uint32_t *v, uint32_t n)
{
	HT_VEC(struct keyseg) todo = {0};
	int rc = 0;
	if (ht__vec_push(&todo, ((struct keyseg){0, n, 0})) < 0)
		return HT_ERR_NOMEM;
	while (todo.len) {
		struct keyseg sg = todo.v[--todo.len];
		uint32_t *w = v + sg.lo;
		if (sg.n < 12) {
			for (uint32_t i = 1; i < sg.n; i++)
				for (uint32_t j = i;
				     j && cmp_keys_from(a, w[j - 1], w[j], sg.depth) > 0; j--) {
					uint32_t t = w[j];
					w[j] = w[j - 1];
					w[j - 1] = t;
				}
			continue;
		}
		uint32_t p0 = key_at(a, w[0], sg.depth), p1 = key_at(a, w[sg.n / 2], sg.depth),
			 p2 = key_at(a, w[sg.n - 1], sg.depth);
		uint32_t piv = p0 < p1 ? (p1 < p2   ? p1
					  : p0 < p2 ? p2
						    : p0)
				       : (p0 < p2   ? p0
					  : p1 < p2 ? p2
						    : p1);
		/* w[0 .. lt) below, [lt .. i) equal, (gt .. n) above */
		uint32_t lt = 0, i = 0, gt = sg.n;
		while (i < gt) {
			uint32_t k = key_at(a, w[i], sg.depth);
			uint32_t t = w[i];
			if (k < piv) {
				w[i++] = w[lt];
				w[lt++] = t;
			} else if (k > piv) {
				w[i] = w[--gt];
				w[gt] = t;
			} else {
				i++;
			}
		}
		struct keyseg parts[3] = {{sg.lo, lt, sg.depth},
					  {sg.lo + gt, sg.n - gt, sg.depth},
					  {sg.lo + lt, gt - lt, sg.depth + 1}};
		/* The equal part goes on to the next frame, unless the keys ended
		   there (then they are one key: groups' keys are distinct). */
		for (int k = 0; k < (piv ? 3 : 2) && !rc; k++)
			if (parts[k].n > 1 && ht__vec_push(&todo, parts[k]) < 0)
				rc = HT_ERR_NOMEM;
		if (rc)
			break;
	}
	ht__vec_release(&todo);
	return rc;
}

/*
 * Sorts sk[0 .. n) as cmp_sortkeys() does (largest metric first, then
 * largest total; ties in no set order), a byte at a time from the least
 * significant (LSD radix sort, stable) of the keys inverted (ascending
 * bytes are the groups' descending order), skipping the bytes all keys
 * share: clang's 50 thousand groups took 48 M instructions in qsort(), 16
 * comparisons through a pointer per group. The counts of all 16 bytes are
 * taken in one read, each byte by a shift of the key's word (a call per
 * byte took 14 M instructions on clang). tmp holds n keys.
 */
static void radix_sortkeys(struct sortkey *sk, struct sortkey *tmp, size_t n)
{
	uint32_t(*count)[256] = calloc(16, sizeof(*count));
	if (!count) { /* no room for the counts: the slower sort needs none */
		qsort(sk, n, sizeof(*sk), cmp_sortkeys);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t t = ~sk[i].total, m = ~sk[i].metric;
		for (unsigned b = 0; b < 8; b++) {
			count[b][t >> (b * 8) & 0xff]++;
			count[8 + b][m >> (b * 8) & 0xff]++;
		}
	}
	struct sortkey *from = sk, *to = tmp;
	for (unsigned b = 0; b < 16; b++) {
		uint32_t *c = count[b];
		unsigned shift = b % 8 * 8;
		uint64_t first = b < 8 ? ~from[0].total : ~from[0].metric;
		if (c[first >> shift & 0xff] == n)
			continue; /* every key has this byte */
		uint32_t at = 0;
		for (unsigned v = 0; v < 256; v++) {
			uint32_t k = c[v];
			c[v] = at;
			at += k;
		}
		if (b < 8)
			for (size_t i = 0; i < n; i++)
				to[c[~from[i].total >> shift & 0xff]++] = from[i];
		else
			for (size_t i = 0; i < n; i++)
				to[c[~from[i].metric >> shift & 0xff]++] = from[i];
		struct sortkey *t = from;
		from = to;
		to = t;
	}
	if (from != sk)
		memcpy(sk, from, n * sizeof(*sk));
	free(count);
}

/*
 * The groups in the result's order: by the sort metric and the total size
 * (largest first), then by the key's text. Only groups that tie on both
 * numbers compare texts, and only the first `shown` groups are put in that
 * full order: the ones after them are only below them (their texts are never
 * compared: clang's 50 thousand groups show 10 thousand). Returns 0 or
 * HT_ERR_NOMEM.
 */
static int sort_groups(struct ht__agg *a, size_t shown)
{
	size_t n = a->ngroups;
	struct sortkey *sk = malloc(n * 2 * sizeof(*sk));
	uint32_t *order = malloc(n * sizeof(*order));
	int rc = sk && order ? 0 : HT_ERR_NOMEM;
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		sk[i] = (struct sortkey){sort_metric(&a->groups[i].c, a->q->sort),
					 a->groups[i].c.total_bytes, (uint32_t)i};
	radix_sortkeys(sk, sk + n, n);
	for (size_t i = 0; i < n; i++)
		order[i] = sk[i].group;
	for (size_t i = 0, j; i < shown && i < n && rc == 0; i = j) {
		for (j = i + 1; j < n && !cmp_sortkeys(&sk[i], &sk[j]); j++)
			;
		if (j - i > 1 && !a->rank)
			rc = rank_texts(a);
		if (j - i > 1 && rc == 0)
			rc = sort_by_text(a, order + i, (uint32_t)(j - i));
	}
	if (rc < 0)
		goto out;
	/* groups[i] = the old groups[order[i]], in place, a cycle at a time
	   (no second array of groups at the peak of the memory). */
	for (size_t i = 0; i < n; i++) {
		if (order[i] == i)
			continue;
		struct group first = a->groups[i];
		size_t j = i;
		for (;;) {
			size_t k = order[j];
			order[j] = (uint32_t)j;
			if (k == i) {
				a->groups[j] = first;
				break;
			}
			a->groups[j] = a->groups[k];
			j = k;
		}
	}
out:
	free(sk);
	free(order);
	return rc;
}

static int cmp_handles(const void *pa, const void *pb, void *ctx)
{
	const struct ht__agg_item *x = pa, *y = pb;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->process != y->process)
		return x->process < y->process ? -1 : 1;
	return (x->heap > y->heap) - (x->heap < y->heap);
}

/* The handle rows: merge (process, heap, stack) entries that pass -requireFrames. */
static int finish_handles(struct ht__agg *a, struct ht__frame_matcher *mr,
			  struct ht__agg_result *res)
{
	struct ht__agg_item *items = calloc(a->hents.len ? a->hents.len : 1, sizeof(*items));
	if (!items)
		return HT_ERR_NOMEM;
	size_t n = 0;
	for (size_t i = 0; i < a->hents.len; i++) {
		const struct hentry *e = &a->hents.v[i];
		if (mr) {
			const uint32_t *frames;
			uint32_t nf = e->stack ? ht_reader_stack(a->r, e->stack, &frames) : 0;
			if (!ht__frame_matcher_any(mr, frames, nf))
				continue;
		}
		const struct ht_process *p = ht_reader_process(a->r, e->process);
		items[n].c = e->c;
		items[n].process = e->process;
		items[n].pid = p ? p->pid : -1;
		items[n].heap = e->heap;
		n++;
	}
	if (n > 1) /* items may be NULL when there are none */
		qsort_r(items, n, sizeof(*items), cmp_handles, a);
	/* Entries of one (process, heap) that differ by stack are now adjacent. */
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (m && items[m - 1].process == items[i].process &&
		    items[m - 1].heap == items[i].heap) {
			counts_sum(&items[m - 1].c, &items[i].c);
			continue;
		}
		items[m++] = items[i];
	}
	for (size_t i = 0; i < m; i++)
		counts_sum(&res->totals, &items[i].c);
	res->items = items;
	res->total_items = m;
	return 0;
}

/*
 * The key of a stack's frames [first, n) grouped by stack without symbols:
 * each frame's text id in key[], the frame in kf[], an inlined frame and its
 * caller (which print the same address) shown once (with symbols every frame
 * is kept: hash_frames()). The reader's frames and the text ids in locals:
 * the stores to key[] could change them for all the compiler knows. 0 or
 * HT_ERR_NOMEM.
 */
static int stack_key(struct ht__agg *a, const uint32_t *frames, uint32_t first, uint32_t n,
		     uint32_t *key, uint32_t *kf, uint32_t *kept_out)
{
	const uint32_t *ft = a->ftext;
	size_t ftn = a->ftext_len;
	uint32_t kept = 0;
	for (uint32_t i = first; i < n; i++) {
		uint32_t f = frames[i];
		uint32_t id = f < ftn ? ft[f] : HT__NO_ID;
		if (id == HT__NO_ID) {
			if ((id = frame_text_id_new(a, f)) == HT__NO_ID)
				return HT_ERR_NOMEM;
			ft = a->ftext; /* grown */
			ftn = a->ftext_len;
		}
		if (kept && key[kept - 1] == id)
			continue;
		kf[kept] = f;
		key[kept++] = id;
	}
	*kept_out = kept;
	return 0;
}

static int finish_stacks(struct ht__agg *a, struct ht__frame_matcher *mc,
			 struct ht__frame_matcher *mr, size_t shown, struct ht__agg_result *res)
{
	enum ht__group grp = a->q->group;
	uint32_t *key = NULL, *kf = NULL;
	size_t key_cap = 0, kf_cap = 0;
	int rc = 0;
	if (a->symbols && (rc = ftext_cover(a, 0)) < 0) /* for hash_frames() */
		return rc;
	for (uint32_t s = 0; s < a->stacks_len; s++) {
		const struct ht__agg_counts *c = &a->stacks[s];
		if (!c->total_count)
			continue;
		const uint32_t *frames = NULL;
		uint32_t n = s ? ht_reader_stack(a->r, s, &frames) : 0;
		if (mr && !ht__frame_matcher_any(mr, frames, n))
			continue;
		counts_sum(&res->totals, c);
		bool keyed = s < a->keys_n; /* by keys_main() */
		uint32_t first = keyed ? a->key_first[s] : ht__frame_matcher_cull(mc, frames, n);
		uint32_t left = n - first;
		if (ht__grow((void **)&key, &key_cap, left, sizeof(*key)) < 0 ||
		    ht__grow((void **)&kf, &kf_cap, left, sizeof(*kf)) < 0) {
			rc = HT_ERR_NOMEM;
			break;
		}
		struct group *g;
		if (grp == HT_GROUP_STACK && a->symbols) {
			/* Every frame kept, in the reader's order: the group can
			   point at them. */
			uint64_t h;
			if (keyed)
				h = a->key_hash[s];
			else if ((rc = hash_frames(a, frames + first, left, &h)) < 0)
				goto out;
			if (!(g = group_for_frames(a, frames + first, left, h))) {
				rc = HT_ERR_NOMEM;
				break;
			}
			goto count;
		}
		uint32_t kept = 0;
		if (grp == HT_GROUP_STACK) {
			if ((rc = stack_key(a, frames, first, n, key, kf, &kept)) < 0)
				goto out;
		} else if (first < n) {
			/* By function or image: the first frame kept is the key. */
			uint32_t id;
			if (grp == HT_GROUP_IMAGE) {
				struct ht__match_frame mf;
				ht__match_frame_from_reader(a->r, frames[first], &mf);
				id = ht__intern_id(&a->in, mf.module_name ? mf.module_name : "?");
			} else {
				id = frame_text_id(a, frames[first]);
			}
			if (id == HT__NO_ID) {
				rc = HT_ERR_NOMEM;
				goto out;
			}
			key[0] = id;
			kf[0] = frames[first];
			kept = 1;
		}
		if (!(g = group_for(a, key, kf, kept))) {
			rc = HT_ERR_NOMEM;
			break;
		}
	count:
		if (g->stack == HT__NO_ID)
			g->stack = s;
		counts_sum(&g->c, c);
	}
out:
	free(key);
	free(kf);
	if (rc < 0)
		return rc;
	if (a->ngroups > 1 &&
	    (rc = sort_groups(a, shown)) < 0) /* groups is NULL when there are none */
		return rc;
	/* Items for the rows shown only (aggregate.h: none is read past count):
	   clang++'s 50 thousand groups made 5 MB of zeroed items for 10 thousand. */
	size_t m = a->ngroups < shown ? a->ngroups : shown;
	res->items = calloc(m ? m : 1, sizeof(*res->items));
	if (!res->items)
		return HT_ERR_NOMEM;
	for (size_t i = 0; i < m; i++) {
		const struct group *g = &a->groups[i];
		struct ht__agg_item *it = &res->items[i];
		it->c = g->c;
		it->stack = g->stack;
		it->frames = g->seq_len ? group_frames(a, g) : NULL;
		it->nframes = g->seq_len;
		if (grp != HT_GROUP_STACK)
			it->key = g->seq_len ? a->in.strs[group_key(a, g, 0)] : NO_STACK_KEY;
	}
	res->total_items = a->ngroups;
	return 0;
}

int ht__agg_finish(struct ht__agg *a, struct ht__agg_result *res)
{
	const struct ht__query *q = a->q;
	struct ht__frame_matcher *mc = NULL, *mr = NULL;
	int rc;
	memset(res, 0, sizeof(*res));
	res->group = q->group;
	res->sort = q->sort;
	res->symbols = a->symbols;
	keys_join(a);
	if (a->keys_n && (rc = a->keys_rc) < 0)
		goto out;
	if (a->keys_mc) { /* the keys' thread's, with what it learned */
		mc = a->keys_mc;
		a->keys_mc = NULL;
	} else if ((rc = ht__frame_matcher_new(&mc, &q->cull, a->r)) < 0) {
		goto out;
	}
	if (q->require.count && (rc = ht__frame_matcher_new(&mr, &q->require, a->r)) < 0)
		goto out;
	uint64_t top = q->top ? q->top : HT_QUERY_DEFAULT_TOP;
	size_t shown = q->totals_only ? 0 : top < SIZE_MAX ? (size_t)top : SIZE_MAX;
	if (q->group == HT_GROUP_HANDLE)
		rc = finish_handles(a, mr, res);
	else
		rc = finish_stacks(a, mc, mr, shown, res);
	if (rc < 0)
		goto out;
	res->count = res->total_items < shown ? res->total_items : shown;
	for (size_t i = 0; i < res->count; i++)
		counts_sum(&res->shown, &res->items[i].c);
out:
	ht__frame_matcher_free(mc);
	ht__frame_matcher_free(mr);
	if (rc < 0)
		ht__agg_result_release(res);
	return rc;
}

void ht__agg_result_release(struct ht__agg_result *res)
{
	free(res->items);
	res->items = NULL;
	res->count = res->total_items = 0;
}
