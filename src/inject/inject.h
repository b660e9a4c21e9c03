/*
 * inject.h - load the recorder into a running process and start or stop its
 * attach mode, with ptrace and without gdb (docs/attach.md). One thread of the
 * target is borrowed for a moment at a safe point, made to call dlopen() and
 * ht__attach_start() (or ht__attach_stop()), and put back exactly as it was.
 *
 * Typical use (what `heaptrail record -p` does):
 *
 *     struct ht__attach a;
 *     char why[256];
 *     rc = ht__inject_check(pid);                       // touches nothing
 *     rc = ht__inject_attach(&a, pid, lib, session_path, why, sizeof why);
 *     ... the session collects ...
 *     rc = ht__inject_detach(&a, why, sizeof why);
 *
 * Every function returns 0 or a negative enum ht_error; when why is given it
 * gets one lowercase line saying what went wrong. Nothing here prints.
 * Thread-safety: one thread injects into a given process at a time; calls for
 * different processes are independent. x86-64 and glibc targets only.
 */
#ifndef HT_INJECT_INJECT_H
#define HT_INJECT_INJECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* How long an injected call may take before it is abandoned. */
#define HT__INJECT_CALL_MS 10000

/*
 * Work to do while an injection waits (for a safe point, for a call to
 * return), at most every 10 ms: the session's tick, so processes already
 * attached are drained meanwhile and never see a silent collector. NULL: none.
 */
void ht__inject_set_idle(void (*idle)(void *ctx), void *ctx);

/* One process the recorder was injected into, for ht__inject_detach(). */
struct ht__attach {
	pid_t pid;
	uint64_t lib_base;   /* where the recorder is mapped in the target */
	uint64_t stop_fn;    /* ht__attach_stop() in the target */
	char lib_path[4096]; /* the recorder's path as the target's maps show it */
};

/*
 * Whether we may ptrace pid, found without touching it (opening
 * /proc/PID/mem asks the kernel the same question as PTRACE_ATTACH, Yama
 * included). Returns 0, HT_ERR_NOT_FOUND (no such process) or HT_ERR_PERM.
 */
int ht__inject_check(pid_t pid);

/*
 * Why pid cannot be traced and what to do about it, as one lowercase line
 * without a final period (Yama ptrace_scope, another tracer, another user, a
 * non-dumpable process). For the message after HT_ERR_PERM.
 */
void ht__inject_perm_hint(pid_t pid, char *buf, size_t n);

/*
 * Load the recorder lib (an absolute path) into pid and call
 * ht__attach_start(session_path) there. When a recorder from an earlier attach
 * is still loaded (inert), a fresh copy of lib is loaded instead, next to the
 * session file. On success *a describes the attach. Returns 0,
 * HT_ERR_NOT_FOUND (process gone, also when it exited during the attach and
 * failed a step of it, which why then says; no glibc, symbol missing), HT_ERR_PERM,
 * HT_ERR_EXISTS (it runs under `heaptrail record` already),
 * HT_ERR_IO (ptrace failed, the call timed out or crashed) or the error
 * ht__attach_start() returned in the target. The target is left running and
 * unchanged on every error before the dlopen.
 */
int ht__inject_attach(struct ht__attach *a, pid_t pid, const char *lib, const char *session_path,
		      char *why, size_t n);

/*
 * Call ht__attach_stop() in the process: its GOT entries are restored and the
 * recorder goes dormant. Returns 0, HT_ERR_NOT_FOUND when the process is gone
 * (before or during the detach) or has exec'd (nothing to undo then), or
 * HT_ERR_IO.
 */
int ht__inject_detach(const struct ht__attach *a, char *why, size_t n);

/*
 * Value of the defined dynamic symbol name in the ELF file at path (its
 * .dynsym), and the virtual address the file's offset 0 is loaded at, so that
 * runtime address = value + (mapping start of offset 0) - *base_vaddr.
 * Returns 0, HT_ERR_NOT_FOUND (no such symbol) or HT_ERR_IO / HT_ERR_CORRUPT.
 */
int ht__elf_dynsym(const char *path, const char *name, uint64_t *value, uint64_t *base_vaddr);

#endif
