/*
 * The cold side of the ring writer: claiming a ring for a thread, waiting for
 * room (lossless) or dropping (lossy), noticing a dead or stopping session,
 * releasing the ring when the thread exits, and the thread records.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* Only for a session nobody collects yet (collector_pid 0): no heartbeat
   for this long and it is taken for dead. */
#define HT_DEAD_NS 2000000000ull
/* A heartbeat this old makes a waiter look whether the collector lives. */
#define HT_LIVE_CHECK_NS 250000000ull
/* A waiter's longest sleep without a wake from the collector. */
#define HT_SLEEP_NS 50000000l

static pthread_key_t thread_key;
static int key_ok;
static _Atomic uint64_t claim_gave_up; /* when a claim of ours last gave up (claim_ring) */

/*
 * Threads that own a ring, so pthread_setname_np() on another thread can
 * name it by tid. Scanned only on that rare call.
 */
#define HT_REG_SIZE 1024
static struct {
	_Atomic unsigned long self;
	pid_t tid;
} ring_owners[HT_REG_SIZE];

static void reg_add(pid_t tid)
{
	unsigned long self = (unsigned long)pthread_self();
	for (unsigned i = 0; i < HT_REG_SIZE; i++) {
		unsigned long z = 0;
		if (atomic_load_explicit(&ring_owners[i].self, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&ring_owners[i].self, &z, self)) {
			ring_owners[i].tid = tid;
			return;
		}
	}
}

static void reg_del(void)
{
	unsigned long self = (unsigned long)pthread_self();
	for (unsigned i = 0; i < HT_REG_SIZE; i++)
		if (atomic_load_explicit(&ring_owners[i].self, memory_order_relaxed) == self) {
			atomic_store(&ring_owners[i].self, 0);
			return;
		}
}

pid_t ht__thread_tid(unsigned long pthread)
{
	for (unsigned i = 0; i < HT_REG_SIZE; i++)
		if (atomic_load(&ring_owners[i].self) == pthread)
			return ring_owners[i].tid;
	return 0;
}

void ht__thread_forget_all(void)
{
	for (unsigned i = 0; i < HT_REG_SIZE; i++)
		atomic_store(&ring_owners[i].self, 0);
	atomic_store(&claim_gave_up, 0);
}

/*
 * Thread exit: THREAD_EXIT, then the ring goes to the collector, and the
 * unwinding stack is unmapped. Set up by the first ring claim or unwinding
 * stack of the thread (ht__thread_watch).
 */
static void key_destructor(void *arg)
{
	(void)arg;
	struct ht__thread *t = &ht__t;
	int save = errno;
	/* Nothing here calls the program's allocator: a re-entry can only be
	   a signal handler's event, counted as one (guard HOOK). */
	int guard = t->guard;
	if (guard)
		t->guard = guard + HT_GUARD_OWN;
	else
		ht__guard_at(t, HT_GUARD_HOOK, __builtin_frame_address(0));
	ht__thread_release(t);
	ht__ustack_unmap(t);
	if (ht__g.snap)
		ht__snap_thread_exit(t);
	t->exited = 1;
	t->guard = guard;
	errno = save;
}

/*
 * Past the first 32 keys (an attach to a program that had made them: our key
 * came after) pthread_setspecific allocates the thread's block of keys with
 * the program's calloc: the recorder's own call, passed through uncounted
 * (guard OWN), with signals held off meanwhile so that no handler's event
 * passes with it. Once a thread (the block stays). Never inside a mapping
 * hook, which the allocator may have called holding its own lock (jemalloc
 * preloaded deadlocked in its mmap from inside its malloc): the call waits
 * for the thread's next record outside one (ht__rec_room).
 */
void ht__thread_watch(struct ht__thread *t)
{
	if (!key_ok)
		return;
	if (HT_LIKELY(thread_key < 32)) {
		pthread_setspecific(thread_key, t);
		return;
	}
	if (t->map_hook) {
		t->watch_wait = 1;
		t->fast = 0;
		return;
	}
	t->watch_wait = 0;
	sigset_t old;
	ht__signals_hold(&old);
	t->guard += HT_GUARD_OWN;
	pthread_setspecific(thread_key, t);
	t->guard -= HT_GUARD_OWN;
	ht__signals_release(&old);
}

void ht__threads_init(void)
{
	key_ok = pthread_key_create(&thread_key, key_destructor) == 0;
}

/* The state of one wait for the collector (for room or for a ring). */
struct ht__wait {
	unsigned n;
	int asleep;	/* counted in the header's waiters */
	uint32_t seq;	/* drain_seq when we last looked for room */
	uint32_t seq0;	/* drain_seq when we were first counted in waiters */
	uint64_t since; /* when the wait stopped spinning */
};

/*
 * Is the collector's process gone (or a zombie, or its pid taken by another
 * process since)? Read from /proc/PID/stat with raw calls (open and read are
 * cancellation points); without /proc (hidepid), kill(pid, 0).
 */
static int pid_gone(pid_t pid, uint64_t start_time)
{
	char path[32] = "/proc/", *p = path + 6, digits[12];
	int n = 0;
	for (unsigned v = (unsigned)pid; v; v /= 10)
		digits[n++] = (char)('0' + v % 10);
	while (n)
		*p++ = digits[--n];
	memcpy(p, "/stat", 6);
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		return kill(pid, 0) < 0 && errno == ESRCH;
	}
	char buf[512];
	long len = syscall(SYS_read, (int)fd, buf, sizeof buf - 1);
	syscall(SYS_close, (int)fd);
	if (len <= 0)
		return 0;
	buf[len] = 0;
	char state;
	uint64_t start;
	if (!ht__parse_proc_stat(buf, &state, &start))
		return 0;
	return state == 'Z' || state == 'X' || (start_time && start != start_time);
}

int ht__collector_gone(struct ht__shm_header *h)
{
	return h->collector_pid > 0 && pid_gone(h->collector_pid, h->collector_start);
}

/* When a thread of this process last saw the collector alive (collector_dead). */
static _Atomic uint64_t alive_seen;

/*
 * The collector is dead: its process is gone. A late heartbeat alone never
 * says so (on 2 cores under 256 busy threads, or under SIGSTOP, a tick can
 * come seconds late). The process is looked at only when the heartbeat is
 * HT_LIVE_CHECK_NS old, and by one thread of the process per that interval.
 * A session nobody collects yet (collector_pid 0: a buffer waiting for its
 * session) has no process to look at: there the old rule stays, no
 * heartbeat for HT_DEAD_NS since the wait began.
 */
static int collector_dead(struct ht__shm_header *h, uint64_t now, uint64_t since)
{
	uint64_t hb = atomic_load(&h->heartbeat_ns);
	pid_t pid = h->collector_pid;
	if (pid <= 0) {
		if (hb < since)
			hb = since;
		return now > hb && now - hb > HT_DEAD_NS;
	}
	if (now <= hb || now - hb < HT_LIVE_CHECK_NS)
		return 0;
	uint64_t seen = atomic_load_explicit(&alive_seen, memory_order_relaxed);
	if (now > seen && now - seen < HT_LIVE_CHECK_NS)
		return 0;
	int save = errno;
	int gone = pid_gone(pid, h->collector_start);
	errno = save;
	if (!gone)
		atomic_store_explicit(&alive_seen, now, memory_order_relaxed);
	return gone;
}

static void wait_end(struct ht__wait *w)
{
	if (w->asleep)
		atomic_fetch_sub(&ht__g.hdr->waiters, 1);
	w->asleep = 0;
}

/*
 * One step of waiting for the collector: spin a little, then sleep on the
 * futex drain_seq, which the collector bumps after each drain while
 * threads wait (and at most HT_SLEEP_NS, to look at the collector). The
 * sleepers cost the collector nothing: on 2 cores, hundreds of threads
 * polling with short sleeps took the CPU it needs to drain. There is no
 * sched_yield() between: on a loaded machine a yield hands the core to
 * other tasks and the thread sees room only when it is picked again,
 * milliseconds after the drain, while a sleeper is woken by the drain
 * itself (docs/performance.md, "The program's side, session 28": 16
 * yields were most of a waiting thread's time; 8 threads' recording
 * 1187 -> 697 ms at load 12). Returns 0 when the session is stopping or
 * the collector is dead (collector_dead): the recorder has then stopped
 * recording. The caller looks for room after every step and calls
 * wait_end() when done.
 */
static int wait_step(struct ht__wait *w)
{
	unsigned i = w->n++;
	if (i < 64) {
		__builtin_ia32_pause();
		return 1;
	}
	struct ht__shm_header *h = ht__g.hdr;
	uint64_t now = ht__clock();
	if (!w->since)
		w->since = now;
	if (atomic_load(&h->state) >= HT_SESSION_STOPPING || collector_dead(h, now, w->since)) {
		wait_end(w);
		ht__stop_recording();
		ht__lose_untraced(); /* the event that waited */
		return 0;
	}
	if (!w->asleep) {
		/* Counted first, then the sequence read: a drain after this read
		   changes it, so the futex wait below cannot miss that drain. The
		   caller looks for room once more before the first sleep. */
		w->asleep = 1;
		atomic_fetch_add(&h->waiters, 1);
		w->seq = w->seq0 = atomic_load(&h->drain_seq);
		return 1;
	}
	/* The raw system call: malloc must not become a cancellation point. */
	struct timespec ts = {0, HT_SLEEP_NS};
	int save = errno;
	syscall(SYS_futex, &h->drain_seq, FUTEX_WAIT, w->seq, &ts, NULL, 0);
	errno = save;
	w->seq = atomic_load(&h->drain_seq);
	return 1;
}

static struct ht__ring *ring_at(uint32_t i)
{
	return (struct ht__ring *)(ht__g.rings + (size_t)i * ht__g.ring_stride);
}

/*
 * Claims the lowest free ring: one that a thread gave back and the collector
 * freed is taken again before a ring never used, whose first lap faults in
 * and zeroes 256 pages of the session's file (1 MiB rings), and ring_reach
 * stays near the most threads that held rings at once. Claims used to start
 * after the last one (the header's ring_hint, no longer read), so that a
 * program whose threads come and go walked through every ring: 40 threads
 * one after another, 20 000 pairs each, took 40 rings and 10 933 page
 * faults (2 225 now), and the collector's RSS grew with them.
 */
static int try_claim(struct ht__thread *t)
{
	struct ht__shm_header *h = ht__g.hdr;
	for (uint32_t i = 0; i < ht__g.ring_count; i++) {
		struct ht__ring *r = ring_at(i);
		uint32_t s = HT_RING_FREE;
		if (atomic_load_explicit(&r->state, memory_order_relaxed) != HT_RING_FREE ||
		    !atomic_compare_exchange_strong(&r->state, &s, HT_RING_OWNED))
			continue;
		ht__ring_reached(h, i);
		/* The collector reads these after it sees our first write_pos. */
		r->pid = ht__g.pid;
		r->tid = t->tid;
		r->instance = ht__g.instance;
		r->clock = ht__g.clock;
		atomic_store_explicit(&r->lost, 0, memory_order_relaxed);
		atomic_store_explicit(&r->events, 0, memory_order_relaxed);
		t->ring = r;
		t->data = (char *)r + HT_RING_HEADER_SIZE;
		t->wpos = atomic_load_explicit(&r->write_pos, memory_order_acquire);
		t->fast = 0;
		t->limit =
		    atomic_load_explicit(&r->read_pos, memory_order_acquire) + ht__g.ring_size;
		return 1;
	}
	return 0;
}

/*
 * Waiting for a ring is worth it while the collector may still free one: it
 * frees released rings and those of dead threads within a few ticks. Once
 * it has been seen ticking for HT_CLAIM_NS since the wait went to sleep and no ring
 * came free (none changed hands: rings_held), the rings are held by live
 * threads and more waiting only stalls the program (a thread that waits
 * may hold the program's lock: 300 Python threads waited two seconds each,
 * one after the other, under the GIL). Then the event is counted in
 * rings_exhausted, and for HT_CLAIM_QUIET_NS the other threads of the
 * process try without waiting.
 */
#define HT_CLAIM_NS 200000000ull
#define HT_CLAIM_QUIET_NS 1000000000ull
/* Drains the collector must also have finished while we waited: the
   heartbeat is stamped as a tick starts, and a ring released before the wait
   is free only a drain or two after the collector ran at all (qa: on a loaded
   machine the one late tick that stamped it gave every waiter up). */
#define HT_CLAIM_DRAINS 4u

/*
 * Who holds the rings, as one number: it changes when a ring is released,
 * freed or claimed. A wait for a ring starts over while it changes: rings
 * come free, only to other waiters so far (qa: 40 threads taking turns on 2
 * rings, each holding one for 20 ms, gave up 83 events; on a loaded machine
 * 20 threads holding them for a moment did). One look at each ring, only
 * when a wait would give up.
 */
static uint64_t rings_held(void)
{
	uint64_t h = 0;
	uint32_t n = ht__rings_reached(ht__g.hdr, ht__g.ring_count);
	for (uint32_t i = 0; i < n; i++) {
		struct ht__ring *r = ring_at(i);
		uint32_t st = atomic_load_explicit(&r->state, memory_order_relaxed);
		if (st == HT_RING_FREE)
			continue;
		uint64_t v = (uint64_t)(uint32_t)__atomic_load_n(&r->pid, __ATOMIC_RELAXED) << 32 |
			     (uint32_t)__atomic_load_n(&r->tid, __ATOMIC_RELAXED);
		h = (h ^ v ^ ((uint64_t)i << 2 | st)) * 0x100000001b3ull;
	}
	return h;
}

/* A ring was just claimed: the thread's exit cleanup and THREAD_START. */
static void claimed(struct ht__thread *t)
{
	if (t->exited)
		return;
	ht__thread_watch(t);
	reg_add(t->tid);
	/* While an instance starts, it writes PROCESS_START first, then this.
	   A thread past its key destructor only borrows the ring for one event. */
	if (atomic_load(&ht__g.state) == HT_ST_READY && !t->exited) {
		if (HT_UNLIKELY(atomic_load(&ht__g.process_pending)))
			ht__write_process_pending();
		char name[16] = {0};
		prctl(PR_GET_NAME, name, 0, 0, 0);
		ht__write_thread(t, HT_REC_THREAD_START, t->tid, name);
	}
}

/* Claims a ring for this thread and writes its THREAD_START. */
static int claim_ring(struct ht__thread *t)
{
	if (!t->tid)
		t->tid = (int32_t)syscall(SYS_gettid);
	struct ht__wait w = {0};
	uint64_t held = 0;	 /* rings_held() since the wait went to sleep */
	uint64_t held_since = 0; /* the clock when held was taken */
	while (!try_claim(t)) {
		/* After one timeout, later events only try once each. */
		if (t->no_ring || atomic_load(&ht__g.state) == HT_ST_DORMANT)
			goto fail;
		uint64_t gave_up = atomic_load_explicit(&claim_gave_up, memory_order_relaxed);
		if (gave_up && ht__clock() - gave_up < HT_CLAIM_QUIET_NS)
			goto fail;
		int asleep = w.asleep;
		if (!wait_step(&w))
			return 0;
		/* The window starts with the first look at the holders, not with
		   the wait: on a loaded machine the wait's spins and yields (there
		   were yields until session 28) took 350 ms, and the two looks came 7 ms apart
		   while rings changed hands every few ms (preload.ring_full lost 3 to 70
		   allocations). */
		if (w.asleep && !asleep) {
			held = rings_held();
			held_since = ht__clock();
		}
		if (!held_since)
			continue;
		/* Only the collector's ticking counts: a stopped collector frees
		   no ring, however long it is stopped. */
		uint64_t hb = atomic_load_explicit(&ht__g.hdr->heartbeat_ns, memory_order_relaxed);
		if (hb > held_since && hb - held_since > HT_CLAIM_NS && w.asleep &&
		    atomic_load(&ht__g.hdr->drain_seq) - w.seq0 >= HT_CLAIM_DRAINS) {
			uint64_t now_held = rings_held();
			if (now_held != held) { /* rings changed hands: wait on */
				held = now_held;
				held_since = hb;
				w.seq0 = atomic_load(&ht__g.hdr->drain_seq);
				continue;
			}
			t->no_ring = 1;
			atomic_store_explicit(&claim_gave_up, ht__clock(), memory_order_relaxed);
			goto fail;
		}
	}
	wait_end(&w);
	t->no_ring = 0;
	claimed(t);
	return 1;
fail:
	wait_end(&w);
	atomic_fetch_add(&ht__g.hdr->rings_exhausted, 1);
	ht__lose(HT_LOSS_NO_BUFFER);
	return 0;
}

int ht__ring_claim_now(struct ht__thread *t)
{
	if (!t->tid)
		t->tid = (int32_t)syscall(SYS_gettid);
	if (!try_claim(t))
		return 0;
	claimed(t);
	return 1;
}

int ht__make_room(struct ht__thread *t, uint32_t len)
{
	if (!t->ring && !claim_ring(t))
		return 0;
	if (len > ht__g.ring_size - 16)
		return 0; /* can never fit */
	struct ht__wait w = {0};
	for (;;) {
		uint32_t off = (uint32_t)t->wpos & ht__g.ring_mask;
		uint32_t tail = ht__g.ring_size - off;
		uint64_t need = (len > tail || tail - len == 8) ? (uint64_t)tail + len : len;
		/* In a small ring PAD + record may exceed the ring: PAD alone first. */
		uint64_t want = need > ht__g.ring_size ? tail : need;
		if (t->wpos + want > t->limit)
			t->limit = atomic_load_explicit(&t->ring->read_pos, memory_order_acquire) +
				   ht__g.ring_size;
		if (t->wpos + want <= t->limit) {
			if (want == need) {
				wait_end(&w);
				return 1;
			}
			struct ht__rec *pad = (struct ht__rec *)(t->data + off);
			memset(pad, 0, sizeof *pad);
			pad->type = HT_REC_PAD;
			pad->len = (uint16_t)tail;
			t->wpos += tail;
			atomic_store_explicit(&t->ring->write_pos, t->wpos, memory_order_release);
			continue;
		}
		if (ht__g.flags & HT_SHM_LOSSY) {
			atomic_store_explicit(
			    &t->ring->lost,
			    atomic_load_explicit(&t->ring->lost, memory_order_relaxed) + 1,
			    memory_order_relaxed);
			ht__lose(HT_LOSS_LOSSY);
			wait_end(&w);
			return 0;
		}
		/* Counted once per wait, on the cold path only. */
		if (!w.n)
			atomic_fetch_add_explicit(&ht__g.hdr->room_waits, 1, memory_order_relaxed);
		int was_asleep = w.asleep;
		if (!wait_step(&w))
			return 0;
		if (w.asleep && !was_asleep)
			atomic_fetch_add_explicit(&ht__g.hdr->room_sleeps, 1, memory_order_relaxed);
	}
}

/* Keeps errno: the hottest hooks leave it to the record (rec_heap.h,
   ht__ring_alloc), whose waits and claims here make system calls. */
static uint64_t rec_room(struct ht__thread *t, uint32_t len)
{
	if (HT_UNLIKELY(t->watch_wait) && !t->map_hook)
		ht__thread_watch(t);
	uint64_t pos = t->wpos;
	uint32_t off = (uint32_t)pos & ht__g.ring_mask;
	uint32_t tail = ht__g.ring_size - off;
	/* A tail of 8 bytes could not hold a PAD header: never leave one. */
	int wrap = len > tail || tail - len == 8;
	uint64_t need = wrap ? (uint64_t)tail + len : len;
	if (pos + need > t->limit) {
		if (!ht__make_room(t, len)) {
			t->fast = 0;
			return UINT64_MAX;
		}
		pos = t->wpos;
		off = (uint32_t)pos & ht__g.ring_mask;
		tail = ht__g.ring_size - off;
		wrap = len > tail || tail - len == 8;
	}
	if (wrap) {
		struct ht__rec *pad = (struct ht__rec *)(t->data + off);
		memset(pad, 0, sizeof *pad);
		pad->type = HT_REC_PAD;
		pad->len = (uint16_t)tail;
		pos += tail;
	}
	/* The next records need no PAD while 16 bytes stay before the ring's
	   end, and no look at read_pos below the cached limit. */
	uint64_t end = (pos | ht__g.ring_mask) + 1 - 16;
	t->fast = t->watch_wait ? 0 : end < t->limit ? end : t->limit;
	return pos;
}

uint64_t ht__rec_room(struct ht__thread *t, uint32_t len)
{
	int e = errno;
	uint64_t pos = rec_room(t, len);
	errno = e;
	return pos;
}

void ht__thread_release(struct ht__thread *t)
{
	if (!t->ring)
		return;
	struct ht__rec *r = ht__rec_begin(t, HT_REC_THREAD_EXIT, 0, sizeof *r, 0);
	if (r)
		ht__rec_commit(t);
	reg_del();
	ht__ring_done(t->ring);
	atomic_store_explicit(&t->ring->state, HT_RING_RELEASED, memory_order_release);
	t->ring = NULL;
	t->data = NULL;
	t->wpos = t->limit = t->next = t->fast = 0;
}

static void linger_release(struct ht__thread *t)
{
	ht__ring_done(t->ring);
	atomic_store_explicit(&t->ring->state, HT_RING_RELEASED, memory_order_release);
	t->ring = NULL;
	t->data = NULL;
	t->wpos = t->limit = t->next = t->fast = 0;
}

void ht__write_thread(struct ht__thread *t, unsigned type, pid_t tid, const char *name)
{
	struct ht__rec_thread *r = (struct ht__rec_thread *)ht__rec_begin(t, type, 0, sizeof *r, 0);
	if (!r)
		return;
	r->tid = tid;
	r->pad = 0;
	memset(r->name, 0, sizeof r->name);
	strncpy(r->name, name, sizeof r->name - 1);
	ht__rec_commit(t);
}

/* PROCESS_EXIT for ourselves (exit, _exit) or for a child reaped by wait. */
void ht__write_exit(pid_t pid, int kind, int value)
{
	struct ht__thread *t = &ht__t;
	if (atomic_load(&ht__g.state) != HT_ST_READY || t->guard)
		return;
	int save = errno;
	if (HT_UNLIKELY(!*ht__g.alive)) {
		ht__g.child(); /* a raw clone's child exits before any event */
		if (atomic_load(&ht__g.state) != HT_ST_READY) {
			errno = save;
			return;
		}
	}
	ht__guard_at(t, HT_GUARD_HOOK, __builtin_frame_address(0));
	struct ht__rec_exit *r =
	    (struct ht__rec_exit *)ht__rec_begin(t, HT_REC_PROCESS_EXIT, 0, sizeof *r, 0);
	if (r) {
		r->pid = pid;
		r->kind = (uint32_t)kind;
		r->value = value;
		r->pad = 0;
		ht__rec_commit(t);
	}
	ht__leave(t);
	errno = save;
}

/* ht__leave() of an event recorded inside another hook's real call (that
   hook's guard, REAL, comes back: a handler's next event is one such too,
   and keeps that hook's frame), or of a thread past its key destructor. */
void ht__leave_cold(struct ht__thread *t)
{
	if (t->nested & ~HT_NESTED_CHILD) {
		t->nested--;
		t->guard = HT_GUARD_REAL;
		return;
	}
	if (t->nested) { /* the hook a handler's fork interrupted, in the child */
		ht__child_resume(t);
		return;
	}
	if (t->exited && t->ring)
		linger_release(t);
	/* The exit cleanup waited for a hook outside a mapping hook: snapshot
	   mode writes no record for the heap events after it (each thread left
	   its unwinding stack mapped: allocators.attached-keys-snapshot). */
	if (t->watch_wait && !t->map_hook)
		ht__thread_watch(t);
	t->guard = 0;
}
