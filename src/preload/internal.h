/*
 * Internals of libheaptrail.so shared by its source files: the global recorder
 * state, the per-thread state in initial-exec TLS, the real functions, and the
 * inlined record writer that every hook uses (see docs/session-protocol.md).
 */
#ifndef HT_PRELOAD_INTERNAL_H
#define HT_PRELOAD_INTERNAL_H

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "heaptrail/trace.h"
#include "base/protocol.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the record header store assumes little-endian");

#define HT_EXPORT __attribute__((visibility("default")))
#define HT_LIKELY(x) __builtin_expect(!!(x), 1)
#define HT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HT_COLD __attribute__((cold, noinline))

/* ht__g.state: the life of the recorder in this process image. */
enum ht__state {
	HT_ST_UNINIT = 0,
	HT_ST_INITIALIZING = 1,
	HT_ST_READY = 2,   /* tracing */
	HT_ST_DORMANT = 3, /* pass through forever (no session, dead collector, ...) */
};

/*
 * The one list of the libc functions the recorder hooks: X(return type,
 * name, parameter types, attributes, ATTACH or LAUNCH). ATTACH: attach mode
 * redirects the name in every module's GOT too (attach.c); LAUNCH: only
 * interposed by preloading. The order is the order ht__resolve() finds the
 * real functions in (free last). The allocators' own APIs are alloc_ext.h's
 * list.
 */
#define HT__LIBC_HOOKS(X)                                                                          \
	X(void *, mmap, (void *, size_t, int, int, int, off_t), , ATTACH)                          \
	X(void *, mmap64, (void *, size_t, int, int, int, off_t), , ATTACH)                        \
	X(int, munmap, (void *, size_t), , ATTACH)                                                 \
	X(void *, mremap, (void *, size_t, size_t, int, ...), , ATTACH)                            \
	X(int, mprotect, (void *, size_t, int), , ATTACH)                                          \
	X(void *, calloc, (size_t, size_t), , ATTACH)                                              \
	X(void *, malloc, (size_t), , ATTACH)                                                      \
	X(void *, realloc, (void *, size_t), , ATTACH)                                             \
	X(void *, reallocarray, (void *, size_t, size_t), , ATTACH)                                \
	X(int, posix_memalign, (void **, size_t, size_t), , ATTACH)                                \
	X(void *, aligned_alloc, (size_t, size_t), , ATTACH)                                       \
	X(void *, memalign, (size_t, size_t), , ATTACH)                                            \
	X(void *, valloc, (size_t), , ATTACH)                                                      \
	X(void *, pvalloc, (size_t), , ATTACH)                                                     \
	X(int, brk, (void *), , ATTACH)                                                            \
	X(void *, sbrk, (intptr_t), , ATTACH)                                                      \
	X(void, _exit, (int), __attribute__((noreturn)), ATTACH)                                   \
	X(void, _Exit, (int), __attribute__((noreturn)), ATTACH)                                   \
	X(int, __cxa_atexit, (void (*)(void *), void *, void *), , LAUNCH)                         \
	X(int, on_exit, (void (*)(int, void *), void *), , LAUNCH)                                 \
	X(pid_t, waitpid, (pid_t, int *, int), , LAUNCH)                                           \
	X(pid_t, wait, (int *), , LAUNCH)                                                          \
	X(pid_t, wait4, (pid_t, int *, int, void *), , LAUNCH)                                     \
	X(int, waitid, (int, id_t, void *, int), , LAUNCH)                                         \
	X(void *, dlopen, (const char *, int), , ATTACH)                                           \
	X(int, dlclose, (void *), , ATTACH)                                                        \
	X(int, pthread_setname_np, (unsigned long, const char *), , ATTACH)                        \
	X(int, clone, (int (*)(void *), void *, int, void *, ...), , ATTACH)                       \
	X(pid_t, _Fork, (void), , ATTACH)                                                          \
	/* free last: until it is known, frees of boot blocks are no-ops anyway. */                \
	X(void, free, (void *), , ATTACH)

/* The real functions, resolved once with dlsym(RTLD_NEXT). */
#define HT__REAL_FIELD(ret, name, params, attr, mode) ret(*name) params attr;
struct ht__real {
	HT__LIBC_HOOKS(HT__REAL_FIELD)
};
#undef HT__REAL_FIELD

/* Everything about the current instance (one process image). */
struct ht__global {
	_Atomic int state; /* enum ht__state */
	struct ht__shm_header *hdr;
	char *rings; /* base of ring 0 */
	size_t map_size;
	uint32_t ring_size, ring_mask, ring_count, ring_stride;
	uint32_t flags, stack_mask;
	uint64_t sample_rate; /* ht__shm_header.sample_rate: 0 records every heap event */
	uint32_t clock;	      /* ht__shm_header.clock: what records are stamped with */
	uint32_t instance;
	/* errno's offset from the thread pointer (ht__errno_get()), set
	   before the state is READY */
	intptr_t errno_off;
	pid_t pid;
	uintptr_t self_start, self_end;	  /* our own code, dropped from stacks */
	uintptr_t unw_start, unw_end;	  /* libunwind's code: its mappings are ours */
	_Atomic uint32_t process_pending; /* PROCESS_START flags | HT_PROC_PENDING, or 0 */
	/*
	 * 1 in this image; 0 in a child that a clone without CLONE_VM copied us
	 * into, however it was made (inline assembly too): the word lies in a
	 * MADV_WIPEONFORK page, which the kernel gives such a child zeroed.
	 * Points to a constant 1 where that advice is not available.
	 */
	volatile uint32_t *alive;
	int wipe;	     /* alive is in a MADV_WIPEONFORK page */
	void (*child)(void); /* starts a child found that way (launch or attach mode) */
	/* This image's slot of the session's loss table, NULL until it loses
	   an event (or when the table is full: UINTPTR_MAX). */
	struct ht__shm_loss *_Atomic loss;
	/* The recorder stopped recording (session stopping, collector gone):
	   events that pass through are counted as HT_LOSS_UNTRACED. */
	_Atomic int untraced;
	struct ht__snap_stack *snap; /* snapshot mode: the session's region, else NULL */
	uint32_t snap_cap;
	struct ht__snap_heap *snap_heap; /* snapshot mode: custom heaps' entries */
	uint32_t snap_heap_cap;
	/* snapshot mode: the rings' tables (HT_SNAP_THR_SLOTS struct
	   ht__snap_thr_ent), one of snap_thr_bytes per ring */
	char *snap_thr;
	uint32_t snap_thr_bytes;
	/* Exit note (note.c): heap and memory records of rings this image gave
	   back, and whether the session is still mapped for a note at exit. */
	_Atomic uint64_t events_done;
	_Atomic int note_ok;
};

/* Per thread, in initial-exec TLS so the hot path needs no call. */
struct ht__thread {
	struct ht__ring *ring; /* NULL until the first event */
	char *data;
	uint64_t wpos;	/* our copy of write_pos */
	uint64_t limit; /* cached read_pos + ring_size: wpos may go up to it */
	uint64_t fast;	/* records may end up to here without a PAD or a look at
			   read_pos (ht__rec_begin); 0: always ask ht__rec_room */
	uint64_t next;	/* write_pos after the record being written */
	/* The frame of the hook that set the guard: a guard its hook left
	   behind (a handler jumped out of it) is told from one still live
	   (init.c, guard_stale). Set with the guard in one store. */
	uintptr_t guard_fp;
	int guard; /* HT_GUARD_*: non-zero, re-entry passes through */
	uint32_t guard_pad;
	int32_t tid;
	uint8_t exited; /* the key destructor ran */
	uint8_t nested; /* events under way inside hooks' real calls (HT_GUARD_REAL), and
			   HT_NESTED_CHILD: a fork child inside the hook a handler's fork
			   interrupted (init.c, child_defer) */
	/* ht__thread_watch() waits for a hook outside a mapping hook (map_hook)
	   to call pthread_setspecific, which may allocate: the next hook's
	   ht__leave() outside one does it (and t->fast stays 0 meanwhile, so
	   that the next record's ht__rec_room() does it first). */
	uint8_t watch_wait;
	uint8_t no_ring; /* a previous claim timed out: retry without waiting */
	/* Inside a mapping hook (ht__enter_inner to ht__leave_inner), which an
	   allocator may call holding its own lock: jemalloc maps memory through
	   the PLT from inside malloc. The recorder calls no allocator there. */
	uint8_t map_hook;
	/* ht__table_gen while the copy of the cached stack above ustack
	   (struct ht__same) may serve whole, else 0 (stack.c, same_copy) */
	uint32_t same_gen;
	char *ustack;			/* the stack captures run on (stack.c), or NULL */
	uint64_t sig_debt, sig_debt_at; /* unwinding through signal frames (stack.c) */
	uint32_t sig_unwinds;		/* how many so far (the first are free) */
	int64_t sample_left;		/* sampling: bytes to the next sample (sample.c) */
	uint64_t sample_rng;		/* its random state; 0 until the first allocation */
	/* Sampling, a realloc between its decision and its end (rec_heap.h,
	   ht__realloc_begin): HT_RLC_* bits, old's key, the bytes to give
	   back to sample_left when no block is made. */
	unsigned rlc;
	uint64_t rlc_old;
	int64_t rlc_undo;
	/* Snapshot mode, custom heaps (snapshot.c): the thread's last handle
	   and its slot, and last (slot, stack) pair and its entry j + 1, valid
	   in instance snap_inst only (an instance starts tables of its own). */
	uint64_t snap_heap, snap_pair;
	uint32_t snap_slot, snap_ent, snap_inst;
	/* Snapshot mode: the table of the ring snap_ring (snapshot.c), NULL
	   when counts go to the stacks' region; snap_noring: a claim for it
	   found no free ring (not tried again). */
	struct ht__snap_thr_ent *snap_tab;
	uintptr_t snap_ring; /* the ring's address | 1; 0: no table, look again */
	uint8_t snap_noring;
	/* Snapshot mode, the address tables (snapshot.c): the key that makes
	   this thread the owned table's owner while snap_owner holds it (0:
	   never was), and its inserts into the shared table since it last
	   tried to take the owned one over; its window of inserts (inserts,
	   probes past their homes, the table's levels at its start) that
	   says when the newest level is crowded. */
	uint64_t snap_key;
	uint32_t snap_sput;
	uint32_t snap_wins, snap_wprobes, snap_wlevel;
	/* While the recorder's own call into libc runs (stack.c's
	   pthread_getattr_np allocates a cpuset and its attributes' extension),
	   the malloc family serves it from here, never from the program's
	   allocator: that one may be inside its own lock (jemalloc maps memory
	   through the PLT from inside malloc) and deadlock. NULL otherwise. */
	char *scratch;
	uint32_t scratch_used, scratch_size;
};

/* ht__thread.nested: the fork child's mark (init.c, child_defer). */
#define HT_NESTED_CHILD 0x80

/*
 * ht__thread.guard: HOOK inside a hook, where a re-entry can only be a signal
 * handler's event (counted in the header's reentered); more while the
 * recorder's own code runs, or a hook that calls the program's allocator on
 * purpose (operator new calling malloc), where a re-entry is not an event.
 */
#define HT_GUARD_HOOK 1
#define HT_GUARD_OWN 2
/*
 * A hook inside its real call with no record open (an allocation, stamped
 * after the call; a free, stamped before it): a re-entry there is an event
 * of its own, recorded. It is the allocator itself when the real function is
 * not glibc's (jemalloc, tcmalloc or mimalloc calling mmap through the PLT
 * from inside malloc), or a signal handler; a call into the allocators' own
 * entry points is the allocator's work for the outer call, passed through
 * (ht__enter_ext()). ht__real_call() sets it, ht__real_done() puts POST
 * (a re-entry's ht__leave() cleared it).
 */
#define HT_GUARD_REAL 4
/*
 * A realloc inside its real call with its record open (begun before the
 * call, busy across it): a re-entry cannot be recorded. Into the allocators'
 * own entry points or a mapping function it is the allocator's own work for
 * that realloc (mimalloc's realloc calls mi_free through the PLT, jemalloc's
 * may mmap), not an event of the program: ht__enter_inner() and
 * ht__enter_ext() pass it through uncounted (a mapping is then found in
 * /proc/PID/maps). Into the malloc family it is a signal handler's event,
 * counted as with HOOK.
 */
#define HT_GUARD_BUSY 8
/*
 * A hook after its real call returned, its event made and not yet
 * committed: a re-entry is a handler's event, counted as with HOOK. A guard
 * left so by a handler that jumped out of the hook is one event lost.
 */
#define HT_GUARD_POST 16
/*
 * Inside a hook of the allocators' own entry points (hooks_alloc_ext.c):
 * a re-entry from the allocators' own code (operator new calling malloc,
 * mimalloc's mi_new calling mi_malloc, tcmalloc calling mmap) is its work
 * for the outer call and passes through uncounted; from anywhere else it
 * is a handler's event, counted (ht__ext_own()).
 */
#define HT_GUARD_EXT 32

/*
 * The guard of a hook, set in the frame fp (see ht__thread.guard_fp), both
 * in one store: one instruction, which a signal cannot split. A handler's
 * event before it is a whole event of its own; one after it finds the
 * hook's own frame.
 */
typedef uint64_t ht__pair __attribute__((vector_size(16), may_alias));
static inline void ht__guard_at(struct ht__thread *t, int guard, const uintptr_t *fp)
{
	_Static_assert(offsetof(struct ht__thread, guard) ==
			   offsetof(struct ht__thread, guard_fp) + 8,
		       "the guard and its frame are stored together");
	ht__pair v = {(uint64_t)(uintptr_t)fp, (uint32_t)guard};
	__asm__("movups %1, %0" : "=m"(*(ht__pair *)&t->guard_fp) : "x"(v));
}

extern struct ht__global ht__g;
extern struct ht__real ht__real;
extern __thread struct ht__thread ht__t __attribute__((tls_model("initial-exec")));

/* hooks_alloc_ext.c: 1 when ra is in the code of an allocator whose own
   entry points are traced (a re-entry from there is its own work). */
int ht__ext_own(uintptr_t ra);

/* init.c */
int ht__ensure(void);					/* returns 1 when tracing (state READY) */
int ht__init_session(const char *path, uint32_t flags); /* 0 or enum ht_error */
void ht__resolve(void);
void *ht__boot_alloc(size_t size, size_t align);
#define HT_BOOT_SIZE (64 * 1024)
extern char ht__boot_buf[HT_BOOT_SIZE];
/* Blocks from the boot buffer are never given to the real free(). */
static inline int ht__is_boot(const void *p)
{
	return (uintptr_t)p - (uintptr_t)ht__boot_buf < HT_BOOT_SIZE;
}
size_t ht__boot_size(const void *p);
/* The malloc family's pass-through while t->scratch is set (struct
   ht__thread): a bump allocator in it, NULL when it is full; a free of its
   blocks is nothing. */
void *ht__scratch_realloc(struct ht__thread *t, void *old, size_t size, int zero);
static inline int ht__in_scratch(const struct ht__thread *t, const void *p)
{
	return (uintptr_t)p - (uintptr_t)t->scratch < t->scratch_size;
}
void ht__go_dormant(void);
/*
 * Asynchronous signals held off (the faults a bug would raise are not)
 * while the recorder sets up what a handler's event would find half made,
 * or calls the program's allocator itself (a re-entry there cannot tell a
 * handler's event from its own call): an instance's start, a thread's stack
 * bounds. The handler runs right after, its events recorded. A system call
 * each way: set-up paths only.
 */
void ht__signals_hold(sigset_t *old);
void ht__signals_release(const sigset_t *old);
void ht__stop_recording(void); /* the session is over: dormant, counting what passes */
void ht__lose(unsigned cause); /* one event not recorded (enum ht__loss_cause) */
void ht__lose_untraced(void);  /* one event passed through after ht__stop_recording() */
void ht__child_start(void);    /* new instance after fork/clone in the child */
/* The child's start deferred until the hook a handler's fork interrupted leaves. */
void ht__child_resume(struct ht__thread *t);
/* _Fork / clone without CLONE_VM (hooks_proc.c), running in_child first in
   the child (errno kept); the hooks and attach's GOT redirection share them. */
pid_t ht__fork_then(void (*in_child)(void));
int ht__clone_then(void (*in_child)(void), int (*fn)(void *), void *stack, int flags, void *arg,
		   pid_t *ptid, void *tls, pid_t *ctid);
void ht__child_check(void);	/* in a fork child: ht__child_start() unless already done */
void ht__exit_arm(void);	/* registers the exit handler, once, before any other */
void ht__exit_self(int status); /* this process ends now with status: PROCESS_EXIT, note */
int ht__enter_odd(struct ht__thread *t, const uintptr_t *fp);
#define HT_PROC_PENDING 0x80000000u
void ht__write_process_pending(void);
void *ht__raw_mmap(size_t len);
void *ht__own_mmap(size_t len, int prot, int flags); /* anonymous; MAP_FAILED */
uint64_t ht__now(void);
extern char ht__exe[4096]; /* /proc/self/exe, the main module's path */
extern uint32_t ht__exe_len;

/* note.c: the exit note (docs/session-protocol.md, "A collector killed"). */
void ht__note_status(int kind, int value); /* how the image exits (exit, _exit) */
void ht__note_write(void);		   /* once per image, at its end */
void ht__note_begin(void);		   /* a new instance: nothing written yet */
void ht__ring_done(struct ht__ring *r);	   /* a ring goes back: keep its count */

/* ring.c: the slow paths of the writer. ht__rec_room(): where a record of
   len bytes goes when it does not fit below t->fast (a PAD written first
   when the ring's tail is too short, room made), UINT64_MAX when dropped. */
int ht__make_room(struct ht__thread *t, uint32_t len);
int ht__ring_claim_now(struct ht__thread *t); /* a free ring now, or 0: no wait, no loss */
uint64_t ht__rec_room(struct ht__thread *t, uint32_t len);
int ht__collector_gone(struct ht__shm_header *h); /* its process is gone (raw calls) */
void ht__thread_release(struct ht__thread *t);
void ht__threads_init(void);		     /* once per process image */
void ht__thread_forget_all(void);	     /* fork child: the parent's threads are gone */
pid_t ht__thread_tid(unsigned long pthread); /* tid of a thread that has a ring, or 0 */
void ht__thread_watch(struct ht__thread *t); /* run the exit cleanup for this thread */

/* stack.c */
/* The stack of the current call; fp: the frame of the recorder's function
   that asks (ht__stack_for() gives its caller's). */
uint32_t ht__stack_capture(struct ht__thread *t, const uintptr_t *fp);
void ht__ustack_unmap(struct ht__thread *t); /* at thread exit */
/* The unwinding stack (t->ustack) and the guard page below it. */
#define HT_USTACK_SIZE (128 * 1024)
#define HT_USTACK_GUARD 4096

/* A check of a cached stack: the value a walk read in a slot. */
struct ht__chk {
	uintptr_t at, val;
};

/*
 * The thread's cached stack as the hooks check it inline (ht__stack_for):
 * an allocation from the same stack as the thread's previous ones costs no
 * call. stack.c (same_copy) keeps it in the top bytes of the thread's
 * unwinding stack, above the stack cache whose checks it points to, valid
 * while the thread's same_gen is the stack table's generation.
 */
struct ht__same {
	uint32_t id, use;  /* use: rbp is checked too */
	uintptr_t loc, ip; /* the innermost frame: the hook's slot and its return address */
	uintptr_t rbp;	   /* rbp saved below loc */
	uint64_t nchk;
	const struct ht__chk *chk; /* the outer frames' checks, nchk of them */
};
#define HT_SAME_ROOM 64
_Static_assert(sizeof(struct ht__same) <= HT_SAME_ROOM, "ht__same fits its room");
static inline struct ht__same *ht__same_of(char *ustack)
{
	return (struct ht__same *)(ustack + HT_USTACK_SIZE - HT_SAME_ROOM);
}
/* bumped with each new stack table: ids cached before it are void */
extern _Atomic uint32_t ht__table_gen;
int ht__modules_refresh(int force);
void ht__stacks_init(void);
void ht__modules_reset(void);
void ht__find_self(void);
extern _Atomic int ht__modules_dirty;
/* dlcloses between their start and their module refresh's end: while one
   is, a capture refreshes the modules first (stack.c, ht__stack_capture). */
extern _Atomic int ht__dlclosing;

/*
 * unwind.c: the unwinding rule of a return address, from .eh_frame. OK
 * rules hold the CFA offset in bits 0-31 (from rsp, or from rbp with
 * CFA_RBP) and, with RBP_SAVED, where rbp was saved (CFA minus bits 32-55);
 * the return address is at CFA-8. LAST: the outermost frame. SIGNAL: the
 * signal trampoline (the stack is cut there: stack.c, ht__capture_cached).
 */
#define HT_CFI_UNKNOWN 0ull
#define HT_CFI_OK (1ull << 63)
#define HT_CFI_LAST (1ull << 62)
#define HT_CFI_CFA_RBP (1ull << 61)
#define HT_CFI_RBP_SAVED (1ull << 60)
#define HT_CFI_SIGNAL (1ull << 59)
uint64_t ht__cfi_rule(uintptr_t ra);
void ht__cfi_reset(void); /* a new instance, or modules unloaded */

/*
 * attach.c, exported: attach mode from inside the process (the injector or a
 * loader hook calls these on any thread). ht__attach_start() maps the session
 * at path and redirects the GOT entries of every module to the hooks; it
 * runs once per loaded copy of the library. ht__attach_stop() puts them back
 * and leaves the recorder dormant. Both return 0 or a negative enum ht_error.
 */
int ht__attach_start(const char *session_path);
int ht__attach_stop(void);

/*
 * sample.c: sampling by bytes (docs/session-protocol.md, "Sampling"). A
 * key is a block's address, mixed with its custom heap's handle.
 * ht__sample_draw(): the thread's byte counter ran out, or size is at least
 * the rate: decides (1: sampled); ht__sample_remember() then keeps the
 * block's key. ht__sample_forget(): 1 when key was sampled (and forgets it):
 * its free is recorded.
 */
int ht__sample_draw(struct ht__thread *t, uint64_t size);
int ht__sample_forget(uint64_t key);
void ht__sample_remember(uint64_t key);
static inline uint64_t ht__sample_key(uint64_t heap, const void *p)
{
	return (uint64_t)(uintptr_t)p ^ heap * 0x9e3779b97f4a7c15ull;
}

/*
 * A counting filter in front of the set: how many sampled keys hash to
 * each byte (255 sticks: then the set decides). A free whose byte is 0 was
 * never sampled: one multiply and one load, inlined in the free hooks.
 */
#define HT_SAMPLE_FILTER_BITS 16
extern _Atomic uint8_t ht__sample_filter[1u << HT_SAMPLE_FILTER_BITS];
static inline uint32_t ht__sample_filter_slot(uint64_t key)
{
	return (uint32_t)((key * 0xff51afd7ed558ccdull) >> (64 - HT_SAMPLE_FILTER_BITS));
}
static inline int ht__sample_maybe(uint64_t key)
{
	return atomic_load_explicit(&ht__sample_filter[ht__sample_filter_slot(key)],
				    memory_order_relaxed) != 0;
}

/*
 * The hooks' fast path when sampling, before ht__enter(): 1 when this
 * allocation of size is not sampled (the thread's counter did not run
 * out), so the hook only calls the real function. Else the counter is as
 * before and the hook goes the usual way (ht__rec_alloc decides again).
 */
static inline int ht__sample_skip_alloc(struct ht__thread *t, uint64_t size)
{
	uint64_t rate = ht__g.sample_rate;
	if (HT_LIKELY(!rate) || t->guard)
		return 0;
	if (HT_LIKELY((t->sample_left -= (int64_t)size) > 0) && HT_LIKELY(size < rate))
		return 1;
	t->sample_left += (int64_t)size;
	return 0;
}

/* The same for a free of p (not NULL, not boot memory): 1 when p was never sampled. */
static inline int ht__sample_skip_free(struct ht__thread *t, const void *p)
{
	return HT_UNLIKELY(ht__g.sample_rate != 0) && !t->guard &&
	       !ht__sample_maybe((uint64_t)(uintptr_t)p);
}

/* A skipped allocation whose call failed: failures are always recorded. */
void ht__sample_failed(unsigned func, uint64_t size);

/* Whether an allocation of size is sampled, when sampling: the decision
   needs the size alone (a realloc makes it before its call). */
static inline int ht__sample_decide(struct ht__thread *t, uint64_t size)
{
	t->sample_left -= (int64_t)size;
	if (HT_LIKELY(t->sample_left > 0) && HT_LIKELY(size < ht__g.sample_rate))
		return 0;
	return ht__sample_draw(t, size);
}

/* An allocation of size at key: 1 to record it (always, when not sampling). */
static inline int ht__sample_keep(struct ht__thread *t, uint64_t key, uint64_t size)
{
	if (HT_LIKELY(!ht__g.sample_rate))
		return 1;
	if (HT_LIKELY(!ht__sample_decide(t, size)))
		return 0;
	ht__sample_remember(key);
	return 1;
}

/* A free of key: 1 to record it. */
static inline int ht__sample_free(uint64_t key)
{
	return HT_LIKELY(!ht__g.sample_rate) || (ht__sample_maybe(key) && ht__sample_forget(key));
}

/*
 * A realloc of old into p (ht__rec_realloc's arguments): what to record
 * when sampling. The new block is an allocation of size of its own.
 */
enum ht__sample_realloc {
	HT_SR_NONE,    /* neither block was sampled */
	HT_SR_REALLOC, /* both (or a failure or a free of a sampled old): as is */
	HT_SR_FREE,    /* only old was: a free of old */
	HT_SR_ALLOC,   /* only p is: an allocation of p */
};
enum ht__sample_realloc ht__sample_realloc(struct ht__thread *t, uint64_t heap, const void *old,
					   const void *p, uint64_t size);

/*
 * snapshot.c: heap snapshot mode (ht__g.snap set). ht__snap_alloc() tracks
 * a new block under the stack of class bit; ht__snap_take() removes a block
 * from the table (1 and its packed value when it was there) without
 * counting it freed, which ht__snap_freed() does; ht__snap_put_back()
 * returns a block a failed realloc kept. ht__snap_reset(): a new instance.
 * ht__snap_heap_*(): the same for custom heaps (include/heaptrail/heap.h).
 */
void ht__snap_alloc(struct ht__thread *t, void *p, uint64_t size, uint32_t bit);
/* The same with the stack captured by the caller: a hook captures it inline
   (rec_heap.h), so the capture has no frame of ours more to walk past. */
void ht__snap_alloc_at(struct ht__thread *t, void *p, uint64_t size, uint32_t stack);
int ht__snap_take(uint64_t p, uint64_t *val);
void ht__snap_freed(struct ht__thread *t, uint64_t val);
void ht__snap_free(struct ht__thread *t, const void *p); /* take, count freed; keeps errno */
void ht__snap_put_back(struct ht__thread *t, uint64_t p, uint64_t val);
void ht__snap_reset(void);
void ht__snap_thread_exit(struct ht__thread *t); /* from its key destructor */
/* Custom heaps' blocks (heap.c): heap 0 is the process heap's handle. */
void ht__snap_heap_alloc(struct ht__thread *t, uint64_t heap, const void *p, uint64_t size,
			 uint32_t bit);
void ht__snap_heap_free(struct ht__thread *t, uint64_t heap, const void *p);
void ht__snap_heap_destroy(uint64_t heap);

/* crash.c: the crash signals' handler of a flight recorder session. */
void ht__crash_arm(void);    /* each instance (HT_SHM_CRASHES) */
void ht__crash_disarm(void); /* detach */

/* ring.c: records written from several files. */
void ht__write_exit(pid_t pid, int kind, int value);
void ht__write_thread(struct ht__thread *t, unsigned type, pid_t tid, const char *name);

static inline uint64_t ht__clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * A record's stamp in the session's clock (docs/session-protocol.md, "The
 * clock"): raw TSC ticks, which the collector converts, or CLOCK_MONOTONIC.
 * Every stamp reads the TSC with rdtscp, which waits for every earlier
 * instruction as the vDSO's read does. An allocation's stamp so follows
 * the loads that handed the block over; a free's, the load that brought
 * the pointer in: a plain rdtsc, taken while that load was still in
 * flight (the branches on p predicted), came out before another thread's
 * stamp of the malloc that made the block (qa.mailbox: 14-37 frees in 20
 * million ordered before their block's malloc; bench/tsc_handover.c: up
 * to 236 ns early). before: the record is stamped before its real call
 * (kept for the callers' sake; the read is the same).
 */
static inline uint64_t ht__stamp(int before)
{
	(void)before;
#if defined(__x86_64__)
	if (HT_LIKELY(ht__g.clock == HT_CLOCK_TSC)) {
		unsigned cpu;
		return __builtin_ia32_rdtscp(&cpu);
	}
#endif
	return ht__clock();
}

/*
 * errno without a call: glibc keeps it in static TLS, at one offset from
 * the thread pointer in every thread (ht__g.errno_off). A hook saves it
 * around its record (the cold paths, a wait for room or a new stack, make
 * system calls) with a load of the offset and one access, where it called
 * __errno_location() through the PLT. Only once the state is READY.
 */
static inline int ht__errno_get(void)
{
	return *(int *)((char *)__builtin_thread_pointer() + ht__g.errno_off);
}

static inline void ht__errno_set(int e)
{
	*(int *)((char *)__builtin_thread_pointer() + ht__g.errno_off) = e;
}

int ht__enter_slow(struct ht__thread *t);

/*
 * Every hook starts with this: 1 means trace this call (the guard is now
 * set; ht__leave() clears it), 0 means pass straight through (not tracing,
 * or re-entered from inside a hook, libunwind or an interrupting signal).
 */
static inline int ht__enter(struct ht__thread *t)
{
	if (HT_LIKELY(atomic_load_explicit(&ht__g.state, memory_order_relaxed) == HT_ST_READY &&
		      !t->guard)) {
		/* A stopping session, or a child no hook saw being made. */
		if (HT_UNLIKELY(atomic_load_explicit(&ht__g.hdr->state, memory_order_relaxed) >=
				    HT_SESSION_STOPPING ||
				!*ht__g.alive))
			return ht__enter_odd(t, __builtin_frame_address(0));
		ht__guard_at(t, HT_GUARD_HOOK, __builtin_frame_address(0));
		return 1;
	}
	return ht__enter_slow(t);
}

void ht__leave_cold(struct ht__thread *t);

/*
 * ht__enter() for the mapping hooks: inside a realloc's real call, the
 * allocator's own. A traced call is marked (map_hook) until
 * ht__leave_inner(): the allocator may have called it holding its lock.
 */
static inline int ht__enter_inner(struct ht__thread *t)
{
	if (HT_UNLIKELY(t->guard == HT_GUARD_BUSY) || !ht__enter(t))
		return 0;
	t->map_hook = 1;
	return 1;
}

/*
 * ht__enter() for the allocators' own entry points: inside any real call of
 * the malloc family's hooks, a call of them is the allocator's own work for
 * that call (mimalloc's realloc calls mi_free through the PLT), which the
 * outer event stands for: passed through uncounted.
 */
static inline int ht__enter_ext(struct ht__thread *t)
{
	if (HT_UNLIKELY(t->guard == HT_GUARD_BUSY || t->guard == HT_GUARD_REAL))
		return 0;
	return ht__enter(t);
}

static inline void ht__real_call(struct ht__thread *t)
{
	t->guard = HT_GUARD_REAL;
}

static inline void ht__real_done(struct ht__thread *t)
{
	t->guard = HT_GUARD_POST;
}

static inline void ht__leave(struct ht__thread *t)
{
	/* After its key destructor a thread borrows a ring per event (glibc
	   still frees its TLS then): it is handed straight back. An event
	   recorded inside a hook's real call gives that hook its guard back.
	   A thread's exit cleanup may wait for a hook's end (watch_wait). The
	   three flags in one load. */
	uint32_t cold;
	_Static_assert(
	    offsetof(struct ht__thread, nested) == offsetof(struct ht__thread, exited) + 1 &&
		offsetof(struct ht__thread, watch_wait) == offsetof(struct ht__thread, exited) + 2,
	    "exited, nested and watch_wait are read together");
	memcpy(&cold, &t->exited, sizeof cold);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	cold &= 0x00ffffffu;
#else
	cold &= 0xffffff00u;
#endif
	if (HT_UNLIKELY(cold)) {
		ht__leave_cold(t);
		return;
	}
	t->guard = 0;
}

/* ht__leave() for the mapping hooks (ht__enter_inner()). */
static inline void ht__leave_inner(struct ht__thread *t)
{
	ht__leave(t); /* still marked: the allocator may hold its lock */
	t->map_hook = 0;
}

/* Whether every check of chk[0..n-1] still holds: two at a time from the
   innermost, where stacks from one call site's callers differ. */
static inline __attribute__((always_inline)) int ht__chk_hold(const struct ht__chk *chk, uint32_t n)
{
	const struct ht__chk *p = chk + n, *end = chk + (n & 1);
	while (p != end) {
		p -= 2;
		if ((*(const uintptr_t *)p[1].at ^ p[1].val) |
		    (*(const uintptr_t *)p[0].at ^ p[0].val))
			return 0;
	}
	return end == chk || *(const uintptr_t *)chk[0].at == chk[0].val;
}

/*
 * Stack id for an event of class bit (HT_STK_*), 0 when not wanted. The mask
 * is read from the session's header at each event: `heaptrail update
 * --stacks` changes it while the program runs (same cache line as state).
 * Inlined into the hook, whose frame holds the return address into the
 * program: when that is the thread's cached stack's innermost frame, in
 * the same slot, and every outer check holds, the cached stack is this
 * call's (what ht__stack_capture() would find first, without its call).
 */
static inline __attribute__((always_inline)) uint32_t ht__stack_for(struct ht__thread *t,
								    uint32_t bit)
{
	uint32_t mask = __atomic_load_n(&ht__g.hdr->stack_mask, __ATOMIC_RELAXED);
	if (!(mask & bit))
		return 0;
	const uintptr_t *fp = __builtin_frame_address(0);
	/* 0 on most captures of a program whose stacks vary: one load */
	uint32_t gen = t->same_gen;
	if (gen) {
		const struct ht__same *s = ht__same_of(t->ustack);
		if (s->loc == (uintptr_t)&fp[1] && s->ip == fp[1] &&
		    gen == atomic_load_explicit(&ht__table_gen, memory_order_relaxed) &&
		    (!s->use || s->rbp == fp[0]) &&
		    HT_LIKELY(!atomic_load_explicit(&ht__dlclosing, memory_order_relaxed)) &&
		    ht__chk_hold(s->chk, s->nchk))
			return s->id;
	}
	/* The walk, a new stack's record and a module scan make system
	   calls: errno is kept here, where the hottest hooks leave it to the
	   record (rec_heap.h, ht__ring_alloc). Not in ht__stack_capture(),
	   whose tail calls keep its own frame off the stack while it walks:
	   one frame more cut 33 of CPython's 7 500 deepest walks short
	   (HEAPTRAIL_STACK_VERIFY=1). */
	int e = ht__errno_get();
	uint32_t id = ht__stack_capture(t, fp);
	ht__errno_set(e);
	return id;
}

/*
 * Starts a record of len bytes (a multiple of 8) in the thread's ring: makes
 * room (claiming a ring, waiting or dropping as the session says), writes a
 * PAD record when the tail is too short, sets busy, takes the timestamp and
 * fills the header. Returns NULL when the record is dropped; otherwise the
 * caller fills the body and calls ht__rec_commit(). Only called with the
 * guard set. The common case is one compare: t->fast is how far records may
 * go with room before the reader and at least 16 bytes left before the end
 * of the ring (so no PAD is due); anything else is ht__rec_room() (ring.c).
 */
static inline struct ht__rec *ht__rec_open(struct ht__thread *t, unsigned type, unsigned func,
					   uint32_t len, uint32_t stack, uint64_t *next)
{
	uint64_t pos = t->wpos;
	if (HT_UNLIKELY(pos + len > t->fast) && (pos = ht__rec_room(t, len)) == UINT64_MAX)
		return NULL;
	struct ht__ring *ring = t->ring; /* once: the stores below may alias t */
	atomic_store_explicit(&ring->busy, 1, memory_order_relaxed);
	struct ht__rec *r = (struct ht__rec *)(t->data + ((uint32_t)pos & ht__g.ring_mask));
	/* type, func, len and stack in one store (little-endian layout). */
	uint64_t head = (uint64_t)(uint8_t)type | (uint64_t)(uint8_t)func << 8 |
			(uint64_t)(uint16_t)len << 16 | (uint64_t)stack << 32;
	memcpy(r, &head, sizeof head);
	r->ts = ht__stamp(type == HT_REC_FREE || type == HT_REC_HEAP_FREE);
	*next = pos + len;
	/* Counted for the exit note (constant folded: type is a constant). */
	if (type - HT_REC_ALLOC <= HT_REC_HEAP_FREE - HT_REC_ALLOC)
		atomic_store_explicit(&ring->events,
				      atomic_load_explicit(&ring->events, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	return r;
}

/*
 * Publishes a record started by ht__rec_open(), which ends at next, to the
 * collector. The hot paths (rec_heap.h) keep next in a register, where the
 * record's stores (which may alias the thread's state) made t->next a
 * store and a load more per event.
 */
static inline void ht__rec_close(struct ht__thread *t, uint64_t next)
{
	struct ht__ring *ring = t->ring;
	t->wpos = next;
	atomic_store_explicit(&ring->write_pos, next, memory_order_release);
	atomic_store_explicit(&ring->busy, 0, memory_order_relaxed);
}

/* ht__rec_open() keeping where the record ends in t->next, for
   ht__rec_commit(). */
static inline struct ht__rec *ht__rec_begin(struct ht__thread *t, unsigned type, unsigned func,
					    uint32_t len, uint32_t stack)
{
	uint64_t next;
	struct ht__rec *r = ht__rec_open(t, type, func, len, stack, &next);
	if (HT_LIKELY(r != NULL))
		t->next = next;
	return r;
}

/* Publishes the record started by ht__rec_begin() to the collector. */
static inline void ht__rec_commit(struct ht__thread *t)
{
	ht__rec_close(t, t->next);
}

#endif
