/*
 * ring_keep.c - the flight recorder (ring_keep.h, docs/modes.md): the newest
 * events in a FIFO of fixed-size blocks, the state at the window's start
 * built from the events dropped out of it, and the writing of a window as a
 * trace whose synthetic prefix makes it self-consistent.
 */
#include "session/ring_keep.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "analysis/commit.h"
#include "analysis/lifetime.h"
#include "base/vec.h"
#include "format/codec.h"
#include "session/live.h"

/* Names longer than this (thread and heap names) are cut in the window. */
#define NAME_MAX_KEPT 255u

/*
 * A block of kept events, packed one after the other (pack() below): about
 * 20 bytes for a heap event instead of the 104 of struct ht_event, so SIZE
 * holds about five times as many. Each block is read from its start, its
 * first event packed against zeros.
 */
struct blk {
	struct blk *next;
	uint32_t used, n;
	uint64_t first_ts, last_ts;
	uint8_t data[];
};

/*
 * What an event is packed against: the previous one of its block. An event
 * is its type and func bytes, then varints: flags, a mask of the fields
 * present (the others are 0 and addr is the previous one's), process, pid
 * and time as differences from the previous event's (zigzag), tid as a
 * difference from pid, then the fields of the mask in struct order (addr
 * as a difference from the previous addr, fd and value zigzag), then the
 * name's length and bytes.
 */
struct pack_ctx {
	uint64_t ts, addr;
	int64_t pid, process;
};

enum {
	PK_STACK = 1 << 0,
	PK_MODULE = 1 << 1,
	PK_HEAP = 1 << 2,
	PK_ADDR = 1 << 3,
	PK_SIZE = 1 << 4,
	PK_OLD_ADDR = 1 << 5,
	PK_OLD_SIZE = 1 << 6,
	PK_PROT = 1 << 7,
	PK_MFLAGS = 1 << 8,
	PK_FD = 1 << 9,
	PK_VALUE = 1 << 10,
	PK_NAME = 1 << 11,
};

/* The most one event takes packed: 2 bytes, 16 varints, the name. */
#define PACK_MAX (2 + 16 * 10 + NAME_MAX_KEPT)

/* Packs ev (and name_len bytes of name) at out; returns the bytes taken. */
static size_t pack(uint8_t *out, struct pack_ctx *c, const struct ht_event *ev, const char *name,
		   uint32_t name_len)
{
	uint8_t *p = out;
	unsigned mask = (ev->stack ? PK_STACK : 0) | (ev->module ? PK_MODULE : 0) |
			(ev->heap ? PK_HEAP : 0) | (ev->addr != c->addr ? PK_ADDR : 0) |
			(ev->size ? PK_SIZE : 0) | (ev->old_addr ? PK_OLD_ADDR : 0) |
			(ev->old_size ? PK_OLD_SIZE : 0) | (ev->prot ? PK_PROT : 0) |
			(ev->mflags ? PK_MFLAGS : 0) | (ev->fd ? PK_FD : 0) |
			(ev->value ? PK_VALUE : 0) | (name_len ? PK_NAME : 0);
	*p++ = ev->type;
	*p++ = ev->func;
	p = ht__put_varint(p, ev->flags);
	p = ht__put_varint(p, mask);
	p = ht__put_varint(p, ht__zigzag((int64_t)ev->process - c->process));
	p = ht__put_varint(p, ht__zigzag((int64_t)ev->pid - c->pid));
	p = ht__put_varint(p, ht__zigzag((int64_t)ev->tid - ev->pid));
	p = ht__put_varint(p, ht__zigzag((int64_t)(ev->ts - c->ts)));
	if (mask & PK_STACK)
		p = ht__put_varint(p, ev->stack);
	if (mask & PK_MODULE)
		p = ht__put_varint(p, ev->module);
	if (mask & PK_HEAP)
		p = ht__put_varint(p, ev->heap);
	if (mask & PK_ADDR)
		p = ht__put_varint(p, ht__zigzag((int64_t)(ev->addr - c->addr)));
	if (mask & PK_SIZE)
		p = ht__put_varint(p, ev->size);
	if (mask & PK_OLD_ADDR)
		p = ht__put_varint(p, ev->old_addr);
	if (mask & PK_OLD_SIZE)
		p = ht__put_varint(p, ev->old_size);
	if (mask & PK_PROT)
		p = ht__put_varint(p, ev->prot);
	if (mask & PK_MFLAGS)
		p = ht__put_varint(p, ev->mflags);
	if (mask & PK_FD)
		p = ht__put_varint(p, ht__zigzag(ev->fd));
	if (mask & PK_VALUE)
		p = ht__put_varint(p, ht__zigzag(ev->value));
	if (mask & PK_NAME) {
		p = ht__put_varint(p, name_len);
		memcpy(p, name, name_len);
		p += name_len;
	}
	c->ts = ev->ts;
	c->addr = ev->addr;
	c->pid = ev->pid;
	c->process = ev->process;
	return (size_t)(p - out);
}

/* A varint of a block: written by pack() in our own memory, so whole and
   not bounds-checked (the trace reader's ht__get_varint is). */
static inline uint64_t get_packed(struct ht__cur *cur)
{
	const uint8_t *p = cur->p;
	uint64_t v = *p & 0x7f;
	for (unsigned shift = 7; *p++ & 0x80; shift += 7)
		v |= (uint64_t)(*p & 0x7f) << shift;
	cur->p = p;
	return v;
}

/* Unpacks the event at cur (written by pack(), so whole; its name, NUL-terminated, into
 * name[NAME_MAX_KEPT + 1]). */
static void unpack(struct ht__cur *cur, struct pack_ctx *c, struct ht_event *ev, char *name,
		   uint32_t *name_len)
{
	/* Every field is set, none by a memset first: a rep stos of the
	   event took half of unpack()'s time (perf, --ring 64M). The context
	   is set from registers, not read back from ev: loads that span the
	   fields' separate stores wait for them to reach the cache. */
	ev->type = *cur->p++;
	ev->func = *cur->p++;
	ev->flags = (uint16_t)get_packed(cur);
	unsigned mask = (unsigned)get_packed(cur);
	uint32_t process = (uint32_t)(c->process + ht__unzigzag(get_packed(cur)));
	int32_t pid = (int32_t)(c->pid + ht__unzigzag(get_packed(cur)));
	ev->process = process;
	ev->pid = pid;
	ev->tid = (int32_t)(pid + ht__unzigzag(get_packed(cur)));
	uint64_t ts = c->ts + (uint64_t)ht__unzigzag(get_packed(cur));
	ev->ts = ts;
	ev->stack = mask & PK_STACK ? (uint32_t)get_packed(cur) : 0;
	ev->module = mask & PK_MODULE ? (uint32_t)get_packed(cur) : 0;
	ev->heap = mask & PK_HEAP ? get_packed(cur) : 0;
	uint64_t addr = c->addr + (mask & PK_ADDR ? (uint64_t)ht__unzigzag(get_packed(cur)) : 0);
	ev->addr = addr;
	ev->size = mask & PK_SIZE ? get_packed(cur) : 0;
	ev->old_addr = mask & PK_OLD_ADDR ? get_packed(cur) : 0;
	ev->old_size = mask & PK_OLD_SIZE ? get_packed(cur) : 0;
	ev->prot = mask & PK_PROT ? (uint32_t)get_packed(cur) : 0;
	ev->mflags = mask & PK_MFLAGS ? (uint32_t)get_packed(cur) : 0;
	ev->fd = mask & PK_FD ? (int32_t)ht__unzigzag(get_packed(cur)) : 0;
	ev->value = mask & PK_VALUE ? (int32_t)ht__unzigzag(get_packed(cur)) : 0;
	ev->name = NULL;
	*name_len = 0;
	if (mask & PK_NAME) {
		*name_len = (uint32_t)get_packed(cur);
		memcpy(name, cur->p, *name_len);
		cur->p += *name_len;
	}
	name[*name_len] = 0;
	c->ts = ts;
	c->addr = addr;
	c->pid = pid;
	c->process = process;
}

/* A process image as it was at the window's start. */
struct pstate {
	int32_t pid;
	uint8_t started, ended;
	uint64_t rss;
};

struct mod_ent {
	uint32_t process, module;
	int32_t tid;
	uint64_t addr, size, bias;
};

struct named_ent { /* a custom heap (heap != 0 or a name) or a thread */
	uint32_t process;
	int32_t tid;
	uint32_t stack;
	uint64_t heap;
	char *name;
};

struct ht__ring_keep {
	struct ht__ring_keep_config cfg;
	struct blk *head, *tail;  /* oldest, newest */
	struct pack_ctx tail_ctx; /* the newest event of tail, to pack the next against */
	uint64_t newest_ts;
	struct ht__ring_keep_stats st;
	struct ht__proctab procs; /* every image's description, by trace index */
	HT_VEC(struct pstate) ps;
	struct ht__life_tracker *lt;
	struct ht__commit_tracker *ct;
	HT_VEC(struct mod_ent) mods;
	HT_VEC(struct named_ent) heaps, threads;
	int32_t crash_pid;
	int crash_sig;
	int err;
};

int ht__ring_keep_new(struct ht__ring_keep **out, const struct ht__ring_keep_config *cfg)
{
	*out = NULL;
	if (!cfg || cfg->max_bytes < HT__RING_KEEP_MIN)
		return HT_ERR_INVALID;
	struct ht__ring_keep *k = calloc(1, sizeof(*k));
	if (!k)
		return HT_ERR_NOMEM;
	k->cfg = *cfg;
	/* Sixteen blocks or more: dropping one drops at most a sixteenth. */
	uint64_t bs = 4096;
	while (bs * 2 <= cfg->max_bytes / 16 && bs < (1u << 20))
		bs *= 2;
	k->st.block_size = bs;
	k->lt = ht__life_new(NULL, NULL);
	k->ct = ht__commit_new(NULL, NULL);
	if (!k->lt || !k->ct) {
		ht__ring_keep_free(k);
		return HT_ERR_NOMEM;
	}
	*out = k;
	return 0;
}

const struct ht__ring_keep_stats *ht__ring_keep_stats(struct ht__ring_keep *k)
{
	struct ht__life_stats const *ls = ht__life_stats(k->lt);
	k->st.state_blocks = ls->live_count;
	k->st.state_ranges = ht__commit_stats(k->ct)->ranges;
	return &k->st;
}

int32_t ht__ring_keep_take_crash(struct ht__ring_keep *k, int *sig)
{
	int32_t pid = k->crash_pid;
	if (sig)
		*sig = k->crash_sig;
	k->crash_pid = 0;
	return pid;
}

static void free_named(struct named_ent *e)
{
	free(e->name);
}

void ht__ring_keep_free(struct ht__ring_keep *k)
{
	if (!k)
		return;
	while (k->head) {
		struct blk *b = k->head;
		k->head = b->next;
		free(b);
	}
	ht__proctab_release(&k->procs);
	ht__vec_release(&k->ps);
	ht__life_free(k->lt);
	ht__commit_free(k->ct);
	ht__vec_release(&k->mods);
	for (size_t i = 0; i < k->heaps.len; i++)
		free_named(&k->heaps.v[i]);
	for (size_t i = 0; i < k->threads.len; i++)
		free_named(&k->threads.v[i]);
	ht__vec_release(&k->heaps);
	ht__vec_release(&k->threads);
	free(k);
}

/* ---- the state at the window's start ---- */

static struct pstate *pstate(struct ht__ring_keep *k, uint32_t process)
{
	if (ht__vec_grow_zero(&k->ps, (size_t)process + 1) < 0)
		return NULL;
	return &k->ps.v[process];
}

/* Index of the entry of (process, key) in v, or -1; key is a tid or heap. */
#define FIND_NAMED(vec, field, proc, key)                                                          \
	({                                                                                         \
		long found_ = -1;                                                                  \
		for (size_t i_ = 0; i_ < (vec).len; i_++)                                          \
			if ((vec).v[i_].process == (proc) && (vec).v[i_].field == (key)) {         \
				found_ = (long)i_;                                                 \
				break;                                                             \
			}                                                                          \
		found_;                                                                            \
	})

static void remove_named(struct ht__ring_keep *k, void *vec_v, size_t *len, long i)
{
	(void)k;
	struct named_ent *v = vec_v;
	free_named(&v[i]);
	v[i] = v[--*len];
}

static int set_name(struct named_ent *e, const char *name, uint32_t len)
{
	char *copy = malloc((size_t)len + 1);
	if (!copy)
		return HT_ERR_NOMEM;
	memcpy(copy, name ? name : "", len);
	copy[len] = 0;
	free(e->name);
	e->name = copy;
	return 0;
}

/* The image ended (exit, or exec replaced it): what it held ends with it. */
static int end_image(struct ht__ring_keep *k, uint32_t process, uint64_t ts)
{
	struct pstate *p = pstate(k, process);
	if (!p)
		return HT_ERR_NOMEM;
	if (p->ended)
		return 0;
	p->ended = 1;
	int rc = ht__life_end_process(k->lt, process, ts);
	ht__commit_end_process(k->ct, process, ts);
	for (size_t i = 0; i < k->mods.len;)
		if (k->mods.v[i].process == process)
			k->mods.v[i] = k->mods.v[--k->mods.len];
		else
			i++;
	for (size_t i = 0; i < k->heaps.len;)
		if (k->heaps.v[i].process == process)
			remove_named(k, k->heaps.v, &k->heaps.len, (long)i);
		else
			i++;
	for (size_t i = 0; i < k->threads.len;)
		if (k->threads.v[i].process == process)
			remove_named(k, k->threads.v, &k->threads.len, (long)i);
		else
			i++;
	return rc;
}

/* An event leaves the window: the state at its start takes it in. */
static int apply(struct ht__ring_keep *k, const struct ht_event *ev, const char *name,
		 uint32_t name_len)
{
	struct pstate *p = pstate(k, ev->process);
	if (!p)
		return HT_ERR_NOMEM;
	if (!p->started && !p->ended) {
		p->started = 1;
		p->pid = ev->pid;
	}
	int rc = 0;
	long i;
	switch (ev->type) {
	case HT_EV_PROCESS_EXEC:
		/* The image it replaced: the pid's earlier one still running
		   (the trace pass's rule, pass.h). */
		for (size_t j = 0; j < k->ps.len && rc >= 0; j++)
			if (j != ev->process && k->ps.v[j].started && !k->ps.v[j].ended &&
			    k->ps.v[j].pid == ev->pid)
				rc = end_image(k, (uint32_t)j, ev->ts);
		break;
	case HT_EV_PROCESS_EXIT:
		rc = end_image(k, ev->process, ev->ts);
		break;
	case HT_EV_THREAD_START:
	case HT_EV_THREAD_NAME:
		i = FIND_NAMED(k->threads, tid, ev->process, ev->tid);
		if (i < 0) {
			struct named_ent e = {.process = ev->process, .tid = ev->tid};
			if (ht__vec_push(&k->threads, e) < 0)
				return HT_ERR_NOMEM;
			i = (long)k->threads.len - 1;
		}
		rc = set_name(&k->threads.v[i], name, name_len);
		break;
	case HT_EV_THREAD_EXIT:
		if ((i = FIND_NAMED(k->threads, tid, ev->process, ev->tid)) >= 0)
			remove_named(k, k->threads.v, &k->threads.len, i);
		break;
	case HT_EV_MODULE_LOAD: {
		struct mod_ent m = {ev->process, ev->module, ev->tid,
				    ev->addr,	 ev->size,   ev->old_addr};
		rc = ht__vec_push(&k->mods, m) < 0 ? HT_ERR_NOMEM : 0;
		break;
	}
	case HT_EV_MODULE_UNLOAD:
		if ((i = FIND_NAMED(k->mods, module, ev->process, ev->module)) >= 0)
			k->mods.v[i] = k->mods.v[--k->mods.len];
		break;
	case HT_EV_HEAP_CREATE: {
		struct named_ent e = {
		    .process = ev->process, .tid = ev->tid, .stack = ev->stack, .heap = ev->heap};
		if (ht__vec_push(&k->heaps, e) < 0)
			return HT_ERR_NOMEM;
		rc = set_name(&k->heaps.v[k->heaps.len - 1], name, name_len);
		break;
	}
	case HT_EV_HEAP_DESTROY:
		if ((i = FIND_NAMED(k->heaps, heap, ev->process, ev->heap)) >= 0)
			remove_named(k, k->heaps.v, &k->heaps.len, i);
		rc = ht__life_event(k->lt, ev);
		break;
	case HT_EV_RSS:
		p->rss = ev->size;
		break;
	default:
		rc = ht__life_event(k->lt, ev);
		if (rc >= 0)
			rc = ht__commit_event(k->ct, ev);
		break;
	}
	return rc;
}

/* Drop the oldest block, its events going into the state. */
static int drop_oldest(struct ht__ring_keep *k)
{
	struct blk *b = k->head;
	int rc = 0;
	struct pack_ctx c = {0};
	struct ht__cur cur = {b->data, b->data + b->used, 0};
	while (cur.p < cur.end && rc >= 0) {
		struct ht_event ev;
		char name[NAME_MAX_KEPT + 1];
		uint32_t name_len;
		unpack(&cur, &c, &ev, name, &name_len);
		rc = apply(k, &ev, name, name_len);
	}
	k->st.dropped += b->n;
	k->st.events -= b->n;
	k->st.bytes -= k->st.block_size;
	k->head = b->next;
	if (!k->head)
		k->tail = NULL;
	free(b);
	if (k->head && k->head->used)
		k->st.window_start_ns = k->head->first_ts;
	else
		k->st.window_start_ns = k->newest_ts;
	return rc;
}

static bool crash_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
	       sig == SIGABRT || sig == SIGTRAP || sig == SIGSYS;
}

/* --ring-time: blocks wholly older than the limit go (never the newest). */
static int drop_aged(struct ht__ring_keep *k)
{
	int rc;
	while (k->cfg.max_ns && k->head != k->tail &&
	       k->newest_ts - k->head->last_ts > k->cfg.max_ns)
		if ((rc = drop_oldest(k)) < 0)
			return k->err = rc;
	return 0;
}

static int keep_event(void *ctx, const struct ht_event *ev, const struct ht_process *proc)
{
	struct ht__ring_keep *k = ctx;
	if (k->err)
		return k->err;
	int rc = 0;
	if ((ev->type == HT_EV_PROCESS_START || ev->type == HT_EV_PROCESS_EXEC) && proc &&
	    (rc = ht__proctab_set(&k->procs, ev->process, proc)) < 0)
		return k->err = rc;
	if (ev->type == HT_EV_PROCESS_EXIT && (ev->flags & HT_EVF_SIGNAL) &&
	    crash_signal(ev->value)) {
		k->crash_pid = ev->pid;
		k->crash_sig = ev->value;
	}
	uint32_t name_len = 0;
	if (ev->name && (ev->type == HT_EV_THREAD_START || ev->type == HT_EV_THREAD_NAME ||
			 ev->type == HT_EV_HEAP_CREATE)) {
		name_len = (uint32_t)strnlen(ev->name, NAME_MAX_KEPT);
	}
	size_t room = k->st.block_size - sizeof(struct blk);
	if (k->tail && k->tail->used + PACK_MAX <= room) {
		/* Room for any event: packed in place (the usual case), against
		   the context itself (a copy of it back, whose loads span pack()'s
		   separate stores, stalled on them: two thirds of this function's
		   samples). */
		struct blk *b = k->tail;
		b->used += (uint32_t)pack(b->data + b->used, &k->tail_ctx, ev, ev->name, name_len);
		b->n++;
		b->last_ts = ev->ts;
		k->newest_ts = ev->ts;
		k->st.events++;
		return drop_aged(k);
	}
	struct pack_ctx c = k->tail_ctx;
	uint8_t packed[PACK_MAX];
	size_t need = pack(packed, &c, ev, ev->name, name_len);
	if (!k->tail || k->tail->used + need > room) {
		/* A new block: the oldest go first while it would not fit. */
		while (k->head && k->st.bytes + k->st.block_size > k->cfg.max_bytes)
			if ((rc = drop_oldest(k)) < 0)
				return k->err = rc;
		struct blk *b = malloc(k->st.block_size);
		if (!b)
			return k->err = HT_ERR_NOMEM;
		b->next = NULL;
		b->used = b->n = 0;
		b->first_ts = ev->ts;
		b->last_ts = 0;
		/* A block's first event is packed against zeros. */
		memset(&c, 0, sizeof(c));
		need = pack(packed, &c, ev, ev->name, name_len);
		if (k->tail)
			k->tail->next = b;
		else
			k->head = b;
		k->tail = b;
		k->st.bytes += k->st.block_size;
		if (k->st.bytes > k->st.peak_bytes)
			k->st.peak_bytes = k->st.bytes;
	}
	struct blk *b = k->tail;
	memcpy(b->data + b->used, packed, need);
	k->tail_ctx = c;
	b->used += (uint32_t)need;
	b->n++;
	b->last_ts = ev->ts;
	k->newest_ts = ev->ts;
	k->st.events++;
	return drop_aged(k);
}

static const struct ht__sink keep_sink = {
    .event = keep_event,
};

const struct ht__sink *ht__ring_keep_sink(void)
{
	return &keep_sink;
}

void ht__ring_keep_path(char *out, size_t n, const char *output, const char *tag)
{
	size_t len = strlen(output);
	if (len > 4 && !strcmp(output + len - 4, ".htr"))
		snprintf(out, n, "%.*s.%s.htr", (int)(len - 4), output, tag);
	else
		snprintf(out, n, "%s.%s", output, tag);
}

/* ---- writing a window ---- */

struct out {
	struct ht__ring_keep *k;
	struct ht__writer *w;
	HT_VEC(uint32_t) map; /* keeper's process index -> trace index + 1 */
	uint32_t next;
	uint64_t synthetic;
	int rc;
};

static uint32_t *map_slot(struct out *o, uint32_t process)
{
	if (ht__vec_grow_zero(&o->map, (size_t)process + 1) < 0)
		return NULL;
	return &o->map.v[process];
}

/* The description of image process with its parent's index in this trace. */
static struct ht_process describe(struct out *o, uint32_t process)
{
	struct ht_process d = {.parent = UINT32_MAX};
	if (process < o->k->procs.n && o->k->procs.v[process])
		d = o->k->procs.v[process]->p;
	if (d.parent != UINT32_MAX)
		d.parent = d.parent < o->map.len && o->map.v[d.parent] ? o->map.v[d.parent] - 1
								       : UINT32_MAX;
	return d;
}

/* The process_start of an image the window names but did not see start. */
static int synth_start(struct out *o, uint32_t process, int32_t pid, uint64_t ts)
{
	uint32_t *m = map_slot(o, process);
	if (!m)
		return HT_ERR_NOMEM;
	struct ht_process d = describe(o, process);
	*m = ++o->next;
	struct ht_event ev = {.type = HT_EV_PROCESS_START,
			      .flags = HT_EVF_SYNTHETIC,
			      .process = *m - 1,
			      .pid = pid,
			      .tid = pid,
			      .ts = ts};
	o->synthetic++;
	return ht__writer_event(o->w, &ev, &d);
}

/* ev with its process in this trace's numbering (made when new). */
static int put(struct out *o, struct ht_event ev)
{
	int rc;
	uint32_t *m = map_slot(o, ev.process);
	if (!m)
		return HT_ERR_NOMEM;
	if (ev.type == HT_EV_PROCESS_START || ev.type == HT_EV_PROCESS_EXEC) {
		uint32_t old = ev.process;
		struct ht_process d = describe(o, old);
		if (!*m)
			*m = ++o->next;
		ev.process = *m - 1;
		return ht__writer_event(o->w, &ev, &d);
	}
	if (!*m && (rc = synth_start(o, ev.process, ev.pid, ev.ts)) < 0)
		return rc;
	ev.process = o->map.v[ev.process] - 1;
	return ht__writer_event(o->w, &ev, NULL);
}

/* put() of an event of the window's prefix: flagged and counted synthetic. */
static int put_synthetic(struct out *o, struct ht_event ev)
{
	o->synthetic++;
	ev.flags |= HT_EVF_SYNTHETIC;
	return put(o, ev);
}

struct lives {
	HT_VEC(struct ht__life) v;
	int err;
};

static void collect_life(void *ctx, const struct ht__life *l)
{
	struct lives *c = ctx;
	if (ht__vec_push(&c->v, *l) < 0)
		c->err = HT_ERR_NOMEM;
}

static int life_cmp(const void *a, const void *b)
{
	const struct ht__life *x = a, *y = b;
	if (x->alloc_ts != y->alloc_ts)
		return x->alloc_ts < y->alloc_ts ? -1 : 1;
	if (x->process != y->process)
		return x->process < y->process ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

struct ranges {
	HT_VEC(struct ht__commit) v;
	int err;
};

static void collect_range(void *ctx, const struct ht__commit *c)
{
	struct ranges *r = ctx;
	if (ht__vec_push(&r->v, *c) < 0)
		r->err = HT_ERR_NOMEM;
}

static int range_cmp(const void *a, const void *b)
{
	const struct ht__commit *x = a, *y = b;
	if (x->commit_ts != y->commit_ts)
		return x->commit_ts < y->commit_ts ? -1 : 1;
	if (x->process != y->process)
		return x->process < y->process ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int32_t pid_of(const struct ht__ring_keep *k, uint32_t process)
{
	return process < k->ps.len ? k->ps.v[process].pid : 0;
}

/* The state at the window's start W, as events stamped W. */
static int write_prefix(struct out *o, uint64_t w)
{
	struct ht__ring_keep *k = o->k;
	int rc = 0;
	for (uint32_t i = 0; i < k->ps.len && rc >= 0; i++)
		if (k->ps.v[i].started && !k->ps.v[i].ended)
			rc = synth_start(o, i, k->ps.v[i].pid, w);
	for (size_t i = 0; i < k->mods.len && rc >= 0; i++) {
		const struct mod_ent *m = &k->mods.v[i];
		struct ht_event ev = {.type = HT_EV_MODULE_LOAD,
				      .process = m->process,
				      .pid = pid_of(k, m->process),
				      .tid = m->tid,
				      .ts = w,
				      .module = m->module,
				      .addr = m->addr,
				      .size = m->size,
				      .old_addr = m->bias};
		rc = put_synthetic(o, ev);
	}
	for (size_t i = 0; i < k->heaps.len && rc >= 0; i++) {
		const struct named_ent *h = &k->heaps.v[i];
		struct ht_event ev = {.type = HT_EV_HEAP_CREATE,
				      .process = h->process,
				      .pid = pid_of(k, h->process),
				      .tid = h->tid,
				      .ts = w,
				      .stack = h->stack,
				      .heap = h->heap,
				      .name = h->name};
		rc = put_synthetic(o, ev);
	}
	for (size_t i = 0; i < k->threads.len && rc >= 0; i++) {
		const struct named_ent *t = &k->threads.v[i];
		struct ht_event ev = {.type = HT_EV_THREAD_START,
				      .process = t->process,
				      .pid = pid_of(k, t->process),
				      .tid = t->tid,
				      .ts = w,
				      .name = t->name};
		rc = put_synthetic(o, ev);
	}
	struct ranges rs = {0};
	ht__commit_each_live(k->ct, collect_range, &rs);
	if (rs.err)
		rc = rs.err;
	if (rs.v.len)
		qsort(rs.v.v, rs.v.len, sizeof(*rs.v.v), range_cmp);
	for (size_t i = 0; i < rs.v.len && rc >= 0; i++) {
		const struct ht__commit *c = &rs.v.v[i];
		struct ht_event ev = {.type = HT_EV_MMAP,
				      .func = c->func,
				      .flags = c->unseen ? HT_EVF_UNSEEN : 0,
				      .process = c->process,
				      .pid = pid_of(k, c->process),
				      .tid = c->tid,
				      .ts = w,
				      .stack = c->stack,
				      .addr = c->addr,
				      .size = c->size,
				      .prot = PROT_READ | PROT_WRITE,
				      .mflags = MAP_PRIVATE | MAP_ANONYMOUS,
				      .fd = -1};
		rc = put_synthetic(o, ev);
	}
	ht__vec_release(&rs.v);
	struct lives ls = {0};
	ht__life_each_live(k->lt, collect_life, &ls);
	if (ls.err && rc >= 0)
		rc = ls.err;
	if (ls.v.len)
		qsort(ls.v.v, ls.v.len, sizeof(*ls.v.v), life_cmp);
	for (size_t i = 0; i < ls.v.len && rc >= 0; i++) {
		const struct ht__life *l = &ls.v.v[i];
		struct ht_event ev = {.type = HT_EV_ALLOC,
				      .func = l->func,
				      .process = l->process,
				      .pid = pid_of(k, l->process),
				      .tid = l->tid,
				      .ts = w,
				      .stack = l->stack,
				      .heap = l->heap,
				      .addr = l->addr,
				      .size = l->size};
		rc = put_synthetic(o, ev);
	}
	ht__vec_release(&ls.v);
	for (uint32_t i = 0; i < k->ps.len && rc >= 0; i++) {
		const struct pstate *p = &k->ps.v[i];
		if (!p->started || p->ended || !p->rss)
			continue;
		struct ht_event ev = {.type = HT_EV_RSS,
				      .process = i,
				      .pid = p->pid,
				      .tid = p->pid,
				      .ts = w,
				      .size = p->rss};
		rc = put_synthetic(o, ev);
	}
	return rc;
}

int ht__ring_keep_write(struct ht__ring_keep *k, struct ht__session *s, struct ht__output *o,
			struct ht__trace_meta meta, struct ht__ring_keep_result *res)
{
	if (k->err)
		return k->err;
	char host[256];
	ht__session_meta_fill(s, &meta, host, sizeof(host));
	struct out out = {.k = k};
	int rc = ht__writer_open_fd(&out.w, o->fd, &meta);
	if (rc < 0) {
		ht__output_abort(o);
		return rc;
	}
	o->fd = -1; /* the writer's */
	uint64_t w = k->st.dropped ? k->st.window_start_ns : 0;
	if (meta.ts_unit_ns > 1) /* as the writer stores times: META says what events say */
		w -= w % meta.ts_unit_ns;
	rc = ht__session_defs_to(s, ht__sink_writer(), out.w);
	if (rc >= 0)
		rc = write_prefix(&out, w);
	uint64_t kept = 0;
	for (const struct blk *b = k->head; b && rc >= 0; b = b->next) {
		struct pack_ctx c = {0};
		struct ht__cur cur = {b->data, b->data + b->used, 0};
		while (cur.p < cur.end && rc >= 0) {
			struct ht_event ev;
			char name[NAME_MAX_KEPT + 1];
			uint32_t name_len;
			unpack(&cur, &c, &ev, name, &name_len);
			if (name_len || ev.type == HT_EV_THREAD_START ||
			    ev.type == HT_EV_THREAD_NAME || ev.type == HT_EV_HEAP_CREATE)
				ev.name = name;
			rc = put(&out, ev);
			kept++;
		}
	}
	if (rc >= 0)
		rc = ht__session_symbols_to(s, ht__sink_writer(), out.w);
	ht__vec_release(&out.map);
	if (rc < 0) {
		ht__writer_abort(out.w);
		ht__output_abort(o);
		return rc;
	}
	uint64_t lossy, no_buffer, in_handler;
	ht__session_losses_now(s, &lossy, &no_buffer, &in_handler);
	ht__writer_set_losses(out.w, lossy, no_buffer, in_handler);
	ht__writer_set_window(out.w, w, k->st.dropped, k->cfg.max_bytes, k->cfg.max_ns);
	rc = ht__writer_finish(out.w, k->newest_ts, lossy + no_buffer + in_handler, 0);
	if (rc < 0) {
		ht__output_abort(o);
		return rc;
	}
	char why[512];
	if ((rc = ht__output_commit(o, why, sizeof(why))) < 0)
		return rc;
	if (res)
		*res = (struct ht__ring_keep_result){kept, out.synthetic, k->st.dropped, w};
	return 0;
}
