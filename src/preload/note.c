/*
 * The image's exit note (docs/session-protocol.md, "A collector killed"):
 * when a traced image ends it appends one record of what it wrote into the
 * rings and what it lost to the file the session named next to its trace,
 * so that a reader of a trace whose collector was killed can count, per
 * process, what the trace does not hold. Raw system calls, no allocation.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

static _Atomic int noted;	   /* this instance wrote its note */
static _Atomic int exit_kind = -1; /* HT_EXIT_CODE once exit or _exit said so */
static _Atomic int exit_value;

void ht__note_begin(void)
{
	atomic_store(&ht__g.events_done, 0);
	atomic_store(&noted, 0);
	atomic_store(&exit_kind, -1);
	atomic_store(&ht__g.note_ok, 1);
}

void ht__note_status(int kind, int value)
{
	atomic_store(&exit_value, value);
	atomic_store(&exit_kind, kind);
}

/* A ring goes back to the collector: its count stays the image's. */
void ht__ring_done(struct ht__ring *r)
{
	atomic_fetch_add(&ht__g.events_done, atomic_exchange(&r->events, 0));
}

static uint64_t since_t0(uint64_t ns, uint64_t t0)
{
	return ns > t0 ? ns - t0 : 0;
}

/*
 * Once per instance, when it ends (exit, _exit), whatever the
 * recorder's state: a recorder that stopped because its collector died
 * still has its counts. Nothing is written when the session has read its
 * loss table already (DONE: the trace is whole) or names no note file.
 * The file must be the session's: a regular file of note_uid with one
 * link, opened without following a symbolic link and without blocking.
 */
void ht__note_write(void)
{
	struct ht__shm_header *h = ht__g.hdr;
	if (!h || !atomic_load(&ht__g.note_ok) || (pid_t)syscall(SYS_getpid) != ht__g.pid ||
	    atomic_load(&h->state) == HT_SESSION_DONE)
		return;
	struct ht__shm_note *sn = ht__shm_note(h);
	if (!sn->path[0] || sn->path[HT_SHM_NOTE_MAX - 1] || atomic_exchange(&noted, 1))
		return;
	int save = errno;
	uint64_t t0 = h->t0_ns;
	struct ht__exit_note n = {
	    .magic = HT_NOTE_MAGIC,
	    .pid = ht__g.pid,
	    .instance = ht__g.instance,
	    .t0_ns = t0,
	    .events = atomic_load(&ht__g.events_done),
	    .end_ns = since_t0(ht__clock(), t0),
	    .exit_kind = atomic_load(&exit_kind),
	    .exit_value = atomic_load(&exit_value),
	};
	/* The rings this image still holds (its live threads'). */
	uint32_t reached = ht__rings_reached(ht__g.hdr, ht__g.ring_count);
	for (uint32_t i = 0; i < reached; i++) {
		struct ht__ring *r =
		    (struct ht__ring *)(ht__g.rings + (size_t)i * ht__g.ring_stride);
		if (atomic_load(&r->state) == HT_RING_OWNED && r->pid == ht__g.pid &&
		    r->instance == ht__g.instance)
			n.events += atomic_load(&r->events);
	}
	struct ht__shm_loss *l = atomic_load(&ht__g.loss);
	if (l && l != (struct ht__shm_loss *)UINTPTR_MAX) {
		for (unsigned c = 0; c < HT_LOSS_CAUSES; c++)
			n.n[c] = atomic_load(&l->n[c]);
		n.first_ns = since_t0(atomic_load(&l->first_ns), t0);
		n.untraced_ns = since_t0(atomic_load(&l->untraced_ns), t0);
	}
	n.collector_gone = (uint32_t)ht__collector_gone(h);
	long fd = syscall(SYS_openat, AT_FDCWD, sn->path,
			  O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0) {
		struct stat st;
		if (syscall(SYS_fstat, (int)fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_nlink == 1 && st.st_uid == sn->uid)
			syscall(SYS_write, (int)fd, &n, sizeof n);
		syscall(SYS_close, (int)fd);
	}
	errno = save;
}

/*
 * The note goes as late as the exit lets it, with the status known: in
 * launch mode our exit handler is the image's first (init.c
 * ht__exit_arm), runs after every other and the destructors, and writes
 * it; when attached, ours was registered later, runs first and leaves it
 * to this destructor.
 */
__attribute__((destructor)) static void note_at_exit(void)
{
	if (atomic_load(&exit_kind) >= 0)
		ht__note_write();
}
