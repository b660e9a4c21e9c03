/*
 * Crash reports for the flight recorder (HT_SHM_CRASHES): a process whose
 * parent is not traced dies without anyone telling the session how, so the
 * recorder's own handler of the crash signals notes the signal in the
 * session's header and lets the process die of it exactly as it would have.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* The signals whose default action is a crash (ring_keep.c's list). */
static const int crash_sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS};
#define NSIGS (sizeof(crash_sigs) / sizeof(crash_sigs[0]))

/* Claims a slot of the header's crash table for this process (no lock, no
   allocation: it runs in a signal handler of a crashing program). */
static void report(struct ht__shm_header *h, int sig)
{
	int32_t pid = (int32_t)syscall(SYS_getpid);
	for (uint32_t i = 0; i < HT_CRASH_SLOTS; i++) {
		struct ht__shm_crash *c = &h->crash[i];
		int32_t free_pid = 0;
		if (atomic_load_explicit(&c->pid, memory_order_relaxed) == pid)
			return; /* another thread of ours was first */
		if (!atomic_compare_exchange_strong(&c->pid, &free_pid, -1))
			continue;
		c->sig = sig;
		c->instance = ht__g.instance;
		atomic_store_explicit(&c->pid, pid, memory_order_release);
		return;
	}
	atomic_fetch_add_explicit(&h->crashes_unreported, 1, memory_order_relaxed);
}

/*
 * Installed with SA_RESETHAND, so the disposition is the default again as
 * this runs. The signal is sent again, with the same siginfo, to this
 * thread: it stays pending (blocked while the handler runs) and kills the
 * process when the handler returns, as the first delivery would have, with
 * the same core dump. A fault would repeat anyway; abort() and kill() would
 * not.
 */
static void on_crash(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	int save = errno;
	if (atomic_load_explicit(&ht__g.state, memory_order_relaxed) == HT_ST_READY && ht__g.hdr)
		report(ht__g.hdr, sig);
	long pid = syscall(SYS_getpid), tid = syscall(SYS_gettid);
	if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, si) != 0)
		syscall(SYS_tgkill, pid, tid, sig);
	errno = save;
}

/* Takes the crash signals the program leaves at their default action. */
void ht__crash_arm(void)
{
	if (!(ht__g.flags & HT_SHM_CRASHES))
		return;
	for (unsigned i = 0; i < NSIGS; i++) {
		struct sigaction old, sa = {.sa_sigaction = on_crash,
					    .sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK};
		if (sigaction(crash_sigs[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
		    old.sa_handler != SIG_DFL)
			continue;
		sigemptyset(&sa.sa_mask);
		sigaction(crash_sigs[i], &sa, NULL);
	}
}

/* Gives back the default action where the handler is still ours (detach). */
void ht__crash_disarm(void)
{
	for (unsigned i = 0; i < NSIGS; i++) {
		struct sigaction old, sa = {.sa_handler = SIG_DFL};
		if (sigaction(crash_sigs[i], NULL, &old) == 0 && (old.sa_flags & SA_SIGINFO) &&
		    old.sa_sigaction == on_crash) {
			sigemptyset(&sa.sa_mask);
			sigaction(crash_sigs[i], &sa, NULL);
		}
	}
}
