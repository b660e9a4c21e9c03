/*
 * relay.c - events of programs that started before their IFEO session: the
 * session adopts the in-memory buffers the loader hook made for them
 * (src/ifeo/pending.h) and copies every record into rings of its own shared
 * file, renumbering stack ids, so the collector sees one protocol and the
 * trace has the programs' whole history (docs/sessions.md).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "control/relay.h"
#include "ifeo/pending.h"
#include "heaptrail/trace.h"
#include "base/protocol.h"
#include "base/vec.h"
#include "session/session.h"

#define PENDING_LINK "/memfd:" HT__PENDING_NAME

_Static_assert(HT__PENDING_TAG_OFFSET >= sizeof(struct ht__shm_header) &&
		   HT__PENDING_TAG_OFFSET + HT__PENDING_TAG_MAX <= HT_SHM_NOTE_OFFSET,
	       "the pending tag lies between the header and the note path");

struct pending {
	dev_t dev;
	ino_t ino;
	uint8_t *map;
	size_t size;
	struct ht__shm_header *h;
	uint32_t *stack_map; /* pending stack id -> session stack id, 0: not yet */
	uint32_t stack_cap;
	int32_t *dst;	     /* per pending ring: session ring + 1, 0: none */
	uint64_t *dst_wpos;  /* our write position in that session ring */
	uint64_t *lost_seen; /* per pending ring: its lost count already passed on */
	uint64_t exhausted;  /* rings_exhausted of the pending file, counted so far */
	uint64_t reentered;  /* its reentered, counted so far */
	/* per slot of its loss table: the session's slot + 1 we copy it
	   into, 0 before its first loss, -1 once the session took it */
	int32_t loss_dst[HT_LOSS_SLOTS];
};

struct ht__relay {
	struct ht__shm_header *sh; /* the session's file */
	char dir[PATH_MAX];	   /* the session's directory */
	uint64_t pumps;		   /* calls of ht__relay_pump, to space out liveness checks */
	uint32_t ring_size, ring_count;
	struct pending *p;
	unsigned n;
	size_t cap;
	uint64_t min_t0;
};

static struct ht__ring *ring_in(struct ht__shm_header *h, uint32_t i)
{
	return (struct ht__ring *)((uint8_t *)h + h->header_size +
				   (size_t)i * (HT_RING_HEADER_SIZE + h->ring_size));
}

int ht__relay_new(struct ht__relay **out, struct ht__shm_header *session, const char *dir)
{
	struct ht__relay *r = calloc(1, sizeof(*r));
	if (!r)
		return HT_ERR_NOMEM;
	snprintf(r->dir, sizeof(r->dir), "%s", dir);
	r->sh = session;
	r->ring_size = session->ring_size;
	r->ring_count = session->ring_count;
	r->min_t0 = UINT64_MAX;
	*out = r;
	return 0;
}

/*
 * Whether a program with this XDG_RUNTIME_DIR would have looked for its
 * session in our directory: the hook's list (src/ifeo/hook.c), which is
 * ht__session_default_dir's candidates.
 */
static bool would_find(const struct ht__relay *r, const char *xdg)
{
	char cand[PATH_MAX];
	unsigned uid = (unsigned)geteuid();
	if (*xdg == '/' && snprintf(cand, sizeof(cand), "%s/heaptrail", xdg) < (int)sizeof(cand) &&
	    !strcmp(cand, r->dir))
		return true;
	if (uid == 0 && !strcmp(r->dir, "/run/heaptrail"))
		return true;
	snprintf(cand, sizeof(cand), "/tmp/heaptrail-%u", uid);
	if (!strcmp(cand, r->dir))
		return true;
	snprintf(cand, sizeof(cand), "/dev/shm/heaptrail-%u", uid);
	return !strcmp(cand, r->dir);
}

/* Maps one pending file found at /proc/PID/fd/N, unless known or not one of ours. */
static void adopt(struct ht__relay *r, const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() ||
	    (size_t)st.st_size < HT_SHM_HEADER_SIZE) {
		close(fd);
		return;
	}
	for (unsigned i = 0; i < r->n; i++)
		if (r->p[i].dev == st.st_dev && r->p[i].ino == st.st_ino) {
			close(fd);
			return;
		}
	size_t size = (size_t)st.st_size;
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return;
	struct ht__shm_header *h = m;
	uint32_t zero = 0;
	const char *tag = (const char *)m + HT__PENDING_TAG_OFFSET;
	if (strncmp(tag, "xdg=", 4) || strnlen(tag, HT__PENDING_TAG_MAX) == HT__PENDING_TAG_MAX ||
	    !would_find(r, tag + 4)) {
		munmap(m, size);
		return;
	}
	/* Checked like a recorder checks a session file; collector_pid claims it
	   (0 while nobody collects it), so two sessions never both relay one. */
	if (h->magic != HT_SHM_MAGIC || h->version != HT_PROTO_VERSION ||
	    h->header_size != HT_SHM_HEADER_SIZE || h->ring_size < 4096 ||
	    (h->ring_size & (h->ring_size - 1)) || h->ring_size > (1u << 30) || !h->ring_count ||
	    h->ring_count > 4096 ||
	    h->header_size + (uint64_t)h->ring_count * (HT_RING_HEADER_SIZE + h->ring_size) >
		size ||
	    !__atomic_compare_exchange_n((uint32_t *)&h->collector_pid, &zero, (uint32_t)getpid(),
					 false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		munmap(m, size);
		return;
	}
	if (ht__grow((void **)&r->p, &r->cap, r->n + 1, sizeof(*r->p)) < 0) {
		munmap(m, size);
		return;
	}
	struct pending *p = &r->p[r->n];
	memset(p, 0, sizeof(*p));
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	p->map = m;
	p->size = size;
	p->h = h;
	p->dst = calloc(h->ring_count, sizeof(*p->dst));
	p->dst_wpos = calloc(h->ring_count, sizeof(*p->dst_wpos));
	p->lost_seen = calloc(h->ring_count, sizeof(*p->lost_seen));
	if (!p->dst || !p->dst_wpos || !p->lost_seen) {
		free(p->dst);
		free(p->dst_wpos);
		free(p->lost_seen);
		munmap(m, size);
		return;
	}
	r->n++;
	if (h->t0_ns < r->min_t0)
		r->min_t0 = h->t0_ns;
}

unsigned ht__relay_scan(struct ht__relay *r)
{
	unsigned before = r->n;
	DIR *procd = opendir("/proc");
	if (!procd)
		return 0;
	struct dirent *pe;
	while ((pe = readdir(procd))) {
		if (pe->d_name[0] < '1' || pe->d_name[0] > '9')
			continue;
		char dir[64];
		snprintf(dir, sizeof(dir), "/proc/%.20s/fd", pe->d_name);
		struct stat st;
		/* Only our own processes: the same user's, as every session is. */
		if (stat(dir, &st) < 0 || st.st_uid != geteuid())
			continue;
		DIR *fdd = opendir(dir);
		if (!fdd)
			continue;
		struct dirent *fe;
		while ((fe = readdir(fdd))) {
			if (fe->d_name[0] < '0' || fe->d_name[0] > '9')
				continue;
			char link[128], target[64];
			snprintf(link, sizeof(link), "%s/%.20s", dir, fe->d_name);
			ssize_t n = readlink(link, target, sizeof(target) - 1);
			if (n < (ssize_t)strlen(PENDING_LINK))
				continue;
			target[n] = 0;
			if (!strncmp(target, PENDING_LINK, strlen(PENDING_LINK)))
				adopt(r, link);
		}
		closedir(fdd);
	}
	closedir(procd);
	return r->n - before;
}

uint64_t ht__relay_min_t0(const struct ht__relay *r)
{
	return r->min_t0;
}

static uint32_t map_stack(struct ht__relay *r, struct pending *p, uint32_t id)
{
	if (!id)
		return 0;
	if (ht__grow32_zero((void **)&p->stack_map, &p->stack_cap, (size_t)id + 1,
			    sizeof(*p->stack_map)) < 0)
		return 0;
	if (!p->stack_map[id])
		p->stack_map[id] = atomic_fetch_add(&r->sh->next_stack_id, 1);
	return p->stack_map[id];
}

/* A free ring of the session, claimed for the writer of src, or -1. */
static int claim(struct ht__relay *r, const struct ht__ring *src, uint64_t *wpos)
{
	for (uint32_t i = 0; i < r->ring_count; i++) {
		struct ht__ring *d = ring_in(r->sh, i);
		uint32_t free_state = HT_RING_FREE;
		if (atomic_load(&d->state) != HT_RING_FREE ||
		    !atomic_compare_exchange_strong(&d->state, &free_state, HT_RING_OWNED))
			continue;
		ht__ring_reached(r->sh, i);
		d->pid = src->pid;
		d->tid = src->tid;
		d->instance = src->instance;
		d->clock = src->clock; /* its records keep the scale they were stamped in */
		atomic_store(&d->lost, 0);
		*wpos = atomic_load_explicit(&d->write_pos, memory_order_acquire);
		return (int)i;
	}
	return -1;
}

/* The session ring we copy into is still the one we claimed for src. */
static bool still_ours(struct ht__ring *dst, const struct ht__ring *src)
{
	return atomic_load_explicit(&dst->state, memory_order_acquire) == HT_RING_OWNED &&
	       dst->pid == src->pid && dst->tid == src->tid && dst->instance == src->instance;
}

/* Copies what ring i of p has committed into its session ring. */
static void pump_ring(struct ht__relay *r, struct pending *p, uint32_t i)
{
	struct ht__ring *src = ring_in(p->h, i);
	uint32_t state = atomic_load_explicit(&src->state, memory_order_acquire);
	if (state == HT_RING_FREE)
		return;
	uint64_t w = atomic_load_explicit(&src->write_pos, memory_order_acquire);
	uint64_t rd = atomic_load_explicit(&src->read_pos, memory_order_relaxed);
	uint32_t smask = p->h->ring_size - 1;
	const uint8_t *sdata = (const uint8_t *)src + HT_RING_HEADER_SIZE;
	if (rd < w && !p->dst[i]) {
		int d = claim(r, src, &p->dst_wpos[i]);
		if (d < 0)
			return; /* every session ring is taken: next tick */
		p->dst[i] = d + 1;
	}
	struct ht__ring *dst = p->dst[i] ? ring_in(r->sh, (uint32_t)p->dst[i] - 1) : NULL;
	if (dst && !still_ours(dst, src)) {
		/* The collector took it back (its writer looked dead): a new one if needed. */
		p->dst[i] = 0;
		dst = NULL;
		if (rd < w) {
			int d = claim(r, src, &p->dst_wpos[i]);
			if (d < 0)
				return;
			p->dst[i] = d + 1;
			dst = ring_in(r->sh, (uint32_t)d);
		}
	}
	if (dst) {
		uint8_t *ddata = (uint8_t *)dst + HT_RING_HEADER_SIZE;
		uint64_t dw = p->dst_wpos[i];
		uint64_t dlimit =
		    atomic_load_explicit(&dst->read_pos, memory_order_acquire) + r->ring_size;
		while (rd < w) {
			const struct ht__rec *rec = (const struct ht__rec *)(sdata + (rd & smask));
			uint32_t len = rec->len, off = (uint32_t)(rd & smask);
			if (len < sizeof(*rec) || (len & 7) || off + len > p->h->ring_size) {
				rd = w; /* not a record: the rest of this ring cannot be trusted */
				break;
			}
			/* A record too big for the session's rings (a long PROCESS_START
			   into 4 KiB buffers) cannot be passed on: dropped. */
			if (rec->type == HT_REC_PAD || len + 8 > r->ring_size) {
				rd += len;
				continue;
			}
			uint32_t doff = (uint32_t)(dw & (r->ring_size - 1)),
				 tail = r->ring_size - doff;
			bool wrap = len > tail || tail - len == 8;
			uint64_t need = wrap ? (uint64_t)tail + len : len;
			if (dw + need > dlimit)
				break; /* the collector frees room at its tick */
			if (wrap) {
				struct ht__rec pad = {.type = HT_REC_PAD, .len = (uint16_t)tail};
				memcpy(ddata + doff, &pad, sizeof(pad));
				dw += tail;
				doff = 0;
			}
			struct ht__rec *copy = (struct ht__rec *)(ddata + doff);
			memcpy(copy, rec, len);
			copy->stack = map_stack(r, p, rec->stack);
			dw += len;
			rd += len;
		}
		p->dst_wpos[i] = dw;
		uint64_t lost = atomic_load(&src->lost);
		if (lost > p->lost_seen[i]) {
			atomic_fetch_add(&dst->lost, lost - p->lost_seen[i]);
			p->lost_seen[i] = lost;
		}
		atomic_store_explicit(&dst->write_pos, dw, memory_order_release);
		/* A writer caught mid-record there is one here too, for the watermark. */
		atomic_store_explicit(&dst->busy, atomic_load(&src->busy), memory_order_relaxed);
		atomic_store_explicit(&src->read_pos, rd, memory_order_release);
	}
	if (rd < w)
		return;
	/* All copied: a ring its thread gave back (or whose process died) ends
	   here too. Whether a process died is asked every 50th tick. */
	if (state == HT_RING_RELEASED || (r->pumps % 50 == 0 && ht__pid_exited(src->pid))) {
		if (dst) {
			atomic_store(&dst->busy, 0);
			atomic_store_explicit(&dst->state, HT_RING_RELEASED, memory_order_release);
			p->dst[i] = 0;
		}
		if (state == HT_RING_RELEASED) {
			atomic_store(&src->lost, 0);
			p->lost_seen[i] = 0;
			atomic_store_explicit(&src->state, HT_RING_FREE, memory_order_release);
		}
	}
}

/*
 * A session slot for a pending image's losses, claimed as a recorder
 * claims one (docs/session-protocol.md, "Loss by process"), or -1 when
 * the table is full (the trace-wide counters still have them).
 */
static int loss_claim(struct ht__relay *r, int32_t pid, uint32_t instance)
{
	struct ht__shm_loss *tab = ht__shm_losses(r->sh);
	for (uint32_t i = 0; i < HT_LOSS_SLOTS; i++) {
		int32_t z = 0;
		if (atomic_load_explicit(&tab[i].pid, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&tab[i].pid, &z, -1)) {
			tab[i].instance = instance;
			atomic_store_explicit(&tab[i].pid, pid, memory_order_release);
			return (int)i;
		}
	}
	return -1;
}

/*
 * Each pending image's losses by process into a slot of the session's own
 * table, so the trace has them per process as for any recorder: its
 * counts by cause and the first times (absolute clock values in both
 * files). We are the only writer of that slot. Once the session took the
 * counts of the image (it is gone) the slot is someone else's: we stop.
 */
static void relay_losses(struct ht__relay *r, struct pending *p)
{
	struct ht__shm_loss *src = ht__shm_losses(p->h), *dst = ht__shm_losses(r->sh);
	for (uint32_t i = 0; i < HT_LOSS_SLOTS; i++) {
		int32_t pid = atomic_load_explicit(&src[i].pid, memory_order_acquire);
		if (pid <= 0 || p->loss_dst[i] < 0)
			continue;
		if (!p->loss_dst[i]) {
			int d = loss_claim(r, pid, src[i].instance);
			if (d < 0)
				continue;
			p->loss_dst[i] = d + 1;
		}
		struct ht__shm_loss *l = &dst[p->loss_dst[i] - 1];
		if (atomic_load_explicit(&l->pid, memory_order_acquire) != pid ||
		    l->instance != src[i].instance) {
			p->loss_dst[i] = -1;
			continue;
		}
		for (unsigned c = 0; c < HT_LOSS_CAUSES; c++)
			atomic_store(&l->n[c], atomic_load(&src[i].n[c]));
		atomic_store(&l->first_ns, atomic_load(&src[i].first_ns));
		atomic_store(&l->untraced_ns, atomic_load(&src[i].untraced_ns));
	}
}

void ht__relay_pump(struct ht__relay *r)
{
	r->pumps++;
	for (unsigned k = 0; k < r->n; k++) {
		struct pending *p = &r->p[k];
		atomic_store(&p->h->heartbeat_ns, atomic_load(&r->sh->heartbeat_ns));
		/* From now on the program captures the stacks the session wants. */
		__atomic_store_n(&p->h->stack_mask,
				 __atomic_load_n(&r->sh->stack_mask, __ATOMIC_RELAXED),
				 __ATOMIC_RELAXED);
		for (uint32_t i = 0; i < p->h->ring_count; i++)
			pump_ring(r, p, i);
		uint64_t ex = atomic_load(&p->h->rings_exhausted);
		if (ex > p->exhausted) {
			atomic_fetch_add(&r->sh->rings_exhausted, ex - p->exhausted);
			p->exhausted = ex;
		}
		uint64_t re = atomic_load(&p->h->reentered);
		if (re > p->reentered) {
			atomic_fetch_add(&r->sh->reentered, re - p->reentered);
			p->reentered = re;
		}
		relay_losses(r, p);
	}
}

void ht__relay_stop(struct ht__relay *r)
{
	for (unsigned k = 0; k < r->n; k++)
		atomic_store_explicit(&r->p[k].h->state, HT_SESSION_STOPPING, memory_order_release);
	/* A thread inside a hook finishes its record (the recorders' own grace). */
	struct timespec ts = {0, 5000000};
	nanosleep(&ts, NULL);
	ht__relay_pump(r);
	/* The programs count no more (their untraced events end here, a
	   moment before the session's): their last counts go over. */
	for (unsigned k = 0; k < r->n; k++) {
		atomic_store_explicit(&r->p[k].h->state, HT_SESSION_DONE, memory_order_release);
		relay_losses(r, &r->p[k]);
	}
	for (unsigned k = 0; k < r->n; k++)
		for (uint32_t i = 0; i < r->p[k].h->ring_count; i++)
			if (r->p[k].dst[i]) {
				struct ht__ring *dst = ring_in(r->sh, (uint32_t)r->p[k].dst[i] - 1);
				if (still_ours(dst, ring_in(r->p[k].h, i))) {
					atomic_store(&dst->busy, 0);
					atomic_store_explicit(&dst->state, HT_RING_RELEASED,
							      memory_order_release);
				}
				r->p[k].dst[i] = 0;
			}
}

void ht__relay_free(struct ht__relay *r)
{
	if (!r)
		return;
	for (unsigned k = 0; k < r->n; k++) {
		struct pending *p = &r->p[k];
		munmap(p->map, p->size);
		free(p->stack_map);
		free(p->dst);
		free(p->dst_wpos);
		free(p->lost_seen);
	}
	free(r->p);
	free(r);
}
