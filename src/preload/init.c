/*
 * Start-up of the recorder: resolving the real functions (serving dlsym's own
 * allocations from a static buffer), mapping the session file, and starting an
 * instance (PROCESS_START, THREAD_START, modules) at the first hook call, from
 * the constructor, after fork and after exec.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <libunwind.h>

#include "internal.h"

static const uint32_t alive_always = 1;
struct ht__global ht__g = {.alive = (volatile uint32_t *)&alive_always};
struct ht__real ht__real;
__thread struct ht__thread ht__t __attribute__((tls_model("initial-exec")));

/*
 * dlsym() allocates (calloc for its error state) before we know the real
 * malloc. Those few blocks come from here and are never freed: free() ignores
 * pointers in this range.
 */
char ht__boot_buf[HT_BOOT_SIZE] __attribute__((aligned(64)));
static _Atomic size_t boot_used;

void *ht__boot_alloc(size_t size, size_t align)
{
	if (align < 16)
		align = 16;
	for (;;) {
		size_t used = atomic_load(&boot_used);
		size_t start = (used + 16 + align - 1) & ~(align - 1);
		if (size > HT_BOOT_SIZE || start + size > HT_BOOT_SIZE)
			return NULL;
		if (atomic_compare_exchange_weak(&boot_used, &used, start + size)) {
			/* The size sits just before the block, for realloc. */
			memcpy(ht__boot_buf + start - sizeof(size_t), &size, sizeof(size_t));
			return ht__boot_buf + start;
		}
	}
}

void *ht__scratch_realloc(struct ht__thread *t, void *old, size_t size, int zero)
{
	/* Each block is preceded by its size, 16-byte aligned. */
	size_t start = ((size_t)t->scratch_used + sizeof(size_t) + 15) & ~(size_t)15;
	if (size > t->scratch_size || start + size > t->scratch_size)
		return NULL;
	char *p = t->scratch + start;
	memcpy(p - sizeof(size_t), &size, sizeof(size_t));
	t->scratch_used = (uint32_t)(start + size);
	if (zero)
		memset(p, 0, size);
	if (old && ht__in_scratch(t, old)) {
		size_t n;
		memcpy(&n, (char *)old - sizeof(size_t), sizeof(size_t));
		memcpy(p, old, n < size ? n : size);
	}
	return p;
}

size_t ht__boot_size(const void *p)
{
	size_t n;
	memcpy(&n, (const char *)p - sizeof(size_t), sizeof(size_t));
	return n;
}

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/*
 * Anonymous memory of the recorder itself: never malloc, never the hooked
 * mmap, and in the window [HT_OWN_BASE, HT_OWN_END) when that address is
 * free, so the session does not count it as the program's (docs/
 * session-protocol.md, "Mappings no hook saw"). Addresses are not reused;
 * a window used up, or a kernel that places it elsewhere, leaves it where
 * it lands (it then counts like the program's memory).
 */
static _Atomic uint64_t own_next = HT_OWN_BASE;

void *ht__own_mmap(size_t len, int prot, int flags)
{
	uint64_t size = (len + 4095) & ~4095ull;
	uint64_t at = atomic_fetch_add(&own_next, size + 4096);
	long p = -1;
	if (at + size <= HT_OWN_END) {
		p = syscall(SYS_mmap, (void *)at, len, prot, flags | MAP_FIXED_NOREPLACE, -1, 0);
		if (p >= 0 && (uint64_t)p != at) { /* the hint ignored: give it back */
			syscall(SYS_munmap, (void *)p, len);
			p = -1;
		}
	}
	if (p < 0 && p > -4096)
		p = syscall(SYS_mmap, NULL, len, prot, flags, -1, 0);
	if (p < 0 && p > -4096)
		return MAP_FAILED;
	return (void *)p;
}

void *ht__raw_mmap(size_t len)
{
	void *p = ht__own_mmap(len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
	return p == MAP_FAILED ? NULL : p;
}

uint64_t ht__now(void)
{
	return ht__clock();
}

#define RESOLVE(ret, name, params, attr, mode)                                                     \
	ht__real.name = (__typeof__(ht__real.name))dlsym(RTLD_NEXT, #name);

/* Resolves every real function once, in the list's order. Re-entrant calls get boot memory. */
void ht__resolve(void)
{
	static _Atomic int done;
	if (atomic_load(&done))
		return;
	int save = errno;
	sigset_t old;
	ht__signals_hold(&old);
	ht__t.guard += HT_GUARD_OWN;
	HT__LIBC_HOOKS(RESOLVE)
	ht__t.guard -= HT_GUARD_OWN;
	atomic_store(&done, 1);
	ht__signals_release(&old);
	errno = save;
}

void ht__signals_hold(sigset_t *old)
{
	sigset_t all;
	sigfillset(&all);
	static const int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT};
	for (unsigned i = 0; i < sizeof faults / sizeof faults[0]; i++)
		sigdelset(&all, faults[i]);
	pthread_sigmask(SIG_BLOCK, &all, old);
}

void ht__signals_release(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

void ht__go_dormant(void)
{
	atomic_store(&ht__g.state, HT_ST_DORMANT);
}

void ht__stop_recording(void)
{
	atomic_store(&ht__g.untraced, 1);
	ht__go_dormant();
}

#define LOSS_NONE ((struct ht__shm_loss *)UINTPTR_MAX)

/* This image's slot of the loss table, claimed at its first loss. */
static struct ht__shm_loss *loss_slot(void)
{
	struct ht__shm_loss *l = atomic_load_explicit(&ht__g.loss, memory_order_acquire);
	if (HT_LIKELY(l))
		return l == LOSS_NONE ? NULL : l;
	struct ht__shm_loss *tab = ht__shm_losses(ht__g.hdr), *mine = LOSS_NONE;
	for (uint32_t i = 0; i < HT_LOSS_SLOTS; i++) {
		int32_t z = 0;
		if (atomic_load_explicit(&tab[i].pid, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&tab[i].pid, &z, -1)) {
			tab[i].instance = ht__g.instance;
			atomic_store_explicit(&tab[i].pid, ht__g.pid, memory_order_release);
			mine = &tab[i];
			break;
		}
	}
	/* Two threads may claim at once: the one that publishes first wins and
	   the other gives its slot back (it holds no count yet). */
	struct ht__shm_loss *none = NULL;
	if (!atomic_compare_exchange_strong(&ht__g.loss, &none, mine)) {
		if (mine != LOSS_NONE)
			atomic_store(&mine->pid, 0);
		mine = none;
	}
	return mine == LOSS_NONE ? NULL : mine;
}

/*
 * One event of this image not recorded. Cold: the trace-wide counters are
 * bumped by the callers as before; this keeps the same count by process,
 * and when the first one happened. Async-signal-safe (atomics, vDSO clock).
 */
void ht__lose(unsigned cause)
{
	struct ht__shm_loss *l = loss_slot();
	if (!l)
		return;
	atomic_fetch_add_explicit(&l->n[cause], 1, memory_order_relaxed);
	_Atomic uint64_t *first = cause == HT_LOSS_UNTRACED ? &l->untraced_ns : &l->first_ns;
	if (!atomic_load_explicit(first, memory_order_relaxed)) {
		uint64_t z = 0;
		atomic_compare_exchange_strong(first, &z, ht__clock());
	}
}

/* Counting ends once the session has read the table for the last time. */
void ht__lose_untraced(void)
{
	if (atomic_load_explicit(&ht__g.hdr->state, memory_order_relaxed) == HT_SESSION_DONE)
		atomic_store(&ht__g.untraced, 0);
	else
		ht__lose(HT_LOSS_UNTRACED);
}

/* The path of the running program, also the main module's path. */
char ht__exe[4096];
uint32_t ht__exe_len;
/* /proc/self/cmdline, truncated so PROCESS_START stays a small record. */
static char args[16384];

static uint32_t random_token(void)
{
	uint32_t v = 0;
	if (syscall(SYS_getrandom, &v, sizeof v, 1 /* GRND_NONBLOCK */) != (long)sizeof v || v == 0)
		v = (uint32_t)(ht__clock() * 2654435761u) ^ (uint32_t)getpid();
	return v ? v : 1;
}

/* Raw system calls: open, read and close are cancellation points, and the
   fork child and first hook that get here must not become ones. */
static uint32_t args_read; /* of the last read, which a fork child has a copy of */

static uint32_t read_args(void)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	/* No descriptor left (RLIMIT_NOFILE, EMFILE): a fork child's
	   arguments are its parent's, read before. */
	if (fd < 0)
		return args_read;
	uint32_t n = 0;
	for (;;) {
		long r = syscall(SYS_read, fd, args + n, sizeof args - n);
		if (r <= 0)
			break;
		n += (uint32_t)r;
		if (n == sizeof args)
			break;
	}
	syscall(SYS_close, fd);
	/* Cut a truncated list at its last complete argument. */
	if (n == sizeof args)
		while (n > 0 && args[n - 1] != '\0')
			n--;
	return args_read = n;
}

/*
 * The pid of the process a fork child was copied from. getppid() in the child
 * is not it when the parent exits first: the child is then adopted (by the
 * session, a subreaper), and the trace would lose the parent link.
 */
static pid_t fork_parent;

/* Returns 0 when the record was dropped (no ring could be had). */
static int write_process(uint32_t flags)
{
	struct ht__thread *t = &ht__t;
	uint32_t args_len = read_args();
	uint32_t max = ht__g.ring_size / 4;
	if (sizeof(struct ht__rec_process) + ht__exe_len + args_len > max)
		args_len = 0;
	uint32_t len =
	    ht__rec_align((uint32_t)sizeof(struct ht__rec_process) + ht__exe_len + args_len);
	struct ht__rec_process *r =
	    (struct ht__rec_process *)ht__rec_begin(t, HT_REC_PROCESS_START, 0, len, 0);
	if (!r)
		return 0;
	r->pid = ht__g.pid;
	r->ppid = (flags & HT_PROC_FORK) && fork_parent ? fork_parent : getppid();
	r->flags = flags;
	r->instance = ht__g.instance;
	r->exe_len = ht__exe_len;
	r->args_len = args_len;
	char *p = (char *)(r + 1);
	memcpy(p, ht__exe, ht__exe_len);
	memcpy(p + ht__exe_len, args, args_len);
	memset(p + ht__exe_len + args_len, 0, len - sizeof *r - ht__exe_len - args_len);
	ht__rec_commit(t);
	return 1;
}

/* PROCESS_START that could not be written when the instance began. */
void ht__write_process_pending(void)
{
	uint32_t f = atomic_exchange(&ht__g.process_pending, 0);
	if (f && !write_process(f & ~HT_PROC_PENDING))
		atomic_store(&ht__g.process_pending, f);
}

/*
 * First records of an instance, written by the thread that starts it while
 * the state is still INITIALIZING, so no other thread can write first.
 */
/* instance_begin(): the instance's token and loss slot are already set. */
#define HT_PROC_KEEP_ID 0x40000000u

static void instance_begin(uint32_t flags)
{
	struct ht__thread *t = &ht__t;
	if (!(flags & HT_PROC_KEEP_ID)) { /* else chosen with the loss slot (child_defer) */
		ht__g.instance = random_token();
		atomic_store(&ht__g.loss, NULL); /* a fork child's copy is its parent's */
		atomic_store(&ht__g.untraced, 0);
	}
	flags &= ~HT_PROC_KEEP_ID;
	ht__g.errno_off = (intptr_t)((char *)&errno - (char *)__builtin_thread_pointer());
	ht__note_begin();
	ht__stacks_init();
	ht__modules_reset();
	ht__snap_reset();
	/* Without a ring now, the first thread that gets one writes it. */
	atomic_store(&ht__g.process_pending, write_process(flags) ? 0 : flags | HT_PROC_PENDING);
	char name[16] = {0};
	prctl(PR_GET_NAME, name, 0, 0, 0);
	if (t->ring)
		ht__write_thread(t, HT_REC_THREAD_START, t->tid, name);
	ht__modules_refresh(1);
	ht__crash_arm();
	atomic_store(&ht__g.state, HT_ST_READY);
}

/*
 * The fork sentinel (ht__g.alive): one page the kernel zeroes in a child
 * that does not share our memory. Set up once per image; after that a
 * child made with inline assembly, which no hook sees, is found at its
 * first event by one load.
 */
static void arm_alive(void)
{
	if (!ht__g.wipe) {
		uint32_t *p = ht__raw_mmap(4096);
		if (p && syscall(SYS_madvise, p, 4096, 18 /* MADV_WIPEONFORK */) == 0) {
			ht__g.alive = p;
			ht__g.wipe = 1;
		} else if (p) {
			syscall(SYS_munmap, p, 4096);
		}
	}
	if (ht__g.wipe)
		*ht__g.alive = 1;
}

/*
 * Maps the session file at path and starts the first instance of this
 * process image, its PROCESS_START carrying flags (attach.c passes
 * HT_PROC_ATTACHED). Returns 0, or a negative enum ht_error with the
 * recorder dormant.
 */
int ht__init_session(const char *path, uint32_t flags)
{
	struct ht__thread *t = &ht__t;
	if (!t->tid)
		t->tid = (int32_t)syscall(SYS_gettid);
	int rc = HT_ERR_INVALID;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		rc = errno == EACCES || errno == EPERM ? HT_ERR_PERM : HT_ERR_NOT_FOUND;
		goto dormant;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < HT_SHM_HEADER_SIZE) {
		close(fd);
		goto dormant;
	}
	long m =
	    syscall(SYS_mmap, NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m < 0 && m > -4096) {
		rc = HT_ERR_NOMEM;
		goto dormant;
	}
	struct ht__shm_header *h = (struct ht__shm_header *)m;
	size_t size = (size_t)st.st_size;
	if (h->magic != HT_SHM_MAGIC || h->version != HT_PROTO_VERSION ||
	    h->header_size < sizeof *h || h->ring_size < 4096 || h->clock > HT_CLOCK_TSC ||
	    (h->ring_size & (h->ring_size - 1)) || h->ring_count == 0 ||
	    h->header_size + (uint64_t)h->ring_count * (HT_RING_HEADER_SIZE + h->ring_size) >
		size ||
	    atomic_load(&h->state) >= HT_SESSION_STOPPING)
		goto unmap;
	pid_t pid = getpid();
	if ((h->flags & HT_SHM_NO_FOLLOW) && pid != h->root_pid)
		goto unmap;

	ht__g.hdr = h;
	ht__g.map_size = size;
	ht__g.rings = (char *)h + h->header_size;
	ht__g.ring_size = h->ring_size;
	ht__g.ring_mask = h->ring_size - 1;
	ht__g.ring_count = h->ring_count;
	ht__g.ring_stride = HT_RING_HEADER_SIZE + h->ring_size;
	ht__g.flags = h->flags;
	ht__g.stack_mask = h->stack_mask;
	ht__g.sample_rate = h->sample_rate;
	ht__g.clock = h->clock;
	ht__g.pid = pid;
	ht__g.snap = NULL;
	ht__g.snap_cap = 0;
	ht__g.snap_heap = NULL;
	ht__g.snap_heap_cap = 0;
	ht__g.snap_thr = NULL;
	if (h->flags & HT_SHM_SNAPSHOT) {
		if (!h->snap_cap || h->snap_offset % 64 ||
		    h->snap_offset + (uint64_t)h->snap_cap * sizeof(struct ht__snap_stack) > size ||
		    h->snap_heap_offset % 64 ||
		    (uint64_t)h->snap_cap + h->snap_heap_cap >= 1u << 28 ||
		    h->snap_heap_offset +
			    (uint64_t)h->snap_heap_cap * sizeof(struct ht__snap_heap) >
			size ||
		    h->snap_thr_slots != HT_SNAP_THR_SLOTS || h->snap_thr_offset % 64 ||
		    h->snap_thr_bytes < ht__snap_thr_bytes(HT_SNAP_THR_SLOTS) ||
		    h->snap_thr_bytes % 64 ||
		    h->snap_thr_offset + (uint64_t)h->ring_count * h->snap_thr_bytes > size) {
			ht__g.hdr = NULL;
			goto unmap;
		}
		ht__g.snap = (struct ht__snap_stack *)((char *)h + h->snap_offset);
		ht__g.snap_cap = h->snap_cap;
		ht__g.snap_heap = (struct ht__snap_heap *)((char *)h + h->snap_heap_offset);
		ht__g.snap_heap_cap = h->snap_heap_cap;
		ht__g.snap_thr = (char *)h + h->snap_thr_offset;
		ht__g.snap_thr_bytes = h->snap_thr_bytes;
	}

	ssize_t n = readlink("/proc/self/exe", ht__exe, sizeof ht__exe - 1);
	ht__exe_len = n > 0 ? (uint32_t)n : 0;

	flags |= pid == h->root_pid ? HT_PROC_ROOT : 0;
	/*
	 * exec: the old image of this pid still owns rings (with another
	 * token, since ours is not chosen yet). They are released so the
	 * collector drains and frees them.
	 */
	uint32_t reached = ht__rings_reached(h, ht__g.ring_count);
	for (uint32_t i = 0; i < reached && !(flags & HT_PROC_ATTACHED); i++) {
		struct ht__ring *r =
		    (struct ht__ring *)(ht__g.rings + (size_t)i * ht__g.ring_stride);
		if (atomic_load(&r->state) == HT_RING_OWNED && r->pid == pid) {
			uint32_t owned = HT_RING_OWNED;
			if (atomic_compare_exchange_strong(&r->state, &owned, HT_RING_RELEASED))
				flags |= HT_PROC_EXEC;
		}
	}
	ht__threads_init();
	ht__find_self();
	arm_alive();
	if (!ht__g.child)
		ht__g.child = ht__child_start;
	instance_begin(flags);
	return 0;
unmap:
	syscall(SYS_munmap, (void *)m, size);
dormant:
	ht__go_dormant();
	return rc;
}

/*
 * The session is mapped whole (512 MiB by default), and under an
 * address-space limit (ulimit -v) that comes out of the program's budget:
 * an allocation that works natively would fail traced. When the session
 * would take more than a quarter of the limit, the program runs untraced.
 */
static int fits_address_limit(const char *path)
{
	struct rlimit rl;
	struct stat st;
	if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || stat(path, &st) != 0)
		return 1;
	return (uint64_t)st.st_size <= (uint64_t)rl.rlim_cur / 4;
}

/* Maps the session named by the environment, if any. */
static void init_from_env(void)
{
	ht__resolve();
	ht__t.tid = (int32_t)syscall(SYS_gettid);
	const char *path = getenv(HT_ENV_SESSION);
	if (!path || !*path || !fits_address_limit(path))
		ht__go_dormant();
	else
		ht__init_session(path, 0);
}

int ht__ensure(void)
{
	int s = atomic_load(&ht__g.state);
	if (s == HT_ST_READY)
		return 1;
	if (s != HT_ST_UNINIT)
		return 0;
	if (!atomic_compare_exchange_strong(&ht__g.state, &s, HT_ST_INITIALIZING))
		return atomic_load(&ht__g.state) == HT_ST_READY;
	int save = errno;
	sigset_t old;
	ht__signals_hold(&old);
	ht__t.guard += HT_GUARD_OWN;
	init_from_env();
	ht__t.guard -= HT_GUARD_OWN;
	ht__signals_release(&old);
	errno = save;
	return atomic_load(&ht__g.state) == HT_ST_READY;
}

/* A hook of a traced image whose session stops, or which is a child no
   hook saw being made (raw clone): the cold half of ht__enter(). */
int ht__enter_odd(struct ht__thread *t, const uintptr_t *fp)
{
	if (!*ht__g.alive) {
		int save = errno;
		ht__g.child();
		errno = save;
		if (atomic_load(&ht__g.state) != HT_ST_READY)
			return 0;
	}
	if (atomic_load_explicit(&ht__g.hdr->state, memory_order_relaxed) >= HT_SESSION_STOPPING) {
		ht__stop_recording();
		ht__lose_untraced(); /* this event is the first not recorded */
		return 0;
	}
	ht__guard_at(t, HT_GUARD_HOOK, fp);
	return 1;
}

/* The thread runs on the recorder's unwinding stack or on its alternate
   signal stack (a system call: cold). */
static int on_other_stack(struct ht__thread *t, uintptr_t sp)
{
	if (t->ustack && sp - (uintptr_t)t->ustack < HT_USTACK_SIZE)
		return 1;
	stack_t ss;
	return syscall(SYS_sigaltstack, NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
}

/*
 * Whether the guard was left by a hook that is gone: a signal handler that
 * interrupted it left it with siglongjmp (or a C++ throw, setcontext), and
 * this is a later event of the thread, not one nested in that hook. cur is
 * the frame of the hook entered now. A handler's event nested in the hook
 * runs below the hook's frame, or on another stack (an alternate signal
 * stack, the recorder's unwinding stack); a hook entered at the gone hook's
 * frame or above it on the same stack is certain it is gone. One entered
 * below a gone hook's frame (a deeper call) cannot tell: its events are
 * counted as a handler's until one is entered at or above it.
 */
static int guard_stale(struct ht__thread *t, uintptr_t cur)
{
	uintptr_t f = t->guard_fp;
	if (!f || cur < f)
		return 0;
	return cur == f || !on_other_stack(t, cur);
}

/*
 * The hook that set the guard was left without its end: a record it had
 * begun is given up (the next one is written over it), an event it had
 * made (guard POST: the real call returned) is counted as lost to the
 * handler, and the thread records again.
 */
static HT_COLD void guard_recover(struct ht__thread *t)
{
	if (t->guard == HT_GUARD_POST) {
		atomic_fetch_add_explicit(&ht__g.hdr->reentered, 1, memory_order_relaxed);
		ht__lose(HT_LOSS_IN_HANDLER);
	}
	if (t->ring)
		atomic_store_explicit(&t->ring->busy, 0, memory_order_relaxed);
	t->rlc = 0;
	t->nested = 0;
	t->map_hook = 0;
	t->guard = 0;
	t->guard_fp = 0;
}

__attribute__((noinline)) int ht__enter_slow(struct ht__thread *t)
{
	/* The frame of the hook that called us (the recorder keeps frame
	   pointers), holding the return address into its caller. */
	const uintptr_t *cur = *(const uintptr_t *const *)__builtin_frame_address(0);
	int g = t->guard, real = 0;
	if (g == HT_GUARD_REAL) { /* inside a hook's real call, no record open */
		/* Recorded, keeping the outer hook's frame: its guard after the
		   call (POST) is told stale or live by it. ht__leave() gives the
		   outer hook its guard back. */
		if (guard_stale(t, (uintptr_t)cur)) {
			guard_recover(t); /* a handler jumped out of the real call */
		} else {
			t->guard = 0;
			real = 1;
			if (t->guard_fp)
				cur = (const uintptr_t *)t->guard_fp;
		}
	} else if (g) {
		/* Inside a hook of an allocator's own entry points, a call from
		   the allocator (or from that hook itself, which the allocator
		   tail-called through: jemalloc's operator delete jumps to free)
		   is its own work. */
		if (g == HT_GUARD_EXT &&
		    (cur[1] - ht__g.self_start < ht__g.self_end - ht__g.self_start ||
		     ht__ext_own(cur[1])))
			return 0;
		if ((g != HT_GUARD_HOOK && g != HT_GUARD_POST && g != HT_GUARD_BUSY &&
		     g != HT_GUARD_EXT) ||
		    atomic_load_explicit(&ht__g.state, memory_order_relaxed) != HT_ST_READY)
			return 0; /* the recorder's own call */
		if (!guard_stale(t, (uintptr_t)cur)) {
			/* A signal handler's event inside a hook. */
			atomic_fetch_add_explicit(&ht__g.hdr->reentered, 1, memory_order_relaxed);
			ht__lose(HT_LOSS_IN_HANDLER);
			return 0;
		}
		guard_recover(t);
	}
	int ok = 1;
	if (atomic_load_explicit(&ht__g.state, memory_order_relaxed) == HT_ST_READY) {
		if (atomic_load_explicit(&ht__g.hdr->state, memory_order_relaxed) >=
			HT_SESSION_STOPPING ||
		    !*ht__g.alive)
			ok = ht__enter_odd(t, cur);
		else
			ht__guard_at(t, HT_GUARD_HOOK, cur);
	} else if (!ht__ensure()) {
		if (HT_UNLIKELY(atomic_load_explicit(&ht__g.untraced, memory_order_relaxed)))
			ht__lose_untraced();
		return 0;
	} else {
		ht__guard_at(t, HT_GUARD_HOOK, cur);
	}
	if (ok && real)
		t->nested++;
	return ok;
}

/*
 * A fork made by a signal handler that interrupted a hook: the child will
 * return into the rest of that hook, whose locals may point into the
 * parent's ring (a record begun, its position, the ring itself), shared
 * with the parent. The child maps the session anew elsewhere and puts
 * private memory where it was, so that the hook's rest writes there, out
 * of anyone's sight; the thread keeps the parent's state for that rest
 * (never waiting for room), and the child starts its instance when the
 * hook leaves (ht__leave_cold, or its exit first). Until then its events
 * are counted as a handler's, under its own pid and token. 0 when the
 * session could not be mapped again.
 */
static uint64_t deferred_wpos, deferred_next;
static void child_begin(struct ht__thread *t, int deferred);

static int child_defer(struct ht__thread *t)
{
	char *old = (char *)ht__g.hdr;
	size_t size = ht__g.map_size;
	long m = syscall(SYS_mremap, old, 0, size, MREMAP_MAYMOVE);
	if (m < 0 && m > -4096)
		return 0;
	long p = syscall(SYS_mmap, old, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	if (p < 0 && p > -4096) {
		syscall(SYS_munmap, m, size);
		return 0;
	}
	ht__g.hdr = (struct ht__shm_header *)m;
	ht__g.rings = (char *)m + (ht__g.rings - old);
	/* ht__g.snap and the snapshot tables stay in the old range until
	   the instance starts. */
	deferred_wpos = t->wpos;
	deferred_next = t->next;
	t->fast = UINT64_MAX;
	t->nested |= HT_NESTED_CHILD;
	fork_parent = ht__g.pid;
	ht__g.pid = getpid();
	if (ht__g.wipe)
		*ht__g.alive = 1;
	ht__g.instance = random_token();
	atomic_store(&ht__g.loss, NULL);
	atomic_store(&ht__g.untraced, 0);
	return 1;
}

/*
 * A child of fork (or of clone without CLONE_VM) is a new instance: its own
 * token, an empty stack table, its own rings. The parent's rings are not
 * touched: this thread's copy of its ring pointer is simply forgotten.
 */
void ht__child_start(void)
{
	struct ht__thread *t = &ht__t;
	/* A handler's event would find the thread's state wiped and the
	   sentinel still zero: it would start the instance again inside this
	   one, or pass through uncounted (the state is INITIALIZING). */
	sigset_t old;
	ht__signals_hold(&old);
	int follow = !(ht__g.flags & HT_SHM_NO_FOLLOW) || getpid() == ht__g.hdr->root_pid;
	if (t->guard && t->guard != HT_GUARD_REAL && child_defer(t)) {
		if (!follow) {
			atomic_store(&ht__g.note_ok, 0);
			ht__go_dormant();
		}
		ht__signals_release(&old);
		return;
	}
	child_begin(t, 0);
	ht__signals_release(&old);
}

/* The child's instance (signals held): the thread's state made anew. lost:
   the rest of the hook a fork interrupted wrote a record (child_defer). */
static void child_begin(struct ht__thread *t, int deferred)
{
	int lost = deferred && (t->wpos != deferred_wpos || t->next != deferred_next);
	/* The unwinding stack is this thread's copy of the parent's: keep it. */
	char *ustack = t->ustack;
	memset(t, 0, sizeof *t);
	t->ustack = ustack;
	t->guard = HT_GUARD_OWN;
	t->tid = (int32_t)syscall(SYS_gettid);
	if (!deferred) {
		atomic_store(&ht__g.state, HT_ST_INITIALIZING);
		fork_parent = ht__g.pid; /* still the parent's: this is its copy */
		ht__g.pid = getpid();
		if (ht__g.wipe)
			*ht__g.alive = 1;
	} else if (atomic_load(&ht__g.state) != HT_ST_READY) {
		t->guard = 0; /* not followed (child_defer's caller) */
		return;
	} else {
		atomic_store(&ht__g.state, HT_ST_INITIALIZING);
		struct ht__shm_header *h = ht__g.hdr;
		if (ht__g.snap) {
			ht__g.snap = (struct ht__snap_stack *)((char *)h + h->snap_offset);
			ht__g.snap_heap = (struct ht__snap_heap *)((char *)h + h->snap_heap_offset);
			ht__g.snap_thr = (char *)h + h->snap_thr_offset;
		}
	}
	if ((ht__g.flags & HT_SHM_NO_FOLLOW) && ht__g.pid != ht__g.hdr->root_pid) {
		atomic_store(&ht__g.note_ok, 0); /* not traced: it owes no note */
		ht__go_dormant();
	} else {
		ht__thread_forget_all();
		instance_begin(HT_PROC_FORK |
			       (ht__g.pid == ht__g.hdr->root_pid ? HT_PROC_ROOT : 0) |
			       (deferred ? HT_PROC_KEEP_ID : 0));
		if (lost) {
			atomic_fetch_add_explicit(&ht__g.hdr->reentered, 1, memory_order_relaxed);
			ht__lose(HT_LOSS_IN_HANDLER);
		}
	}
	t->guard = 0;
}

/* The hook a fork interrupted (child_defer) has left, or the child exits
   before it does: the child's instance starts. */
void ht__child_resume(struct ht__thread *t)
{
	sigset_t old;
	ht__signals_hold(&old);
	child_begin(t, 1);
	ht__signals_release(&old);
}

/*
 * The child of a fork the recorder hears of (atfork, _Fork, clone(),
 * syscall()). Its first event may have started its instance already, when
 * the sentinel found it first.
 */
void ht__child_check(void)
{
	if (atomic_load(&ht__g.state) == HT_ST_READY && (!ht__g.wipe || !*ht__g.alive))
		ht__child_start();
}

static void atfork_child(void)
{
	int save = errno;
	ht__child_check();
	errno = save;
}

/*
 * Exit code of exit() and of returning from main. glibc runs exit handlers
 * newest first and frees its blocks of handlers while it walks them, so
 * every handler registered before ours (a library constructor's atexit,
 * static destructors, glibc's own frees) would run after our PROCESS_EXIT
 * and its frees would land after the process's end (docs/
 * session-protocol.md, "The end of a process"). Ours is registered before
 * any other: the hooks of __cxa_atexit and on_exit (hooks_proc.c) arm it
 * at the first registration of the image, which can come from a library
 * constructor that runs before ours.
 */
static void exit_handler(int status, void *arg)
{
	(void)arg;
	ht__exit_self(status);
}

void ht__exit_arm(void)
{
	static _Atomic int armed; /* a fork child's copy says yes: it has the list too */
	if (atomic_load(&armed) || !ht__ensure() || atomic_exchange(&armed, 1))
		return;
	if (!ht__real.on_exit)
		ht__resolve();
	if (ht__real.on_exit)
		ht__real.on_exit(exit_handler, NULL);
}

__attribute__((constructor)) static void init_at_load(void)
{
	int save = errno;
	if (ht__ensure()) {
		pthread_atfork(NULL, NULL, atfork_child);
		ht__exit_arm();
	}
	errno = save;
}
