/*
 * Call stacks: unwinding with libunwind, the per-instance lock-free table
 * that gives each unique stack a session-wide id (written once as a STACK
 * record), and the instance's module list that turns addresses into
 * (module index, ELF address) with MODULE_LOAD records ahead of their use.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "internal.h"

/* ---- modules ---- */

/*
 * Modules loaded at once; the indices of unloaded ones are reused. The
 * table is reserved whole and lookups read it without a lock, so it never
 * moves: its pages cost memory only as far as indices are used (32 bytes
 * a module). glibc cannot load this many objects at once (each takes a
 * link map, a TLS slot's worth of loader state and its own mappings).
 */
#define HT_MAX_MODULES (1u << 18)

struct ht__mod {
	uintptr_t start, end, bias;
	_Atomic int dead; /* unloaded: no longer matches addresses */
	int seen;	  /* refresh scratch, under the lock */
};

static struct ht__mod *mods;
static _Atomic uint32_t nmods; /* entries published to lookups */
static _Atomic int mod_lock;
static unsigned long long phdr_adds, phdr_subs; /* dl_iterate_phdr generation seen */
static _Atomic int mods_retry;			/* a MODULE_LOAD was dropped: rescan next time */
_Atomic int ht__modules_dirty;
_Atomic int ht__dlclosing;

static void lock_modules(void)
{
	int z = 0;
	while (!atomic_compare_exchange_weak(&mod_lock, &z, 1)) {
		z = 0;
		sched_yield();
	}
}

static void unlock(void)
{
	atomic_store(&mod_lock, 0);
}

static int read_build_id(const struct dl_phdr_info *info, uint8_t *out)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		const char *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			const char *name = p + sizeof *n;
			const char *desc = name + ((n->n_namesz + 3) & ~3u);
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    !memcmp(name, "GNU", 4) && desc + n->n_descsz <= end) {
				int len = n->n_descsz > 31 ? 31 : (int)n->n_descsz;
				memcpy(out, desc, (size_t)len);
				return len;
			}
			p = desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	return 0;
}

/* Returns 0 when the record was dropped (lossy, no ring, session gone). */
static int write_module(uint32_t index, uint64_t bias, uintptr_t start, uintptr_t end,
			const uint8_t *build_id, int build_id_len, const char *path,
			uint32_t path_len)
{
	struct ht__thread *t = &ht__t;
	uint32_t len = ht__rec_align((uint32_t)sizeof(struct ht__rec_module) + path_len);
	struct ht__rec_module *r =
	    (struct ht__rec_module *)ht__rec_begin(t, HT_REC_MODULE_LOAD, 0, len, 0);
	if (!r)
		return 0;
	r->index = index;
	r->path_len = path_len;
	r->bias = bias;
	r->start = start;
	r->size = end - start;
	memset(r->build_id, 0, sizeof r->build_id);
	memcpy(r->build_id, build_id, (size_t)build_id_len);
	r->build_id_len = (uint8_t)build_id_len;
	char *p = (char *)(r + 1);
	memcpy(p, path, path_len);
	memset(p + path_len, 0, len - sizeof *r - path_len);
	ht__rec_commit(t);
	return 1;
}

/*
 * What one dl_iterate_phdr walk saw, copied out so that the module lock is
 * never held while the loader's lock is wanted (a program may allocate inside
 * its own dl_iterate_phdr callback, holding the loader's lock).
 */
struct ht__seen {
	uintptr_t bias, start, end;
	const void *phdr;
	uint32_t path_off, path_len;
	uint32_t mod; /* its table index when known, else HT_MODULE_UNKNOWN */
	uint8_t build_id[31];
	uint8_t build_id_len;
	uint8_t known; /* 2: in the table during the walk; 1: at the merge; 3: gone since */
	uint8_t skip;  /* not a module (the vDSO, no PT_LOAD) */
};

/*
 * The objects of the last walk merged, in the walk's order (dlpi_addr and
 * dlpi_phdr each, and the table index it got): while the loader's count of
 * unloads (dlpi_subs) has not moved, nothing was unloaded and a new object
 * comes after those of its namespace, so the next walk's first objects are
 * these, recognised by two compares each (docs/performance.md, "A dlopen
 * with thousands of modules loaded"). Reserved whole like the table; read
 * without the lock during a walk, and trusted only if no merge happened
 * since the walk began (mods_gen).
 */
struct ht__order {
	uintptr_t addr;
	const void *phdr;
	uint32_t mod; /* table index, HT_ORD_SKIP, or HT_MODULE_UNKNOWN (not in it) */
};
#define HT_ORD_SKIP (HT_MODULE_UNKNOWN - 1)
#define HT_INDEX_MAX (HT_MAX_MODULES * 2)

static struct ht__order *order;
static uint32_t norder;
static unsigned long long order_subs;
static _Atomic uint32_t mods_gen; /* bumped by each merge that changes the table */

/*
 * The index of the module table by start address, open addressing (index +
 * 1 per slot, at most half full), kept with the table under its lock and
 * read without it during a walk; reserved at its largest so that a read
 * stays in bounds while it grows.
 */
static uint32_t *mindex;
static _Atomic uint32_t mhcap;
static uint32_t nlive;
static uint32_t *freelist; /* dead indices, lowest last */
static uint32_t nfree;

/*
 * One walk's buffer, sized for the objects the last walk saw: obj[cap],
 * then path bytes. A walk that finds more objects or paths than fit is made
 * again with a larger buffer: an object left out would look unloaded. One
 * buffer is kept between walks (spare).
 */
struct ht__scan {
	struct {
		int force, stop, full, noprefix, prefix_ok;
		unsigned long long adds, subs, order_subs;
		uint32_t n, total, path_used, prefix, pn, gen;
	} w; /* reset for each walk */
	uint32_t cap, path_cap;
	size_t bytes;
	char maps[8192]; /* /proc/self/maps, a piece at a time (mapped_path) */
	char abs[4096];
	struct ht__seen *obj;
	char *paths;
};

static _Atomic(struct ht__scan *) spare;

/*
 * The absolute path of the file mapped at addr, from /proc/self/maps, into
 * s->abs; its length, or 0. The loader names a library loaded by a relative
 * path (dlopen("./lib1.so"), LD_LIBRARY_PATH=.) by that path, which means
 * nothing once the working directory changes or to the collector. Raw
 * calls: no allocation, no cancellation point.
 */
static uint32_t mapped_path(struct ht__scan *s, uintptr_t addr)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	uint32_t found = 0;
	size_t have = 0;
	for (;;) {
		long r = syscall(SYS_read, fd, s->maps + have, sizeof s->maps - 1 - have);
		if (r <= 0)
			break;
		have += (size_t)r;
		s->maps[have] = 0;
		char *line = s->maps, *nl;
		while ((nl = strchr(line, '\n'))) {
			*nl = 0;
			/* start-end perms offset dev inode path */
			char *e;
			uintptr_t lo = strtoul(line, &e, 16),
				  hi = *e == '-' ? strtoul(e + 1, &e, 16) : 0;
			char *path = strchr(e, '/');
			if (addr >= lo && addr < hi && path) {
				size_t n = strlen(path);
				if (n < sizeof s->abs) {
					memcpy(s->abs, path, n);
					found = (uint32_t)n;
				}
				goto out;
			}
			line = nl + 1;
		}
		have -= (size_t)(line - s->maps);
		memmove(s->maps, line, have);
		if (have == sizeof s->maps - 1)
			have = 0; /* a line longer than the buffer: not a path we can keep */
	}
out:
	syscall(SYS_close, fd);
	return found;
}

static uint32_t index_slot(uintptr_t start, uint32_t hcap)
{
	return (uint32_t)((start >> 12) * 0x9e3779b97f4a7c15ull >> 32) & (hcap - 1);
}

/* Index + 1 of a live module with these bounds, or 0. Also read without
   the lock during a walk: bounded, and checked by the merge (mods_gen). */
static uint32_t index_find(uintptr_t start, uintptr_t end, uintptr_t bias)
{
	uint32_t hcap = atomic_load_explicit(&mhcap, memory_order_relaxed);
	uint32_t h = index_slot(start, hcap), v;
	for (uint32_t k = 0; k < hcap && (v = __atomic_load_n(&mindex[h], __ATOMIC_RELAXED));
	     k++, h = (h + 1) & (hcap - 1)) {
		const struct ht__mod *m = &mods[v - 1];
		if (m->start == start && m->end == end && m->bias == bias &&
		    !atomic_load_explicit(&m->dead, memory_order_relaxed))
			return v;
	}
	return 0;
}

/* Under the lock. */
static void index_put(uint32_t i)
{
	uint32_t hcap = atomic_load_explicit(&mhcap, memory_order_relaxed);
	uint32_t h = index_slot(mods[i].start, hcap);
	while (mindex[h])
		h = (h + 1) & (hcap - 1);
	__atomic_store_n(&mindex[h], i + 1, __ATOMIC_RELAXED);
}

/* Under the lock: the index anew from the live modules, large enough for
   want of them. */
static void index_rebuild(uint32_t want)
{
	uint32_t hcap = 1024;
	while (hcap < 2 * want + 64 && hcap < HT_INDEX_MAX)
		hcap *= 2;
	memset(mindex, 0, (size_t)hcap * sizeof *mindex);
	atomic_store_explicit(&mhcap, hcap, memory_order_relaxed);
	uint32_t n = atomic_load_explicit(&nmods, memory_order_relaxed);
	for (uint32_t i = 0; i < n; i++)
		if (!atomic_load_explicit(&mods[i].dead, memory_order_relaxed))
			index_put(i);
}

/* A new instance starts with no modules (indices are per instance). */
void ht__modules_reset(void)
{
	if (!mods) {
		mods = ht__raw_mmap(HT_MAX_MODULES * sizeof *mods);
		order = ht__raw_mmap(HT_MAX_MODULES * sizeof *order);
		mindex = ht__raw_mmap(HT_INDEX_MAX * sizeof *mindex);
		freelist = ht__raw_mmap(HT_MAX_MODULES * sizeof *freelist);
		if (!order || !mindex || !freelist)
			mods = NULL; /* no module list: frames stay raw addresses */
	}
	atomic_store(&nmods, 0);
	atomic_store(&mod_lock, 0);
	phdr_adds = phdr_subs = 0;
	atomic_store(&mods_retry, 0);
	atomic_store(&ht__dlclosing, 0); /* a fork child: the closing threads are not in it */
	norder = nlive = nfree = 0;
	order_subs = 0;
	if (mindex)
		index_rebuild(0);
	atomic_fetch_add(&mods_gen, 1);
}

/* A walk's buffer for up to cap objects and path_cap bytes of paths: the
   spare one when it is large enough. */
static struct ht__scan *scan_new(uint32_t cap, uint32_t path_cap)
{
	struct ht__scan *s = atomic_exchange(&spare, NULL);
	if (s && s->cap >= cap && s->path_cap >= path_cap)
		return s;
	if (s)
		syscall(SYS_munmap, s, s->bytes);
	size_t head = (sizeof(struct ht__scan) + 63) & ~(size_t)63;
	size_t bytes = head + (size_t)cap * sizeof(struct ht__seen) + path_cap;
	s = ht__raw_mmap(bytes);
	if (!s)
		return NULL;
	s->bytes = bytes;
	s->cap = cap;
	s->path_cap = path_cap;
	s->obj = (struct ht__seen *)((char *)s + head);
	s->paths = (char *)(s->obj + cap);
	return s;
}

static void scan_done(struct ht__scan *s)
{
	struct ht__scan *old = atomic_exchange(&spare, s);
	if (old)
		syscall(SYS_munmap, old, old->bytes);
}

static int scan_obj(struct dl_phdr_info *info, struct ht__scan *s);

/* Per object: the objects of the last walk merged cost a few compares here;
   the rest is out of line (scan_obj), so that this stays a leaf. */
static int scan_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct ht__scan *s = data;
	uint32_t k = s->w.total++;
	if (HT_LIKELY(k && k == s->w.prefix && k < s->w.pn)) {
		/* An object of the last walk merged, at the same place: known. */
		const struct ht__order *e = &order[k];
		if (e->addr == info->dlpi_addr && e->phdr == info->dlpi_phdr &&
		    e->mod != HT_MODULE_UNKNOWN) {
			s->w.prefix++;
			return 0;
		}
	} else if (k == 0) {
		if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
			return scan_obj(info, s);
		s->w.adds = info->dlpi_adds;
		s->w.subs = info->dlpi_subs;
		if (!s->w.force && s->w.adds == phdr_adds && s->w.subs == phdr_subs) {
			s->w.stop = 1;
			return 1;
		}
		/* Nothing unloaded since the last walk merged: its objects come
		   first, in the same order. */
		s->w.prefix_ok = !s->w.noprefix && s->w.subs == s->w.order_subs;
		if (s->w.prefix_ok && s->w.pn) {
			const struct ht__order *e = &order[0];
			if (e->addr == info->dlpi_addr && e->phdr == info->dlpi_phdr &&
			    e->mod != HT_MODULE_UNKNOWN) {
				s->w.prefix = 1;
				return 0;
			}
		}
	}
	return scan_obj(info, s);
}

/* An object not in the last walk's order, or after its first difference. */
static __attribute__((noinline)) int scan_obj(struct dl_phdr_info *info, struct ht__scan *s)
{
	if (s->w.n >= s->cap) {
		s->w.full = 1;
		return 0;
	}
	struct ht__seen *o = &s->obj[s->w.n];
	o->bias = info->dlpi_addr;
	o->phdr = info->dlpi_phdr;
	o->known = 0;
	o->skip = 1;
	o->mod = HT_MODULE_UNKNOWN;
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	if (strstr(name, "linux-vdso") || strstr(name, "linux-gate")) {
		s->w.n++;
		return 0;
	}
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
		if (a < lo)
			lo = a;
		if (b > hi)
			hi = b;
	}
	s->w.n++;
	if (hi <= lo)
		return 0;
	o->skip = 0;
	o->start = lo;
	o->end = hi;
	/* A module the table has: its path and build-id are not needed. */
	uint32_t known = index_find(lo, hi, info->dlpi_addr);
	if (known) {
		o->known = 2; /* seen in the table during the walk */
		o->mod = known - 1;
		o->path_len = 0;
		o->build_id_len = 0;
		return 0;
	}
	const char *path = name;
	uint32_t plen = (uint32_t)strlen(name);
	if (!*name) {
		/* The main program has no name here. */
		path = ht__exe;
		plen = ht__exe_len;
	} else if (*name != '/') {
		uint32_t n = mapped_path(s, lo);
		if (n) {
			path = s->abs;
			plen = n;
		}
	}
	if (plen > 4000)
		plen = 4000;
	if (plen > s->path_cap - s->w.path_used) {
		s->w.full = 1;
		return 0;
	}
	o->path_off = s->w.path_used;
	o->path_len = plen;
	memcpy(s->paths + s->w.path_used, path, plen);
	s->w.path_used += plen;
	o->build_id_len = (uint8_t)read_build_id(info, o->build_id);
	return 0;
}

static void write_unload(uint32_t index)
{
	struct ht__thread *t = &ht__t;
	uint32_t len = sizeof(struct ht__rec_module);
	struct ht__rec_module *r =
	    (struct ht__rec_module *)ht__rec_begin(t, HT_REC_MODULE_UNLOAD, 0, len, 0);
	if (!r)
		return;
	memset((char *)r + sizeof r->h, 0, len - sizeof r->h);
	r->index = index;
	ht__rec_commit(t);
}

/* Under the lock: a new object into the table (a dead index first) and the
   index, MODULE_LOAD first since lookups only see announced modules. */
static void load_module(struct ht__scan *s, struct ht__seen *o)
{
	uint32_t n = atomic_load_explicit(&nmods, memory_order_relaxed);
	uint32_t i = nfree ? freelist[nfree - 1] : n;
	if (i >= HT_MAX_MODULES)
		return; /* its frames stay raw addresses (README) */
	if (!write_module(i, o->bias, o->start, o->end, o->build_id, o->build_id_len,
			  s->paths + o->path_off, o->path_len)) {
		atomic_store(&mods_retry, 1);
		return;
	}
	if (nfree)
		nfree--;
	struct ht__mod *m = &mods[i];
	m->start = o->start;
	m->end = o->end;
	m->bias = o->bias;
	m->seen = 1;
	atomic_store(&m->dead, 0);
	if (i == n)
		atomic_store_explicit(&nmods, n + 1, memory_order_release);
	o->mod = i;
	if (++nlive > atomic_load_explicit(&mhcap, memory_order_relaxed) / 2)
		index_rebuild(nlive);
	else
		index_put(i);
}

/* Under the lock: the walk's objects become the order the next walk is
   matched against, from its position from on. */
static void order_set(struct ht__scan *s, uint32_t from)
{
	order_subs = s->w.subs;
	if (from + s->w.n > HT_MAX_MODULES) {
		norder = 0;
		return;
	}
	for (uint32_t k = 0; k < s->w.n; k++) {
		const struct ht__seen *o = &s->obj[k];
		struct ht__order *e = &order[from + k];
		e->addr = o->bias;
		e->phdr = o->phdr;
		e->mod = o->skip ? HT_ORD_SKIP : o->mod;
	}
	norder = from + s->w.n;
}

/*
 * Brings the module list up to date: MODULE_LOAD for new objects,
 * MODULE_UNLOAD for vanished ones (and then a fresh stack table, since their
 * addresses may come to mean other code). Without force, returns at once when
 * the loader's add/remove counters have not moved. While nothing was
 * unloaded, the objects of the last walk are skipped at two compares each
 * and only the new ones are looked at. Returns the number of modules
 * unloaded. Cold path; the caller holds the guard.
 */
int ht__modules_refresh(int force)
{
	if (!mods)
		return 0;
	atomic_store(&ht__modules_dirty, 0);
	if (atomic_exchange(&mods_retry, 0))
		force = 1;
	static _Atomic uint32_t last_total; /* objects the last walk saw */
	uint32_t cap = 2048, path_cap = 1u << 20, last = atomic_load(&last_total);
	while (cap < last + last / 4 + 256)
		cap *= 2;
	int noprefix = 0;
	struct ht__scan *s;
again:
	for (;;) {
		s = scan_new(cap, path_cap);
		if (!s)
			return 0;
		memset(&s->w, 0, sizeof s->w);
		s->w.force = force;
		s->w.noprefix = noprefix;
		lock_modules();
		s->w.gen = atomic_load_explicit(&mods_gen, memory_order_relaxed);
		s->w.pn = norder;
		s->w.order_subs = order_subs;
		unlock();
		dl_iterate_phdr(scan_cb, s);
		if (!s->w.full || cap >= HT_MAX_MODULES * 2u)
			break;
		/* More objects or longer paths than fit: again, larger. */
		if (s->w.n >= s->cap)
			while (cap < s->w.total + s->w.total / 4 + 256)
				cap *= 2;
		else
			path_cap *= 2;
		syscall(SYS_munmap, s, s->bytes);
	}
	atomic_store(&last_total, s->w.total);
	int gone = 0;
	lock_modules();
	int same = atomic_load_explicit(&mods_gen, memory_order_relaxed) == s->w.gen;
	if (s->w.full) {
		atomic_store(&mods_retry, 1);
	} else if (s->w.stop || !(force || s->w.adds + s->w.subs >= phdr_adds + phdr_subs)) {
		/* Nothing new, or a walk older than the last one merged: it must
		   not undo that one. */
	} else if (!same && s->w.prefix) {
		/* Objects recognised by the order of a walk merged since: walk
		   again, looking at each. */
		unlock();
		scan_done(s);
		noprefix = 1;
		goto again;
	} else if (same && s->w.prefix_ok && s->w.subs == phdr_subs) {
		/* Nothing unloaded since the last merge: the new objects only. */
		phdr_adds = s->w.adds;
		phdr_subs = s->w.subs;
		for (uint32_t k = 0; k < s->w.n; k++) {
			struct ht__seen *o = &s->obj[k];
			if (!o->skip && !o->known)
				load_module(s, o);
		}
		order_set(s, s->w.prefix);
		atomic_fetch_add_explicit(&mods_gen, 1, memory_order_relaxed);
	} else {
		phdr_adds = s->w.adds;
		phdr_subs = s->w.subs;
		uint32_t n = atomic_load(&nmods);
		for (uint32_t i = 0; i < n; i++)
			mods[i].seen = 0;
		/* Looked up again under the lock: another thread may have merged
		   a walk since ours began. */
		for (uint32_t k = 0; k < s->w.n; k++) {
			struct ht__seen *o = &s->obj[k];
			if (o->skip)
				continue;
			uint32_t i = index_find(o->start, o->end, o->bias);
			if (i) {
				mods[i - 1].seen = 1;
				o->known = 1;
				o->mod = i - 1;
			} else if (o->known == 2) {
				/* Known during the walk, gone since: its path was not
				   copied, so the next refresh walks again. */
				o->known = 3;
				o->mod = HT_MODULE_UNKNOWN;
				atomic_store(&mods_retry, 1);
			}
		}
		/* Unloads first: their indices are free for the new modules (a
		   program that dlopens and dlcloses 10,000 times needs only a few). */
		for (uint32_t i = 0; i < n; i++) {
			struct ht__mod *m = &mods[i];
			if (!m->dead && !m->seen) {
				atomic_store(&m->dead, 1);
				write_unload(i);
				nlive--;
				gone++;
			}
		}
		if (gone)
			index_rebuild(nlive);
		nfree = 0;
		for (uint32_t i = n; i-- > 0;)
			if (mods[i].dead)
				freelist[nfree++] = i;
		for (uint32_t k = 0; k < s->w.n; k++) {
			struct ht__seen *o = &s->obj[k];
			if (!o->skip && !o->known)
				load_module(s, o);
		}
		order_set(s, 0);
		atomic_fetch_add_explicit(&mods_gen, 1, memory_order_relaxed);
	}
	/* Under the lock: a refresh that finds nothing to merge because this
	   one merged the unload returns only once the new stack table is in. */
	if (gone)
		ht__stacks_init();
	unlock();
	scan_done(s);
	return gone;
}

/*
 * Module index of an address, or HT_MODULE_UNKNOWN: through a memo of the
 * last module found per page (checked against the module's bounds, so a
 * stale entry is never believed), then the table from its newest entry (a
 * library just loaded is the likeliest new frame).
 */
static _Atomic uint32_t mod_memo[1024]; /* index + 1 */

static uint32_t find_module(uintptr_t ip)
{
	uint32_t n = atomic_load_explicit(&nmods, memory_order_acquire);
	uint32_t h = (uint32_t)((ip >> 12) * 0x9e3779b97f4a7c15ull >> 54);
	uint32_t v = atomic_load_explicit(&mod_memo[h], memory_order_relaxed);
	if (v && v <= n) {
		struct ht__mod *m = &mods[v - 1];
		if (ip >= m->start && ip < m->end &&
		    !atomic_load_explicit(&m->dead, memory_order_relaxed))
			return v - 1;
	}
	for (uint32_t i = n; i-- > 0;) {
		struct ht__mod *m = &mods[i];
		if (ip >= m->start && ip < m->end &&
		    !atomic_load_explicit(&m->dead, memory_order_relaxed)) {
			atomic_store_explicit(&mod_memo[h], i + 1, memory_order_relaxed);
			return i;
		}
	}
	return HT_MODULE_UNKNOWN;
}

/* ---- stack table ---- */

struct ht__slot {
	_Atomic uint64_t key;
	_Atomic uint32_t id; /* 0 while the inserting thread writes the STACK record */
	uint32_t pad;
};

struct ht__table {
	uint64_t mask;
	_Atomic uint64_t used;
	_Atomic int growing;
	struct ht__slot slots[];
};

#define HT_STACK_NONE UINT32_MAX /* the STACK record was dropped (lossy) */
#define HT_TABLE_FIRST (1u << 16)

static _Atomic(struct ht__table *) cur_table;
_Atomic uint32_t ht__table_gen = 1; /* internal.h */
static int verify_stacks;	    /* HEAPTRAIL_STACK_VERIFY=1 (see the stack cache) */

static struct ht__table *table_new(uint64_t nslots)
{
	struct ht__table *tb = ht__raw_mmap(sizeof *tb + nslots * sizeof(struct ht__slot));
	if (tb)
		tb->mask = nslots - 1;
	return tb;
}

/* An empty table for a new instance or after a module unload. */
void ht__stacks_init(void)
{
	static int unw_ready;
	if (!unw_ready) {
		unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
		const char *v = getenv("HEAPTRAIL_STACK_VERIFY");
		verify_stacks = v && *v == '1';
		unw_ready = 1;
	}
	/* The new tables first, then the generation: a thread's memos of the
	   old ones (its stack cache, rules and ids) go with the old one. */
	ht__cfi_reset();
	struct ht__table *tb = table_new(HT_TABLE_FIRST);
	if (tb)
		atomic_store(&cur_table, tb);
	atomic_fetch_add(&ht__table_gen, 1);
}

static int insert_at(struct ht__table *tb, uint64_t key, uint32_t id)
{
	for (uint64_t i = key & tb->mask, k = 0; k <= tb->mask; i = (i + 1) & tb->mask, k++) {
		uint64_t z = 0;
		if (atomic_compare_exchange_strong(&tb->slots[i].key, &z, key)) {
			atomic_store(&tb->slots[i].id, id);
			atomic_fetch_add(&tb->used, 1);
			return 1;
		}
		if (z == key)
			return 0;
	}
	return 0;
}

/*
 * The table is 3/4 full: copy the published entries into one four times the
 * size and swap it in. Entries inserted into the old one meanwhile are just
 * recorded again under a new id later.
 */
static void grow(struct ht__table *old)
{
	int z = 0;
	if (!atomic_compare_exchange_strong(&old->growing, &z, 1))
		return;
	struct ht__table *tb = table_new((old->mask + 1) * 4);
	if (!tb)
		return;
	for (uint64_t i = 0; i <= old->mask; i++) {
		uint64_t key = atomic_load(&old->slots[i].key);
		uint32_t id = atomic_load(&old->slots[i].id);
		if (key && id && id != HT_STACK_NONE)
			insert_at(tb, key, id);
	}
	struct ht__table *expect = old;
	atomic_compare_exchange_strong(&cur_table, &expect, tb);
}

static uint32_t new_id(void)
{
	uint32_t id;
	do
		id = atomic_fetch_add(&ht__g.hdr->next_stack_id, 1);
	while (id == 0 || id == HT_STACK_NONE);
	return id;
}

/* Writes the STACK record for a new id; 0 if it was dropped. Its n frames
   are ips[0..n-1] innermost first, or when ips is NULL, rev[0..n-1]
   outermost first (the stack cache's order), read in place. */
static int write_stack(struct ht__thread *t, uint32_t id, void *const *ips, const uintptr_t *rev,
		       int n)
{
	uint64_t rel[HT_MAX_FRAMES];
	uint32_t mod[HT_MAX_FRAMES];
	int refreshed = 0;
	if (atomic_load_explicit(&ht__modules_dirty, memory_order_relaxed)) {
		ht__modules_refresh(0);
		refreshed = 1;
	}
	uint32_t last = HT_MODULE_UNKNOWN; /* a stack's frames come in runs of one module */
	/* one loop for both orders (a branch a frame cost as much as copying
	   rev reversed first); ips' void pointers read as words */
	typedef uintptr_t __attribute__((may_alias)) word;
	const word *src = ips ? (const word *)ips : rev + n - 1;
	ptrdiff_t step = ips ? 1 : -1;
	for (int i = 0; i < n; i++, src += step) {
		uintptr_t ip = *src;
		uint32_t m = last;
		if (m == HT_MODULE_UNKNOWN || ip < mods[m].start || ip >= mods[m].end ||
		    atomic_load_explicit(&mods[m].dead, memory_order_relaxed))
			last = m = find_module(ip);
		if (m == HT_MODULE_UNKNOWN && !refreshed) {
			refreshed = 1;
			ht__modules_refresh(0);
			m = find_module(ip);
		}
		mod[i] = m;
		rel[i] = m == HT_MODULE_UNKNOWN ? ip : ip - mods[m].bias;
	}
	uint32_t len = ht__rec_align((uint32_t)(sizeof(struct ht__rec_stack) + (size_t)n * 12));
	struct ht__rec_stack *r =
	    (struct ht__rec_stack *)ht__rec_begin(t, HT_REC_STACK, 0, len, id);
	if (!r)
		return 0;
	r->nframes = (uint32_t)n;
	r->pad = 0;
	char *p = (char *)(r + 1);
	memcpy(p, rel, (size_t)n * 8);
	memcpy(p + (size_t)n * 8, mod, (size_t)n * 4);
	if (n & 1)
		memset(p + (size_t)n * 12, 0, 4);
	ht__rec_commit(t);
	return 1;
}

static uint32_t wait_id(struct ht__slot *s)
{
	for (unsigned i = 0; i < (1u << 22); i++) {
		uint32_t id = atomic_load_explicit(&s->id, memory_order_acquire);
		if (id)
			return id == HT_STACK_NONE ? 0 : id;
		if (i < 256)
			__builtin_ia32_pause();
		else
			sched_yield();
	}
	return 0;
}

/*
 * The table key of a stack, hashed from its outermost frame in, so that a
 * cached stack's outer part keeps its partial hash (hsuf in the cache).
 */
#define HT_KEY_SEED 0x84222325cbf29ce4ull

static inline uint64_t key_step(uint64_t h, uintptr_t ip)
{
	h ^= (uint64_t)ip;
	h *= 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

static inline uint64_t key_final(uint64_t h)
{
	return h ? h : 1;
}

/*
 * The id of the stack whose key is key, writing its STACK record when the
 * stack is new to this instance; 0 when none could be had. Its n program
 * frames are f[0..n-1] innermost first, or when f is NULL, rev[0..n-1]
 * outermost first (the stack cache's order).
 */
static uint32_t stack_id(struct ht__thread *t, uint64_t key, void *const *f, int n,
			 const uintptr_t *rev)
{
	struct ht__table *tb = atomic_load_explicit(&cur_table, memory_order_acquire);
	if (!tb)
		return 0;
	for (uint64_t i = key & tb->mask, k = 0; k <= tb->mask; i = (i + 1) & tb->mask, k++) {
		struct ht__slot *s = &tb->slots[i];
		uint64_t cur = atomic_load_explicit(&s->key, memory_order_acquire);
		if (cur == key)
			return wait_id(s);
		if (cur != 0)
			continue;
		if (!atomic_compare_exchange_strong(&s->key, &cur, key)) {
			if (cur == key)
				return wait_id(s);
			continue;
		}
		uint32_t id = new_id();
		int ok = write_stack(t, id, f, rev, n);
		atomic_store_explicit(&s->id, ok ? id : HT_STACK_NONE, memory_order_release);
		if (atomic_fetch_add(&tb->used, 1) + 1 > (tb->mask + 1) / 4 * 3)
			grow(tb);
		return ok ? id : 0;
	}
	return 0;
}

/*
 * Room for our own frames at the start of a libunwind walk from inside the
 * recorder. The check of a recent stack under HEAPTRAIL_STACK_VERIFY=1
 * starts with 8 (the hook, ht__stack_capture, capture_other, capture_long,
 * the switch to the unwinding stack, ...): with room for 8, one frame more
 * of ours cut 33 of CPython json's walks at 127 program frames where the
 * capture kept 128. preload.stack_room keeps a margin of 8 over realloc's
 * 8 (the most of ours on any walk, reported by the verify line).
 */
#define HT_OWN_FRAMES 16

/*
 * The most of our own frames that began a libunwind walk, under
 * HEAPTRAIL_STACK_VERIFY=1: a walk with more than HT_OWN_FRAMES of them
 * loses program frames of a stack deeper than HT_MAX_FRAMES, and only such
 * stacks show it; the count shows the margin on every walk
 * (preload.stack_room).
 */
static _Atomic int verify_own;

static HT_COLD void verify_own_max(int s)
{
	int cur = atomic_load_explicit(&verify_own, memory_order_relaxed);
	while (s > cur && !atomic_compare_exchange_weak(&verify_own, &cur, s))
		;
}

/*
 * libunwind's backtrace of the current call without our own frames: the
 * program's frames land in ips[*skip..*skip + n - 1]; returns n (at most
 * HT_MAX_FRAMES).
 *
 * Cancellation is disabled meanwhile: on a stack it has not seen, libunwind
 * checks memory with write() and read() on a pipe, and opens files, all
 * cancellation points, which would make malloc one (a thread cancelled
 * there loses the block malloc returned, and stops where the program never
 * could). In glibc that is an atomic operation on the thread, no call.
 */
static int unwind_stack(void **ips, int *skip)
{
	int cancel;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	int n = unw_backtrace(ips, HT_MAX_FRAMES + HT_OWN_FRAMES);
	if (cancel != PTHREAD_CANCEL_DISABLE)
		pthread_setcancelstate(cancel, NULL);
	int s = 0;
	while (s < n && (uintptr_t)ips[s] >= ht__g.self_start && (uintptr_t)ips[s] < ht__g.self_end)
		s++;
	*skip = s;
	if (HT_UNLIKELY(verify_stacks))
		verify_own_max(s);
	n -= s;
	return n > HT_MAX_FRAMES ? HT_MAX_FRAMES : n;
}

/*
 * Unwinds the caller's stack with libunwind, drops our own frames and
 * returns the stack's id, writing its STACK record (and any MODULE_LOAD it
 * needs) when the stack is new to this instance. 0 when no stack could be
 * taken. Runs on the thread's unwinding stack when it has one.
 */
static __attribute__((noinline)) uint32_t capture_unwind(struct ht__thread *t)
{
	void *ips[HT_MAX_FRAMES + HT_OWN_FRAMES];
	int skip;
	int n = unwind_stack(ips, &skip);
	if (n <= 0)
		return 0;
	uint64_t h = HT_KEY_SEED;
	for (int i = n - 1; i >= 0; i--)
		h = key_step(h, (uintptr_t)ips[skip + i]);
	return stack_id(t, key_final(h), ips + skip, n, NULL);
}

/* ---- the validated stack cache ---- */

/*
 * Consecutive allocations of a thread mostly share their outer frames, often
 * all of them. So a capture walks the stack itself, from the hook outwards,
 * with the rules of unwind.c (a lookup and two loads a frame), and keeps per
 * frame what the walk read: the return address and its slot, rbp and the
 * slot it was restored from (bytehound's idea, without its return
 * trampolines). The next capture stops walking at the first frame that is a
 * cached one (same slot and return address, and the same rbp if the walk
 * uses it) provided every cached frame beyond it still holds the same
 * values in the same slots: the walk from there would read exactly what it
 * read before, so it would find the same frames. Those are reused, with
 * their partial key.
 *
 * rbp matters only where a rule reads it (a CFA from rbp) before it is
 * restored from a slot: in code without frame pointers it is a register
 * like any other, with a new value at every call, and checking it would
 * make the cache miss for nothing. The rule of a return address and the id
 * of a stack key are memoised per thread (a few KiB, where the shared
 * tables are MiBs that every frame would miss in).
 *
 * The first frame is exact: the recorder's own frame pointers lead to the
 * hook's return address into the program and the rbp it saved. Every read
 * stays between that slot and the top of the thread's stack. A frame the
 * rules cannot follow exactly as libunwind would (no unwind table, a signal
 * frame, a DWARF expression) or that leaves the thread's stack sends the
 * whole capture to libunwind, uncached, as before. HEAPTRAIL_STACK_VERIFY=1
 * also unwinds every capture with libunwind and counts the differences
 * (tests/preload/t_stack_cache.sh).
 */
#define HT_CFI_MEMO 1024
#define HT_ID_MEMO 512

/*
 * The thread's last whole stacks besides the cached one (recent_*()), each
 * as the list of (slot, value) pairs same_stack() would check for it: jq's
 * allocations come from the previous allocation's stack 58 % of the time,
 * from one of the last four 98 %; CPython json's from one of the last four
 * 35 %, of the last 32 95 % (its interpreter's frames above a handful of
 * allocating paths). The entries are mapped at a thread's first keep, and
 * found through a hash of the hook slot and the return address there
 * (rhead[]: CPython json's 32 mostly differ in them), replaced by a clock; a stack
 * needing more checks than HT_RECENT_CHK is not kept; nor, mostly, are
 * stacks of a thread whose recent ones have not served for HT_RECENT_IDLE
 * walks (every stack new, as in deep_stacks: keeping each cost a copy of
 * its checks).
 */
#define HT_RECENT 32	  /* a power of two */
#define HT_RECENT_CHK 126 /* checks of a whole stack kept */
#define HT_RECENT_CUT 254 /* of a cut one (recent_keep_cut): an entry's room */
#define HT_RECENT_IDLE 64
#define HT_RECENT_HIT 16 /* walks a find makes up for in recent_idle */
#define HT_RECENT_WAKE 4

struct ht__recent {
	uint32_t id, gen;
	uint32_t n, pad;
	/* as the cache's chk: the outer frames' checks, outermost first, then
	   the rbp slot when the innermost rule reads rbp; checked from the
	   innermost (the hook's slot and return address are the entry's key,
	   rkey) */
	struct ht__chk chk[HT_RECENT_CUT];
};

/*
 * The thread's stack tree: every stack a walk found while walks cover most
 * of the stack (walk_frac), as a tree of frames from the outermost, each node one
 * frame's checks (its return address and slot, and the rbp slot where the
 * walk reads rbp: the cache's chk[nchk[k]..nchk[k + 1] - 1] for frame k),
 * and on a frame that was innermost the stack's id. deep_stacks' stacks
 * differ from the previous one a frame or two below main, so the walk from
 * the hook joins the cached stack near the top: 29 of 30 frames walked,
 * about 3 200 instructions a capture. A descent from the outermost frame,
 * following the child whose checks hold, to a node in the hook's slot,
 * reads each of the stack's slots once and walks nothing. Exact by the
 * argument of the recent stacks: every (slot, value) pair the walk read
 * for that stack still holds, and the walk is a function of them. A
 * descent that finds no such node is a miss, never a wrong stack: the walk
 * follows and its stack is added. The tree is the thread's own, mapped at
 * its first use, emptied when full or when the stack table changes
 * (ht__table_gen). It is used while walks
 * cover most of the stack, and looked at once in 16 captures when it has
 * not served of late.
 */
#define HT_TREE_NODES 16384
#define HT_TREE_WALK 32 /* 64ths of the stack a walk walks, on average, to use it */
#define HT_TREE_IDLE 64 /* lookups without a find: then once in 16 */
#define HT_TREE_VISIT (4 * HT_MAX_FRAMES) /* nodes a descent looks at */

/* 32 bytes, two to a cache line: a descent is a chain of dependent loads
   through nodes that mostly miss L1 (deep_stacks' tree is 6 600 of them),
   so the rare rbp check is kept on the side. */
struct ht__tnode {
	uintptr_t loc, ip; /* the frame's return address and its slot */
	uint32_t child;	   /* first child (an inner frame), 0: none */
	uint32_t next;	   /* next sibling, 0: none */
	uint32_t id;	   /* the stack ending here, innermost: its id; 0 none */
	uint32_t rb;	   /* 1: rbp is checked too, rb[] of the same index */
};

struct ht__tree {
	uint32_t n;   /* nodes used; node 0 is the root, above the outermost */
	uint32_t gen; /* ht__table_gen of the ids */
	uint32_t pad[14];
	struct ht__tnode node[HT_TREE_NODES];
	struct {
		uintptr_t rl, rbp; /* rbp and its slot */
	} rb[HT_TREE_NODES];
};

struct ht__scache {
	uintptr_t lo, hi;  /* the thread's stack; hi == 0: unknown, no cache */
	uint32_t gen;	   /* ht__table_gen when filled */
	uint32_t id;	   /* id of the whole cached stack */
	int n;		   /* cached frames, 0: empty */
	int sig;	   /* the outermost frame is a signal frame: the walk ended there */
	uint32_t memo_gen; /* ht__table_gen of cfi[] and ids[] */
	/* ht__table_gen while same_stack() may take the cached stack (whole, not
	   ended at a signal frame, not verifying), else 0: one compare */
	uint32_t same_gen;
	/* Outermost frame first, so that new inner frames go on the end. */
	uintptr_t ip[HT_MAX_FRAMES];
	uintptr_t loc[HT_MAX_FRAMES]; /* slot of ip[k], decreasing */
	uintptr_t rbp[HT_MAX_FRAMES]; /* rbp in frame k (meaningful where use[k]) */
	uint64_t hkey[HT_MAX_FRAMES]; /* key state after frames 0..k */
	/* rbp[k] is read by the rule of frame k or of a frame outside it before
	   being restored from memory: only then does the walk depend on it. */
	uint8_t use[HT_MAX_FRAMES];
	/* What the walk read, as (slot, value) pairs, frame 0's first: the
	   return address of each frame and the saved rbp where use[k].
	   Frames 0..k-1 are chk[0..nchk[k]-1]. */
	uint16_t nchk[HT_MAX_FRAMES + 1];
	struct ht__chk chk[2 * HT_MAX_FRAMES];
	/* Per-thread memos of the shared tables (valid for memo_gen): the
	   rule of a return address and the id of a stack key, direct-mapped,
	   so that a frame or a known stack costs no miss in a table of MBs. */
	struct {
		uintptr_t ra;
		uint64_t rule;
	} cfi[HT_CFI_MEMO];
	struct {
		uint64_t key;
		uint64_t id;
	} ids[HT_ID_MEMO];
	/* The recent entries' index, in the cache's lines: recent[i]'s hook
	   slot and return address there (rkey), its id, the next entry of its
	   bucket (rnext, index + 1; 0 ends), whether it served since the
	   clock hand last passed (ruse); the buckets by hook slot and return
	   address (rhead, index + 1; 0: empty). An entry of another
	   ht__table_gen is told by its gen. */
	struct {
		uintptr_t loc, ip;
	} rkey[HT_RECENT];
	uint32_t rid[HT_RECENT];
	uint8_t rnext[HT_RECENT], ruse[HT_RECENT];
	uint8_t rhead[2 * HT_RECENT];
	struct ht__recent *recent; /* HT_RECENT entries; NULL until the first is kept */
	uint32_t nrecent;	   /* entries in use */
	uint32_t rhand;		   /* the clock hand: the entry a new stack may replace */
	/* the entry the last capture found (index + 1), and the one before
	   (same_recent); 0: a walk came between */
	uint32_t rfound, rprev;
	/* captures that no recent stack served, less HT_RECENT_HIT for each
	   that one did, from 0 to 2 * HT_RECENT_IDLE (a thread's stacks may
	   start to repeat) */
	uint32_t recent_idle;
	uint32_t recent_tick;  /* captures that no recent stack served */
	uint32_t walk_frac;    /* 64ths of its stack a walk walked, 8 times the running mean */
	uint32_t tree_idle;    /* lookups in the tree since it found a stack */
	struct ht__tree *tree; /* NULL: not used yet */
};

static _Atomic uint64_t verify_reuse, verify_walked, verify_bad, verify_recent, verify_tree;

/*
 * The index of the innermost check below m that no longer holds, or -1:
 * inner checks first, since where a stack changed it is mostly near the
 * allocation.
 */
static inline int check_fails(const struct ht__scache *c, int m)
{
	int i = m;
	while (i >= 2) {
		i -= 2;
		if ((*(const uintptr_t *)c->chk[i + 1].at ^ c->chk[i + 1].val) |
		    (*(const uintptr_t *)c->chk[i].at ^ c->chk[i].val))
			return *(const uintptr_t *)c->chk[i + 1].at != c->chk[i + 1].val ? i + 1
											 : i;
	}
	if (i && *(const uintptr_t *)c->chk[0].at != c->chk[0].val)
		return 0;
	return -1;
}

/*
 * The cached stack's id when this call is the one cached, whole: its
 * innermost frame in the same slot with the same return address (and rbp,
 * where the walk reads it), and every outer frame holding what it held.
 * What capture_cached() would find, checked on the program's stack without
 * switching stacks or setting up the walk's frame; 0 sends the capture the
 * long way.
 */
static inline uint32_t same_stack(const struct ht__scache *c, uintptr_t loc0)
{
	int k = c->n - 1;
	if (c->same_gen != atomic_load_explicit(&ht__table_gen, memory_order_relaxed) ||
	    c->loc[k] != loc0 || c->ip[k] != *(const uintptr_t *)loc0 ||
	    (c->use[k] && c->rbp[k] != *(const uintptr_t *)(loc0 - 8)))
		return 0;
	return check_fails(c, c->nchk[k]) < 0 ? c->id : 0;
}

/*
 * The hooks check the cached stack inline (internal.h, ht__stack_for)
 * through a copy of what same_stack() reads, kept above the cache
 * (struct ht__same). A walk that fills the cache (and keeps its stack
 * among the recent ones) voids the copy (one store: on CPython json most
 * walks' stacks do not come again next); once same_stack() finds the
 * cached stack again, same_copy() makes it, or same_recent() from a
 * recent entry found twice in a row, and the captures after that cost no
 * call while the stack repeats. A thread without its unwinding stack has
 * none (ht__ustack_unmap).
 */
static inline void same_void(struct ht__thread *t)
{
	t->same_gen = 0;
}

/* The same for recent entry at, found twice in a row (capture_other):
   jq's allocations come from the previous one's stack 58 % of the time,
   nearly all of them found among the recent stacks. */
static void same_recent(struct ht__thread *t, const struct ht__scache *c, uint32_t at)
{
	struct ht__same *s = ht__same_of(t->ustack);
	const struct ht__recent *e = &c->recent[at];
	s->id = e->id;
	s->use = 0; /* the entry's checks end with the rbp slot's, if read */
	s->loc = c->rkey[at].loc;
	s->ip = c->rkey[at].ip;
	s->nchk = e->n;
	s->chk = e->chk;
	t->same_gen = e->gen;
}

static void same_copy(struct ht__thread *t, const struct ht__scache *c)
{
	struct ht__same *s = ht__same_of(t->ustack);
	int k = c->n - 1;
	s->id = c->id;
	s->loc = c->loc[k];
	s->ip = c->ip[k];
	s->rbp = c->rbp[k];
	s->use = c->use[k];
	s->nchk = c->nchk[k];
	s->chk = c->chk;
	t->same_gen = c->same_gen;
}

/* The bucket of the recent stacks whose hook slot is loc0 with ip0 there. */
static inline uint32_t recent_bucket(uintptr_t loc0, uintptr_t ip0)
{
	_Static_assert(2 * HT_RECENT == 1 << (64 - 58), "rhead[] has 2 * HT_RECENT buckets");
	return (uint32_t)(((loc0 >> 3) ^ ip0) * 0x9e3779b97f4a7c15ull >> 58);
}

/*
 * The id of one of the thread's recent stacks (struct ht__recent) when this
 * call is that one, whole: every slot it read holds what it held. What
 * same_stack() checks, for a stack that is no longer the cached one; 0 if
 * none is.
 */
static uint32_t recent_stack(struct ht__scache *c, uintptr_t loc0)
{
	uint32_t gen = atomic_load_explicit(&ht__table_gen, memory_order_relaxed);
	uintptr_t ip0 = *(const uintptr_t *)loc0;
	for (uint32_t j = c->rhead[recent_bucket(loc0, ip0)]; j; j = c->rnext[j - 1]) {
		uint32_t at = j - 1;
		if (((c->rkey[at].loc ^ loc0) | (c->rkey[at].ip ^ ip0)) != 0)
			continue;
		const struct ht__recent *e = &c->recent[at];
		if (e->gen != gen)
			continue;
		/* two at a time from the innermost, where two stacks from one
		   call site's callers differ */
		const struct ht__chk *p = e->chk + e->n, *end = e->chk + (e->n & 1);
		while (p != end) {
			p -= 2;
			if ((*(const uintptr_t *)p[1].at ^ p[1].val) |
			    (*(const uintptr_t *)p[0].at ^ p[0].val))
				break;
		}
		if (p != end ||
		    (end != e->chk && *(const uintptr_t *)e->chk[0].at != e->chk[0].val))
			continue;
		c->ruse[at] = 1;
		c->rfound = at + 1;
		/* a find makes up for HT_RECENT_HIT walks; one while they were
		   looked at once in 16 lets the next HT_RECENT_WAKE captures look */
		uint32_t idle = c->recent_idle;
		c->recent_idle = idle >= HT_RECENT_IDLE ? HT_RECENT_IDLE - HT_RECENT_WAKE
				 : idle > HT_RECENT_HIT ? idle - HT_RECENT_HIT
							: 0;
		return e->id;
	}
	return 0;
}

/* Takes recent entry at out of its bucket's list. */
static void recent_unlink(struct ht__scache *c, uint32_t at)
{
	uint8_t *j = &c->rhead[recent_bucket(c->rkey[at].loc, c->rkey[at].ip)];
	while (*j && *j != at + 1)
		j = &c->rnext[*j - 1];
	if (*j)
		*j = c->rnext[at];
}

static void tree_walked(struct ht__scache *c, int walked);

/*
 * Keeps the cached stack c->ip[0..c->n-1], just walked, among the recent
 * ones: in the entry that has its id (a stale copy), else in a new one,
 * else in the first the clock hand finds unused since it last passed. A
 * walk of walked new frames.
 */
/*
 * The entry for a stack of id under the key (loc, ip), put in its bucket:
 * the entry that has its id (a stale copy; with at_loc, its id in the hook
 * slot loc: a stack cut to its innermost frames comes at many depths), else
 * a new one, else the first the clock hand finds unused since it last
 * passed; NULL when the entries cannot be mapped. The caller fills its
 * checks.
 */
static struct ht__recent *recent_entry(struct ht__scache *c, uintptr_t loc, uintptr_t ip,
				       uint32_t id, uint32_t gen, int at_loc)
{
	if (HT_UNLIKELY(!c->recent)) {
		c->recent = ht__raw_mmap(HT_RECENT * sizeof *c->recent);
		if (!c->recent)
			return NULL;
	}
	uint32_t at = 0;
	while (at < c->nrecent && (c->rid[at] != id || (at_loc && c->rkey[at].loc != loc)))
		at++;
	if (at < c->nrecent) {
		recent_unlink(c, at);
	} else if (c->nrecent < HT_RECENT) {
		at = c->nrecent++;
	} else {
		while (c->ruse[c->rhand]) {
			c->ruse[c->rhand] = 0;
			c->rhand = (c->rhand + 1) & (HT_RECENT - 1);
		}
		at = c->rhand;
		c->rhand = (at + 1) & (HT_RECENT - 1);
		recent_unlink(c, at);
	}
	struct ht__recent *e = &c->recent[at];
	c->rkey[at].loc = loc;
	c->rkey[at].ip = ip;
	c->rid[at] = id;
	c->ruse[at] = 1;
	uint8_t *head = &c->rhead[recent_bucket(loc, ip)];
	c->rnext[at] = *head;
	*head = (uint8_t)(at + 1);
	e->id = id;
	e->gen = gen;
	return e;
}

static void recent_keep(struct ht__scache *c, int walked)
{
	int k = c->n - 1;
	if (k < 0 || c->sig || !c->id)
		return;
	tree_walked(c, walked); /* the tree may serve where walks are long */
	if (c->recent_idle >= HT_RECENT_IDLE && c->recent_tick % 16)
		return; /* recent stacks that do not serve: one walk in 16 is kept */
	uint32_t m = c->nchk[k], n = m + c->use[k];
	if (n > HT_RECENT_CHK)
		return;
	struct ht__recent *e = recent_entry(c, c->loc[k], c->ip[k], c->id, c->gen, 0);
	if (!e)
		return;
	e->n = n;
	memcpy(e->chk, c->chk, m * sizeof e->chk[0]);
	if (c->use[k]) {
		e->chk[m].at = c->loc[k] - 8;
		e->chk[m].val = c->rbp[k];
	}
}

/*
 * What a walk that went deeper than HT_MAX_FRAMES found (capture_cached):
 * its n new frames, innermost first (the return address and its slot, rbp
 * in the frame and the slot it was restored from, 0 where it came in
 * unchanged, whether the frame's rule reads it), the cached frame jc it
 * joined (-1: none) and rbp there with its slot.
 */
struct ht__cutwalk {
	const uintptr_t *ip, *loc, *rbp, *rl;
	const uint8_t *fr;
	int n, jc;
	uintptr_t jrl, jrbp;
};

/*
 * Keeps a stack cut to its HT_MAX_FRAMES innermost frames (capture_cut)
 * among the recent ones, under id: the checks the walk read for those
 * frames, as recent_keep() keeps a whole stack's. The cut stack is a
 * function of them alone: the walk from the hook's slot reads only them to
 * find its innermost HT_MAX_FRAMES frames (the frames beyond, and where
 * the outermost one kept returns to, do not change them), so by the
 * argument of the recent stacks a later capture whose every pair still
 * holds is this stack. Those of the cached frames joined are the cache's
 * (the walk found them holding), the joined frame's rbp this walk's; each
 * frame's rbp is checked as the cache would (more than needed for the
 * outermost kept: never a wrong stack, at worst a walk). A cut stack used
 * to be walked anew at each capture: CPython json's 7 500 walks were all
 * of stacks deeper than HT_MAX_FRAMES, 6 700 instructions each.
 */
static void recent_keep_cut(struct ht__scache *c, uint32_t id, uint32_t gen,
			    const struct ht__cutwalk *w)
{
	if (!id || id == HT_STACK_NONE || (c->recent_idle >= HT_RECENT_IDLE && c->recent_tick % 16))
		return;
	struct ht__chk chk[HT_RECENT_CUT];
	uint32_t m = 0;
	int carry = 0;
	if (w->jc >= 0 && w->n < HT_MAX_FRAMES) {
		/* frames jc down to kk, the outermost kept (the new frames alone
		   when they are HT_MAX_FRAMES: a join at the next frame) */
		int kk = w->jc + 1 + w->n - HT_MAX_FRAMES;
		uint32_t from = c->nchk[kk], to = c->nchk[w->jc];
		if (to < from || to - from + 2 > HT_RECENT_CUT)
			return;
		memcpy(chk, &c->chk[from], (to - from) * sizeof chk[0]);
		m = to - from;
		chk[m].at = c->loc[w->jc];
		chk[m++].val = c->ip[w->jc];
		if (c->use[w->jc] && w->jrl) {
			chk[m].at = w->jrl;
			chk[m++].val = w->jrbp;
		}
		carry = c->use[w->jc] && !w->jrl;
	}
	for (int i = w->n - 1; i >= 0; i--) {
		int use = w->fr[i] | carry;
		if (m + 2 > HT_RECENT_CUT)
			return;
		if (i) { /* the innermost's slot and return address are the key */
			chk[m].at = w->loc[i];
			chk[m++].val = w->ip[i];
		}
		if (use && w->rl[i]) {
			chk[m].at = w->rl[i];
			chk[m++].val = w->rbp[i];
		}
		carry = use && !w->rl[i];
	}
	struct ht__recent *e = recent_entry(c, w->loc[0], w->ip[0], id, gen, 1);
	if (!e)
		return;
	e->n = m;
	memcpy(e->chk, chk, m * sizeof chk[0]);
	c->rprev = 0; /* a walk came between */
}

/*
 * The id of the stack in the thread's tree whose checks all hold and whose
 * innermost frame is in the hook's slot loc0, or 0. From the outermost
 * frame inwards, the first child whose checks hold; every slot read is at
 * or above loc0 - 8, where the walk reads, and below the stack's top (a
 * node's slots were in the thread's stack when it was added).
 */
static uint32_t tree_stack(const struct ht__scache *c, uintptr_t loc0)
{
	const struct ht__tree *tr = c->tree;
	if (tr->gen != atomic_load_explicit(&ht__table_gen, memory_order_relaxed))
		return 0;
	uintptr_t floor = loc0 - 8;
	uint32_t at = tr->node[0].child;
	for (int visit = 0; at && visit < HT_TREE_VISIT; visit++) {
		const struct ht__tnode *e = &tr->node[at];
		if (e->loc >= loc0 && *(const uintptr_t *)e->loc == e->ip &&
		    (!e->rb || (tr->rb[at].rl >= floor &&
				*(const uintptr_t *)tr->rb[at].rl == tr->rb[at].rbp))) {
			if (e->loc != loc0) {
				at = e->child;
				continue;
			}
			if (e->id)
				return e->id;
		}
		at = e->next;
	}
	return 0;
}

/*
 * Adds the cached stack c->ip[0..c->n-1], just walked, to the thread's
 * tree (mapping it at its first use; emptied when full or of another
 * generation). Each frame's checks are those the cache keeps for it.
 */
static void tree_keep(struct ht__scache *c)
{
	int n = c->n;
	if (n <= 0 || c->sig || !c->id)
		return;
	struct ht__tree *tr = c->tree;
	if (!tr) {
		tr = ht__raw_mmap(sizeof *tr);
		if (!tr)
			return;
		c->tree = tr;
		tr->n = 0;
	}
	if (tr->gen != c->gen || tr->n + (uint32_t)n > HT_TREE_NODES || !tr->n) {
		tr->n = 1;
		tr->node[0].child = 0;
		tr->gen = c->gen;
	}
	uint32_t parent = 0;
	for (int k = 0; k < n; k++) {
		const struct ht__chk *g = &c->chk[c->nchk[k]];
		uintptr_t rl = c->nchk[k + 1] - c->nchk[k] > 1 ? g[1].at : 0,
			  rbp = rl ? g[1].val : 0;
		uint32_t at = tr->node[parent].child;
		while (at) {
			const struct ht__tnode *e = &tr->node[at];
			if (e->loc == g[0].at && e->ip == g[0].val &&
			    (e->rb ? tr->rb[at].rl == rl && tr->rb[at].rbp == rbp : !rl))
				break;
			at = e->next;
		}
		if (!at) {
			at = tr->n++;
			struct ht__tnode *e = &tr->node[at];
			e->loc = g[0].at;
			e->ip = g[0].val;
			e->rb = rl != 0;
			tr->rb[at].rl = rl;
			tr->rb[at].rbp = rbp;
			e->child = 0;
			e->id = 0;
			e->next = tr->node[parent].child;
			tr->node[parent].child = at;
		}
		parent = at;
	}
	tr->node[parent].id = c->id;
}

/*
 * The tree's side of a capture that neither the cached nor a recent stack
 * served: a lookup while walks cover most of the stack (a descent reads every frame's slot:
 * clang++'s walks are about 10 frames of stacks 60 to 120 deep, and its lookups cost more than the
 * walks they saved); a tree that has found nothing of late is looked at once in 16.
 */
static __attribute__((noinline)) uint32_t tree_look(struct ht__scache *c, uintptr_t loc0)
{
	if (c->walk_frac < 8 * HT_TREE_WALK ||
	    (c->tree_idle >= HT_TREE_IDLE && ++c->tree_idle % 16))
		return 0;
	uint32_t id = tree_stack(c, loc0);
	if (id)
		c->tree_idle = 0;
	else if (c->tree_idle < HT_TREE_IDLE)
		c->tree_idle++;
	return id;
}

/* A walk of n new frames whose stack is now the cached one: kept in the
   tree when walks cover most of the stack. */
static __attribute__((noinline)) void tree_walked(struct ht__scache *c, int n)
{
	c->walk_frac += (uint32_t)(n * 64 / c->n) - c->walk_frac / 8;
	if (c->walk_frac >= 8 * HT_TREE_WALK)
		tree_keep(c);
}

static uint32_t capture_long(struct ht__thread *t, struct ht__scache *sc, uintptr_t loc0);

/*
 * A capture that neither the cached nor a recent stack served, of a thread
 * with a stack tree: the tree, else the long way. HEAPTRAIL_STACK_VERIFY=1 walks a stack
 * found in the tree as well.
 */
static __attribute__((noinline)) uint32_t capture_miss(struct ht__thread *t, struct ht__scache *sc,
						       uintptr_t loc0)
{
	uint32_t id = tree_look(sc, loc0);
	if (!id)
		return capture_long(t, sc, loc0);
	if (HT_LIKELY(!verify_stacks))
		return id;
	uint32_t walked = capture_long(t, sc, loc0);
	atomic_fetch_add(&verify_tree, 1);
	if (walked != id)
		atomic_fetch_add(&verify_bad, 1);
	return walked;
}

/*
 * A capture that is not the cached stack: one of the recent stacks, the
 * thread's stack tree, or the long way. HEAPTRAIL_STACK_VERIFY=1 walks the recent ones too (the
 * walk is checked against libunwind) and counts where it finds another stack.
 */
static __attribute__((noinline)) uint32_t capture_other(struct ht__thread *t, struct ht__scache *sc,
							uintptr_t loc0)
{
	/* Recent stacks that have not served of late are looked at once in
	   16 captures, after one is kept (recent_keep) */
	uint32_t id = sc->recent_idle < HT_RECENT_IDLE || sc->recent_tick % 16 == 0
			  ? recent_stack(sc, loc0)
			  : 0;
	if (!id) {
		sc->recent_tick++;
		if (sc->recent_idle < 2 * HT_RECENT_IDLE)
			sc->recent_idle++;
	}
	if (HT_LIKELY(!verify_stacks)) {
		if (id) {
			if (sc->rfound == sc->rprev)
				same_recent(t, sc, sc->rfound - 1);
			sc->rprev = sc->rfound;
			return id;
		}
	} else if (id) {
		uint32_t walked = capture_long(t, sc, loc0);
		atomic_fetch_add(&verify_recent, 1);
		if (walked != id)
			atomic_fetch_add(&verify_bad, 1);
		return walked;
	}
	if (HT_UNLIKELY(sc->tree != NULL))
		return capture_miss(t, sc, loc0);
	return capture_long(t, sc, loc0);
}

/*
 * An event in a signal handler: libunwind follows the signal frame into the
 * interrupted code, slowly (a new pc each time; its memory checks are
 * system calls), 20-50 us on a loaded machine. A handler on a 10 us timer
 * that allocates then never let the program run. So those unwinds may take
 * about a tenth of the thread's time: each costs ten times what it took,
 * paid back as time passes, with HT_SIG_SLACK_NS of credit for bursts.
 * Beyond that, the stack ends at the signal frame (the handler's frames
 * and the trampoline, found by our own walk). A thread's first
 * HT_SIG_FREE such unwinds are never cut: the first one pays for
 * libunwind's set-up (milliseconds on a loaded machine), and a program
 * whose handlers allocate now and then must get whole stacks every time.
 */
#define HT_SIG_SLACK_NS 5000000ull
#define HT_SIG_FREE 64

static int sig_afford(struct ht__thread *t)
{
	if (t->sig_unwinds < HT_SIG_FREE)
		return 1;
	uint64_t now = ht__clock(), paid = now - t->sig_debt_at;
	t->sig_debt = t->sig_debt > paid ? t->sig_debt - paid : 0;
	t->sig_debt_at = now;
	return t->sig_debt < HT_SIG_SLACK_NS;
}

static void sig_charge(struct ht__thread *t, uint64_t took)
{
	if (t->sig_unwinds < HT_SIG_FREE) {
		t->sig_unwinds++;
		took = 0;
	}
	t->sig_debt += 10 * took;
	t->sig_debt_at = ht__clock();
}

/* The rule of a return address, through the thread's memo of the table. */
static inline uint64_t cfi_rule(struct ht__scache *c, uintptr_t ra)
{
	uint32_t h = (uint32_t)((ra ^ (ra >> 11)) & (HT_CFI_MEMO - 1));
	if (HT_LIKELY(c->cfi[h].ra == ra))
		return c->cfi[h].rule;
	uint64_t r = ht__cfi_rule(ra);
	c->cfi[h].ra = ra;
	c->cfi[h].rule = r;
	return r;
}

/* The id of the stack c->ip[0..n-1] of key state h, through the memo. */
static inline uint32_t cached_id(struct ht__thread *t, struct ht__scache *c, uint64_t h, int n)
{
	uint64_t key = key_final(h);
	uint32_t s = (uint32_t)(key >> 40) & (HT_ID_MEMO - 1);
	if (c->ids[s].key == key)
		return (uint32_t)c->ids[s].id;
	uint32_t id = stack_id(t, key, NULL, n, c->ip);
	if (id) {
		c->ids[s].key = key;
		c->ids[s].id = id;
	}
	return id;
}

/*
 * A stack deeper than the HT_MAX_FRAMES kept: its innermost frames, as
 * libunwind's backtrace cut there gives them, from the walk's new frames
 * nip[0..n-1] (innermost first) and then the cached frames from jc outwards.
 * Not cached: the frames kept change with every new inner frame.
 */
static HT_COLD uint32_t capture_cut(struct ht__thread *t, const struct ht__scache *c,
				    const uintptr_t *nip, int n, int jc)
{
	void *f[HT_MAX_FRAMES];
	int m = 0;
	for (int i = 0; i < n && m < HT_MAX_FRAMES; i++)
		f[m++] = (void *)nip[i];
	for (int k = jc; k >= 0 && m < HT_MAX_FRAMES; k--)
		f[m++] = (void *)c->ip[k];
	uint64_t h = HT_KEY_SEED;
	for (int i = m - 1; i >= 0; i--)
		h = key_step(h, (uintptr_t)f[i]);
	uint32_t id = stack_id(t, key_final(h), f, m, NULL);
	if (verify_stacks) {
		void *full[HT_MAX_FRAMES + HT_OWN_FRAMES];
		int skip, fn = unwind_stack(full, &skip);
		int same = fn == m;
		for (int i = 0; same && i < m; i++)
			same = full[skip + i] == f[i];
		atomic_fetch_add(&verify_walked, 1);
		if (!same)
			atomic_fetch_add(&verify_bad, 1);
	}
	return id;
}

/*
 * The stack id of the current call through the cache c: loc0 is the slot of
 * the hook's return address into the program, just above the rbp the hook
 * saved. Falls back to libunwind when the walk cannot go on.
 */
static __attribute__((noinline)) uint32_t capture_cached(struct ht__thread *t, struct ht__scache *c,
							 uintptr_t loc0)
{
	uint32_t gen = atomic_load_explicit(&ht__table_gen, memory_order_relaxed);
	if (HT_UNLIKELY(c->memo_gen != gen)) {
		memset(c->cfi, 0, sizeof c->cfi);
		memset(c->ids, 0, sizeof c->ids);
		c->memo_gen = gen;
	}
	uintptr_t ip = *(const uintptr_t *)loc0, loc = loc0;
	uintptr_t rbp = *(const uintptr_t *)(loc0 - 8), rbp_loc = loc0 - 8;
	const uintptr_t hi = c->hi;
	int cn = c->n && c->gen == gen ? c->n : 0;

	/* Walk until a cached frame (same slot and return address, the same
	   rbp where the walk reads it, and every check of the frames outside
	   it holding): nip.. are the new frames, innermost first; jc the
	   cached frame joined, or -1. The checks are looked at from the
	   outermost, once: chk[0..ok-1] hold, and chk[ok] not if okbad (a
	   stack that changed far out, as a loop's caller, fails at once). */
	uintptr_t nip[HT_MAX_FRAMES], nloc[HT_MAX_FRAMES], nrbp[HT_MAX_FRAMES], nrl[HT_MAX_FRAMES];
	uint8_t nfr[HT_MAX_FRAMES];
	int n = 0, jc = -1, done = 0, sig = 0, cut = 0, k = cn - 1, ok = 0, okbad = 0;
	for (;;) {
		while (k >= 0 && c->loc[k] < loc)
			k--;
		if (k >= 0 && c->loc[k] == loc && c->ip[k] == ip &&
		    (!c->use[k] || c->rbp[k] == rbp)) {
			int m = c->nchk[k];
			if (!okbad && ok < m) {
				while (
				    ok + 2 <= m &&
				    !((*(const uintptr_t *)c->chk[ok].at ^ c->chk[ok].val) |
				      (*(const uintptr_t *)c->chk[ok + 1].at ^ c->chk[ok + 1].val)))
					ok += 2;
				while (ok < m &&
				       *(const uintptr_t *)c->chk[ok].at == c->chk[ok].val)
					ok++;
				okbad = ok < m;
			}
			if (ok >= m) {
				jc = k;
				break;
			}
		}
		if (n == HT_MAX_FRAMES) {
			cut = 1;
			break; /* deeper than kept: cut as libunwind cuts it, uncached */
		}
		nip[n] = ip;
		nloc[n] = loc;
		nrbp[n] = rbp;
		nrl[n] = rbp_loc;
		nfr[n] = 0;
		n++;
		uint64_t r = cfi_rule(c, ip);
		if (HT_UNLIKELY(!(r & HT_CFI_OK))) {
			/* A signal frame: libunwind follows it (sig_afford). */
			done = r == HT_CFI_LAST || r == HT_CFI_SIGNAL;
			sig = r == HT_CFI_SIGNAL;
			break;
		}
		nfr[n - 1] = (r & HT_CFI_CFA_RBP) != 0;
		uintptr_t cfa = ((r & HT_CFI_CFA_RBP) ? rbp : loc + 8) + (uint32_t)r;
		if (cfa <= loc + 8 || cfa > hi)
			break;
		if (r & HT_CFI_RBP_SAVED) {
			rbp_loc = cfa - ((r >> 32) & 0xffffff);
			if (rbp_loc <= loc)
				break; /* not in this frame: odd, leave it to libunwind */
			rbp = *(const uintptr_t *)rbp_loc;
		} else {
			rbp_loc = 0;
		}
		loc = cfa - 8;
		ip = *(const uintptr_t *)loc;
		if (!ip) {
			done = 1;
			break;
		}
	}
	if (jc >= 0 && c->sig)
		sig = 1; /* joined a stack that was cut at a signal frame */
	if (HT_UNLIKELY(sig) && sig_afford(t)) {
		c->n = 0;
		c->same_gen = 0;
		same_void(t);
		uint64_t t0 = ht__clock();
		uint32_t id = capture_unwind(t); /* libunwind, through the signal frame */
		sig_charge(t, ht__clock() - t0);
		return id;
	}
	if (jc == cn - 1 && n == 0 && !verify_stacks)
		return c->id; /* the same stack as last time */
	if ((cut || (jc >= 0 && jc + 1 + n > HT_MAX_FRAMES)) && !sig) {
		/* Deeper than kept. The cache stays as it was: still a stack
		   checked against memory at each use, it is the outer part of
		   the next deep stack (joined after its new frames alone) and
		   most likely the next stack once the recursion returns. */
		uint32_t id = capture_cut(t, c, nip, n, jc);
		const struct ht__cutwalk w = {nip, nloc, nrbp, nrl, nfr, n, jc, rbp_loc, rbp};
		recent_keep_cut(c, id, gen, &w);
		return id;
	}
	if (jc >= 0 && jc + 1 + n > HT_MAX_FRAMES)
		jc = -1; /* would need cutting: leave it to libunwind */
	if (jc < 0 && !done) {
		c->n = 0;
		c->same_gen = 0;
		same_void(t);
		return capture_unwind(t); /* libunwind, whole and uncached */
	}

	/* The new frames go after the cached ones kept, outermost first. The
	   frame joined now has its rbp from the new inner frames: where it
	   was read, and so its checks, come from this walk. */
	int base = jc + 1, total = base + n;
	int m = 0, carry = 0; /* carry: rbp of the frame outside passes in unchanged and is read */
	if (jc >= 0) {
		sig = c->sig; /* the outer frames are the cached ones */
		c->rbp[jc] = rbp;
		m = c->nchk[jc];
		c->chk[m].at = c->loc[jc];
		c->chk[m++].val = c->ip[jc];
		if (c->use[jc] && rbp_loc) {
			c->chk[m].at = rbp_loc;
			c->chk[m++].val = rbp;
		}
		c->nchk[base] = (uint16_t)m;
		carry = c->use[jc] && !rbp_loc;
	}
	c->sig = sig;
	uint64_t h = jc >= 0 ? c->hkey[jc] : HT_KEY_SEED;
	for (int i = n - 1, at = base; i >= 0; i--, at++) {
		uintptr_t l = nloc[i], rl = nrl[i];
		int use = nfr[i] | carry;
		h = key_step(h, nip[i]);
		c->ip[at] = nip[i];
		c->loc[at] = l;
		c->rbp[at] = nrbp[i];
		c->use[at] = (uint8_t)use;
		c->hkey[at] = h;
		c->chk[m].at = l;
		c->chk[m++].val = nip[i];
		c->chk[m].at = rl; /* kept only where rbp is read and was restored */
		c->chk[m].val = nrbp[i];
		m += use && rl;
		c->nchk[at + 1] = (uint16_t)m;
		carry = use && !rl;
	}
	c->n = total;
	c->gen = gen;
	uint32_t id = cached_id(t, c, h, total);
	c->id = id;
	c->same_gen = id && !c->sig && !verify_stacks ? gen : 0;
	same_void(t);
	c->rprev = 0;
	if (!id) {
		c->n = 0;
	} else {
		recent_keep(c, n);
	}
	if (verify_stacks) {
		void *full[HT_MAX_FRAMES + HT_OWN_FRAMES];
		int skip, fn = unwind_stack(full, &skip);
		/* libunwind goes on past a signal frame, where ours ends. */
		int same = sig ? fn >= total : fn == total;
		for (int i = 0; same && i < total; i++)
			same = (uintptr_t)full[skip + i] == c->ip[total - 1 - i];
		atomic_fetch_add(base ? &verify_reuse : &verify_walked, 1);
		if (!same)
			atomic_fetch_add(&verify_bad, 1);
	}
	return id;
}
/* Counts of HEAPTRAIL_STACK_VERIFY=1, on stderr at exit. */
__attribute__((destructor)) static void verify_report(void)
{
	if (!verify_stacks)
		return;
	char buf[256];
	int len = snprintf(buf, sizeof buf,
			   "heaptrail: stack cache verify: %llu reused, %llu walked, %llu differ"
			   " (%llu found among the recent stacks, %llu in the stack tree);"
			   " %d of our frames at most began a walk, room for %d\n",
			   (unsigned long long)atomic_load(&verify_reuse),
			   (unsigned long long)atomic_load(&verify_walked),
			   (unsigned long long)atomic_load(&verify_bad),
			   (unsigned long long)atomic_load(&verify_recent),
			   (unsigned long long)atomic_load(&verify_tree), atomic_load(&verify_own),
			   HT_OWN_FRAMES);
	if (len > 0)
		syscall(SYS_write, 2, buf, (size_t)len);
}

/* ---- the unwinding stack ---- */

/*
 * A capture needs about 7 KiB of stack (libunwind's context and cursor, its
 * DWARF parser on a first visit, the STACK record being built, a module
 * scan), more than a program leaves in a signal handler on an 8 KiB
 * alternate stack (SIGSTKSZ of old, what crash handlers use), in a coroutine
 * or near the end of a small thread stack: there, tracing would turn a
 * working program into a crash. So the capture runs on a stack of the
 * recorder's own, one per thread, with a guard page below it, mapped at the
 * thread's first capture and unmapped when the thread releases its ring.
 * Only ht__stack_capture's small frame stays on the program's stack.
 *
 * ht__on_stack(arg, fn, top) calls fn(arg) with the stack pointer at top.
 * Its frame keeps the program's stack pointer in rbp and its CFI says so
 * (CFA = rbp + 16), so libunwind (and a debugger) walks from the recorder's
 * stack back onto the program's as through any frame-pointer frame.
 */
/* The bottom of a fresh unwinding stack lends stack_bounds() its scratch:
   pthread_getattr_np takes about 250 bytes with up to 256 CPUs, under 2 KiB
   with 4096. */
#define HT_SCRATCH_SIZE 4096

#if defined(__x86_64__)
__asm__(".text\n"
	".globl ht__on_stack\n"
	".hidden ht__on_stack\n"
	".type ht__on_stack, @function\n"
	".p2align 4\n"
	"ht__on_stack:\n"
	".cfi_startproc\n"
	"\tpush %rbp\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset %rbp, -16\n"
	"\tmov %rsp, %rbp\n"
	".cfi_def_cfa_register %rbp\n"
	"\tmov %rdx, %rsp\n"
	"\tcall *%rsi\n"
	"\tmov %rbp, %rsp\n"
	"\tpop %rbp\n"
	".cfi_def_cfa %rsp, 8\n"
	"\tret\n"
	".cfi_endproc\n"
	".size ht__on_stack, .-ht__on_stack\n");
void ht__on_stack(void *arg, void (*fn)(void *), void *top);
#define HT_HAVE_USTACK 1
#else
#define HT_HAVE_USTACK 0
#endif

struct ht__capture_call {
	struct ht__thread *t;
	struct ht__scache *cache; /* NULL: unwind whole */
	uintptr_t loc0;
	uint32_t id;
};

static void capture_on_ustack(void *arg)
{
	struct ht__capture_call *c = arg;
	c->id = c->cache ? capture_cached(c->t, c->cache, c->loc0) : capture_unwind(c->t);
}

/* The thread's stack cache sits at the top of its unwinding stack. */
static inline struct ht__scache *scache_of(struct ht__thread *t)
{
	uintptr_t top =
	    (uintptr_t)t->ustack + HT_USTACK_SIZE - HT_SAME_ROOM - sizeof(struct ht__scache);
	return (struct ht__scache *)(top & ~(uintptr_t)63);
}

extern void *__libc_stack_end;

/*
 * Where the thread's stack is, for the cache's reads: the main thread's
 * from the loader's record of its top and the stack limit, another
 * thread's from its attributes (no /proc read for those).
 */
static HT_COLD void stack_bounds(struct ht__thread *t, struct ht__scache *c)
{
	c->lo = c->hi = 0;
	if (t->tid == ht__g.pid) {
		struct rlimit rl;
		uintptr_t size = 8u << 20;
		if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
		    rl.rlim_cur < size)
			size = (uintptr_t)rl.rlim_cur;
		c->hi = ((uintptr_t)__libc_stack_end | 4095) + 1;
		c->lo = c->hi - size;
		return;
	}
	pthread_attr_t a;
	void *addr;
	size_t size;
	/* It allocates (a cpuset, its attributes' extension): our call, not the
	   program's event, and no handler's event comes meanwhile to be taken
	   for it. Its memory is the bottom of the fresh unwinding stack, never
	   the program's allocator, which may be inside its own lock now (a
	   capture in jemalloc's mmap from inside its malloc deadlocked). */
	sigset_t old;
	ht__signals_hold(&old);
	t->guard += HT_GUARD_OWN;
	t->scratch = t->ustack;
	t->scratch_used = 0;
	t->scratch_size = HT_SCRATCH_SIZE;
	if (pthread_getattr_np(pthread_self(), &a) == 0) {
		if (pthread_attr_getstack(&a, &addr, &size) == 0 && addr && size) {
			c->lo = (uintptr_t)addr;
			c->hi = (uintptr_t)addr + size;
		}
		pthread_attr_destroy(&a);
	}
	t->scratch = NULL;
	t->guard -= HT_GUARD_OWN;
	ht__signals_release(&old);
}

/* Maps the thread's unwinding stack; leaves it NULL when that fails. */
static HT_COLD void ustack_map(struct ht__thread *t)
{
	char *m = ht__raw_mmap(HT_USTACK_GUARD + HT_USTACK_SIZE);
	if (!m)
		return;
	syscall(SYS_mprotect, m, HT_USTACK_GUARD, PROT_NONE);
	t->ustack = m + HT_USTACK_GUARD;
	stack_bounds(t, scache_of(t)); /* the mapping is zero: an empty cache */
	ht__thread_watch(t);	       /* unmapped at thread exit, ring or not */
}

/*
 * The slot holding the return address into the program of the hook that
 * called us, found through the recorder's frame pointers; 0 if not found.
 */
static inline uintptr_t hook_slot(const uintptr_t *fp)
{
	for (int i = 0; i < 8; i++) {
		uintptr_t ra = fp[1];
		if (ra < ht__g.self_start || ra >= ht__g.self_end)
			return (uintptr_t)&fp[1];
		const uintptr_t *up = (const uintptr_t *)fp[0];
		if (up <= fp || up - fp > 8192)
			return 0;
		fp = up;
	}
	return 0;
}

void ht__ustack_unmap(struct ht__thread *t)
{
	if (!t->ustack)
		return;
	struct ht__scache *sc = scache_of(t);
	if (sc->tree)
		syscall(SYS_munmap, sc->tree, sizeof *sc->tree);
	if (sc->recent)
		syscall(SYS_munmap, sc->recent, HT_RECENT * sizeof *sc->recent);
	t->same_gen = 0;
	syscall(SYS_munmap, t->ustack - HT_USTACK_GUARD, HT_USTACK_GUARD + HT_USTACK_SIZE);
	t->ustack = NULL;
}

/*
 * The long way of ht__stack_capture(): the walk through the cache sc from
 * the hook's slot loc0 (sc NULL: the thread has no unwinding stack yet, or
 * the slot is not on the thread's stack), on the thread's unwinding stack.
 */
static __attribute__((noinline)) uint32_t capture_long(struct ht__thread *t, struct ht__scache *sc,
						       uintptr_t loc0)
{
	struct ht__capture_call c = {t, NULL, 0, 0};
	if (!HT_HAVE_USTACK || t->exited) {
		c.id = capture_unwind(t);
	} else {
		if (HT_UNLIKELY(!t->ustack)) {
			ustack_map(t);
			if (t->ustack) { /* the frame's slot was found before */
				struct ht__scache *fresh = scache_of(t);
				if (loc0 - fresh->lo < fresh->hi - fresh->lo)
					sc = fresh;
			}
		}
		if (!t->ustack) {
			c.id = capture_unwind(t);
		} else {
			if (sc) {
				c.cache = sc;
				c.loc0 = loc0;
			}
#if HT_HAVE_USTACK
			ht__on_stack(&c, capture_on_ustack,
				     (char *)((uintptr_t)scache_of(t) & ~(uintptr_t)15));
#endif
		}
	}
	return c.id;
}

/*
 * The stack id of the current call, captured on the thread's unwinding
 * stack through its stack cache; fp is the frame of the recorder's
 * function that asks (the hook, where ht__stack_for() is inlined), whose
 * return address into the program hook_slot() finds. A thread past its key
 * destructor (glibc freeing its TLS) captures in place: it has given its
 * unwinding stack back and runs on its own, normal-sized stack then. The
 * common case, the thread's previous stack whole, is checked on the
 * program's stack: by the hook inline (ht__stack_for) once it came twice,
 * here (same_stack) before that; the rest is capture_long().
 */
uint32_t ht__stack_capture(struct ht__thread *t, const uintptr_t *fp)
{
	if (HT_UNLIKELY(atomic_load_explicit(&ht__dlclosing, memory_order_relaxed)))
		ht__modules_refresh(0); /* a stack table of unloaded code must go first */
	uintptr_t loc0 = hook_slot(fp);
	struct ht__scache *sc = NULL;
	if (HT_LIKELY(t->ustack != NULL) && HT_LIKELY(!t->exited)) {
		sc = scache_of(t);
		if (HT_LIKELY(loc0 - sc->lo < sc->hi - sc->lo)) { /* on the thread's stack */
			/* What ht__stack_for() checked inline is not checked again. */
			uint32_t id =
			    t->same_gen && loc0 == (uintptr_t)&fp[1] ? 0 : same_stack(sc, loc0);
			if (id) {
				if (!t->same_gen)
					same_copy(t, sc);
				return id;
			}
			return capture_other(t, sc, loc0);
		} else {
			sc = NULL;
		}
	}
	return capture_long(t, sc, loc0);
}

struct ht__range {
	uintptr_t addr, start, end;
};

static int range_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct ht__range *r = data;
	uintptr_t me = r->addr, lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
		if (a < lo)
			lo = a;
		if (b > hi)
			hi = b;
	}
	if (me < lo || me >= hi)
		return 0;
	r->start = lo;
	r->end = hi;
	return 1;
}

/*
 * Finds our own mapping, whose frames are cut from every stack, and
 * libunwind's, whose own mmap/munmap calls (its per-thread caches, freed
 * from a key destructor outside our guard) are not the program's.
 */
void ht__find_self(void)
{
	struct ht__range r = {(uintptr_t)ht__find_self, 0, 0};
	dl_iterate_phdr(range_cb, &r);
	ht__g.self_start = r.start;
	ht__g.self_end = r.end;
	struct ht__range u = {(uintptr_t)unw_backtrace, 0, 0};
	dl_iterate_phdr(range_cb, &u);
	ht__g.unw_start = u.start;
	ht__g.unw_end = u.end;
}
