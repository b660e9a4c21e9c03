/*
 * inject.c - the injector of `heaptrail record -p`: borrows one thread of a
 * running process with ptrace at a safe point, makes it call dlopen() of the
 * recorder and the recorder's attach entry points, and puts it back exactly
 * as it was (docs/attach.md). Addresses in the target come from its
 * /proc/PID/maps and the .dynsym of the files mapped there.
 */
#define _GNU_SOURCE
#include "inject/inject.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heaptrail/trace.h"
#include "base/procfs.h"
#include "base/protocol.h"

#ifndef __x86_64__
#error "the injector knows the x86-64 calling convention only"
#endif

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif

/* Kernel-internal restart codes a thread stopped in a system call may show. */
#define HT_ERESTARTSYS 512
#define HT_ERESTARTNOINTR 513
#define HT_ERESTARTNOHAND 514
#define HT_ERESTART_RESTARTBLOCK 516

#define HT_RED_ZONE 128
#define HT_XSTATE_MAX (64 * 1024)
#define HT_BORROW_MS 3000 /* how long to look for a thread at a safe point */
/* ...and at least this many looks at every thread: on a loaded machine 3 s
   held a few dozen, and busy threads were never caught at a safe point (qa:
   attach.e2e); on an idle one 3 s hold about a thousand. */
#define HT_BORROW_ROUNDS 400u

static void say(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(char *why, size_t n, const char *fmt, ...)
{
	if (!why || !n)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void (*idle_fn)(void *);
static void *idle_ctx;
static uint64_t idle_last;

void ht__inject_set_idle(void (*idle)(void *ctx), void *ctx)
{
	idle_fn = idle;
	idle_ctx = ctx;
}

/* Sleeps us microseconds, running the idle work when it is due. */
static void pause_us(long us)
{
	uint64_t now = now_ms();
	if (idle_fn && now - idle_last >= 10) {
		idle_last = now;
		idle_fn(idle_ctx);
	}
	struct timespec ts = {0, us * 1000};
	nanosleep(&ts, NULL);
}

/* ---- ELF ---- */

int ht__elf_dynsym(const char *path, const char *name, uint64_t *value, uint64_t *base_vaddr)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? HT_ERR_NOT_FOUND : HT_ERR_IO;
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return HT_ERR_CORRUPT;
	}
	size_t size = (size_t)st.st_size;
	const unsigned char *f = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return HT_ERR_IO;
	int rc = HT_ERR_CORRUPT;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    eh->e_shoff > size || (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size - eh->e_shoff ||
	    eh->e_phoff > size || (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > size - eh->e_phoff)
		goto out;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(f + eh->e_phoff);
	*base_vaddr = 0;
	for (unsigned i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
			*base_vaddr = ph[i].p_vaddr & ~(uint64_t)4095;
			break;
		}
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(f + eh->e_shoff);
	rc = HT_ERR_NOT_FOUND;
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum)
			continue;
		const Elf64_Shdr *strs = &sh[sh[i].sh_link];
		if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset ||
		    strs->sh_offset > size || strs->sh_size > size - strs->sh_offset) {
			rc = HT_ERR_CORRUPT;
			goto out;
		}
		const Elf64_Sym *sym = (const Elf64_Sym *)(f + sh[i].sh_offset);
		const char *str = (const char *)(f + strs->sh_offset);
		size_t count = sh[i].sh_size / sizeof(Elf64_Sym), len = strlen(name);
		for (size_t k = 0; k < count; k++) {
			if (sym[k].st_shndx == SHN_UNDEF || sym[k].st_value == 0 ||
			    sym[k].st_name >= strs->sh_size ||
			    strs->sh_size - sym[k].st_name <= len)
				continue;
			if (!memcmp(str + sym[k].st_name, name, len + 1)) {
				*value = sym[k].st_value;
				rc = 0;
				goto out;
			}
		}
	}
out:
	munmap((void *)f, size);
	return rc;
}

/* ---- the target's memory map ---- */

struct map_line {
	uint64_t start, end, off;
	char perms[8];
	const char *path; /* "" for anonymous mappings */
};

/* Calls cb for each line of /proc/PID/maps until it returns non-zero. */
static int maps_each(pid_t pid, int (*cb)(const struct map_line *, void *), void *ctx)
{
	char name[64], line[PATH_MAX + 256];
	snprintf(name, sizeof(name), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(name, "re");
	if (!f)
		return errno == ENOENT	 ? HT_ERR_NOT_FOUND
		       : errno == EACCES ? HT_ERR_PERM
					 : HT_ERR_IO;
	int rc = 0;
	while (!rc && fgets(line, sizeof(line), f)) {
		struct map_line m;
		int pos = 0;
		unsigned long long s, e, o;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s%n", &s, &e, m.perms, &o, &pos) < 4)
			continue;
		char *p = line + pos;
		while (*p == ' ' || *p == '\t')
			p++;
		p[strcspn(p, "\n")] = 0;
		m.start = s;
		m.end = e;
		m.off = o;
		m.path = p;
		rc = cb(&m, ctx);
	}
	fclose(f);
	return rc < 0 ? rc : 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static bool is_libc(const char *path)
{
	const char *b = base_name(path);
	return !strncmp(b, "libc.so", 7) || (!strncmp(b, "libc-", 5) && strstr(b, ".so"));
}

static bool is_loader(const char *path)
{
	const char *b = base_name(path);
	return !strncmp(b, "ld-linux", 8) || !strncmp(b, "ld64.so", 7) ||
	       (!strncmp(b, "ld-", 3) && strstr(b, ".so"));
}

struct find_mod {
	bool (*match)(const char *path, const void *arg);
	const void *arg;
	uint64_t base; /* start of the mapping of file offset 0 */
	char path[PATH_MAX];
};

static int find_mod_cb(const struct map_line *m, void *ctx)
{
	struct find_mod *fm = ctx;
	if (m->path[0] != '/' || m->off != 0 || !fm->match(m->path, fm->arg))
		return 0;
	fm->base = m->start;
	snprintf(fm->path, sizeof(fm->path), "%s", m->path);
	return 1;
}

static bool match_libc(const char *path, const void *arg)
{
	(void)arg;
	return is_libc(path);
}
static bool match_libdl(const char *path, const void *arg)
{
	(void)arg;
	return !strncmp(base_name(path), "libdl.so", 8) || !strncmp(base_name(path), "libdl-", 6);
}

/* A mapped file's path as the kernel shows a deleted one: "PATH (deleted)". */
static bool match_exact_or_deleted(const char *path, const void *arg)
{
	const char *want = arg;
	size_t n = strlen(want);
	return !strncmp(path, want, n) && (!path[n] || !strcmp(path + n, " (deleted)"));
}

/*
 * Address of symbol name in the module of pid that match accepts, found from
 * the target's maps and the file's .dynsym (read through /proc/PID/root, so a
 * process in another mount namespace is read right).
 */
static int target_symbol(pid_t pid, bool (*match)(const char *, const void *), const void *arg,
			 const char *name, uint64_t *addr, uint64_t *base)
{
	struct find_mod fm = {.match = match, .arg = arg};
	int rc = maps_each(pid, find_mod_cb, &fm);
	if (rc < 0)
		return rc;
	if (!fm.base)
		return HT_ERR_NOT_FOUND;
	char *del = strstr(fm.path, " (deleted)");
	if (del)
		*del = 0;
	char file[PATH_MAX + 64];
	snprintf(file, sizeof(file), "/proc/%d/root%s", (int)pid, fm.path);
	uint64_t value, vbase;
	rc = ht__elf_dynsym(file, name, &value, &vbase);
	if (rc == HT_ERR_IO || rc == HT_ERR_NOT_FOUND) {
		/* /proc/PID/root may be closed to us even where the file is not. */
		int rc2 = ht__elf_dynsym(fm.path, name, &value, &vbase);
		if (rc2 == 0 || rc == HT_ERR_IO)
			rc = rc2;
	}
	if (rc < 0)
		return rc;
	*addr = fm.base - vbase + value;
	if (base)
		*base = fm.base;
	return 0;
}

/* ---- permission ---- */

int ht__inject_check(pid_t pid)
{
	char name[64];
	if (pid <= 0)
		return HT_ERR_NOT_FOUND;
	snprintf(name, sizeof(name), "/proc/%d/mem", (int)pid);
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno == ENOENT || errno == ESRCH ? HT_ERR_NOT_FOUND : HT_ERR_PERM;
}

/* A number from a "Key:\tvalue" line of /proc/PID/status, or -1. */
static long status_field(pid_t pid, const char *key, int column)
{
	char name[64], line[512];
	snprintf(name, sizeof(name), "/proc/%d/status", (int)pid);
	FILE *f = fopen(name, "re");
	if (!f)
		return -1;
	long v = -1;
	size_t n = strlen(key);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, n) || line[n] != ':')
			continue;
		char *p = line + n + 1;
		for (int c = 0; c <= column; c++) {
			char *end;
			v = strtol(p, &end, 10);
			if (end == p) {
				v = -1;
				break;
			}
			p = end;
		}
		break;
	}
	fclose(f);
	return v;
}

void ht__inject_perm_hint(pid_t pid, char *buf, size_t n)
{
	long tracer = status_field(pid, "TracerPid", 0);
	if (tracer > 0) {
		say(buf, n, "it is already traced by process %ld (a debugger?); detach that first",
		    tracer);
		return;
	}
	long scope = -1;
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fscanf(f, "%ld", &scope) != 1)
			scope = -1;
		fclose(f);
	}
	long uid = status_field(pid, "Uid", 1); /* effective uid */
	bool root = geteuid() == 0;
	if (scope == 3) {
		say(buf, n, "kernel.yama.ptrace_scope is 3, which forbids ptrace until reboot");
	} else if (uid >= 0 && (uid_t)uid != geteuid() && !root) {
		say(buf, n,
		    "it runs as user %ld; attach as the same user, or as root (CAP_SYS_PTRACE)",
		    uid);
	} else if (scope == 2 && !root) {
		say(buf, n,
		    "kernel.yama.ptrace_scope is 2: only CAP_SYS_PTRACE may attach; run as root");
	} else if (scope == 1 && !root) {
		say(buf, n,
		    "kernel.yama.ptrace_scope is 1: only a parent may attach; run as root "
		    "(CAP_SYS_PTRACE) or set it to 0 with 'sysctl kernel.yama.ptrace_scope=0'");
	} else {
		say(buf, n,
		    "ptrace is not allowed (a non-dumpable process, a security module or a "
		    "container "
		    "without CAP_SYS_PTRACE); run as root with CAP_SYS_PTRACE");
	}
}

/* ---- borrowing a thread ---- */

struct borrowed {
	pid_t pid, tid;
	struct user_regs_struct regs; /* as the thread was */
	unsigned char *xstate;
	struct iovec xiov;
	bool have_xstate, have_fp;
	struct user_fpregs_struct fp;
};

/*
 * Waits for the interrupt stop of a freshly seized and interrupted thread;
 * signals that arrive first are delivered as they would have been. Returns
 * 0, or HT_ERR_NOT_FOUND when the thread is gone.
 */
static int wait_interrupt_stop(pid_t tid)
{
	for (;;) {
		int st;
		pid_t r = waitpid(tid, &st, __WALL);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return HT_ERR_NOT_FOUND;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return HT_ERR_NOT_FOUND;
		if (!WIFSTOPPED(st))
			continue;
		if ((st >> 16) == PTRACE_EVENT_STOP)
			return 0;
		if (ptrace(PTRACE_CONT, tid, 0, (void *)(long)WSTOPSIG(st)) < 0)
			return HT_ERR_NOT_FOUND;
	}
}

struct ranges {
	uint64_t lo[64], hi[64];
	int n;
};

/* Code of the modules whose locks the injected calls need: libc, the loader,
   and our own recorder (and its unwinder) from an earlier attach. */
static int unsafe_cb(const struct map_line *m, void *ctx)
{
	struct ranges *r = ctx;
	if (!strchr(m->perms, 'x') || m->path[0] != '/' || r->n >= 64)
		return 0;
	const char *b = base_name(m->path);
	if (is_libc(m->path) || is_loader(m->path) || !strncmp(b, "libheaptrail", 12) ||
	    !strncmp(b, "libunwind", 9) || !strncmp(b, "libpthread", 10) ||
	    !strncmp(b, "libdl", 5)) {
		r->lo[r->n] = m->start;
		r->hi[r->n] = m->end;
		r->n++;
	}
	return 0;
}

static bool in_ranges(const struct ranges *r, uint64_t ip)
{
	for (int i = 0; i < r->n; i++)
		if (ip >= r->lo[i] && ip < r->hi[i])
			return true;
	return false;
}

/*
 * A thread is safe to borrow when it cannot be holding a lock our calls
 * need: it stopped outside libc and the loader, or it waits in a blocking
 * system call (the kernel's restart codes, or EINTR) that is not a futex
 * (a futex wait may sit inside a lock of malloc's). With futex_ok, futex
 * waits count as safe too (the main thread in pthread_join, say).
 */
static bool safe_point(const struct user_regs_struct *r, const struct ranges *unsafe, bool futex_ok)
{
	long nr = (long)r->orig_rax;
	long ret = (long)r->rax;
	bool in_syscall = nr >= 0 && (ret == -HT_ERESTARTSYS || ret == -HT_ERESTARTNOINTR ||
				      ret == -HT_ERESTARTNOHAND ||
				      ret == -HT_ERESTART_RESTARTBLOCK || ret == -EINTR);
	if (in_syscall)
		return nr != SYS_futex || futex_ok;
	return !in_ranges(unsafe, r->rip);
}

static void release_thread(struct borrowed *b)
{
	free(b->xstate);
	b->xstate = NULL;
}

static int save_state(struct borrowed *b)
{
	if (ptrace(PTRACE_GETREGS, b->tid, 0, &b->regs) < 0)
		return HT_ERR_IO;
	b->xstate = malloc(HT_XSTATE_MAX);
	if (!b->xstate)
		return HT_ERR_NOMEM;
	b->xiov.iov_base = b->xstate;
	b->xiov.iov_len = HT_XSTATE_MAX;
	b->have_xstate = ptrace(PTRACE_GETREGSET, b->tid, (void *)NT_X86_XSTATE, &b->xiov) == 0;
	if (!b->have_xstate)
		b->have_fp = ptrace(PTRACE_GETFPREGS, b->tid, 0, &b->fp) == 0;
	return 0;
}

static int restore_state(struct borrowed *b)
{
	int rc = 0;
	if (ptrace(PTRACE_SETREGS, b->tid, 0, &b->regs) < 0)
		rc = HT_ERR_IO;
	if (b->have_xstate && ptrace(PTRACE_SETREGSET, b->tid, (void *)NT_X86_XSTATE, &b->xiov) < 0)
		rc = HT_ERR_IO;
	if (b->have_fp && ptrace(PTRACE_SETFPREGS, b->tid, 0, &b->fp) < 0)
		rc = HT_ERR_IO;
	return rc;
}

static int list_tids(pid_t pid, pid_t *out, int max)
{
	char name[64];
	snprintf(name, sizeof(name), "/proc/%d/task", (int)pid);
	DIR *d = opendir(name);
	if (!d)
		return errno == ENOENT ? HT_ERR_NOT_FOUND : HT_ERR_PERM;
	int n = 0;
	out[n++] = pid; /* the main thread first */
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		pid_t t = (pid_t)atoi(e->d_name);
		if (t > 0 && t != pid)
			out[n++] = t;
	}
	closedir(d);
	return n;
}

/*
 * Seizes one thread of pid that is at a safe point and leaves it stopped
 * with its state saved in *b. Threads tried and found busy are let go at
 * once. Returns 0, HT_ERR_PERM, HT_ERR_NOT_FOUND or HT_ERR_IO (no safe
 * point found in time).
 */
static int borrow_thread(struct borrowed *b, pid_t pid, char *why, size_t n)
{
	memset(b, 0, sizeof(*b));
	b->pid = pid;
	uint64_t start = now_ms();
	pid_t tids[512];
	unsigned round = 0;
	while (now_ms() - start < HT_BORROW_MS || round < HT_BORROW_ROUNDS) {
		bool futex_ok =
		    now_ms() - start > HT_BORROW_MS / 3 && round >= HT_BORROW_ROUNDS / 3;
		struct ranges unsafe = {.n = 0};
		int rc = maps_each(pid, unsafe_cb, &unsafe);
		if (rc < 0) {
			say(why, n, "cannot read its memory map");
			return rc;
		}
		int nt = list_tids(pid, tids, 512);
		if (nt < 0) {
			say(why, n, "the process is gone");
			return nt;
		}
		for (int i = 0; i < nt; i++) {
			pid_t tid = tids[i];
			if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0) {
				if (errno == EPERM) {
					say(why, n, "ptrace is not permitted");
					return HT_ERR_PERM;
				}
				continue; /* the thread is gone */
			}
			if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0 ||
			    wait_interrupt_stop(tid) < 0) {
				ptrace(PTRACE_DETACH, tid, 0, 0);
				continue;
			}
			struct user_regs_struct r;
			if (ptrace(PTRACE_GETREGS, tid, 0, &r) == 0 &&
			    safe_point(&r, &unsafe, futex_ok)) {
				b->tid = tid;
				rc = save_state(b);
				if (rc == 0)
					return 0;
				release_thread(b);
				ptrace(PTRACE_DETACH, tid, 0, 0);
				say(why, n, "cannot read the registers of thread %d", (int)tid);
				return rc;
			}
			ptrace(PTRACE_DETACH, tid, 0, 0);
		}
		/* Let the threads run on a little before looking again. */
		pause_us(round < 20 ? 200 : 2000);
		round++;
	}
	say(why, n,
	    "none of its threads reached a safe point (outside libc and the loader) in %llu ms "
	    "(%u looks at each)",
	    (unsigned long long)(now_ms() - start), round);
	return HT_ERR_IO;
}

/* Puts the thread back as it was and lets it go. */
static int return_thread(struct borrowed *b)
{
	int rc = restore_state(b);
	if (ptrace(PTRACE_DETACH, b->tid, 0, 0) < 0 && rc == 0)
		rc = HT_ERR_IO;
	release_thread(b);
	return rc;
}

static int write_mem(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = {(void *)buf, len}, remote = {(void *)addr, len};
	if (process_vm_writev(tid, &local, 1, &remote, 1, 0) == (ssize_t)len)
		return 0;
	/* Word by word through ptrace when process_vm_writev is not allowed. */
	const unsigned char *p = buf;
	for (size_t off = 0; off < len; off += sizeof(long)) {
		long word;
		size_t k = len - off < sizeof(long) ? len - off : sizeof(long);
		if (k < sizeof(long)) {
			errno = 0;
			word = ptrace(PTRACE_PEEKDATA, tid, (void *)(addr + off), 0);
			if (errno)
				return HT_ERR_IO;
		}
		memcpy(&word, p + off, k);
		if (ptrace(PTRACE_POKEDATA, tid, (void *)(addr + off), (void *)word) < 0)
			return HT_ERR_IO;
	}
	return 0;
}

/*
 * Interrupts a thread running an injected call that took too long and
 * waits for it to stop, so its registers can be put back.
 */
static void stop_call(pid_t tid)
{
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0)
		return;
	for (;;) {
		int st;
		if (waitpid(tid, &st, __WALL) < 0 && errno != EINTR)
			return;
		if (WIFEXITED(st) || WIFSIGNALED(st) ||
		    (WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_STOP))
			return;
		if (WIFSTOPPED(st) && ptrace(PTRACE_CONT, tid, 0, (void *)(long)WSTOPSIG(st)) < 0)
			return;
	}
}

/*
 * Makes the borrowed thread call fn(a0, a1) on its own stack, below the red
 * zone and below low (strings put there earlier), with return address 0: the
 * return faults, and the fault brings the thread back to us without being
 * delivered. Signals that arrive meanwhile are delivered as usual. *ret gets
 * rax. Returns 0, HT_ERR_NOT_FOUND (the process died) or HT_ERR_IO.
 */
static int call_in(struct borrowed *b, uint64_t low, uint64_t fn, uint64_t a0, uint64_t a1,
		   uint64_t *ret, char *why, size_t n)
{
	struct user_regs_struct r = b->regs;
	uint64_t sp = ((low - 256) & ~(uint64_t)15) - 8;
	uint64_t zero = 0;
	if (write_mem(b->tid, sp, &zero, sizeof(zero)) < 0) {
		say(why, n, "cannot write to the stack of thread %d", (int)b->tid);
		return HT_ERR_IO;
	}
	r.rsp = sp;
	r.rip = fn;
	r.rdi = a0;
	r.rsi = a1;
	r.rax = 0;
	/* Not in a system call: no restart games on the way back to user mode. */
	r.orig_rax = (unsigned long long)-1;
	r.eflags &= ~(0x400ull | 0x100ull); /* DF clear as the ABI wants; no single-step */
	if (ptrace(PTRACE_SETREGS, b->tid, 0, &r) < 0 || ptrace(PTRACE_CONT, b->tid, 0, 0) < 0) {
		say(why, n, "cannot start a call in thread %d", (int)b->tid);
		return HT_ERR_IO;
	}
	uint64_t start = now_ms();
	for (;;) {
		int st;
		pid_t w = waitpid(b->tid, &st, __WALL | WNOHANG);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			say(why, n, "the process is gone");
			return HT_ERR_NOT_FOUND;
		}
		if (w == 0) {
			if (now_ms() - start > HT__INJECT_CALL_MS) {
				stop_call(b->tid);
				say(why, n, "the call in thread %d did not return within %d ms",
				    (int)b->tid, HT__INJECT_CALL_MS);
				return HT_ERR_IO;
			}
			pause_us(200);
			continue;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			say(why, n, "the process died during the call");
			return HT_ERR_NOT_FOUND;
		}
		if (!WIFSTOPPED(st))
			continue;
		int sig = WSTOPSIG(st);
		if ((st >> 16) == PTRACE_EVENT_STOP) {
			/* A group stop (SIGSTOP to the process): finish the call first. */
			ptrace(PTRACE_CONT, b->tid, 0, 0);
			continue;
		}
		if (sig == SIGSEGV) {
			struct user_regs_struct now;
			if (ptrace(PTRACE_GETREGS, b->tid, 0, &now) < 0) {
				say(why, n, "cannot read the registers of thread %d", (int)b->tid);
				return HT_ERR_IO;
			}
			if (now.rip == 0) {
				*ret = now.rax;
				return 0;
			}
			say(why, n, "the call crashed at 0x%llx in thread %d",
			    (unsigned long long)now.rip, (int)b->tid);
			return HT_ERR_IO;
		}
		if (ptrace(PTRACE_CONT, b->tid, 0, (void *)(long)sig) < 0) {
			say(why, n, "the process is gone");
			return HT_ERR_NOT_FOUND;
		}
	}
}

/*
 * The target's dlerror() text after a failed dlopen, so the user sees the
 * loader's reason (a missing file, static TLS exhausted, a noexec mount).
 */
static void dlerror_in(struct borrowed *b, uint64_t low, char *out, size_t n)
{
	snprintf(out, n, "dlopen returned NULL");
	uint64_t fn, text = 0;
	if (target_symbol(b->pid, match_libc, NULL, "dlerror", &fn, NULL) < 0 &&
	    target_symbol(b->pid, match_libdl, NULL, "dlerror", &fn, NULL) < 0)
		return;
	if (call_in(b, low, fn, 0, 0, &text, NULL, 0) < 0 || !text)
		return;
	struct iovec local = {out, n - 1}, remote = {(void *)text, n - 1};
	ssize_t got = process_vm_readv(b->pid, &local, 1, &remote, 1, 0);
	if (got <= 0) {
		snprintf(out, n, "dlopen returned NULL");
		return;
	}
	out[got] = 0;
	out[strnlen(out, (size_t)got)] = 0;
}

/* Counts the recorder copies mapped in a process (file offset 0 of a
   libheaptrail path, deleted or not: an attach's copy is unlinked once
   loaded). */
static int count_copies_cb(const struct map_line *m, void *ctx)
{
	if (m->off == 0 && !strncmp(base_name(m->path), "libheaptrail", 12))
		++*(int *)ctx;
	return 0;
}

/* Writes s below the red zone under the borrowed thread's stack pointer (or
   below *low when given) and returns its address, or 0. */
static uint64_t put_string(struct borrowed *b, uint64_t below, const char *s)
{
	size_t len = strlen(s) + 1;
	uint64_t addr = (below - len) & ~(uint64_t)15;
	return write_mem(b->tid, addr, s, len) < 0 ? 0 : addr;
}

/* ---- attach and detach ---- */

struct lib_seen {
	const char *want;
	bool found;
};

static int lib_seen_cb(const struct map_line *m, void *ctx)
{
	struct lib_seen *s = ctx;
	if (match_exact_or_deleted(m->path, s->want) ||
	    !strncmp(base_name(m->path), "libheaptrail", 12)) {
		s->found = true;
		return 1;
	}
	return 0;
}

static bool noexec_dir(const char *dir)
{
	struct statvfs v;
	return statvfs(dir, &v) < 0 || (v.f_flag & ST_NOEXEC) || access(dir, W_OK) < 0;
}

/*
 * A recorder from an earlier attach stays loaded (inert) in the target, and
 * one that has run once is not started again: its threads may still point at
 * the old session. A fresh copy of the file is a new module to the loader.
 * The copy goes next to the session file (or the library, or /tmp) on a file
 * system that allows executables; the caller unlinks it after the dlopen.
 */
static int fresh_copy(const char *lib, const char *session_path, pid_t pid, char *out, size_t n)
{
	char dirs[3][PATH_MAX];
	snprintf(dirs[0], sizeof(dirs[0]), "%s", session_path);
	snprintf(dirs[1], sizeof(dirs[1]), "%s", lib);
	snprintf(dirs[2], sizeof(dirs[2]), "/tmp/x");
	int in = open(lib, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return HT_ERR_IO;
	struct stat st;
	if (fstat(in, &st) < 0) {
		close(in);
		return HT_ERR_IO;
	}
	for (int i = 0; i < 3; i++) {
		char *slash = strrchr(dirs[i], '/');
		if (!slash)
			continue;
		*slash = 0;
		if (noexec_dir(dirs[i]))
			continue;
		if ((size_t)snprintf(out, n, "%.*s/libheaptrail-attach-%d-XXXXXX", (int)(n - 64),
				     dirs[i], (int)pid) >= n)
			continue;
		int fd = mkostemp(out, O_CLOEXEC);
		if (fd < 0)
			continue;
		off_t off = 0;
		bool ok = fchmod(fd, 0755) == 0;
		while (ok && off < st.st_size) {
			ssize_t k = sendfile(fd, in, &off, (size_t)(st.st_size - off));
			ok = k > 0;
		}
		close(fd);
		if (ok) {
			close(in);
			return 0;
		}
		unlink(out);
	}
	close(in);
	return HT_ERR_IO;
}

/*
 * Whether pid was started under `heaptrail record` (its environment names a
 * session): its recorder is preloaded and already tracing into that session.
 */
static bool launched_traced(pid_t pid)
{
	char name[64];
	snprintf(name, sizeof(name), "/proc/%d/environ", (int)pid);
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	static char env[256 * 1024];
	ssize_t n = read(fd, env, sizeof(env) - 1);
	close(fd);
	if (n <= 0)
		return false;
	env[n] = 0;
	static const char key[] = HT_ENV_SESSION "=";
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(env + i) + 1)
		if (!strncmp(env + i, key, sizeof(key) - 1) && env[i + sizeof(key) - 1])
			return true;
	return false;
}

/*
 * A session file mapped in pid (shared, in a heaptrail directory): a recorder
 * there is tracing into some session right now. Its path goes to ctx.
 */
static int session_mapped_cb(const struct map_line *m, void *ctx)
{
	if (m->perms[3] != 's' ||
	    (!strstr(m->path, "/heaptrail/") && !strstr(m->path, "/heaptrail-")))
		return 0;
	snprintf(ctx, PATH_MAX, "%s", m->path);
	return 1;
}

/*
 * Whether the session file a process maps (path as in its maps) is stale:
 * nobody collects it any more. Its file was deleted (by its collector at the
 * end, or replaced by a new session of the same name), or the collector its
 * header names is gone (killed with SIGKILL, it removed nothing), judged as
 * the recorder judges it (protocol.h: pid and start time). A session
 * that cannot be read, or one waiting for its collector (IFEO buffers,
 * collector_pid 0), is not stale.
 */
static bool session_stale(pid_t pid, const char *mapped)
{
	if (strstr(mapped, " (deleted)"))
		return true;
	char file[PATH_MAX + 64];
	snprintf(file, sizeof(file), "/proc/%d/root%s", (int)pid, mapped);
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fd = open(mapped, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct ht__shm_header h;
	ssize_t got = pread(fd, &h, sizeof(h), 0);
	close(fd);
	if (got != (ssize_t)sizeof(h) || h.magic != HT_SHM_MAGIC || h.collector_pid <= 0)
		return false;
	/* Gone, a zombie, or its pid taken by another process (start time). */
	char buf[1024];
	if (ht__proc_stat_read(h.collector_pid, buf, sizeof(buf)) < 0)
		return errno == ENOENT;
	char state;
	uint64_t start;
	if (!ht__parse_proc_stat(buf, &state, &start))
		return false;
	return state == 'Z' || state == 'X' || (h.collector_start && start != h.collector_start);
}

/* The recorder modules (libheaptrail*.so, and fresh copies of it) mapped in a process. */
struct recorders {
	unsigned n;
	struct {
		uint64_t start, end;
		char path[PATH_MAX];
	} m[8];
};

static int recorders_cb(const struct map_line *m, void *ctx)
{
	struct recorders *r = ctx;
	if (m->path[0] == '/' && m->off == 0 && !strncmp(base_name(m->path), "libheaptrail", 12) &&
	    r->n < sizeof(r->m) / sizeof(r->m[0])) {
		r->m[r->n].start = m->start;
		r->m[r->n].end = m->end;
		snprintf(r->m[r->n].path, sizeof(r->m[0].path), "%s", m->path);
		r->n++;
	}
	return 0;
}

/*
 * Stops every recorder in pid that is still attached (its ht__attach_stop
 * puts the GOT entries back and drops its session mapping); one stopped
 * already answers HT_ERR_NOT_FOUND. A deleted copy's symbols are read
 * through /proc/PID/map_files.
 */
static int stop_stale_recorders(pid_t pid, char *why, size_t n)
{
	struct recorders r = {0};
	int rc = maps_each(pid, recorders_cb, &r);
	if (rc < 0) {
		say(why, n, "cannot read the memory map of process %d", (int)pid);
		return rc;
	}
	for (unsigned i = 0; i < r.n; i++) {
		struct ht__attach a = {.pid = pid, .lib_base = r.m[i].start};
		char file[PATH_MAX + 64];
		char *del = strstr(r.m[i].path, " (deleted)");
		if (del) {
			*del = 0;
			snprintf(file, sizeof(file), "/proc/%d/map_files/%llx-%llx", (int)pid,
				 (unsigned long long)r.m[i].start, (unsigned long long)r.m[i].end);
		} else {
			snprintf(file, sizeof(file), "/proc/%d/root%s", (int)pid, r.m[i].path);
		}
		uint64_t value, vbase;
		if (ht__elf_dynsym(file, "ht__attach_stop", &value, &vbase) < 0 &&
		    (del || ht__elf_dynsym(r.m[i].path, "ht__attach_stop", &value, &vbase) < 0))
			continue; /* not a recorder with attach mode (the IFEO hook) */
		a.stop_fn = r.m[i].start - vbase + value;
		snprintf(a.lib_path, sizeof(a.lib_path), "%s", r.m[i].path);
		char w[256];
		rc = ht__inject_detach(&a, w, sizeof(w));
		if (rc < 0 && rc != HT_ERR_NOT_FOUND) {
			say(why, n,
			    "cannot stop the recorder of a session whose collector is gone: %s", w);
			return rc;
		}
	}
	return 0;
}

static int find_dlopen(pid_t pid, uint64_t *addr)
{
	if (target_symbol(pid, match_libc, NULL, "dlopen", addr, NULL) == 0)
		return 0;
	/* glibc before 2.34 keeps dlopen in libdl, or only a private one in libc. */
	if (target_symbol(pid, match_libdl, NULL, "dlopen", addr, NULL) == 0)
		return 0;
	return target_symbol(pid, match_libc, NULL, "__libc_dlopen_mode", addr, NULL);
}

static bool match_loader(const char *path, const void *arg)
{
	(void)arg;
	return is_loader(path);
}

/* How long a process the loader is still starting gets to map its libc. */
#define START_WAIT_MS 2000

/*
 * dlopen in pid. A process started a moment ago may have only its program
 * and the dynamic loader mapped, libc not yet (qa: `start --pid` of a
 * `sleep` just spawned, on a loaded machine): while the loader is mapped
 * and libc is not, it is given START_WAIT_MS to map it. A static program
 * never maps a loader.
 */
static int find_dlopen_started(pid_t pid, uint64_t *addr)
{
	uint64_t t0 = now_ms();
	for (;;) {
		int rc = find_dlopen(pid, addr);
		if (rc == 0 || rc == HT_ERR_PERM || now_ms() - t0 >= START_WAIT_MS)
			return rc;
		struct find_mod ld = {.match = match_loader}, libc = {.match = match_libc};
		if (maps_each(pid, find_mod_cb, &ld) < 0 || !ld.base ||
		    maps_each(pid, find_mod_cb, &libc) < 0)
			return rc;
		/* libc mapped now: the loader may have mapped it after
		   find_dlopen() looked (attach-modes.starting failed so 1 time
		   in 100), so look once more before giving up. */
		if (libc.base)
			return find_dlopen(pid, addr);
		pause_us(5000);
	}
}

static int attach_once(struct ht__attach *a, pid_t pid, const char *lib, const char *session_path,
		       char *why, size_t n)
{
	memset(a, 0, sizeof(*a));
	a->pid = pid;
	int rc = ht__inject_check(pid);
	if (rc < 0) {
		say(why, n, rc == HT_ERR_PERM ? "ptrace is not permitted" : "no such process");
		return rc;
	}
	if (launched_traced(pid)) {
		say(why, n,
		    "it runs under 'heaptrail record' already and is traced by that session");
		return HT_ERR_EXISTS;
	}
	char other[PATH_MAX] = "";
	if (maps_each(pid, session_mapped_cb, other) == 0 && other[0]) {
		if (!session_stale(pid, other)) {
			say(why, n, "another heaptrail session traces it already ('%s')", other);
			return HT_ERR_EXISTS;
		}
		/* Its collector was killed: that recorder steps aside for ours. */
		if ((rc = stop_stale_recorders(pid, why, n)) < 0)
			return rc;
		/* A killed `record`'s file would hold its pages in /dev/shm for
		   good: nobody can collect it. (A named session's is replaced by
		   the next session of that name.) */
		if (!strstr(other, " (deleted)") && !strncmp(base_name(other), "session-", 8))
			unlink(other);
	}
	uint64_t dlopen_fn;
	rc = find_dlopen_started(pid, &dlopen_fn);
	if (rc < 0) {
		say(why, n, "no dlopen in the process (is it a dynamically linked glibc program?)");
		return rc == HT_ERR_PERM ? rc : HT_ERR_NOT_FOUND;
	}
	uint64_t start_off, vbase;
	rc = ht__elf_dynsym(lib, "ht__attach_start", &start_off, &vbase);
	if (rc < 0) {
		say(why, n, "'%s' has no ht__attach_start", lib);
		return HT_ERR_NOT_FOUND;
	}
	uint64_t stop_off;
	if (ht__elf_dynsym(lib, "ht__attach_stop", &stop_off, &vbase) < 0) {
		say(why, n, "'%s' has no ht__attach_stop", lib);
		return HT_ERR_NOT_FOUND;
	}

	/* An earlier recorder still loaded: load a fresh copy of the file. */
	struct lib_seen seen = {.want = lib};
	maps_each(pid, lib_seen_cb, &seen);
	char copy[PATH_MAX] = "";
	const char *load = lib;
	if (seen.found) {
		if (fresh_copy(lib, session_path, pid, copy, sizeof(copy)) < 0) {
			say(why, n,
			    "a recorder from an earlier attach is loaded and no fresh copy could "
			    "be made");
			return HT_ERR_IO;
		}
		load = copy;
	}

	struct borrowed b;
	rc = borrow_thread(&b, pid, why, n);
	if (rc < 0)
		goto out;
	uint64_t low = b.regs.rsp - HT_RED_ZONE;
	uint64_t lib_str = put_string(&b, low, load);
	uint64_t ses_str = lib_str ? put_string(&b, lib_str, session_path) : 0;
	if (!ses_str) {
		say(why, n, "cannot write to the stack of thread %d", (int)b.tid);
		return_thread(&b);
		rc = HT_ERR_IO;
		goto out;
	}
	uint64_t handle = 0;
	rc = call_in(&b, ses_str, dlopen_fn, lib_str, RTLD_NOW, &handle, why, n);
	if (rc == 0 && !handle) {
		char msg[256];
		dlerror_in(&b, ses_str, msg, sizeof(msg));
		int copies = 0;
		if (strstr(msg, "static TLS"))
			maps_each(pid, count_copies_cb, &copies);
		if (copies)
			/* Each attach loads a copy of its own (docs/attach.md), and
			   each copy's thread state takes room in the static TLS
			   that glibc sized when the process started. */
			say(why, n,
			    "the process holds %d recorder cop%s from earlier attaches, and "
			    "glibc has no static TLS room left for another (the loader says: %s); "
			    "restart the program to attach again, or start it with "
			    "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 (room for about "
			    "60 attaches)",
			    copies, copies == 1 ? "y" : "ies", msg);
		else
			say(why, n, "loading the recorder failed in the process: %s", msg);
		rc = HT_ERR_IO;
	}
	uint64_t base = 0, start_fn = 0;
	if (rc == 0) {
		struct find_mod fm = {.match = match_exact_or_deleted, .arg = load};
		maps_each(pid, find_mod_cb, &fm);
		base = fm.base;
		if (!base) {
			say(why, n, "'%s' is not in the process's memory map after dlopen", load);
			rc = HT_ERR_IO;
		}
		start_fn = base - vbase + start_off;
	}
	uint64_t result = 0;
	if (rc == 0)
		rc = call_in(&b, ses_str, start_fn, ses_str, 0, &result, why, n);
	int rrc = return_thread(&b);
	if (rc == 0 && rrc < 0) {
		say(why, n, "cannot restore the registers of thread %d", (int)b.tid);
		rc = rrc;
	}
	if (rc == 0 && (int)result == HT_ERR_PERM) {
		/* ptrace worked; the target itself may not open our 0600 file. */
		struct stat st;
		long uid = status_field(pid, "Uid", 1);
		int owner = stat(session_path, &st) == 0 ? (int)st.st_uid : (int)geteuid();
		say(why, n,
		    "the process runs as user %ld and cannot open the session file '%s' (mode "
		    "0600, user %d); trace it as its own user (sudo -u '#%ld' heaptrail ...); "
		    "the recorder stays loaded in it, inactive",
		    uid, session_path, owner, uid);
		rc = HT_ERR_IO; /* not a ptrace refusal: no ptrace hint */
	} else if (rc == 0 && (int)result != 0) {
		rc = (int)result;
		say(why, n,
		    "the recorder could not start in the process: %s; it stays loaded in it, "
		    "inactive",
		    ht_strerror(rc));
	}
	if (rc == 0) {
		a->lib_base = base;
		a->stop_fn = base - vbase + stop_off;
		snprintf(a->lib_path, sizeof(a->lib_path), "%s", load);
	}
out:
	if (copy[0])
		unlink(copy);
	return rc;
}

static int detach_once(const struct ht__attach *a, char *why, size_t n)
{
	/* Gone, or exec'd since (our module no longer at its place): nothing to undo. */
	struct find_mod fm = {.match = match_exact_or_deleted, .arg = a->lib_path};
	int rc = maps_each(a->pid, find_mod_cb, &fm);
	if (rc < 0 || fm.base != a->lib_base) {
		say(why, n, "the process is gone or has exec'd");
		return HT_ERR_NOT_FOUND;
	}
	struct borrowed b;
	rc = borrow_thread(&b, a->pid, why, n);
	if (rc < 0)
		return rc;
	uint64_t result = 0;
	rc = call_in(&b, b.regs.rsp - HT_RED_ZONE, a->stop_fn, 0, 0, &result, why, n);
	int rrc = return_thread(&b);
	if (rc == 0 && rrc < 0) {
		say(why, n, "cannot restore the registers of thread %d", (int)b.tid);
		rc = rrc;
	}
	if (rc == 0 && (int)result != 0) {
		rc = (int)result;
		say(why, n, "the recorder could not stop: %s", ht_strerror(rc));
	}
	return rc;
}

/*
 * Whether pid has exited (a zombie or gone), given up to 100 ms to get
 * there: a process that exits while we attach fails our ptrace calls with
 * EPERM or ESRCH before its threads are all gone, which would read as a
 * refusal ("ptrace is not allowed") or a broken injection.
 */
static bool exited_meanwhile(pid_t pid)
{
	for (int i = 0; i < 50; i++) {
		char buf[512], state;
		uint64_t start;
		if (ht__proc_stat_read(pid, buf, sizeof(buf)) < 0)
			return errno == ENOENT || errno == ESRCH;
		if (ht__parse_proc_stat(buf, &state, &start) && (state == 'Z' || state == 'X'))
			return true;
		usleep(2000);
	}
	return false;
}

int ht__inject_attach(struct ht__attach *a, pid_t pid, const char *lib, const char *session_path,
		      char *why, size_t n)
{
	int rc = attach_once(a, pid, lib, session_path, why, n);
	if (rc < 0 && rc != HT_ERR_EXISTS && exited_meanwhile(pid)) {
		say(why, n, "the process exited while heaptrail attached to it");
		return HT_ERR_NOT_FOUND;
	}
	return rc;
}

int ht__inject_detach(const struct ht__attach *a, char *why, size_t n)
{
	int rc = detach_once(a, why, n);
	if (rc < 0 && rc != HT_ERR_NOT_FOUND && exited_meanwhile(a->pid)) {
		say(why, n, "the process exited while heaptrail detached from it");
		return HT_ERR_NOT_FOUND;
	}
	return rc;
}
