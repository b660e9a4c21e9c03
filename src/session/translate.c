/*
 * translate.c - turns ring records into trace definitions and events: (pid,
 * instance) to a process index, per-instance module indices to trace module
 * ids (one per path + build-id), stack frames to physical frame ids (one per
 * module + address) and recorder stack ids to deduplicated trace stack ids.
 * Lookups go through hash tables; nothing is allocated per event.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/vec.h"
#include "base/procfs.h"
#include "session/internal.h"

/* Recorder stack ids above this are refused (a corrupt record, not a program). */
#define STACK_ID_LIMIT (1u << 28)

static int sink_fail(struct ht__session *s, int rc)
{
	if (rc < 0 && !s->sink_err)
		s->sink_err = rc;
	return rc;
}

/* Inlined: it is most of what an allocation or a free costs here besides the
   sink. */
static inline __attribute__((always_inline)) int
emit(struct ht__session *s, const struct ht_event *ev, const struct ht_process *proc)
{
	s->stats.events++;
	if (!s->sink || !s->sink->event)
		return 0;
	return sink_fail(s, s->sink->event(s->sink_ctx, ev, proc));
}

/* ns since t0, never going back: the sink wants time order. */
static uint64_t rel_ts(struct ht__session *s, uint64_t ts)
{
	uint64_t t0 = s->hdr->t0_ns;
	uint64_t r = ts > t0 ? ts - t0 : 0;
	if (r < s->last_ts) {
		s->stats.late++;
		r = s->last_ts;
	}
	s->last_ts = r;
	return r;
}

/* ---- processes ---- */

struct proc_key {
	int32_t pid;
	uint32_t instance;
};

static uint32_t proc_key_hash(int32_t pid, uint32_t instance)
{
	struct proc_key k = {pid, instance};
	return ht__hash_bytes(&k, sizeof(k), 0);
}

/* The index of image (pid, instance), or UINT32_MAX. Out of line like the
   lookups below: they are rare, and the per-record paths stay small. */
static __attribute__((noinline)) uint32_t proc_by_key(const struct ht__session *s, int32_t pid,
						      uint32_t instance)
{
	uint32_t h = proc_key_hash(pid, instance);
	const struct ht__hindex *ix = &s->proc_by_key;
	for (uint32_t *sl = ht__hindex_find(ix, h); *sl; sl = ht__hindex_next(ix, sl)) {
		const struct ht__proc *p = s->procs[*sl - 1];
		if (ht__hindex_hash(ix, sl) == h && p->pid == pid && p->instance == instance)
			return *sl - 1;
	}
	return UINT32_MAX;
}

static uint32_t pid_hash(int32_t pid)
{
	return ht__hash_bytes(&pid, sizeof(pid), 1);
}

/* The slot of pid's newest image in proc_by_pid, holding 0 when none. */
static __attribute__((noinline)) uint32_t *proc_pid_slot(const struct ht__session *s, int32_t pid)
{
	uint32_t h = pid_hash(pid);
	const struct ht__hindex *ix = &s->proc_by_pid;
	uint32_t *sl = ht__hindex_find(ix, h);
	for (; *sl; sl = ht__hindex_next(ix, sl))
		if (ht__hindex_hash(ix, sl) == h && s->procs[*sl - 1]->pid == pid)
			break;
	return sl;
}

struct ht__proc *ht__proc_by_pid(struct ht__session *s, int32_t pid)
{
	uint32_t *sl = proc_pid_slot(s, pid);
	return *sl ? s->procs[*sl - 1] : NULL;
}

static inline uint32_t proc_index(const struct ht__session *s, const struct ht__proc *p)
{
	(void)s;
	return p->index;
}

static int32_t ppid_of(int32_t pid)
{
	char buf[512];
	return ht__proc_stat_read(pid, buf, sizeof(buf)) < 0 ? 0 : ht__proc_stat_ppid(buf);
}

/*
 * A new process image: into the tables, then its PROCESS_START (or EXEC when
 * the pid already had a traced image) with its description. args holds
 * args_len bytes of NUL-separated arguments.
 */
static int new_proc(struct ht__session *s, int32_t pid, int32_t ppid, uint32_t instance,
		    uint32_t flags, const char *exe, const char *args, uint32_t args_len,
		    uint64_t ts, uint32_t *out)
{
	if (ht__grow32((void **)&s->procs, &s->procs_cap, (size_t)s->nprocs + 1,
		       sizeof(*s->procs)) < 0)
		return HT_ERR_NOMEM;
	struct ht__proc *p = calloc(1, sizeof(*p));
	if (!p)
		return HT_ERR_NOMEM;
	p->pid = pid;
	p->ppid = ppid;
	p->instance = instance;
	p->flags = flags & (HT_PROCF_ROOT | HT_PROCF_FORK | HT_PROCF_EXEC | HT_PROCF_ATTACHED |
			    HT_PROCF_UNSEEN);

	struct ht__proc *prev = ht__proc_by_pid(s, pid);
	struct ht__proc *parent = ppid > 0 ? ht__proc_by_pid(s, ppid) : NULL;
	uint32_t idx = s->nprocs;
	p->index = idx;
	int rc;
	uint32_t *pid_slot = prev ? proc_pid_slot(s, pid) : NULL;
	if ((rc = ht__hindex_insert_kept(&s->proc_by_key, proc_key_hash(pid, instance), idx)) < 0 ||
	    (!prev && (rc = ht__hindex_insert_kept(&s->proc_by_pid, pid_hash(pid), idx)) < 0)) {
		free(p);
		return rc;
	}
	if (prev) /* the pid's newest image is this one now */
		*pid_slot = idx + 1;
	s->procs[s->nprocs++] = p;
	s->stats.processes = s->nprocs;
	/* An image that started before its pid was reaped is that child: the
	   pid cannot be used again before the reap. */
	for (uint32_t k = 0; k < 8 && k < s->nreaped_early; k++)
		if (s->reaped_early[k].pid == pid && ts < s->reaped_early[k].ns) {
			p->dead = true;
			p->gone_ns = s->reaped_early[k].ns;
		}
	bool prev_exited = prev && prev->exited;
	if (prev) {
		/* exec (or a reused pid): the older image writes nothing more, so
		   its counters in the snapshot region are final: a snapshot of it
		   alone, as at an exit (its records, stamped before, are merged). */
		prev->replaced = true;
		prev->dead = true;
		if (!prev_exited && (rc = ht__snap_exited(s, prev)) < 0)
			return rc;
		if (!(p->flags & HT_PROCF_EXEC) && !prev->exited) {
			prev->exited = true; /* no number known: the reader shows it ended */
			/* Unless it said one, held until its death (on_exit_rec). */
			if (prev->exit_held) {
				struct ht_event xev = {.type = HT_EV_PROCESS_EXIT,
						       .process = proc_index(s, prev),
						       .pid = pid,
						       .tid = pid,
						       .value = prev->held_value,
						       .ts = rel_ts(s, ts)};
				if ((rc = emit(s, &xev, NULL)) < 0)
					return rc;
			}
		}
	}

	/* argv: split the NUL-separated bytes; a missing final NUL is tolerated. */
	const char *stack_argv[64];
	const char **argv = stack_argv;
	uint32_t argc = 0;
	for (uint32_t i = 0; i < args_len; i++)
		if (args[i] == 0 || i + 1 == args_len)
			argc++;
	char *copy = NULL;
	if (argc > 64) {
		argv = malloc(argc * sizeof(*argv));
		if (!argv)
			return HT_ERR_NOMEM;
	}
	if (args_len && args[args_len - 1] != 0) {
		copy = malloc(args_len + 1);
		if (!copy) {
			if (argv != stack_argv)
				free(argv);
			return HT_ERR_NOMEM;
		}
		memcpy(copy, args, args_len);
		copy[args_len] = 0;
		args = copy;
	}
	uint32_t a = 0;
	for (uint32_t i = 0; i < args_len && a < argc; a++) {
		argv[a] = args + i;
		i += (uint32_t)strnlen(args + i, args_len - i) + 1;
	}

	struct ht_process hp = {.pid = pid,
				.ppid = ppid,
				.parent = parent ? proc_index(s, parent) : UINT32_MAX,
				.flags = p->flags,
				.exe = exe,
				.argc = a,
				.argv = (const char *const *)argv};
	/* An exec whose earlier image was never traced (a vfork child, an
	   untraced program) starts a process as far as the trace knows. */
	if (!prev || prev_exited)
		p->flags &= ~HT_PROCF_EXEC;
	hp.flags = p->flags;
	struct ht_event ev = {.type = (p->flags & HT_PROCF_EXEC) ? HT_EV_PROCESS_EXEC
								 : HT_EV_PROCESS_START,
			      .process = idx,
			      .pid = pid,
			      .tid = pid};
	ev.ts = hp.start_ts = rel_ts(s, ts);
	rc = emit(s, &ev, &hp);
	if (argv != stack_argv)
		free(argv);
	free(copy);
	*out = idx;
	return rc;
}

/*
 * A record of an image never introduced (its PROCESS_START was lost, or the
 * record is older than the session knows): describe it from /proc.
 */
static int unknown_proc(struct ht__session *s, int32_t pid, uint32_t instance, uint64_t ts,
			uint32_t *out)
{
	char p[64], exe[PATH_MAX];
	snprintf(p, sizeof(p), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(p, exe, sizeof(exe) - 1);
	if (n < 0)
		n = 0;
	exe[n] = 0;
	return new_proc(s, pid, ppid_of(pid), instance, 0, n ? exe : "?", NULL, 0, ts, out);
}

static int slot_proc(struct ht__session *s, struct ht__slot *sl, uint64_t ts, struct ht__proc **out)
{
	if (!sl->proc) {
		uint32_t i = proc_by_key(s, sl->pid, sl->instance);
		if (i == UINT32_MAX) {
			int rc = unknown_proc(s, sl->pid, sl->instance, ts, &i);
			if (rc < 0)
				return rc;
		}
		sl->proc = i + 1;
	}
	*out = s->procs[sl->proc - 1];
	return 0;
}

/* The image of loss slot l, or UINT32_MAX when the session never saw it. */
static uint32_t loss_owner(struct ht__session *s, struct ht__shm_loss *l, int32_t pid)
{
	return proc_by_key(s, pid, l->instance);
}

/* Hands the counts of loss slot l to the sink, for process image pi. */
static int take_loss(struct ht__session *s, struct ht__shm_loss *l, uint32_t pi)
{
	if (!s->sink || !s->sink->loss)
		return 0;
	uint64_t t0 = s->hdr->t0_ns;
	uint64_t first = atomic_load(&l->first_ns);
	uint64_t untraced = atomic_load(&l->untraced_ns);
	struct ht_process p = {
	    .lost_lossy = atomic_load(&l->n[HT_LOSS_LOSSY]),
	    .lost_no_buffer = atomic_load(&l->n[HT_LOSS_NO_BUFFER]),
	    .lost_in_handler = atomic_load(&l->n[HT_LOSS_IN_HANDLER]),
	    .lost_from_ts = first > t0 ? first - t0 : 0,
	    .events_untraced = atomic_load(&l->n[HT_LOSS_UNTRACED]),
	    .untraced_from_ts = untraced > t0 ? untraced - t0 : 0,
	};
	return s->sink->loss(s->sink_ctx, s->procs[pi]->index, &p);
}

/*
 * The loss table (docs/session-protocol.md, "Loss by process"), read once
 * at the end, as late as possible: events of processes still running after
 * the recorders stopped are counted until here. Then DONE tells recorders
 * to stop counting. A slot of an image the session never saw is left out
 * (its events stay in the trace-wide counters only).
 */
int ht__translate_losses(struct ht__session *s)
{
	atomic_store_explicit(&s->hdr->state, HT_SESSION_DONE, memory_order_release);
	struct ht__shm_loss *tab = ht__shm_losses(s->hdr);
	for (uint32_t i = 0; i < HT_LOSS_SLOTS; i++) {
		int32_t pid = atomic_load_explicit(&tab[i].pid, memory_order_acquire);
		uint32_t pi = pid > 0 ? loss_owner(s, &tab[i], pid) : UINT32_MAX;
		int rc = pi == UINT32_MAX ? 0 : take_loss(s, &tab[i], pi);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * Slots of images that are gone (dead, or replaced by exec) count nothing
 * more: their counts go to the sink now and the slot is free for the next
 * image that loses an event, so any number of processes in a session are
 * counted each on its own, as long as no more than HT_LOSS_SLOTS of them
 * lose events between two ticks. The slot is emptied before its pid is
 * given back with release ordering: a recorder that claims it starts from 0.
 */
int ht__losses_reclaim(struct ht__session *s)
{
	struct ht__shm_loss *tab = ht__shm_losses(s->hdr);
	for (uint32_t i = 0; i < HT_LOSS_SLOTS; i++) {
		int32_t pid = atomic_load_explicit(&tab[i].pid, memory_order_acquire);
		uint32_t pi = pid > 0 ? loss_owner(s, &tab[i], pid) : UINT32_MAX;
		if (pi == UINT32_MAX || !s->procs[pi]->dead)
			continue;
		int rc = take_loss(s, &tab[i], pi);
		if (rc < 0)
			return rc;
		for (unsigned c = 0; c < HT_LOSS_CAUSES; c++)
			atomic_store_explicit(&tab[i].n[c], 0, memory_order_relaxed);
		atomic_store_explicit(&tab[i].first_ns, 0, memory_order_relaxed);
		atomic_store_explicit(&tab[i].untraced_ns, 0, memory_order_relaxed);
		tab[i].instance = 0;
		atomic_store_explicit(&tab[i].pid, 0, memory_order_release);
	}
	return 0;
}

/* ---- modules, frames, stacks ---- */

struct mod_key {
	const char *path;
	const uint8_t *bid;
	uint32_t bid_len;
};

static bool mod_eq(const struct ht__module_ent *m, const struct mod_key *k)
{
	return m->build_id_len == k->bid_len && !memcmp(m->build_id, k->bid, k->bid_len) &&
	       !strcmp(m->path, k->path);
}

static int module_intern(struct ht__session *s, const char *path, const uint8_t *bid,
			 uint32_t bid_len, uint32_t *out)
{
	struct mod_key k = {path, bid, bid_len};
	uint32_t h = ht__hash_bytes(path, strlen(path), ht__hash_bytes(bid, bid_len, 2));
	for (uint32_t *sl = ht__hindex_find(&s->mod_tab, h); *sl;
	     sl = ht__hindex_next(&s->mod_tab, sl)) {
		if (ht__hindex_hash(&s->mod_tab, sl) == h && mod_eq(&s->mods[*sl - 1], &k)) {
			*out = *sl - 1;
			return 0;
		}
	}
	if (ht__grow32((void **)&s->mods, &s->mods_cap, (size_t)s->nmods + 1, sizeof(*s->mods)) < 0)
		return HT_ERR_NOMEM;
	struct ht__module_ent *m = &s->mods[s->nmods];
	memset(m, 0, sizeof(*m));
	m->path = strdup(path);
	if (!m->path)
		return HT_ERR_NOMEM;
	m->build_id_len = (uint8_t)bid_len;
	memcpy(m->build_id, bid, bid_len);
	uint32_t id = s->nmods;
	int rc = ht__hindex_insert_kept(&s->mod_tab, h, id);
	if (rc < 0) {
		free(m->path);
		return rc;
	}
	s->nmods++;
	s->stats.modules = s->nmods;
	*out = id;
	if (s->sink && s->sink->module)
		return sink_fail(s, s->sink->module(s->sink_ctx, id, path, bid, bid_len));
	return 0;
}

/*
 * Frames and stacks are looked up once per frame of every new recorder stack
 * (thousands of frames a second in an interpreter), so their indexes are
 * ht__hindex with the comparison inline and word-wise hashes.
 */
static inline uint64_t frame_hash(uint32_t module, uint64_t rel)
{
	return ht__mix64(rel ^ (uint64_t)module << 40);
}

static uint64_t frame_rehash(const void *ctx, uint32_t id)
{
	const struct ht__session *s = ctx;
	return frame_hash(s->frames[id].module, s->frames[id].rel);
}

static int frame_intern(struct ht__session *s, uint32_t module, uint64_t rel, uint32_t *out)
{
	uint64_t h = frame_hash(module, rel);
	for (uint32_t *slot = ht__hindex_find(&s->frame_ix, h); *slot;
	     slot = ht__hindex_next(&s->frame_ix, slot)) {
		const struct ht__frame_key *f = &s->frames[*slot - 1];
		if (f->rel == rel && f->module == module) {
			*out = *slot - 1;
			return 0;
		}
	}
	if (ht__grow32((void **)&s->frames, &s->frames_cap, (size_t)s->nframes + 1,
		       sizeof(*s->frames)) < 0)
		return HT_ERR_NOMEM;
	uint32_t id = s->nframes;
	s->frames[id] = (struct ht__frame_key){module, rel};
	int rc = ht__hindex_insert(&s->frame_ix, h, id, frame_rehash, s);
	if (rc < 0)
		return rc;
	s->nframes++;
	s->stats.frames = s->nframes;
	*out = id;
	if (s->sink && s->sink->frame)
		return sink_fail(s, s->sink->frame(s->sink_ctx, id, module, rel));
	return 0;
}

/* A stack's hash: FNV-1a over its frame ids from the outermost one (so a
   stack's hash up to a frame is that of every stack sharing its outer
   frames: on_stack() takes it from the last stack), then its length. The
   index keeps each stack's hash: growing it hashes no stack again. */
#define STACK_HASH0 0xcbf29ce484222325ull
static inline uint64_t stack_hash_step(uint64_t h, uint32_t frame)
{
	return (h ^ frame) * 0x100000001b3ull;
}

static inline uint64_t stack_hash_end(uint64_t h, uint32_t n)
{
	return ht__mix64(h ^ (uint64_t)n << 32);
}

/* The trace stack of frames (n ids, innermost first, h their stack_hash()). */
static int stack_intern(struct ht__session *s, const uint32_t *frames, uint32_t n, uint64_t h,
			uint32_t *out)
{
	for (uint32_t *slot = ht__hindex_find(&s->stack_ix, h); *slot;
	     slot = ht__hindex_next(&s->stack_ix, slot)) {
		uint32_t id = *slot - 1;
		if (ht__hindex_hash(&s->stack_ix, slot) == (uint32_t)h && s->stack_len[id] == n &&
		    !memcmp(s->stack_frames + s->stack_off[id], frames, n * sizeof(uint32_t))) {
			*out = id;
			return 0;
		}
	}
	/* ids start at 1: slot 0 of the arrays is unused */
	if (ht__grow32((void **)&s->stack_off, &s->stacks_cap, (size_t)s->nstacks + 2,
		       sizeof(*s->stack_off)) < 0 ||
	    ht__grow32((void **)&s->stack_len, &s->stack_len_cap, (size_t)s->nstacks + 2,
		       sizeof(*s->stack_len)) < 0 ||
	    ht__grow((void **)&s->stack_frames, &s->stack_frames_cap, s->stack_frames_n + n,
		     sizeof(*s->stack_frames)) < 0)
		return HT_ERR_NOMEM;
	uint32_t id = s->nstacks + 1;
	s->stack_off[id] = s->stack_frames_n;
	s->stack_len[id] = n;
	memcpy(s->stack_frames + s->stack_frames_n, frames, n * sizeof(uint32_t));
	int rc = ht__hindex_insert_kept(&s->stack_ix, h, id);
	if (rc < 0)
		return rc;
	s->stack_frames_n += n;
	s->nstacks = id;
	s->stats.stacks = s->nstacks;
	*out = id;
	if (s->sink && s->sink->stack)
		return sink_fail(s, s->sink->stack(s->sink_ctx, id, frames, n));
	return 0;
}

/* Room in stack_map and stack_owner (one capacity, zero past what they held)
   for recorder stack id rec_id. Out of line: map_stack is on every new stack. */
static __attribute__((noinline)) int grow_stack_map(struct ht__session *s, uint32_t rec_id)
{
	uint32_t c1 = s->stack_map_cap, c2 = c1;
	size_t need = rec_id < 4096 ? 4096 : (size_t)rec_id + 1;
	if (ht__grow32_zero((void **)&s->stack_map, &c1, need, sizeof(*s->stack_map)) < 0 ||
	    ht__grow32_zero((void **)&s->stack_owner, &c2, need, sizeof(*s->stack_owner)) < 0)
		return HT_ERR_NOMEM;
	s->stack_map_cap = c1;
	return 0;
}

static int map_stack(struct ht__session *s, uint32_t rec_id, uint32_t trace_id,
		     const struct ht__proc *owner)
{
	/* Ids come from the header's counter: one above it is a damaged record,
	   and must not make the map grow. */
	if (rec_id == 0 || rec_id >= STACK_ID_LIMIT ||
	    rec_id >= atomic_load(&s->hdr->next_stack_id))
		return 0;
	if (rec_id >= s->stack_map_cap && grow_stack_map(s, rec_id) < 0)
		return HT_ERR_NOMEM;
	s->stack_map[rec_id] = trace_id;
	s->stack_owner[rec_id] = owner->index + 1;
	return 0;
}

static inline uint32_t lookup_stack(const struct ht__session *s, uint32_t rec_id)
{
	return rec_id < s->stack_map_cap ? s->stack_map[rec_id] : 0;
}

void ht__stack_of(const struct ht__session *s, uint32_t rec_id, uint32_t *trace_id,
		  struct ht__proc **owner)
{
	*trace_id = lookup_stack(s, rec_id);
	*owner = *trace_id && s->stack_owner[rec_id] ? s->procs[s->stack_owner[rec_id] - 1] : NULL;
}

int ht__emit(struct ht__session *s, const struct ht_event *ev)
{
	return emit(s, ev, NULL);
}

static int on_stack(struct ht__session *s, struct ht__proc *p, const struct ht__rec *rec)
{
	const struct ht__rec_stack *st = (const void *)rec;
	uint32_t n = st->nframes;
	if (n > HT_MAX_FRAMES || sizeof(*st) + (uint64_t)n * 12 > rec->len)
		return 1;
	const uint64_t *rel = (const uint64_t *)(st + 1);
	const uint32_t *mod = (const uint32_t *)(rel + n);
	uint32_t ids[HT_MAX_FRAMES];
	/* Frames are innermost first: the outer ones this stack shares with the
	   last stack of its image keep their ids and their part of the hash
	   without a lookup (an interpreter's stacks share dozens; python json's
	   are about 190 frames deep). The last stack is kept outermost first, so
	   only what differs is written back. */
	struct ht__session_last_stack *ls = &s->last_stack;
	uint32_t shared = 0;
	if (ls->proc == p) {
		uint32_t most = n < ls->n ? n : ls->n;
		while (shared < most && rel[n - 1 - shared] == ls->rel[shared] &&
		       mod[n - 1 - shared] == ls->mod[shared]) {
			ids[n - 1 - shared] = ls->ids[shared];
			shared++;
		}
	}
	uint32_t todo = n - shared;
	for (uint32_t i = 0; i < todo; i++) {
		uint32_t m = HT_MODULE_NONE;
		if (mod[i] != HT_MODULE_UNKNOWN && mod[i] < p->nmods && p->mods[mod[i]])
			m = p->mods[mod[i]] - 1;
		int rc = frame_intern(s, m, rel[i], &ids[i]);
		if (rc < 0)
			return rc;
	}
	uint64_t h = shared ? ls->hash[shared - 1] : STACK_HASH0;
	for (uint32_t k = shared; k < n; k++) {
		ls->mod[k] = mod[n - 1 - k];
		ls->rel[k] = rel[n - 1 - k];
		ls->ids[k] = ids[n - 1 - k];
		ls->hash[k] = h = stack_hash_step(h, ids[n - 1 - k]);
	}
	ls->proc = p;
	ls->n = n;
	uint32_t id;
	int rc = stack_intern(s, ids, n, stack_hash_end(h, n), &id);
	if (rc < 0)
		return rc;
	return map_stack(s, rec->stack, id, p);
}

static int on_module(struct ht__session *s, struct ht__proc *p, struct ht_event *ev,
		     const struct ht__rec *rec)
{
	const struct ht__rec_module *m = (const void *)rec;
	char path[PATH_MAX];
	if (sizeof(*m) + (uint64_t)m->path_len > rec->len || m->path_len >= sizeof(path) ||
	    m->build_id_len > sizeof(m->build_id) || m->index >= 1u << 20)
		return 1;
	memcpy(path, m + 1, m->path_len);
	path[m->path_len] = 0;
	uint32_t id;
	int rc = module_intern(s, path, m->build_id, m->build_id_len, &id);
	if (rc < 0)
		return rc;
	/* nmods is the array's length: entries past the used ones are zero. */
	if (ht__grow32_zero((void **)&p->mods, &p->nmods, (size_t)m->index + 1, sizeof(*p->mods)) <
	    0)
		return HT_ERR_NOMEM;
	p->mods[m->index] = id + 1;
	if (s->last_stack.proc == p)
		s->last_stack.proc = NULL; /* its module indices may mean another module now */
	ev->type = HT_EV_MODULE_LOAD;
	ev->module = id;
	ev->addr = m->start;
	ev->size = m->size;
	ev->old_addr = m->bias;
	return 0;
}

/* Minimum length of each record type, to refuse truncated ones. */
static uint32_t min_len(uint8_t type)
{
	switch (type) {
#define MIN_LEN(id, value, name, min_len)                                                          \
	case HT_REC_##id:                                                                          \
		return min_len;
		HT__REC_TYPES(MIN_LEN)
#undef MIN_LEN
	case HT__REC_SELF_RSS:
		return sizeof(struct ht__rec_self_rss);
	case HT__REC_SELF_MAP_FOUND:
	case HT__REC_SELF_MAP_GONE:
		return sizeof(struct ht__rec_self_map);
	default:
		return sizeof(struct ht__rec);
	}
}

static int on_process_start(struct ht__session *s, struct ht__slot *sl, const struct ht__rec *rec)
{
	const struct ht__rec_process *pr = (const void *)rec;
	if (sizeof(*pr) + (uint64_t)pr->exe_len + pr->args_len > rec->len ||
	    pr->exe_len >= PATH_MAX)
		return 1;
	uint32_t i = proc_by_key(s, pr->pid, pr->instance);
	if (i != UINT32_MAX) /* already introduced (from /proc, after a loss) */
		return 1;
	char exe[PATH_MAX];
	memcpy(exe, pr + 1, pr->exe_len);
	exe[pr->exe_len] = 0;
	int rc = new_proc(s, pr->pid, pr->ppid, pr->instance, pr->flags, exe,
			  (const char *)(pr + 1) + pr->exe_len, pr->args_len, rec->ts, &i);
	if (rc < 0)
		return rc;
	if (sl->bound && sl->pid == pr->pid && sl->instance == pr->instance)
		sl->proc = i + 1;
	return 1;
}

/*
 * A parent's wait reaped a child the trace never saw: a fork child killed
 * before it ran (its first code would have started its instance), or one
 * that was never traced (an exec of a static program after vfork). It is a
 * process of the trace all the same, flagged HT_PROCF_UNSEEN, with no exe
 * and its start at the report (docs/session-protocol.md, "Exit status").
 * So is an orphan the session reaped as their subreaper (self_slot), whose
 * parent it does not know (ppid 0); not the program it launched, which the
 * trace names as untraced when it is (a static program). Not with
 * --no-follow, whose children are untraced on purpose.
 */
static struct ht__proc *unseen_child(struct ht__session *s, struct ht__slot *sl,
				     const struct ht__rec_exit *e, int *rc)
{
	uint32_t idx;
	if (s->cfg.flags & HT_SHM_NO_FOLLOW)
		return NULL;
	int32_t ppid = sl == &s->slots[s->ring_count] ? 0 : sl->pid;
	if ((*rc = new_proc(s, e->pid, ppid, 0, HT_PROCF_FORK | HT_PROCF_UNSEEN, "", NULL, 0,
			    e->h.ts, &idx)) < 0)
		return NULL;
	return s->procs[idx];
}

/* The first report of a process's end wins; later ones (a parent's wait, our
   own waitpid) say the same thing less precisely. */
static int on_exit_rec(struct ht__session *s, struct ht__slot *sl, const struct ht__rec *rec,
		       bool self_slot)
{
	const struct ht__rec_exit *e = (const void *)rec;
	struct ht__proc *p = ht__proc_by_pid(s, e->pid);
	if (!p && e->pid > 0 && (self_slot ? e->pid != s->root_pid : sl->pid != e->pid) &&
	    e->kind != HT__EXIT_UNTRACED_EXEC) {
		int rc = 0;
		if (!(p = unseen_child(s, sl, e, &rc)))
			return rc < 0 ? rc : 1;
	}
	if (!p || p->exited)
		return 1;
	bool untraced_exec = self_slot && e->kind == HT__EXIT_UNTRACED_EXEC;
	/* Noticed for an image that a traced one has followed since: that
	   image's PROCESS_EXEC ends it already. */
	if (untraced_exec && p->instance != (uint32_t)e->value)
		return 1;
	/* An image's own report waits until it is dead (drain.c, check_procs;
	   or the end), when nothing more can come, unless its waiter's comes
	   first. An attached image's recorder registered its exit handler at
	   the attach, after the program's own: they run after it, and their
	   frees after its report. And exit's last step, the flush of stdio,
	   comes after every handler: a flush to a pipe nobody reads dies of
	   SIGPIPE after the report said 0 (qa.killed-after-exit). */
	if (!self_slot && sl->pid == e->pid && e->kind == HT_EXIT_CODE) {
		p->exit_held = true;
		p->held_value = e->value & 0xff; /* as wait() says it */
		return 1;
	}
	/* The session found it dead and, its report not merged yet when the
	   grace ran out (a loaded machine: the ticks came more than the grace
	   apart), said "killed"; the report merged first since (earlier
	   stamp) is how it ended (attach.e2e: "killed by signal 0"). */
	bool held = self_slot && p->exit_held && e->kind == HT_EXIT_SIGNAL && !e->value;
	p->exited = true;
	struct ht_event ev = {.type = HT_EV_PROCESS_EXIT,
			      .process = proc_index(s, p),
			      .pid = e->pid,
			      .tid = (!self_slot && sl->pid == e->pid) ? sl->tid : e->pid,
			      .value = untraced_exec ? 0
				       : held	     ? p->held_value
						     : e->value,
			      .flags = untraced_exec			    ? HT_EVF_EXEC
				       : e->kind == HT_EXIT_SIGNAL && !held ? HT_EVF_SIGNAL
									    : 0};
	ev.ts = rel_ts(s, rec->ts);
	int rc = ht__snap_exited(s, p);
	return rc < 0 ? rc : emit(s, &ev, NULL);
}

/* Copied from a zero template: clearing it in place compiled to rep stos,
   whose start-up cost was the largest of a translation per event. */
static const struct ht_event zero_ev;

/* Out of line, so that its frame (a name buffer, many locals) is not set up
   for the records of the fast path. */
static __attribute__((noinline)) int translate_any(struct ht__session *s, struct ht__slot *sl,
						   const struct ht__rec *rec);

/* The fast path reads the address of either record at one place. */
_Static_assert(offsetof(struct ht__rec_alloc, addr) == offsetof(struct ht__rec_free, addr),
	       "alloc and free records keep their address at the same offset");

/* Is rec an allocation or a free of a ring whose process is known (most of
   a trace; the session's own queue never has one), long enough for its
   type? A short one is counted corrupt and skipped (*skip). */
static inline bool plain_heap_rec(struct ht__session *s, const struct ht__slot *sl,
				  const struct ht__rec *rec, bool *skip)
{
	uint8_t type = rec->type;
	if (!sl->proc || (type != HT_REC_ALLOC && type != HT_REC_FREE))
		return false;
	if (rec->len <
	    (type == HT_REC_ALLOC ? sizeof(struct ht__rec_alloc) : sizeof(struct ht__rec_free))) {
		s->stats.corrupt++;
		*skip = true;
		return false;
	}
	return true;
}

/* The event of such a record, without a struct ht_event to clear and fill,
   which the writer looked through again (docs/performance.md, "The
   collector, per event"). */
static inline __attribute__((always_inline)) void heap_of(struct ht__session *s,
							  const struct ht__slot *sl,
							  const struct ht__rec *rec,
							  struct ht__heap_event *h)
{
	uint8_t type = rec->type;
	h->type = type == HT_REC_ALLOC ? HT_EV_ALLOC : HT_EV_FREE;
	h->func = rec->func & 0x7f;
	h->flags = (rec->func & HT_RECF_FAILED) ? HT_EVF_FAILED : 0;
	h->process = sl->proc - 1;
	h->pid = sl->pid;
	h->tid = sl->tid;
	h->ts = rel_ts(s, rec->ts);
	h->stack = lookup_stack(s, rec->stack);
	h->addr = ((const struct ht__rec_free *)rec)->addr;
	h->size = type == HT_REC_ALLOC ? ((const struct ht__rec_alloc *)rec)->size : 0;
	s->stats.events++;
}

int ht__translate(struct ht__session *s, struct ht__slot *sl, const struct ht__rec *rec)
{
	/* The same event as translate_any() makes of them, without the checks
	   and the switch. */
	bool skip = false;
	if (plain_heap_rec(s, sl, rec, &skip)) {
		uint8_t type = rec->type;
		if (s->sink && s->sink->heap_event) {
			struct ht__heap_event h;
			heap_of(s, sl, rec, &h);
			return sink_fail(s, s->sink->heap_event(s->sink_ctx, &h));
		}
		struct ht_event ev = zero_ev;
		ev.func = rec->func & 0x7f;
		ev.flags = (rec->func & HT_RECF_FAILED) ? HT_EVF_FAILED : 0;
		ev.stack = lookup_stack(s, rec->stack);
		ev.pid = sl->pid;
		ev.tid = sl->tid;
		ev.process = sl->proc - 1;
		ev.addr = ((const struct ht__rec_free *)rec)->addr;
		if (type == HT_REC_ALLOC) {
			ev.type = HT_EV_ALLOC;
			ev.size = ((const struct ht__rec_alloc *)rec)->size;
		} else {
			ev.type = HT_EV_FREE;
		}
		ev.ts = rel_ts(s, rec->ts);
		return emit(s, &ev, NULL);
	}
	return skip ? 0 : translate_any(s, sl, rec);
}

/* Events handed to the sink's heap_plain at once, at most. */
#define HEAP_RUN 64

/*
 * The events of the plain allocations and frees from *pp on (malloc and
 * free, not failed, of a known process, long enough for their type), at
 * most HEAP_RUN, into h; *pp moves past them, to end or to the first other
 * record (ht__translate() takes that one). What is read of the session and
 * the slot is in locals here: through the stores to h the compiler loaded
 * it again for each event.
 */
static uint32_t heap_plain_of(struct ht__session *s, const struct ht__slot *sl, const uint8_t **pp,
			      const uint8_t *end, struct ht__heap_plain *h)
{
	const uint8_t *p = *pp;
	const uint64_t t0 = s->hdr->t0_ns;
	const uint32_t *smap = s->stack_map, scap = s->stack_map_cap;
	uint64_t last = s->last_ts, late = 0;
	uint32_t n = 0;
	while (p < end && n < HEAP_RUN) {
		const struct ht__rec *rec = (const struct ht__rec *)p;
		struct ht__heap_plain *e = &h[n];
		if (rec->type == HT_REC_ALLOC && rec->func == HT_FN_MALLOC &&
		    rec->len >= sizeof(struct ht__rec_alloc)) {
			e->type = HT_EV_ALLOC;
			e->size = ((const struct ht__rec_alloc *)rec)->size;
		} else if (rec->type == HT_REC_FREE && rec->func == HT_FN_FREE &&
			   rec->len >= sizeof(struct ht__rec_free)) {
			e->type = HT_EV_FREE;
			e->size = 0;
		} else {
			break;
		}
		n++;
		/* rel_ts() */
		uint64_t r = rec->ts > t0 ? rec->ts - t0 : 0;
		if (r < last) {
			late++;
			r = last;
		}
		e->ts = last = r;
		e->stack = rec->stack < scap ? smap[rec->stack] : 0; /* lookup_stack() */
		e->addr = ((const struct ht__rec_free *)rec)->addr;
		p += rec->len;
	}
	s->last_ts = last;
	s->stats.late += late;
	s->stats.events += n;
	*pp = p;
	return n;
}

int ht__translate_span(struct ht__session *s, struct ht__slot *sl, const uint8_t *p,
		       const uint8_t *end)
{
	int rc;
	if (!s->sink || !s->sink->heap_plain) {
		for (; p < end; p += ((const struct ht__rec *)p)->len)
			if ((rc = ht__translate(s, sl, (const struct ht__rec *)p)) < 0)
				return rc;
		return 0;
	}
	/* A run holds plain allocations and frees of the ring in a row: any
	   other record (a stack, a module, a thread's start, a calloc) is
	   translated between two runs, in its place, and may change what the
	   next ones say (the ring's process, a stack's id). */
	struct ht__heap_plain h[HEAP_RUN];
	while (p < end) {
		uint32_t n = sl->proc ? heap_plain_of(s, sl, &p, end, h) : 0;
		if (n && (rc = sink_fail(s, s->sink->heap_plain(s->sink_ctx, sl->proc - 1, sl->pid,
								sl->tid, h, n))) < 0)
			return rc;
		if (n == HEAP_RUN || p == end)
			continue;
		const struct ht__rec *rec = (const struct ht__rec *)p;
		p += rec->len;
		if ((rc = ht__translate(s, sl, rec)) < 0)
			return rc;
	}
	return 0;
}

static __attribute__((noinline)) int translate_any(struct ht__session *s, struct ht__slot *sl,
						   const struct ht__rec *rec)
{
	if (rec->len < min_len(rec->type)) {
		s->stats.corrupt++;
		return 0;
	}
	bool self_slot = sl == &s->slots[s->ring_count];
	int rc;
	if (rec->type == HT_REC_PROCESS_START)
		return (rc = on_process_start(s, sl, rec)) < 0 ? rc : 0;
	if (rec->type == HT_REC_PROCESS_EXIT)
		return (rc = on_exit_rec(s, sl, rec, self_slot)) < 0 ? rc : 0;

	struct ht__proc *p;
	struct ht_event ev = zero_ev;
	ev.func = rec->func & 0x7f;
	ev.flags = (rec->func & HT_RECF_FAILED) ? HT_EVF_FAILED : 0;
	ev.stack = lookup_stack(s, rec->stack);
	char name[17];
	if (self_slot) {
		if (rec->type == HT__REC_SELF_MAP_FOUND || rec->type == HT__REC_SELF_MAP_GONE) {
			const struct ht__rec_self_map *m = (const void *)rec;
			/* Not after its PROCESS_EXIT: a tick that read its map or
			   RSS between its exit record and its death stamped them
			   after its end. */
			if (!(p = ht__proc_by_pid(s, m->pid)) || p->dead || p->exited)
				return 0;
			int found = rec->type == HT__REC_SELF_MAP_FOUND;
			ev.type = found ? HT_EV_MMAP : HT_EV_MUNMAP;
			ev.flags = HT_EVF_UNSEEN;
			ev.pid = m->pid;
			ev.tid = m->tid;
			ev.addr = m->addr;
			ev.size = m->len;
			if (found) {
				ev.prot = PROT_READ | PROT_WRITE;
				ev.mflags = MAP_PRIVATE | MAP_ANONYMOUS;
				ev.fd = -1;
			}
			ev.process = proc_index(s, p);
			ev.ts = rel_ts(s, rec->ts);
			return emit(s, &ev, NULL);
		}
		if (rec->type == HT__REC_SELF_SNAPSHOT)
			return ht__snap_write(s, rec);
		if (rec->type != HT__REC_SELF_RSS)
			return 0;
		const struct ht__rec_self_rss *r = (const void *)rec;
		if (!(p = ht__proc_by_pid(s, r->pid)) || p->dead || p->exited)
			return 0;
		ev.type = HT_EV_RSS;
		ev.pid = ev.tid = r->pid;
		ev.size = r->rss;
		ev.process = proc_index(s, p);
		ev.ts = rel_ts(s, rec->ts);
		return emit(s, &ev, NULL);
	}
	if ((rc = slot_proc(s, sl, rec->ts, &p)) < 0)
		return rc;
	ev.pid = sl->pid;
	ev.tid = sl->tid;
	ev.process = sl->proc - 1;

	switch (rec->type) {
	case HT_REC_ALLOC:
	case HT_REC_ALLOC_FAIL: {
		const struct ht__rec_alloc *a = (const void *)rec;
		ev.type = rec->type == HT_REC_ALLOC ? HT_EV_ALLOC : HT_EV_ALLOC_FAIL;
		ev.addr = a->addr;
		ev.size = a->size;
		break;
	}
	case HT_REC_REALLOC: {
		const struct ht__rec_realloc *a = (const void *)rec;
		ev.type = HT_EV_REALLOC;
		ev.old_addr = a->old_addr;
		ev.addr = a->new_addr;
		ev.size = a->size;
		break;
	}
	case HT_REC_FREE:
		ev.type = HT_EV_FREE;
		ev.addr = ((const struct ht__rec_free *)rec)->addr;
		break;
	case HT_REC_MMAP: {
		const struct ht__rec_mmap *m = (const void *)rec;
		ev.type = HT_EV_MMAP;
		ev.addr = m->addr;
		ev.size = m->len;
		ev.prot = m->prot;
		ev.mflags = m->flags;
		ev.fd = m->fd;
		break;
	}
	case HT_REC_MUNMAP:
	case HT_REC_MPROTECT: {
		const struct ht__rec_range *m = (const void *)rec;
		ev.type = rec->type == HT_REC_MUNMAP ? HT_EV_MUNMAP : HT_EV_MPROTECT;
		ev.addr = m->addr;
		ev.size = m->len;
		if (rec->type == HT_REC_MPROTECT)
			ev.prot = m->prot;
		if (m->result < 0)
			ev.flags |= HT_EVF_FAILED;
		break;
	}
	case HT_REC_MREMAP: {
		const struct ht__rec_mremap *m = (const void *)rec;
		ev.type = HT_EV_MREMAP;
		ev.old_addr = m->old_addr;
		ev.old_size = m->old_len;
		ev.addr = m->new_addr;
		ev.size = m->new_len;
		ev.mflags = m->flags;
		break;
	}
	case HT_REC_BRK: {
		const struct ht__rec_brk *b = (const void *)rec;
		ev.type = HT_EV_BRK;
		ev.old_addr = b->old_brk;
		ev.addr = b->new_brk;
		break;
	}
	case HT_REC_HEAP_CREATE:
	case HT_REC_HEAP_DESTROY: {
		const struct ht__rec_heap *h = (const void *)rec;
		ev.type = rec->type == HT_REC_HEAP_CREATE ? HT_EV_HEAP_CREATE : HT_EV_HEAP_DESTROY;
		ev.heap = h->handle;
		if (rec->type == HT_REC_HEAP_CREATE && rec->len > sizeof(*h)) {
			const char *nm = (const char *)(h + 1);
			size_t room = rec->len - sizeof(*h);
			if (strnlen(nm, room) < room)
				ev.name = nm;
		}
		break;
	}
	case HT_REC_HEAP_ALLOC:
	case HT_REC_HEAP_REALLOC:
	case HT_REC_HEAP_FREE: {
		const struct ht__rec_heap_op *h = (const void *)rec;
		ev.type = rec->type == HT_REC_HEAP_ALLOC     ? HT_EV_ALLOC
			  : rec->type == HT_REC_HEAP_REALLOC ? HT_EV_REALLOC
							     : HT_EV_FREE;
		ev.heap = h->handle;
		ev.addr = h->addr;
		ev.size = h->size;
		ev.old_addr = h->old_addr;
		/* A custom heap that failed to allocate reports it as the glibc heap
		   does: an alloc_fail event with the size asked for, no block. */
		if (rec->type == HT_REC_HEAP_ALLOC && !h->addr) {
			ev.type = HT_EV_ALLOC_FAIL;
			ev.flags &= ~HT_EVF_FAILED;
		}
		break;
	}
	case HT_REC_THREAD_START:
	case HT_REC_THREAD_NAME: {
		const struct ht__rec_thread *t = (const void *)rec;
		ev.type = rec->type == HT_REC_THREAD_START ? HT_EV_THREAD_START : HT_EV_THREAD_NAME;
		if (t->tid)
			ev.tid = t->tid;
		memcpy(name, t->name, 16);
		name[16] = 0;
		ev.name = name;
		break;
	}
	case HT_REC_THREAD_EXIT:
		ev.type = HT_EV_THREAD_EXIT;
		break;
	case HT_REC_MODULE_LOAD:
		if ((rc = on_module(s, p, &ev, rec)) != 0)
			return rc < 0 ? rc : 0;
		break;
	case HT_REC_MODULE_UNLOAD: {
		const struct ht__rec_module *m = (const void *)rec;
		if (m->index >= p->nmods || !p->mods[m->index])
			return 0;
		ev.type = HT_EV_MODULE_UNLOAD;
		ev.module = p->mods[m->index] - 1;
		break;
	}
	case HT_REC_STACK:
		return (rc = on_stack(s, p, rec)) < 0 ? rc : 0;
	default:
		s->stats.corrupt++;
		return 0;
	}
	ev.ts = rel_ts(s, rec->ts);
	return emit(s, &ev, NULL);
}

int ht__translate_finish(struct ht__session *s)
{
	uint64_t now = ht__now_ns();
	for (uint32_t i = 0; i < s->nprocs; i++) {
		struct ht__proc *p = s->procs[i];
		if (p->replaced || p->exited || (!p->dead && !p->exit_held))
			continue;
		/* Died and nobody said how: "killed", without a signal number
		   unless its recorder reported a crash (drain.c, take_crashes);
		   or an attached image whose own report was held. */
		p->exited = true;
		struct ht_event ev = {.type = HT_EV_PROCESS_EXIT,
				      .process = i,
				      .pid = p->pid,
				      .tid = p->pid,
				      .value = p->exit_held ? p->held_value : p->crash_sig,
				      .flags = p->exit_held ? 0 : HT_EVF_SIGNAL};
		ev.ts = rel_ts(s, now);
		int rc = ht__snap_exited(s, p);
		if (rc >= 0)
			rc = emit(s, &ev, NULL);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void ht__translate_free(struct ht__session *s)
{
	for (uint32_t i = 0; i < s->nprocs; i++) {
		free(s->procs[i]->mods);
		ht__maps_free(&s->procs[i]->maps);
		free(s->procs[i]);
	}
	free(s->procs);
	for (uint32_t i = 0; i < s->nmods; i++)
		free(s->mods[i].path);
	free(s->mods);
	free(s->frames);
	free(s->stack_frames);
	free(s->stack_off);
	free(s->stack_len);
	free(s->stack_map);
	free(s->stack_owner);
	ht__hindex_release(&s->proc_by_key);
	ht__hindex_release(&s->proc_by_pid);
	ht__hindex_release(&s->mod_tab);
	ht__hindex_release(&s->frame_ix);
	ht__hindex_release(&s->stack_ix);
}
