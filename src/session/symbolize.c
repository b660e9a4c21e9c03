/*
 * symbolize.c - at the end of a session, every physical frame (module +
 * address) becomes module!function file:line, with the functions inlined at
 * that address, through elfutils libdw. Symbols go into the trace so that it
 * can be analysed on any machine.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/vec.h"
#include "session/symcache.h"
#include "session/internal.h"

/*
 * C++ names are demangled, and Rust's, legacy (_ZN...17h<hash>E) and v0
 * (_R...), with libiberty's demangler (Debian libiberty-dev, a static
 * library). For C++ it is the C++ runtime's own (__cxa_demangle is built
 * from the same source, with these options), without loading libstdc++
 * into every heaptrail command for one function.
 */
#include <libiberty/demangle.h>

char *ht__demangle(const char *name)
{
	if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	/* A Rust legacy name is also a valid C++ one: Rust is asked first, and
	   says no to anything without its hash. */
	char *d = rust_demangle(name, DMGL_PARAMS | DMGL_ANSI);
	if (d || name[1] != 'Z')
		return d;
	return cplus_demangle_v3(name, DMGL_PARAMS | DMGL_TYPES);
}

#define MAX_INLINE 16

/*
 * libdw is opened when the first module is symbolized, not linked: every
 * heaptrail command (analyze, a recording's start) would otherwise load it
 * and libelf, liblzma and libbz2 behind it at exec, about a third of a
 * millisecond of ld.so, and a recording whose frames all come from the
 * symbol cache never needs it. These are the functions this file calls.
 */
#define DW_FUNCS(X)                                                                                \
	X(dwarf_attr)                                                                              \
	X(dwarf_attr_integrate)                                                                    \
	X(dwarf_child)                                                                             \
	X(dwarf_diecu)                                                                             \
	X(dwarf_diename)                                                                           \
	X(dwarf_filesrc)                                                                           \
	X(dwarf_formref_die)                                                                       \
	X(dwarf_formstring)                                                                        \
	X(dwarf_formudata)                                                                         \
	X(dwarf_getscopes)                                                                         \
	X(dwarf_getscopes_die)                                                                     \
	X(dwarf_getsrcfiles)                                                                       \
	X(dwarf_haschildren)                                                                       \
	X(dwarf_haspc)                                                                             \
	X(dwarf_ranges)                                                                            \
	X(dwarf_siblingof)                                                                         \
	X(dwarf_tag)                                                                               \
	X(dwfl_begin)                                                                              \
	X(dwfl_build_id_find_elf)                                                                  \
	X(dwfl_end)                                                                                \
	X(dwfl_lineinfo)                                                                           \
	X(dwfl_module_addrdie)                                                                     \
	X(dwfl_module_build_id)                                                                    \
	X(dwfl_module_getelf)                                                                      \
	X(dwfl_module_getsrc)                                                                      \
	X(dwfl_module_getsym_info)                                                                 \
	X(dwfl_module_getsymtab)                                                                   \
	X(dwfl_offline_section_address)                                                            \
	X(dwfl_report_end)                                                                         \
	X(dwfl_report_offline)                                                                     \
	X(dwfl_standard_find_debuginfo)

#define DW_SONAME "libdw.so.1"
#define DW_PACKAGE "libdw1"

static struct {
#define DW_FIELD(f) __typeof__(f) *f;
	DW_FUNCS(DW_FIELD)
#undef DW_FIELD
} dw;

/* Offline: the modules are files on disk, not a live process. Debug info is
   looked up next to the file and by build-id under /usr/lib/debug. */
static Dwfl_Callbacks offline_callbacks;

static pthread_once_t dw_once = PTHREAD_ONCE_INIT;
static const char *dw_missing; /* why libdw is not there, or NULL */
static char dw_why[512];

static void dw_load(void)
{
	void *h = dlopen(DW_SONAME, RTLD_NOW | RTLD_LOCAL);
	const char *sym = NULL;
	if (h) {
#define DW_LOAD(f)                                                                                 \
	if (!sym && !(dw.f = (__typeof__(dw.f))dlsym(h, #f)))                                      \
		sym = #f;
		DW_FUNCS(DW_LOAD)
#undef DW_LOAD
	}
	if (!h || sym) {
		const char *e = dlerror();
		if (h)
			dlclose(h);
		snprintf(dw_why, sizeof(dw_why),
			 "%s, which symbolizes frames, cannot be loaded (%s): install the "
			 "Debian package %s",
			 DW_SONAME,
			 e     ? e
			 : sym ? sym
			       : "not found",
			 DW_PACKAGE);
		dw_missing = dw_why;
		return;
	}
	offline_callbacks = (Dwfl_Callbacks){
	    .find_elf = dw.dwfl_build_id_find_elf,
	    .find_debuginfo = dw.dwfl_standard_find_debuginfo,
	    .section_address = dw.dwfl_offline_section_address,
	};
}

const char *ht__symbolizer_missing(void)
{
	pthread_once(&dw_once, dw_load);
	return dw_missing;
}

struct names {
	char *owned[MAX_INLINE + 2];
	uint32_t n;
};

/* name, demangled when it is a C++ or Rust symbol; the result lives until names_free. */
static const char *demangle(struct names *nm, const char *name)
{
	if (nm->n >= MAX_INLINE + 2)
		return name;
	char *d = ht__demangle(name);
	if (!d)
		return name;
	nm->owned[nm->n++] = d;
	return d;
}

static void names_free(struct names *nm)
{
	for (uint32_t i = 0; i < nm->n; i++)
		free(nm->owned[i]);
	nm->n = 0;
}

static const char *die_name(struct names *nm, Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *ln = dw.dwarf_formstring(dw.dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
	if (!ln)
		ln = dw.dwarf_formstring(dw.dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
	if (ln)
		return demangle(nm, ln);
	return dw.dwarf_diename(die);
}

static bool same_build_id(Dwfl_Module *mod, const struct ht__module_ent *m)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	if (!m->build_id_len)
		return true;
	int n = dw.dwfl_module_build_id(mod, &bits, &vaddr);
	return n == m->build_id_len && !memcmp(bits, m->build_id, (size_t)n);
}

static Dwfl_Module *report(Dwfl **dwfl, const char *path)
{
	*dwfl = dw.dwfl_begin(&offline_callbacks);
	if (!*dwfl)
		return NULL;
	const char *base = strrchr(path, '/');
	Dwfl_Module *mod = dw.dwfl_report_offline(*dwfl, base ? base + 1 : path, path, -1);
	dw.dwfl_report_end(*dwfl, NULL, NULL);
	if (!mod) {
		dw.dwfl_end(*dwfl);
		*dwfl = NULL;
	}
	return mod;
}

/* report() of path when it is readable and has the module's build-id. */
static Dwfl_Module *try_file(Dwfl **dwfl, const char *path, const struct ht__module_ent *m)
{
	if (access(path, R_OK) != 0)
		return NULL;
	Dwfl_Module *mod = report(dwfl, path);
	if (mod && same_build_id(mod, m))
		return mod;
	if (*dwfl)
		dw.dwfl_end(*dwfl);
	*dwfl = NULL;
	return NULL;
}

/* In dir (a debug directory): .build-id/xx/rest.debug, then .build-id/xx/rest. */
static Dwfl_Module *try_build_id(Dwfl **dwfl, const char *dir, const struct ht__module_ent *m)
{
	if (m->build_id_len < 2)
		return NULL;
	char path[4200];
	int n = snprintf(path, sizeof(path), "%s/.build-id/%02x/", dir, m->build_id[0]);
	for (uint32_t i = 1; i < m->build_id_len && n > 0 && n < (int)sizeof(path) - 8; i++)
		n += snprintf(path + n, sizeof(path) - (size_t)n, "%02x", m->build_id[i]);
	if (n <= 0 || n >= (int)sizeof(path) - 8)
		return NULL;
	snprintf(path + n, sizeof(path) - (size_t)n, ".debug");
	Dwfl_Module *mod = try_file(dwfl, path, m);
	if (!mod) {
		path[n] = 0;
		mod = try_file(dwfl, path, m);
	}
	return mod;
}

/*
 * The module's file: in each directory of symbol_path (by build-id, then by
 * file name), the path itself when its build-id still matches, else the
 * debug file of that build-id under /usr/lib/debug (the library was upgraded
 * since, but its debug symbols may be installed). A module recorded without
 * a build-id is taken by path alone.
 */
static Dwfl_Module *open_module(Dwfl **dwfl, const struct ht__module_ent *m,
				const char *symbol_path)
{
	*dwfl = NULL;
	Dwfl_Module *mod = NULL;
	const char *base = m->path ? strrchr(m->path, '/') : NULL;
	base = base ? base + 1 : m->path;
	for (const char *p = symbol_path; p && *p && !mod;) {
		size_t len = strcspn(p, ":");
		if (len && len < 4096) {
			char dir[4096], path[8300];
			memcpy(dir, p, len);
			dir[len] = 0;
			mod = try_build_id(dwfl, dir, m);
			if (!mod && base && *base && m->build_id_len) {
				snprintf(path, sizeof(path), "%s/%s", dir, base);
				mod = try_file(dwfl, path, m);
			}
		}
		p += len + (p[len] == ':');
	}
	if (!mod && m->path && m->path[0] == '/')
		mod = try_file(dwfl, m->path, m);
	if (!mod)
		mod = try_build_id(dwfl, "/usr/lib/debug", m);
	return mod;
}

/*
 * A module's functions sorted by address. dwfl_module_addrinfo scans the
 * whole symbol table on every call; with a few thousand frames in a library
 * of ten thousand symbols that scan was most of the symbolizing time, so the
 * table is read once per module and searched by bisection.
 */
struct sym_ent {
	uint64_t addr, size;
	const char *name; /* owned by the Dwfl */
	int rank;	  /* GLOBAL 0, WEAK 1, LOCAL 2: aliases prefer the lower */
};

struct symtab {
	struct sym_ent *v;
	size_t n;
};

static int sym_cmp(const void *a, const void *b)
{
	const struct sym_ent *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->rank - y->rank;
}

static void symtab_build(Dwfl_Module *mod, struct symtab *st)
{
	st->v = NULL;
	st->n = 0;
	int n = dw.dwfl_module_getsymtab(mod);
	if (n <= 1 || !(st->v = malloc((size_t)n * sizeof(*st->v))))
		return;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name =
		    dw.dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
		if (!name || !*name || sym.st_shndx == SHN_UNDEF || shndx == (GElf_Word)-1 ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		st->v[st->n++] = (struct sym_ent){addr, sym.st_size, name,
						  bind == STB_GLOBAL ? 0
						  : bind == STB_WEAK ? 1
								     : 2};
	}
	qsort(st->v, st->n, sizeof(*st->v), sym_cmp);
	/* keep one symbol per address: the best ranked, first after the sort */
	size_t k = 0;
	for (size_t i = 0; i < st->n; i++)
		if (!k || st->v[i].addr != st->v[k - 1].addr)
			st->v[k++] = st->v[i];
	st->n = k;
}

/* The function containing pc, or NULL. */
static const char *symtab_find(const struct symtab *st, uint64_t pc)
{
	size_t lo = 0, hi = st->n;
	while (lo < hi) { /* first entry above pc */
		size_t mid = lo + (hi - lo) / 2;
		if (st->v[mid].addr <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	const struct sym_ent *e = &st->v[lo - 1];
	/* A sized symbol must cover pc; an unsized one reaches to the next. */
	if (e->size && pc >= e->addr + e->size)
		return NULL;
	return e->name;
}

/*
 * dwarf_getscopes() answers one pc by walking its CU from the root: it tests
 * every top-level DIE against pc, and when pc is in inlined code it walks the
 * whole CU again to find the inlined function's abstract definition. In a
 * big C++ CU that is a walk of hundreds of thousands of DIEs per frame, and
 * it was nearly all the time of symbolizing (4000 frames of one -O2 -g C++
 * file took 120 s). The scope chain is rebuilt here by the same rules, with
 * the same result, from what is computed once: per CU, the address ranges of
 * its top-level DIEs; per CU holding abstract definitions, the scopes around
 * each subprogram; per definition, its scopes. Whatever these rules do not
 * cover (imported units, a DIE or range list that does not read) goes back
 * to libdw's own functions, so the answer never changes, only its cost.
 */
#define MAX_SCOPES 256

struct top_range {
	uint64_t lo, hi;
	uint32_t child; /* index in cu_index.children: DIE order */
};

struct cu_index {
	const void *addr;    /* the CU DIE's bytes: names the CU */
	Dwarf_Die *children; /* top-level DIEs that have ranges, in DIE order */
	struct top_range *r; /* their ranges, sorted by lo */
	uint64_t *maxhi;     /* highest hi of r[0 .. i] */
	size_t nchildren, nr;
	bool usable; /* false: ask dwarf_getscopes() */
};

/* What dwarf_getscopes_die() says of an abstract definition: its scopes, outward. */
struct origin_ent {
	const void *addr;  /* the definition's DIE bytes */
	Dwarf_Die *scopes; /* malloc'd; [0] is the definition itself */
	int n;		   /* as returned: <= 0 when not found */
};

struct scope_cache {
	struct cu_index *cus;
	size_t ncus, cus_cap;
	struct ht__hindex cu_tab;
	struct origin_ent *origins;
	size_t norigins, origins_cap;
	struct ht__hindex origin_tab;
	struct origin_cu *ocus;
	size_t nocus, ocus_cap;
	struct ht__hindex ocu_tab;
};

static uint32_t ptr_hash(const void *p)
{
	return ht__hash_bytes(&p, sizeof(p), 0x5c09e5u);
}

/*
 * The id of key in ix, whose ids index an array at base of elements of
 * stride bytes holding the key's pointer at offset off; UINT32_MAX when not
 * there. ix keeps its hashes (ptr_hash of the keys).
 */
static uint32_t ptr_find(const struct ht__hindex *ix, const void *key, const void *base, size_t off,
			 size_t stride)
{
	uint32_t h = ptr_hash(key);
	for (uint32_t *s = ht__hindex_find(ix, h); *s; s = ht__hindex_next(ix, s)) {
		const char *e = (const char *)base + (size_t)(*s - 1) * stride + off;
		if (ht__hindex_hash(ix, s) == h && *(const void *const *)e == key)
			return *s - 1;
	}
	return UINT32_MAX;
}

static int range_cmp(const void *a, const void *b)
{
	const struct top_range *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->child < y->child ? -1 : x->child > y->child;
}

static bool push_range(struct cu_index *ci, size_t *cap, uint64_t lo, uint64_t hi)
{
	if (ht__grow((void **)&ci->r, cap, ci->nr + 1, sizeof(*ci->r)) < 0)
		return false;
	ci->r[ci->nr++] = (struct top_range){lo, hi, (uint32_t)ci->nchildren};
	return true;
}

/*
 * Fill ci with the ranges of cu's top-level DIEs. Any DIE whose ranges do not
 * read, and any imported unit (whose DIEs dwarf_getscopes would visit as if
 * they were here), leaves the index unusable.
 */
static void cu_index_build(struct cu_index *ci, Dwarf_Die *cu)
{
	Dwarf_Die child;
	size_t rcap = 0, ccap = 0;
	int r = dw.dwarf_child(cu, &child);
	if (r < 0)
		return;
	while (r == 0) {
		if (dw.dwarf_tag(&child) == DW_TAG_imported_unit)
			return;
		Dwarf_Addr base, lo, hi;
		ptrdiff_t off = 0;
		bool any = false;
		while ((off = dw.dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
			if (!push_range(ci, &rcap, lo, hi))
				return;
			any = true;
		}
		if (off < 0)
			return;
		if (any) {
			if (ht__grow((void **)&ci->children, &ccap, ci->nchildren + 1,
				     sizeof(*ci->children)) < 0)
				return;
			ci->children[ci->nchildren++] = child;
		}
		r = dw.dwarf_siblingof(&child, &child);
	}
	if (r < 0)
		return;
	if (ci->nr > 1) /* ci->r is NULL when empty */
		qsort(ci->r, ci->nr, sizeof(*ci->r), range_cmp);
	if (ci->nr && !(ci->maxhi = malloc(ci->nr * sizeof(*ci->maxhi))))
		return;
	for (size_t i = 0; i < ci->nr; i++)
		ci->maxhi[i] = i && ci->maxhi[i - 1] > ci->r[i].hi ? ci->maxhi[i - 1] : ci->r[i].hi;
	ci->usable = true;
}

static struct cu_index *cu_index_get(struct scope_cache *sc, Dwarf_Die *cu)
{
	const void *key = cu->addr;
	uint32_t h = ptr_hash(key);
	uint32_t i =
	    ptr_find(&sc->cu_tab, key, sc->cus, offsetof(struct cu_index, addr), sizeof(*sc->cus));
	if (i != UINT32_MAX)
		return &sc->cus[i];
	if (ht__grow((void **)&sc->cus, &sc->cus_cap, sc->ncus + 1, sizeof(*sc->cus)) < 0)
		return NULL;
	struct cu_index *ci = &sc->cus[sc->ncus];
	*ci = (struct cu_index){.addr = key};
	if (ht__hindex_insert_kept(&sc->cu_tab, h, (uint32_t)sc->ncus) < 0)
		return NULL;
	sc->ncus++;
	cu_index_build(ci, cu);
	return ci;
}

/*
 * The first top-level DIE in DIE order whose ranges hold pc: the one
 * dwarf_getscopes would descend into. Returns its index or -1 for none.
 */
static long cu_index_find(const struct cu_index *ci, uint64_t pc)
{
	size_t lo = 0, hi = ci->nr;
	while (lo < hi) { /* count of ranges starting at or below pc */
		size_t mid = lo + (hi - lo) / 2;
		if (ci->r[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	long best = -1;
	for (size_t i = lo; i-- > 0 && ci->maxhi[i] > pc;)
		if (ci->r[i].hi > pc && (best < 0 || ci->r[i].child < (uint32_t)best))
			best = ci->r[i].child;
	return best;
}

/* Tags dwarf_getscopes looks inside. */
static bool may_have_scopes(int tag)
{
	switch (tag) {
	case DW_TAG_compile_unit:
	case DW_TAG_module:
	case DW_TAG_lexical_block:
	case DW_TAG_with_stmt:
	case DW_TAG_catch_block:
	case DW_TAG_try_block:
	case DW_TAG_entry_point:
	case DW_TAG_inlined_subroutine:
	case DW_TAG_subprogram:
	case DW_TAG_namespace:
	case DW_TAG_class_type:
	case DW_TAG_structure_type:
		return true;
	default:
		return false;
	}
}

struct chain {
	Dwarf_Die die[MAX_SCOPES]; /* die[d]: the DIE holding pc at depth d below the top */
	unsigned innermost, inlined;
};

/*
 * Inside parent (at depth - 1), the first child holding pc and then its
 * innermost descendant holding pc, as dwarf_getscopes' walk finds them.
 * Returns 1 found, 0 none, -1 when this walk cannot promise the same answer.
 */
/* Returns 1 when the siblings after die read, -1 when not or one is an imported unit. */
static int rest_of_siblings(Dwarf_Die *die)
{
	Dwarf_Die d = *die;
	int r;
	while ((r = dw.dwarf_siblingof(&d, &d)) == 0)
		if (dw.dwarf_tag(&d) == DW_TAG_imported_unit)
			return -1;
	return r < 0 ? -1 : 1;
}

static int chain_walk(Dwarf_Die *parent, Dwarf_Addr pc, struct chain *ch, unsigned depth)
{
	Dwarf_Die child;
	int r = dw.dwarf_child(parent, &child);
	if (r != 0)
		return r < 0 ? -1 : 0;
	do {
		int tag = dw.dwarf_tag(&child);
		if (tag == DW_TAG_imported_unit)
			return -1;
		int has = dw.dwarf_haspc(&child, pc);
		if (has < 0)
			return -1;
		if (has > 0) {
			if (depth >= MAX_SCOPES)
				return -1;
			ch->die[depth] = child;
			if (tag == DW_TAG_inlined_subroutine)
				ch->inlined = depth;
			int w = 0;
			/* Like libdw, a DIE whose abbreviation does not read counts as
			   having children, and the walk then fails in dwarf_child. */
			if (may_have_scopes(tag) && dw.dwarf_haschildren(&child) != 0)
				w = chain_walk(&ch->die[depth], pc, ch, depth + 1);
			if (w < 0)
				return -1;
			if (!w)
				ch->innermost = depth;
			/* Below the innermost inlined instance, libdw's walk goes on
			   through the remaining siblings without testing them, and fails
			   when one does not read. */
			if (ch->inlined && depth >= ch->inlined)
				return rest_of_siblings(&child);
			return 1;
		}
		r = dw.dwarf_siblingof(&child, &child);
	} while (r == 0);
	return r < 0 ? -1 : 0;
}

/*
 * The definitions of one CU that dwarf_getscopes_die() can find, with the
 * scopes around each, from one walk with its rules: the walk looks inside
 * the tags may_have_scopes() names. Only subprograms are kept: abstract
 * definitions of inlined functions are subprograms, and any other origin
 * is asked of libdw. An imported unit, or a DIE that does not read, makes
 * the index unusable and every origin of that CU is asked of libdw too.
 */
struct origin_cu {
	const void *addr;	/* the CU DIE's bytes */
	Dwarf_Die *scopes;	/* scopes[0] is the CU DIE, then every DIE walked into */
	uint32_t *scope_parent; /* index in scopes, UINT32_MAX for the CU */
	size_t nscopes, scopes_cap;
	const void **sub;     /* subprograms: their DIE bytes */
	uint32_t *sub_parent; /* the scope holding each */
	size_t nsub, sub_cap;
	struct ht__hindex sub_tab;
	bool usable;
};

static int origin_cu_walk(struct origin_cu *oc, uint32_t parent)
{
	Dwarf_Die child;
	int r = dw.dwarf_child(&oc->scopes[parent], &child);
	if (r != 0)
		return r < 0 ? -1 : 0;
	do {
		int tag = dw.dwarf_tag(&child);
		if (tag == DW_TAG_imported_unit)
			return -1;
		if (tag == DW_TAG_subprogram) {
			if (ht__grow2((void **)&oc->sub, sizeof(*oc->sub), (void **)&oc->sub_parent,
				      sizeof(*oc->sub_parent), &oc->sub_cap, oc->nsub + 1) < 0)
				return -1;
			oc->sub[oc->nsub] = child.addr;
			oc->sub_parent[oc->nsub] = parent;
			if (ht__hindex_insert_kept(&oc->sub_tab, ptr_hash(child.addr),
						   (uint32_t)oc->nsub) < 0)
				return -1;
			oc->nsub++;
		}
		if (may_have_scopes(tag) && dw.dwarf_haschildren(&child) != 0) {
			if (ht__grow2((void **)&oc->scopes, sizeof(*oc->scopes),
				      (void **)&oc->scope_parent, sizeof(*oc->scope_parent),
				      &oc->scopes_cap, oc->nscopes + 1) < 0)
				return -1;
			uint32_t me = (uint32_t)oc->nscopes++;
			oc->scopes[me] = child;
			oc->scope_parent[me] = parent;
			if (origin_cu_walk(oc, me) < 0)
				return -1;
		}
		r = dw.dwarf_siblingof(&child, &child);
	} while (r == 0);
	return r < 0 ? -1 : 0;
}

static void origin_cu_build(struct origin_cu *oc, Dwarf_Die *cu)
{
	oc->scopes_cap = 64;
	oc->scopes = malloc(oc->scopes_cap * sizeof(*oc->scopes));
	oc->scope_parent = malloc(oc->scopes_cap * sizeof(*oc->scope_parent));
	if (!oc->scopes || !oc->scope_parent)
		return;
	oc->scopes[0] = *cu;
	oc->scope_parent[0] = UINT32_MAX;
	oc->nscopes = 1;
	oc->usable = origin_cu_walk(oc, 0) == 0;
}

static void origin_cu_free(struct origin_cu *oc)
{
	free(oc->scopes);
	free(oc->scope_parent);
	free(oc->sub);
	free(oc->sub_parent);
	ht__hindex_release(&oc->sub_tab);
}

/*
 * What dwarf_getscopes_die(origin) returns, from the index of its CU when
 * there is one: the count (0 when the walk does not reach origin) and the
 * scopes in *out, to free.
 */
static int origin_scopes(struct scope_cache *sc, Dwarf_Die *origin, Dwarf_Die **out)
{
	Dwarf_Die cu;
	if (dw.dwarf_tag(origin) != DW_TAG_subprogram || !dw.dwarf_diecu(origin, &cu, NULL, NULL))
		return dw.dwarf_getscopes_die(origin, out);
	uint32_t h = ptr_hash(cu.addr);
	uint32_t i = ptr_find(&sc->ocu_tab, cu.addr, sc->ocus, offsetof(struct origin_cu, addr),
			      sizeof(*sc->ocus));
	if (i == UINT32_MAX) {
		if (ht__grow((void **)&sc->ocus, &sc->ocus_cap, sc->nocus + 1, sizeof(*sc->ocus)) <
		    0)
			return dw.dwarf_getscopes_die(origin, out);
		i = (uint32_t)sc->nocus;
		sc->ocus[i] = (struct origin_cu){.addr = cu.addr};
		if (ht__hindex_insert_kept(&sc->ocu_tab, h, i) < 0)
			return dw.dwarf_getscopes_die(origin, out);
		sc->nocus++;
		origin_cu_build(&sc->ocus[i], &cu);
	}
	struct origin_cu *oc = &sc->ocus[i];
	if (!oc->usable)
		return dw.dwarf_getscopes_die(origin, out);
	uint32_t k = ptr_find(&oc->sub_tab, origin->addr, oc->sub, 0, sizeof(*oc->sub));
	if (k == UINT32_MAX)
		return 0;
	int n = 1;
	for (uint32_t p = oc->sub_parent[k]; p != UINT32_MAX; p = oc->scope_parent[p])
		n++;
	Dwarf_Die *v = malloc((size_t)n * sizeof(*v));
	if (!v)
		return dw.dwarf_getscopes_die(origin, out);
	v[0] = *origin;
	n = 1;
	for (uint32_t p = oc->sub_parent[k]; p != UINT32_MAX; p = oc->scope_parent[p])
		v[n++] = oc->scopes[p];
	*out = v;
	return n;
}

/* The scopes containing the abstract definition origin, computed once each. */
static const struct origin_ent *origin_get(struct scope_cache *sc, Dwarf_Die *origin)
{
	const void *key = origin->addr;
	uint32_t h = ptr_hash(key);
	uint32_t i = ptr_find(&sc->origin_tab, key, sc->origins, offsetof(struct origin_ent, addr),
			      sizeof(*sc->origins));
	if (i != UINT32_MAX)
		return &sc->origins[i];
	if (ht__grow((void **)&sc->origins, &sc->origins_cap, sc->norigins + 1,
		     sizeof(*sc->origins)) < 0)
		return NULL;
	struct origin_ent *o = &sc->origins[sc->norigins];
	*o = (struct origin_ent){.addr = key};
	o->n = origin_scopes(sc, origin, &o->scopes);
	if (o->n <= 0)
		o->scopes = NULL;
	if (ht__hindex_insert_kept(&sc->origin_tab, h, (uint32_t)sc->norigins) < 0) {
		free(o->scopes);
		return NULL;
	}
	return &sc->origins[sc->norigins++];
}

static void scope_cache_free(struct scope_cache *sc)
{
	for (size_t i = 0; i < sc->ncus; i++) {
		free(sc->cus[i].children);
		free(sc->cus[i].r);
		free(sc->cus[i].maxhi);
	}
	for (size_t i = 0; i < sc->norigins; i++)
		free(sc->origins[i].scopes);
	for (size_t i = 0; i < sc->nocus; i++)
		origin_cu_free(&sc->ocus[i]);
	free(sc->cus);
	free(sc->origins);
	free(sc->ocus);
	ht__hindex_release(&sc->ocu_tab);
	ht__hindex_release(&sc->cu_tab);
	ht__hindex_release(&sc->origin_tab);
	*sc = (struct scope_cache){.cus = NULL};
}

/*
 * What dwarf_getscopes(cu, pc) returns, into *out (count, like its result):
 * either in scratch (which must hold MAX_SCOPES * 2 DIEs; *owned is NULL) or
 * in memory of dwarf_getscopes (*owned, to free).
 */
static int get_scopes(struct scope_cache *sc, Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *scratch,
		      Dwarf_Die **out, Dwarf_Die **owned)
{
	*owned = NULL;
	*out = NULL;
	struct cu_index *ci = cu_index_get(sc, cu);
	if (!ci || !ci->usable)
		goto slow;
	long top = cu_index_find(ci, pc);
	if (top < 0)
		return 0; /* no top-level DIE holds pc: nothing does */
	Dwarf_Die *s = &ci->children[top];
	if (dw.dwarf_tag(s) != DW_TAG_subprogram)
		goto slow;
	struct chain ch;
	ch.die[0] = *s;
	ch.innermost = 0;
	ch.inlined = 0;
	if (dw.dwarf_haschildren(s) != 0 && chain_walk(s, pc, &ch, 1) < 0)
		goto slow;
	int n = 0;
	if (!ch.inlined) {
		/* The chain out to the subprogram, then the CU. */
		for (unsigned d = ch.innermost + 1; d-- > 0;)
			scratch[n++] = ch.die[d];
		scratch[n++] = *cu;
		*out = scratch;
		return n;
	}
	/* Out to the innermost inlined instance, then the scopes around the
	   abstract definition of its function. */
	for (unsigned d = ch.innermost + 1; d-- > ch.inlined;)
		scratch[n++] = ch.die[d];
	Dwarf_Attribute a;
	Dwarf_Die origin;
	if (!dw.dwarf_formref_die(dw.dwarf_attr(&ch.die[ch.inlined], DW_AT_abstract_origin, &a),
				  &origin))
		return -1;
	const struct origin_ent *o = origin_get(sc, &origin);
	if (!o)
		goto slow;
	if (o->n <= 0)
		return o->n;
	if (n + o->n - 1 > MAX_SCOPES * 2)
		goto slow;
	for (int i = 1; i < o->n; i++)
		scratch[n++] = o->scopes[i];
	*out = scratch;
	return n;
slow:
	n = dw.dwarf_getscopes(cu, pc, owned);
	*out = *owned;
	return n;
}

/*
 * The logical frames at pc (a Dwfl address), innermost first: each inlined
 * function at the place it is executing, then the function it was inlined
 * into at the call site, out to the real function. Returns how many.
 */
static uint32_t resolve(Dwfl_Module *mod, const struct symtab *st, struct scope_cache *sc,
			Dwarf_Addr pc, struct ht__symbol *out, struct names *nm)
{
	const char *symname = symtab_find(st, pc);
	const char *file = NULL;
	int line = 0;
	Dwfl_Line *dl = dw.dwfl_module_getsrc(mod, pc);
	if (dl)
		file = dw.dwfl_lineinfo(dl, NULL, &line, NULL, NULL, NULL);

	uint32_t n = 0;
	const char *outer = NULL;
	Dwarf_Addr dwbias;
	Dwarf_Die *cu = dw.dwfl_module_addrdie(mod, pc, &dwbias);
	if (cu) {
		Dwarf_Die scratch[MAX_SCOPES * 2];
		Dwarf_Die *scopes, *owned;
		int ns = get_scopes(sc, cu, pc - dwbias, scratch, &scopes, &owned);
		Dwarf_Files *files = NULL;
		size_t nfiles = 0;
		if (dw.dwarf_getsrcfiles(cu, &files, &nfiles) != 0)
			files = NULL;
		for (int i = 0; i < ns && n < MAX_INLINE; i++) {
			int tag = dw.dwarf_tag(&scopes[i]);
			if (tag == DW_TAG_subprogram) {
				outer = die_name(nm, &scopes[i]);
				break;
			}
			if (tag != DW_TAG_inlined_subroutine)
				continue;
			out[n++] = (struct ht__symbol){die_name(nm, &scopes[i]), file,
						       (uint32_t)(line > 0 ? line : 0)};
			/* The caller's position is where this one was inlined. */
			Dwarf_Attribute a;
			Dwarf_Word w;
			file = NULL;
			line = 0;
			if (files &&
			    dw.dwarf_formudata(dw.dwarf_attr(&scopes[i], DW_AT_call_file, &a),
					       &w) == 0 &&
			    w < nfiles)
				file = dw.dwarf_filesrc(files, w, NULL, NULL);
			if (dw.dwarf_formudata(dw.dwarf_attr(&scopes[i], DW_AT_call_line, &a),
					       &w) == 0)
				line = (int)w;
		}
		free(owned);
	}
	/* The symbol table names the real function with its full (mangled) name,
	   which demangles to the qualified one; DWARF is the fallback. A
	   dynamic symbol's version ("@@GLIBC_2.34") is not part of the name. */
	const char *at = symname ? strchr(symname, '@') : NULL;
	if (at && at != symname && nm->n < MAX_INLINE + 1) {
		char *plain = strndup(symname, (size_t)(at - symname));
		if (plain) {
			nm->owned[nm->n++] = plain;
			symname = plain;
		}
	}
	const char *fn = symname ? demangle(nm, symname) : outer;
	if (fn || file || n)
		out[n++] = (struct ht__symbol){fn, file, (uint32_t)(line > 0 ? line : 0)};
	return n;
}

int ht__symbolize_frames(struct ht__symbolize_job *job)
{
	job->symbolized = 0;
	job->missing = NULL;
	if (!job->nframes || !job->symbols)
		return 0;
	const struct ht__frame_key *frames = job->frames;
	uint32_t nframes = job->nframes;
	ht__progress_fn progress = job->progress;
	void *ctx = job->progress_ctx;
	/* Group the frames by module: one Dwfl per module file, opened once. */
	uint32_t nm = job->nmods;
	uint32_t *start = calloc(nm + 1, sizeof(*start));
	uint32_t *order = malloc(nframes * sizeof(*order));
	if (!start || !order) {
		free(start);
		free(order);
		return HT_ERR_NOMEM;
	}
	for (uint32_t f = 0; f < nframes; f++)
		if (frames[f].module < nm)
			start[frames[f].module + 1]++;
	for (uint32_t m = 0; m < nm; m++)
		start[m + 1] += start[m];
	uint32_t total = start[nm];
	uint32_t *fill = calloc(nm + 1, sizeof(*fill));
	if (!fill) {
		free(start);
		free(order);
		return HT_ERR_NOMEM;
	}
	for (uint32_t f = 0; f < nframes; f++) {
		uint32_t m = frames[f].module;
		if (m < nm)
			order[start[m] + fill[m]++] = f;
	}
	free(fill);

	int rc = 0;
	uint64_t done = 0;
	for (uint32_t m = 0; m < nm && rc >= 0; m++) {
		if (start[m] == start[m + 1])
			continue;
		/* The module is opened only for frames the symbol cache lacks. */
		struct ht__symcache cache;
		/* A symbol path given now may hold better symbols than the cache
		   remembers: then the cache is neither read nor written. */
		int use_cache = !job->symbol_path || !*job->symbol_path;
		ht__symcache_open(&cache, job->mods[m].build_id,
				  use_cache ? job->mods[m].build_id_len : 0);
		Dwfl *dwfl = NULL;
		Dwfl_Module *mod = NULL;
		bool opened = false;
		GElf_Addr bias = 0;
		struct symtab st = {NULL, 0};
		struct scope_cache sc = {.cus = NULL};
		for (uint32_t i = start[m]; i < start[m + 1] && rc >= 0; i++) {
			uint32_t f = order[i];
			struct ht__symbol syms[MAX_INLINE + 1];
			struct names names = {.n = 0};
			uint64_t rel = frames[f].rel;
			int cached = rel ? ht__symcache_get(&cache, rel, syms, MAX_INLINE + 1) : -1;
			uint32_t n = cached > 0 ? (uint32_t)cached : 0;
			if (cached < 0 && rel) {
				if (!opened) {
					opened = true;
					const char *missing = ht__symbolizer_missing();
					if (missing)
						job->missing = missing;
					else
						mod = open_module(&dwfl, &job->mods[m],
								  job->symbol_path);
					if (mod && !dw.dwfl_module_getelf(mod, &bias))
						mod = NULL;
					if (mod)
						symtab_build(mod, &st);
				}
				/* Return addresses point after the call: look up the call itself.
				 */
				n = mod ? resolve(mod, &st, &sc, rel - 1 + bias, syms, &names) : 0;
				/* Only what the module answered: not opening it is no answer. */
				if (mod)
					ht__symcache_put(&cache, rel, syms, (int)n);
			}
			if (n) {
				if (syms[n - 1].function || n > 1)
					job->symbolized++;
				rc = job->symbols(job->ctx, f, syms, n);
			}
			names_free(&names);
			if (progress && (++done % 256 == 0 || done == total))
				progress(ctx, done, total);
		}
		ht__symcache_close(&cache);
		free(st.v);
		scope_cache_free(&sc);
		if (dwfl)
			dw.dwfl_end(dwfl);
	}
	if (progress && done != total)
		progress(ctx, total, total);
	free(start);
	free(order);
	return rc < 0 ? rc : 0;
}

int ht__symbolize(struct ht__session *s, ht__progress_fn progress, void *ctx)
{
	if (!s->sink || !s->sink->symbols)
		return 0;
	struct ht__symbolize_job job = {
	    .mods = s->mods,
	    .nmods = s->nmods,
	    .frames = s->frames,
	    .nframes = s->nframes,
	    .symbols = s->sink->symbols,
	    .ctx = s->sink_ctx,
	    .progress = progress,
	    .progress_ctx = ctx,
	};
	int rc = ht__symbolize_frames(&job);
	s->stats.frames_symbolized += job.symbolized;
	if (job.missing)
		s->stats.symbols_missing = job.missing;
	if (rc < 0 && !s->sink_err)
		s->sink_err = rc;
	return rc;
}
