/*
 * The cold side of the ring writer: claiming a ring for a thread, waiting for
 * room (lossless) or dropping (lossy), noticing a dead or stopping session,
 * releasing the ring when the thread exits, and the thread records.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#define HT_DEAD_NS 2000000000ull /* heartbeat older than this: collector gone */

static pthread_key_t ht_key;
static int ht_key_ok;
static _Atomic uint64_t ht_claim_gave_up; /* when a claim of ours last gave up (ht_claim) */

/*
 * Threads that own a ring, so pthread_setname_np() on another thread can
 * name it by tid. Scanned only on that rare call.
 */
#define HT_REG_SIZE 1024
static struct {
	_Atomic unsigned long self;
	pid_t tid;
} ht_reg[HT_REG_SIZE];

static void ht_reg_add(pid_t tid)
{
	unsigned long self = (unsigned long)pthread_self();
	for (unsigned i = 0; i < HT_REG_SIZE; i++) {
		unsigned long z = 0;
		if (atomic_load_explicit(&ht_reg[i].self, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&ht_reg[i].self, &z, self)) {
			ht_reg[i].tid = tid;
			return;
		}
	}
}

static void ht_reg_del(void)
{
	unsigned long self = (unsigned long)pthread_self();
	for (unsigned i = 0; i < HT_REG_SIZE; i++)
		if (atomic_load_explicit(&ht_reg[i].self, memory_order_relaxed) == self) {
			atomic_store(&ht_reg[i].self, 0);
			return;
		}
}

pid_t ht__thread_tid(unsigned long pthread)
{
	for (unsigned i = 0; i < HT_REG_SIZE; i++)
		if (atomic_load(&ht_reg[i].self) == pthread)
			return ht_reg[i].tid;
	return 0;
}

void ht__thread_forget_all(void)
{
	for (unsigned i = 0; i < HT_REG_SIZE; i++)
		atomic_store(&ht_reg[i].self, 0);
	atomic_store(&ht_claim_gave_up, 0);
}

/*
 * Thread exit: THREAD_EXIT, then the ring goes to the collector, and the
 * unwinding stack is unmapped. Set up by the first ring claim or unwinding
 * stack of the thread (ht__thread_watch).
 */
static void ht_key_destructor(void *arg)
{
	(void)arg;
	struct ht__thread *t = &ht__t;
	int save = errno;
	t->guard++;
	ht__thread_release(t);
	ht__ustack_unmap(t);
	t->exited = 1;
	t->guard--;
	errno = save;
}

void ht__thread_watch(struct ht__thread *t)
{
	if (ht_key_ok)
		pthread_setspecific(ht_key, t);
}

void ht__threads_init(void)
{
	ht_key_ok = pthread_key_create(&ht_key, ht_key_destructor) == 0;
}

/* The state of one wait for the collector (for room or for a ring). */
struct ht_wait {
	unsigned n;
	uint64_t since; /* when the wait began to sleep */
};

/*
 * The collector died long ago: no heartbeat for two seconds and its process
 * is gone. A wait that starts then gives up at once instead of after two
 * more seconds; without this, once the dead session's rings are all taken,
 * every new process and thread of the program (each exec of a long shell
 * script) would stall two seconds at its first event. A session nobody
 * collects yet (collector_pid 0, a buffer waiting for its session) is never
 * gone. Cold path: the kill() is made once per wait.
 */
static int ht_collector_gone(struct ht__shm_header *h, uint64_t now, uint64_t hb)
{
	pid_t pid = h->collector_pid;
	if (pid <= 0 || now <= hb || now - hb <= HT_DEAD_NS)
		return 0;
	int save = errno;
	int gone = kill(pid, 0) < 0 && errno == ESRCH;
	errno = save;
	return gone;
}

/*
 * One step of waiting for the collector: spin, then yield, then sleep 50 us.
 * Returns 0 when the session is stopping or dead: no heartbeat for two
 * seconds, counted from the later of the last heartbeat and the start of
 * this wait (a collector that never beat gets two seconds too), or at once
 * when the collector is gone (ht_collector_gone). The recorder has then
 * gone dormant.
 */
static int ht_wait_step(struct ht_wait *w)
{
	unsigned i = w->n++;
	if (i < 64) {
		__builtin_ia32_pause();
		return 1;
	}
	struct ht__shm_header *h = ht__g.hdr;
	uint64_t now = ht__clock();
	uint64_t hb = atomic_load(&h->heartbeat_ns);
	if (!w->since) {
		w->since = now;
		if (ht_collector_gone(h, now, hb)) {
			ht__go_dormant();
			return 0;
		}
	}
	if (hb < w->since)
		hb = w->since;
	if (atomic_load(&h->state) == HT_SESSION_STOPPING || (now > hb && now - hb > HT_DEAD_NS)) {
		ht__go_dormant();
		return 0;
	}
	if (i < 128) {
		sched_yield();
	} else {
		/* Not nanosleep(): that is a cancellation point, and malloc must
		   not become one (a thread cancelled in here leaks the block). */
		struct timespec ts = {0, 50000};
		syscall(SYS_nanosleep, &ts, NULL);
	}
	return 1;
}

static struct ht__ring *ht_ring(uint32_t i)
{
	return (struct ht__ring *)(ht__g.rings + (size_t)i * ht__g.ring_stride);
}

static int ht_try_claim(struct ht__thread *t)
{
	struct ht__shm_header *h = ht__g.hdr;
	uint32_t start = atomic_load_explicit(&h->ring_hint, memory_order_relaxed);
	for (uint32_t k = 0; k < ht__g.ring_count; k++) {
		uint32_t i = (start + k) % ht__g.ring_count;
		struct ht__ring *r = ht_ring(i);
		uint32_t s = HT_RING_FREE;
		if (atomic_load_explicit(&r->state, memory_order_relaxed) != HT_RING_FREE ||
		    !atomic_compare_exchange_strong(&r->state, &s, HT_RING_OWNED))
			continue;
		/* The collector reads these after it sees our first write_pos. */
		r->pid = ht__g.pid;
		r->tid = t->tid;
		r->instance = ht__g.instance;
		atomic_store_explicit(&r->lost, 0, memory_order_relaxed);
		t->ring = r;
		t->data = (char *)r + HT_RING_HEADER_SIZE;
		t->wpos = atomic_load_explicit(&r->write_pos, memory_order_acquire);
		t->limit =
		    atomic_load_explicit(&r->read_pos, memory_order_acquire) + ht__g.ring_size;
		atomic_store_explicit(&h->ring_hint, (i + 1) % ht__g.ring_count,
				      memory_order_relaxed);
		return 1;
	}
	return 0;
}

/*
 * Waiting for a ring is worth it while the collector may still free one: it
 * frees released rings and those of dead threads within a few ticks. Once
 * it has been seen ticking for HT_CLAIM_NS since the wait began and no ring
 * came free, the rings are held by live threads and more waiting only
 * stalls the program (a thread that waits may hold the program's lock: 300
 * Python threads waited two seconds each, one after the other, under the
 * GIL). Then the event is counted in rings_exhausted, and for
 * HT_CLAIM_QUIET_NS the other threads of the process try without waiting.
 */
#define HT_CLAIM_NS 200000000ull
#define HT_CLAIM_QUIET_NS 1000000000ull

/* Claims a ring for this thread and writes its THREAD_START. */
static int ht_claim(struct ht__thread *t)
{
	if (!t->tid)
		t->tid = (int32_t)syscall(SYS_gettid);
	struct ht_wait w = {0, 0};
	while (!ht_try_claim(t)) {
		/* After one timeout, later events only try once each. */
		if (t->no_ring || atomic_load(&ht__g.state) == HT_ST_DORMANT)
			goto fail;
		uint64_t gave_up = atomic_load_explicit(&ht_claim_gave_up, memory_order_relaxed);
		if (gave_up && ht__clock() - gave_up < HT_CLAIM_QUIET_NS)
			goto fail;
		if (!ht_wait_step(&w))
			return 0;
		if (!w.since)
			continue;
		uint64_t now = ht__clock();
		uint64_t hb = atomic_load_explicit(&ht__g.hdr->heartbeat_ns, memory_order_relaxed);
		if (now - w.since > HT_DEAD_NS || (hb > w.since && hb - w.since > HT_CLAIM_NS)) {
			t->no_ring = 1;
			atomic_store_explicit(&ht_claim_gave_up, now, memory_order_relaxed);
			goto fail;
		}
	}
	t->no_ring = 0;
	if (t->exited)
		return 1;
	ht__thread_watch(t);
	ht_reg_add(t->tid);
	/* While an instance starts, it writes PROCESS_START first, then this.
	   A thread past its key destructor only borrows the ring for one event. */
	if (atomic_load(&ht__g.state) == HT_ST_READY && !t->exited) {
		if (HT_UNLIKELY(atomic_load(&ht__g.process_pending)))
			ht__write_process_pending();
		char name[16] = {0};
		prctl(PR_GET_NAME, name, 0, 0, 0);
		ht__write_thread(t, HT_REC_THREAD_START, t->tid, name);
	}
	return 1;
fail:
	atomic_fetch_add(&ht__g.hdr->rings_exhausted, 1);
	return 0;
}

int ht__make_room(struct ht__thread *t, uint32_t len)
{
	if (!t->ring && !ht_claim(t))
		return 0;
	if (len > ht__g.ring_size - 16)
		return 0; /* can never fit */
	struct ht_wait w = {0, 0};
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
			if (want == need)
				return 1;
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
			return 0;
		}
		if (!ht_wait_step(&w))
			return 0;
	}
}

void ht__thread_release(struct ht__thread *t)
{
	if (!t->ring)
		return;
	struct ht__rec *r = ht__rec_begin(t, HT_REC_THREAD_EXIT, 0, sizeof *r, 0);
	if (r)
		ht__rec_commit(t);
	ht_reg_del();
	atomic_store_explicit(&t->ring->state, HT_RING_RELEASED, memory_order_release);
	t->ring = NULL;
	t->data = NULL;
	t->wpos = t->limit = t->next = 0;
}

void ht__thread_linger_release(struct ht__thread *t)
{
	atomic_store_explicit(&t->ring->state, HT_RING_RELEASED, memory_order_release);
	t->ring = NULL;
	t->data = NULL;
	t->wpos = t->limit = t->next = 0;
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
	t->guard = 1;
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
