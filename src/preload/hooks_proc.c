/*
 * Hooks of process and thread life: _exit/_Exit, the wait family (children's
 * exit status), dlopen/dlclose (the module list), pthread_setname_np (thread
 * names), and _Fork, clone and raw clone system calls without CLONE_VM (a
 * child that is a new instance).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

/*
 * The end of this process with status: _exit, _Exit, exit_group, and the
 * exit handler that runs after every other (init.c). Nothing of the
 * program runs after it, so the note goes now too.
 */
void ht__exit_self(int status)
{
	/* A vfork child shares our memory and TLS: it must not speak for us.
	   A child no hook saw being made (its sentinel page is zero) starts its
	   instance in ht__write_exit(). */
	pid_t pid = (pid_t)syscall(SYS_getpid);
	if (pid != ht__g.pid && (!ht__g.wipe || *ht__g.alive))
		return;
	/* A fork child that ends before the hook its fork interrupted has
	   left (a handler's fork, then _exit in the handler). */
	if (HT_UNLIKELY(ht__t.nested & HT_NESTED_CHILD))
		ht__child_resume(&ht__t);
	if (atomic_load(&ht__g.state) == HT_ST_READY)
		ht__write_exit(pid, HT_EXIT_CODE, status);
	ht__note_status(HT_EXIT_CODE, status);
	ht__note_write();
}

/*
 * Registrations of exit handlers (atexit is __cxa_atexit in libc_nonshared).
 * The first one of the image registers ours before it (init.c), so that ours
 * runs last.
 */
HT_EXPORT int __cxa_atexit(void (*fn)(void *), void *arg, void *dso)
{
	ht__exit_arm();
	if (HT_UNLIKELY(!ht__real.__cxa_atexit))
		ht__resolve();
	return ht__real.__cxa_atexit(fn, arg, dso);
}

HT_EXPORT int on_exit(void (*fn)(int, void *), void *arg)
{
	ht__exit_arm();
	if (HT_UNLIKELY(!ht__real.on_exit))
		ht__resolve();
	return ht__real.on_exit(fn, arg);
}

HT_EXPORT void _exit(int status)
{
	ht__exit_self(status);
	if (ht__real._exit)
		ht__real._exit(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

HT_EXPORT void _Exit(int status)
{
	ht__exit_self(status);
	if (ht__real._Exit)
		ht__real._Exit(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

static void note_reaped(pid_t pid, int status)
{
	if (pid <= 0)
		return;
	if (WIFEXITED(status))
		ht__write_exit(pid, HT_EXIT_CODE, WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		ht__write_exit(pid, HT_EXIT_SIGNAL, WTERMSIG(status));
}

HT_EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
	int st = 0;
	if (!ht__real.waitpid)
		ht__resolve();
	pid_t r = ht__real.waitpid(pid, &st, options);
	int e = errno;
	if (status)
		*status = st;
	note_reaped(r, st);
	errno = e;
	return r;
}

HT_EXPORT pid_t wait(int *status)
{
	int st = 0;
	if (!ht__real.wait)
		ht__resolve();
	pid_t r = ht__real.wait(&st);
	int e = errno;
	if (status)
		*status = st;
	note_reaped(r, st);
	errno = e;
	return r;
}

HT_EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
	int st = 0;
	if (!ht__real.wait4)
		ht__resolve();
	pid_t r = ht__real.wait4(pid, &st, options, ru);
	int e = errno;
	if (status)
		*status = st;
	note_reaped(r, st);
	errno = e;
	return r;
}

HT_EXPORT int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)
{
	if (!ht__real.waitid)
		ht__resolve();
	int r = ht__real.waitid(idtype, id, info, options);
	int e = errno;
	/* WNOWAIT leaves the child waitable: it is reported when reaped. */
	if (r == 0 && info && info->si_pid > 0 && !(options & WNOWAIT)) {
		if (info->si_code == CLD_EXITED)
			ht__write_exit(info->si_pid, HT_EXIT_CODE, info->si_status);
		else if (info->si_code == CLD_KILLED || info->si_code == CLD_DUMPED)
			ht__write_exit(info->si_pid, HT_EXIT_SIGNAL, info->si_status);
	}
	errno = e;
	return r;
}

/*
 * dlopen finds the caller's RUNPATH and $ORIGIN from its return address, so
 * this hook must be a tail call that leaves the program's return address in
 * place. The module list is refreshed lazily: the next stack looks at the
 * dirty flag, and an address in no known module refreshes it anyway.
 */
HT_EXPORT void *dlopen(const char *file, int mode)
{
	if (HT_UNLIKELY(!ht__real.dlopen))
		ht__resolve();
	atomic_store_explicit(&ht__modules_dirty, 1, memory_order_relaxed);
	return ht__real.dlopen(file, mode);
}

/*
 * Another thread may load a library where the one closed here was, as soon
 * as the real dlclose returns, and allocate from the same addresses before
 * this refresh has made a new stack table: ht__dlclosing makes its capture
 * refresh the modules first (its own library is loaded, so the walk finds
 * this one gone).
 */
HT_EXPORT int dlclose(void *handle)
{
	if (HT_UNLIKELY(!ht__real.dlclose))
		ht__resolve();
	atomic_fetch_add(&ht__dlclosing, 1);
	int r = ht__real.dlclose(handle);
	int e = errno;
	struct ht__thread *t = &ht__t;
	if (ht__enter(t)) {
		ht__modules_refresh(0);
		ht__leave(t);
	}
	/* Not below 0: a fork child starts its instance at 0, and may be
	   inside a dlclose (a library's destructor forked). */
	int n = atomic_load(&ht__dlclosing);
	while (n > 0 && !atomic_compare_exchange_weak(&ht__dlclosing, &n, n - 1))
		;
	errno = e;
	return r;
}

HT_EXPORT int pthread_setname_np(pthread_t thread, const char *name)
{
	if (HT_UNLIKELY(!ht__real.pthread_setname_np))
		ht__resolve();
	int r = ht__real.pthread_setname_np((unsigned long)thread, name);
	int e = errno;
	struct ht__thread *t = &ht__t;
	if (r == 0 && ht__enter(t)) {
		/* Another thread is named by tid if it has a ring; if not, its
		   THREAD_START will carry the new name. */
		int self = pthread_equal(thread, pthread_self());
		if (self && !t->tid)
			t->tid = (int32_t)syscall(SYS_gettid);
		pid_t tid = self ? t->tid : ht__thread_tid((unsigned long)thread);
		if (tid)
			ht__write_thread(t, HT_REC_THREAD_NAME, tid, name);
		ht__leave(t);
	}
	errno = e;
	return r;
}

/*
 * _Fork (glibc 2.34) forks without running atfork handlers, so its child
 * starts its instance here. fork() itself is covered by the atfork handler.
 */
HT_EXPORT pid_t _Fork(void)
{
	if (HT_UNLIKELY(!ht__real._Fork))
		ht__resolve();
	return ht__fork_then(ht__child_check);
}

pid_t ht__fork_then(void (*in_child)(void))
{
	pid_t r = ht__real._Fork ? ht__real._Fork() : (pid_t)syscall(SYS_fork);
	if (r == 0) {
		int e = errno;
		in_child();
		errno = e;
	}
	return r;
}

struct clone_arg {
	int (*fn)(void *);
	void *arg;
	void (*in_child)(void);
};

/* First code of a clone child that does not share our memory. */
static int clone_child(void *p)
{
	struct clone_arg *a = p;
	a->in_child();
	return a->fn(a->arg);
}

int ht__clone_then(void (*in_child)(void), int (*fn)(void *), void *stack, int flags, void *arg,
		   pid_t *ptid, void *tls, pid_t *ctid)
{
	/* The child gets a copy of this frame, so the wrapper may live here. */
	struct clone_arg a = {fn, arg, in_child};
	return ht__real.clone(clone_child, stack, flags, &a, ptid, tls, ctid);
}

HT_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	pid_t *ptid = va_arg(ap, pid_t *);
	void *tls = va_arg(ap, void *);
	pid_t *ctid = va_arg(ap, pid_t *);
	va_end(ap);
	if (HT_UNLIKELY(!ht__real.clone))
		ht__resolve();
	if ((flags & CLONE_VM) || atomic_load(&ht__g.state) != HT_ST_READY)
		return ht__real.clone(fn, stack, flags, arg, ptid, tls, ctid);
	return ht__clone_then(ht__child_check, fn, stack, flags, arg, ptid, tls, ctid);
}

/* syscall(2) made here: the real one would be the exported hook below. */
static long syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/*
 * syscall(): a raw clone (syscall(SYS_clone, SIGCHLD, 0, ...) or clone3)
 * without CLONE_VM makes a child that glibc knows nothing of: no atfork
 * handler runs, and the child would write into its parent's rings under
 * the parent's pid. Its first code after the call starts its own instance,
 * like a fork child. Every other call goes straight to the kernel. A clone
 * made with inline assembly is found by the fork sentinel (ht__g.alive) at
 * the child's first event instead.
 */
HT_EXPORT long syscall(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
	long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
	va_end(ap);
	uint64_t flags = CLONE_VM;
	if (nr == SYS_clone)
		flags = (uint64_t)a1;
	else if (nr == SYS_fork)
		flags = 0;
#ifdef SYS_clone3
	else if (nr == SYS_clone3 && a1 && (size_t)a2 >= sizeof(uint64_t))
		memcpy(&flags, (const void *)a1, sizeof flags); /* clone_args.flags */
#endif
	/* exit_group ends every thread without an exit handler: like _exit. */
	if (HT_UNLIKELY(nr == SYS_exit_group))
		ht__exit_self((int)a1);
	long r = syscall6(nr, a1, a2, a3, a4, a5, a6);
	if (HT_UNLIKELY(!(flags & CLONE_VM)) && r == 0) {
		int e = errno;
		ht__child_check();
		errno = e;
	}
	return r;
}
