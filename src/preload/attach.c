/*
 * Attach mode of the recorder (docs/attach.md): loaded into a running
 * process (dlopen by the injector, or by a loader hook), it redirects the
 * GOT entries of the hooked functions in every loaded module to the hooks,
 * follows modules loaded later, and on stop puts every entry back and goes
 * dormant for good.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc_ext.h"
#include "internal.h"

/*
 * The functions redirected, as the program's modules import them, and where
 * their real definitions go: the ATTACH entries of internal.h's list.
 */
struct got_hook {
	const char *name;
	void **real;
};
#define IF_ATTACH(...) __VA_ARGS__
#define IF_LAUNCH(...)
#define GOT_HOOK(ret, name, params, attr, mode) IF_##mode({#name, (void **)&ht__real.name}, )
static const struct got_hook got_hooks[] = {HT__LIBC_HOOKS(GOT_HOOK)};
#undef GOT_HOOK
#define HT_NHOOKS (sizeof got_hooks / sizeof got_hooks[0])
/* Then the allocators' own entry points (alloc_ext.h), HT_NHOOKS + their index. */
#define HT_NREAL (HT_NHOOKS + HT_EXT_COUNT)

/*
 * Last, include/heaptrail/heap.h's functions, HT_NREAL + their index. A
 * program references them weakly; the loader bound them to 0 when it started
 * (nothing defined them then), so their entries are set from 0 to ours. The
 * stop leaves them so: compiled code tests the entry and then calls through
 * it, loading it twice (gcc's `cmpq $0` then `call *`, clang's PLT stub), so
 * a thread between the two would call address 0 if it went back to 0. The
 * dormant recorder returns at once (docs/attach.md, "Custom heaps").
 */
static const char *const heap_api[] = {"ht_rec_heap_create", "ht_rec_heap_destroy",
				       "ht_rec_heap_alloc", "ht_rec_heap_realloc",
				       "ht_rec_heap_free"};
#define HT_NALL (HT_NREAL + sizeof heap_api / sizeof heap_api[0])

static const char *hook_name(unsigned i)
{
	if (i >= HT_NREAL)
		return heap_api[i - HT_NREAL];
	return i < HT_NHOOKS ? got_hooks[i].name : ht__ext_name(i - HT_NHOOKS);
}

static uintptr_t hook_fn[HT_NALL]; /* our function for each name */
static _Atomic int got_attached;   /* GOT entries point at the hooks */
static int attach_started;	   /* this copy of the module has attached once */

/* ---- saved GOT entries: slot address -> value before patching ---- */

struct ht__saved {
	uintptr_t slot, old;
};

#define HT_SAVED_MAX (1u << 16)
static struct ht__saved *saved_tab;

static struct ht__saved *saved_at(uintptr_t slot, int add)
{
	uint32_t i = (uint32_t)((slot >> 3) * 0x9e3779b97f4a7c15ull >> 40) & (HT_SAVED_MAX - 1);
	for (uint32_t k = 0; k < HT_SAVED_MAX; k++, i = (i + 1) & (HT_SAVED_MAX - 1)) {
		if (saved_tab[i].slot == slot)
			return &saved_tab[i];
		if (saved_tab[i].slot == 0) {
			if (!add)
				return NULL;
			saved_tab[i].slot = slot;
			return &saved_tab[i];
		}
	}
	return NULL;
}

static int hook_index(const char *name)
{
	/* Most imported names start with none of these: a cheap first filter. */
	if (strchr("cfmprvabsd_", name[0]))
		for (unsigned i = 0; i < HT_NHOOKS; i++)
			if (!strcmp(name, got_hooks[i].name))
				return (int)i;
	if (!strncmp(name, "ht_rec_heap_", 12)) {
		for (unsigned i = HT_NREAL; i < HT_NALL; i++)
			if (!strcmp(name, heap_api[i - HT_NREAL]))
				return (int)i;
		return -1;
	}
	int k = ht__ext_index(name);
	return k < 0 ? -1 : (int)HT_NHOOKS + k;
}

/* ---- walking a module's relocations ---- */

enum ht__walk_mode { HT_PATCH, HT_RESTORE, HT_INSPECT };

struct ht__walk {
	int mode;		      /* enum ht__walk_mode */
	uintptr_t self_lo, loader_lo; /* modules to leave alone, by lowest address */
	unsigned changed;
	/* HT_INSPECT: a non-PIE program's canonical PLT entry for a hooked name
	   (the address every module binds the name to) and the GOT entry behind it. */
	uintptr_t canon[HT_NALL], canon_got[HT_NALL];
	uintptr_t lo, hi; /* the module being walked */
};

static uintptr_t lowest_addr(const struct dl_phdr_info *info)
{
	uintptr_t lo = UINTPTR_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD &&
		    info->dlpi_addr + info->dlpi_phdr[i].p_vaddr < lo)
			lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
	return lo;
}

/*
 * Stores v in a GOT slot. A slot in the RELRO range (made read-only by the
 * loader, whole pages only) is made writable for the store, then read-only
 * again. Raw system calls: the hooks must not see the recorder's own work.
 */
static void store_slot(uintptr_t slot, uintptr_t v, uintptr_t ro_lo, uintptr_t ro_hi)
{
	uintptr_t page = slot & ~(uintptr_t)4095;
	int ro = page >= ro_lo && page < ro_hi;
	if (ro && syscall(SYS_mprotect, page, 4096, PROT_READ | PROT_WRITE) != 0)
		return;
	__atomic_store_n((uintptr_t *)slot, v, __ATOMIC_RELEASE);
	if (ro)
		syscall(SYS_mprotect, page, 4096, PROT_READ);
}

static void walk_relocs(struct ht__walk *w, uintptr_t bias, const Elf64_Rela *rel, size_t bytes,
			const Elf64_Sym *symtab, const char *strtab, uintptr_t ro_lo,
			uintptr_t ro_hi)
{
	size_t n = bytes / sizeof *rel;
	for (size_t i = 0; i < n; i++) {
		unsigned type = (unsigned)ELF64_R_TYPE(rel[i].r_info);
		if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
			continue;
		size_t si = ELF64_R_SYM(rel[i].r_info);
		if (si == 0)
			continue;
		int k = hook_index(strtab + symtab[si].st_name);
		if (k < 0)
			continue;
		uintptr_t slot = bias + rel[i].r_offset;
		uintptr_t cur = __atomic_load_n((uintptr_t *)slot, __ATOMIC_ACQUIRE);
		if (w->mode == HT_INSPECT) {
			const Elf64_Sym *s = &symtab[si];
			/* A value still inside the module is a lazy slot not bound yet. */
			if (type == R_X86_64_JUMP_SLOT && s->st_shndx == SHN_UNDEF && s->st_value &&
			    !w->canon[k]) {
				w->canon[k] = bias + s->st_value;
				w->canon_got[k] = cur >= w->lo && cur < w->hi ? 0 : cur;
			}
			continue;
		}
		int heap = (unsigned)k >= HT_NREAL;
		if (w->mode == HT_RESTORE) {
			struct ht__saved *s = saved_at(slot, 0);
			/* An entry someone else rewrote since is theirs now. */
			if (s && cur == hook_fn[k] && !heap) {
				store_slot(slot, s->old, ro_lo, ro_hi);
				w->changed++;
			}
			continue;
		}
		/* 0 is a weak reference to a function nothing defines: a program
		   that tests it (an allocator's entry point) must still see 0.
		   heap.h's functions are the exception: ours are what it tests for. */
		if (cur == hook_fn[k] || (cur == 0 && !heap))
			continue;
		struct ht__saved *s = saved_at(slot, 1);
		if (!s)
			continue; /* table full: leave this one alone */
		s->old = cur;
		store_slot(slot, hook_fn[k], ro_lo, ro_hi);
		w->changed++;
	}
}

/* The loader adjusts most d_ptr values by the load bias, but not in a
   read-only dynamic section (the vDSO): an unadjusted one is below the bias. */
static uintptr_t dptr(uintptr_t p, uintptr_t bias)
{
	return p && p < bias ? p + bias : p;
}

/*
 * One module, under the loader's lock (dl_iterate_phdr holds it, so no
 * module can be unmapped meanwhile, and walks never overlap): patch or
 * restore its GOT entries of the hooked names.
 */
static int walk_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct ht__walk *w = data;
	(void)size;
	/* A dlopen racing with the stop: once the stop's walk is done, patch nothing. */
	if (w->mode == HT_PATCH && !atomic_load(&got_attached))
		return 1;
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	const char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	uintptr_t lo = lowest_addr(info);
	w->lo = lo;
	w->hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD &&
		    info->dlpi_addr + info->dlpi_phdr[i].p_vaddr + info->dlpi_phdr[i].p_memsz >
			w->hi)
			w->hi = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr +
				info->dlpi_phdr[i].p_memsz;
	if (lo == w->self_lo || lo == w->loader_lo || strstr(name, "linux-vdso") ||
	    strstr(name, "linux-gate") || !strncmp(base, "libheaptrail", 12))
		return 0;
	uintptr_t bias = info->dlpi_addr, ro_lo = 0, ro_hi = 0;
	const ElfW(Dyn) *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(bias + ph->p_vaddr);
		if (ph->p_type == PT_GNU_RELRO) {
			ro_lo = (bias + ph->p_vaddr) & ~(uintptr_t)4095;
			ro_hi = (bias + ph->p_vaddr + ph->p_memsz) & ~(uintptr_t)4095;
		}
	}
	if (!dyn)
		return 0;
	uintptr_t symtab = 0, strtab = 0, jmprel = 0, rela = 0;
	size_t pltrelsz = 0, relasz = 0;
	int pltrel = DT_RELA;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB:
			symtab = dptr(dyn->d_un.d_ptr, bias);
			break;
		case DT_STRTAB:
			strtab = dptr(dyn->d_un.d_ptr, bias);
			break;
		case DT_JMPREL:
			jmprel = dptr(dyn->d_un.d_ptr, bias);
			break;
		case DT_PLTRELSZ:
			pltrelsz = dyn->d_un.d_val;
			break;
		case DT_PLTREL:
			pltrel = (int)dyn->d_un.d_val;
			break;
		case DT_RELA:
			rela = dptr(dyn->d_un.d_ptr, bias);
			break;
		case DT_RELASZ:
			relasz = dyn->d_un.d_val;
			break;
		}
	}
	if (!symtab || !strtab)
		return 0;
	const Elf64_Sym *sym = (const Elf64_Sym *)symtab;
	const char *str = (const char *)strtab;
	if (jmprel && pltrel == DT_RELA)
		walk_relocs(w, bias, (const Elf64_Rela *)jmprel, pltrelsz, sym, str, ro_lo, ro_hi);
	if (rela)
		walk_relocs(w, bias, (const Elf64_Rela *)rela, relasz, sym, str, ro_lo, ro_hi);
	return 0;
}

struct ht__range_find {
	uintptr_t addr, lo;
};

static int range_find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct ht__range_find *f = data;
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && f->addr >= a && f->addr < a + ph->p_memsz) {
			f->lo = lowest_addr(info);
			return 1;
		}
	}
	return 0;
}

/* Lowest address of the module holding addr, or 0. */
static uintptr_t module_of(const void *addr)
{
	struct ht__range_find f = {(uintptr_t)addr, 0};
	if (addr)
		dl_iterate_phdr(range_find_cb, &f);
	return f.lo;
}

/* Walks every module in mode; returns the number of entries changed. */
static unsigned walk_all(int mode, struct ht__walk *out)
{
	struct ht__walk w = {.mode = mode};
	w.self_lo = module_of((const void *)module_of);
	w.loader_lo = module_of(&_r_debug);
	dl_iterate_phdr(walk_cb, &w);
	if (out)
		*out = w;
	return w.changed;
}

/* ---- dlopen in attach mode ---- */

struct ht__caller {
	uintptr_t addr;
	int found;
	char dir[4096];	    /* $ORIGIN of the calling module */
	char runpath[4096]; /* its DT_RUNPATH, or "" */
	char rpath[4096];   /* its DT_RPATH, or "" */
};

static void copy_str(char *dst, size_t n, const char *src)
{
	size_t len = strnlen(src, n - 1);
	memcpy(dst, src, len);
	dst[len] = 0;
}

static int caller_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct ht__caller *c = data;
	(void)size;
	const ElfW(Dyn) *dyn = NULL;
	int inside = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && c->addr >= a && c->addr < a + ph->p_memsz)
			inside = 1;
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
	}
	if (!inside)
		return 0;
	c->found = 1;
	const char *path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : ht__exe;
	copy_str(c->dir, sizeof c->dir, path);
	char *slash = strrchr(c->dir, '/');
	if (slash)
		*(slash == c->dir ? slash + 1 : slash) = 0;
	uintptr_t strtab = 0, runpath = 0, rpath = 0;
	int has_runpath = 0, has_rpath = 0;
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_STRTAB)
			strtab = dptr(dyn->d_un.d_ptr, info->dlpi_addr);
		else if (dyn->d_tag == DT_RUNPATH)
			runpath = dyn->d_un.d_val, has_runpath = 1;
		else if (dyn->d_tag == DT_RPATH)
			rpath = dyn->d_un.d_val, has_rpath = 1;
	}
	if (strtab && has_runpath)
		copy_str(c->runpath, sizeof c->runpath, (const char *)strtab + runpath);
	if (strtab && has_rpath)
		copy_str(c->rpath, sizeof c->rpath, (const char *)strtab + rpath);
	return 1;
}

/* Replaces $ORIGIN and ${ORIGIN} in s by dir; 0 when another token is there
   ($LIB, $PLATFORM) or the result does not fit. */
static int expand(const char *s, size_t len, const char *dir, char *out, size_t n)
{
	size_t o = 0, dl = strlen(dir);
	for (size_t i = 0; i < len;) {
		if (s[i] == '$') {
			size_t skip = !strncmp(s + i, "$ORIGIN", 7)	? 7
				      : !strncmp(s + i, "${ORIGIN}", 9) ? 9
									: 0;
			if (!skip || o + dl >= n)
				return 0;
			memcpy(out + o, dir, dl);
			o += dl;
			i += skip;
			continue;
		}
		if (o + 1 >= n)
			return 0;
		out[o++] = s[i++];
	}
	out[o] = 0;
	return 1;
}

/* Looks for file in the ':'-separated list; the full path into out. */
static int search(const char *list, const char *dir, const char *file, char *out, size_t n)
{
	while (list && *list) {
		const char *end = strchrnul(list, ':');
		char d[4096];
		if (end > list && expand(list, (size_t)(end - list), dir, d, sizeof d)) {
			size_t dl = strlen(d), fl = strlen(file);
			if (dl + 1 + fl < n) {
				memcpy(out, d, dl);
				out[dl] = '/';
				memcpy(out + dl + 1, file, fl + 1);
				if (access(out, F_OK) == 0)
					return 1;
			}
		}
		list = *end ? end + 1 : end;
	}
	return 0;
}

/*
 * The loader resolves a bare name and $ORIGIN through the module that called
 * dlopen, found from the return address. Our hook is that caller now, so the
 * calling module's DT_RPATH / DT_RUNPATH and $ORIGIN are applied here, in the
 * loader's order (RPATH, LD_LIBRARY_PATH, RUNPATH; the cache and the default
 * directories follow in the real dlopen). Returns 1 with a path in out when
 * file should be opened under another name.
 */
static int caller_path(const char *file, void *ret, char *out, size_t n)
{
	int has_dollar = strchr(file, '$') != NULL;
	if (strchr(file, '/') && !has_dollar)
		return 0;
	struct ht__caller *c = ht__raw_mmap(sizeof *c);
	if (!c)
		return 0;
	c->addr = (uintptr_t)ret;
	dl_iterate_phdr(caller_cb, c);
	int found = 0;
	if (c->found) {
		if (has_dollar) {
			found = expand(file, strlen(file), c->dir, out, n);
		} else if (c->rpath[0] && !c->runpath[0]) {
			found = search(c->rpath, c->dir, file, out, n);
		} else if (c->runpath[0] &&
			   !search(getenv("LD_LIBRARY_PATH"), c->dir, file, out, n)) {
			found = search(c->runpath, c->dir, file, out, n);
		}
	}
	syscall(SYS_munmap, c, sizeof *c);
	return found;
}

/*
 * dlopen while attached: the real dlopen, then the GOT entries of whatever
 * it loaded are redirected before the program sees the handle.
 */
static void *attach_dlopen(const char *file, int mode)
{
	void *ret = __builtin_return_address(0);
	char path[4096];
	const char *use = file;
	if (file && caller_path(file, ret, path, sizeof path))
		use = path;
	void *h = ht__real.dlopen(use, mode);
	if (!h && use != file)
		h = ht__real.dlopen(file, mode);
	int e = errno;
	atomic_store_explicit(&ht__modules_dirty, 1, memory_order_relaxed);
	if (h && atomic_load(&got_attached))
		walk_all(HT_PATCH, NULL);
	errno = e;
	return h;
}

/* ---- start and stop ---- */

/* A fork child is not followed in attach mode: dormant, its parent's ring forgotten. */
static void attach_child(void)
{
	if (atomic_load(&ht__g.state) != HT_ST_READY)
		return;
	ht__go_dormant();
	atomic_store(&ht__g.untraced, 0); /* the table goes with the mapping */
	atomic_store(&got_attached, 0);
	memset(&ht__t, 0, sizeof ht__t);
	atomic_store(&ht__g.note_ok, 0); /* no session mapped: no note */
	syscall(SYS_munmap, ht__g.hdr, ht__g.map_size);
}

/* _Fork runs no atfork handlers: its child leaves the attach here. */
static pid_t attach_fork(void)
{
	return ht__fork_then(attach_child);
}

/* A clone that does not share our memory is a fork child too. */
static int attach_clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	pid_t *ptid = va_arg(ap, pid_t *);
	void *tls = va_arg(ap, void *);
	pid_t *ctid = va_arg(ap, pid_t *);
	va_end(ap);
	if (flags & CLONE_VM)
		return ht__real.clone(fn, stack, flags, arg, ptid, tls, ctid);
	return ht__clone_then(attach_child, fn, stack, flags, arg, ptid, tls, ctid);
}

static void attach_on_exit(int status, void *arg)
{
	(void)arg;
	ht__note_status(HT_EXIT_CODE, status);
	ht__write_exit(getpid(), HT_EXIT_CODE, status);
}

/*
 * Our hook for each name, looked up in our own module (a reference from our
 * code would bind through the global scope to libc's function instead).
 */
static int find_hooks(void)
{
	Dl_info di;
	if (!dladdr((void *)find_hooks, &di) || !di.dli_fname)
		return HT_ERR_NOT_FOUND;
	void *self = ht__real.dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	if (!self)
		return HT_ERR_NOT_FOUND;
	int rc = 0;
	for (unsigned i = 0; i < HT_NALL; i++) {
		/* Where attach mode must behave unlike launch mode, its own hook. */
		const char *name = hook_name(i);
		if (!strcmp(name, "dlopen"))
			hook_fn[i] = (uintptr_t)attach_dlopen;
		else if (!strcmp(name, "_Fork"))
			hook_fn[i] = (uintptr_t)attach_fork;
		else if (!strcmp(name, "clone"))
			hook_fn[i] = (uintptr_t)attach_clone;
		else
			hook_fn[i] = (uintptr_t)dlsym(self, name);
		if (!hook_fn[i])
			rc = HT_ERR_NOT_FOUND;
	}
	ht__real.dlclose(self);
	return rc;
}

/*
 * The real functions are what the program's global scope binds each name to
 * (what its GOT entries hold). Two exceptions. A non-PIE program that takes
 * a function's address owns its canonical address, a PLT entry jumping
 * through the program's own GOT entry, which we redirect: the function is
 * what that entry held. When the recorder itself is in the global scope
 * (preloaded by a loader hook), the next definition after it is meant.
 */
static void find_reals(void)
{
	struct ht__walk w;
	walk_all(HT_INSPECT, &w);
	for (unsigned i = 0; i < HT_NREAL; i++) {
		const char *name = hook_name(i);
		void *p = dlsym(RTLD_DEFAULT, name);
		if (p && (uintptr_t)p == w.canon[i])
			p = w.canon_got[i] ? (void *)w.canon_got[i] : dlsym(RTLD_NEXT, name);
		if (p && (uintptr_t)p == hook_fn[i])
			p = dlsym(RTLD_NEXT, name);
		if (i >= HT_NHOOKS)
			ht__ext_set_real(i - HT_NHOOKS, p);
		else if (p)
			*got_hooks[i].real = p;
	}
	ht__ext_ready();
}

HT_EXPORT int ht__attach_start(const char *session_path)
{
	int save = errno;
	struct ht__thread *t = &ht__t;
	int rc = HT_ERR_EXISTS;
	if (!session_path || !*session_path) {
		rc = HT_ERR_INVALID;
		goto out;
	}
	/* Once per copy of the module: threads may still point at an old session. */
	if (attach_started || atomic_load(&ht__g.state) == HT_ST_READY ||
	    atomic_load(&got_attached))
		goto out;
	t->guard += HT_GUARD_OWN;
	ht__resolve();
	rc = find_hooks();
	if (rc == 0) {
		find_reals();
		if (!saved_tab)
			saved_tab = ht__raw_mmap(HT_SAVED_MAX * sizeof *saved_tab);
		if (!saved_tab)
			rc = HT_ERR_NOMEM;
	}
	if (rc == 0) {
		/*
		 * Redirect first, with the hooks still passing through, then
		 * start tracing: every function is traced from the same moment,
		 * so no thread has, say, its mallocs traced but not its frees.
		 */
		atomic_store(&ht__g.state, HT_ST_INITIALIZING);
		atomic_store(&got_attached, 1);
		walk_all(HT_PATCH, NULL);
		ht__g.child = attach_child; /* a raw clone's child leaves too */
		rc = ht__init_session(session_path, HT_PROC_ATTACHED);
		if (rc < 0) {
			atomic_store(&got_attached, 0);
			walk_all(HT_RESTORE, NULL);
		}
	}
	if (rc == 0) {
		attach_started = 1;
		pthread_atfork(NULL, NULL, attach_child);
		on_exit(attach_on_exit, NULL);
	}
	t->guard -= HT_GUARD_OWN;
out:
	errno = save;
	return rc;
}

static struct ht__ring *ring_in(char *base, uint32_t i)
{
	return (struct ht__ring *)(base + ht__g.hdr->header_size + (size_t)i * ht__g.ring_stride);
}

/* Whether a ring of ours is in the middle of a record. */
static int any_busy(void)
{
	uint32_t reached = ht__rings_reached(ht__g.hdr, ht__g.ring_count);
	for (uint32_t i = 0; i < reached; i++) {
		struct ht__ring *r = ring_in((char *)ht__g.hdr, i);
		if (atomic_load(&r->state) == HT_RING_OWNED && r->pid == ht__g.pid &&
		    r->instance == ht__g.instance && atomic_load(&r->busy))
			return 1;
	}
	return 0;
}

HT_EXPORT int ht__attach_stop(void)
{
	int save = errno;
	if (!atomic_exchange(&got_attached, 0)) {
		errno = save;
		return HT_ERR_NOT_FOUND;
	}
	struct ht__thread *t = &ht__t;
	t->guard += HT_GUARD_OWN;
	/* Tracing ends for every function at once, then the entries go back.
	   The instance ends here: its exit note now (the process runs on, no
	   status), for a collector that may be gone (a stale session replaced
	   by a new attach) or die before it flushed our last events. */
	ht__go_dormant();
	ht__crash_disarm();
	ht__note_write();
	atomic_store(&ht__g.note_ok, 0);
	walk_all(HT_RESTORE, NULL);
	/* Threads caught inside a hook finish their record. */
	for (int i = 0; i < 200 && any_busy(); i++) {
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	struct timespec ts = {0, 2000000};
	nanosleep(&ts, NULL);
	/*
	 * A second view of the shared pages, then anonymous memory over the
	 * first: a straggler still inside a hook writes there harmlessly (one
	 * waiting for room in its ring reads STOPPING there and gives up at
	 * once), and the rings are handed to the collector through the second
	 * view. Shared anonymous memory: the collector's reads of
	 * /proc/PID/maps skip it as they skipped the session (a private one
	 * would be found there as 512 MiB committed by the program).
	 */
	char *hdr = (char *)ht__g.hdr;
	size_t size = ht__g.map_size;
	uint32_t count = ht__g.ring_count, stride = ht__g.ring_stride,
		 hsize = ht__g.hdr->header_size;
	long view = syscall(SYS_mremap, hdr, 0, size, MREMAP_MAYMOVE);
	char *shared = hdr;
	if (!(view < 0 && view > -4096)) {
		long m = syscall(SYS_mmap, hdr, size, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		if (m < 0 && m > -4096) {
			syscall(SYS_munmap, view, size); /* release the rings in place */
		} else {
			shared = (char *)view;
			atomic_store(&((struct ht__shm_header *)hdr)->state, HT_SESSION_STOPPING);
		}
	}
	for (uint32_t i = 0; i < count; i++) {
		struct ht__ring *r = (struct ht__ring *)(shared + hsize + (size_t)i * stride);
		uint32_t owned = HT_RING_OWNED;
		if (atomic_load(&r->state) == HT_RING_OWNED && r->pid == ht__g.pid &&
		    r->instance == ht__g.instance)
			atomic_compare_exchange_strong(&r->state, &owned, HT_RING_RELEASED);
	}
	if (shared != hdr)
		syscall(SYS_munmap, shared, size);
	t->guard -= HT_GUARD_OWN;
	errno = save;
	return 0;
}
