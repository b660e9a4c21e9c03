/*
 * symbolize.c - at the end of a session, every physical frame (module +
 * address) becomes module!function file:line, with the functions inlined at
 * that address, through elfutils libdw. Symbols go into the trace so that it
 * can be analysed on any machine.
 */
#define _GNU_SOURCE
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session/internal.h"

/*
 * C++ names are demangled with the C++ runtime's own demangler: libstdc++ is
 * present wherever C++ programs run, so this needs no extra package (the
 * alternative, libiberty, is a static-only build dependency).
 */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

#define MAX_INLINE 16

/* Offline: the modules are files on disk, not a live process. Debug info is
   looked up next to the file and by build-id under /usr/lib/debug. */
static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

struct names {
	char *owned[MAX_INLINE + 2];
	uint32_t n;
};

/* name, demangled when it is a C++ symbol; the result lives until names_free. */
static const char *demangle(struct names *nm, const char *name)
{
	if (!name || name[0] != '_' || name[1] != 'Z' || nm->n >= MAX_INLINE + 2)
		return name;
	int status = 0;
	char *d = __cxa_demangle(name, NULL, NULL, &status);
	if (!d || status != 0) {
		free(d);
		return name;
	}
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
	const char *ln = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
	if (!ln)
		ln = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
	if (ln)
		return demangle(nm, ln);
	return dwarf_diename(die);
}

static bool same_build_id(Dwfl_Module *mod, const struct ht__module_ent *m)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	if (!m->build_id_len)
		return true;
	int n = dwfl_module_build_id(mod, &bits, &vaddr);
	return n == m->build_id_len && !memcmp(bits, m->build_id, (size_t)n);
}

static Dwfl_Module *report(Dwfl **dwfl, const char *path)
{
	*dwfl = dwfl_begin(&offline_callbacks);
	if (!*dwfl)
		return NULL;
	const char *base = strrchr(path, '/');
	Dwfl_Module *mod = dwfl_report_offline(*dwfl, base ? base + 1 : path, path, -1);
	dwfl_report_end(*dwfl, NULL, NULL);
	if (!mod) {
		dwfl_end(*dwfl);
		*dwfl = NULL;
	}
	return mod;
}

/*
 * The module's file as it was recorded: the path itself when its build-id
 * still matches, else the debug file of that build-id (the library was
 * upgraded since, but its debug symbols may be installed).
 */
static Dwfl_Module *open_module(Dwfl **dwfl, const struct ht__module_ent *m)
{
	*dwfl = NULL;
	if (m->path[0] == '/' && access(m->path, R_OK) == 0) {
		Dwfl_Module *mod = report(dwfl, m->path);
		if (mod && same_build_id(mod, m))
			return mod;
		if (*dwfl)
			dwfl_end(*dwfl);
		*dwfl = NULL;
	}
	if (m->build_id_len < 2)
		return NULL;
	char path[128];
	int n = snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%02x/", m->build_id[0]);
	for (uint32_t i = 1; i < m->build_id_len && n < (int)sizeof(path) - 8; i++)
		n += snprintf(path + n, sizeof(path) - (size_t)n, "%02x", m->build_id[i]);
	snprintf(path + n, sizeof(path) - (size_t)n, ".debug");
	if (access(path, R_OK) != 0)
		return NULL;
	return report(dwfl, path);
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
	int rank;         /* GLOBAL 0, WEAK 1, LOCAL 2: aliases prefer the lower */
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
	int n = dwfl_module_getsymtab(mod);
	if (n <= 1 || !(st->v = malloc((size_t)n * sizeof(*st->v))))
		return;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
		if (!name || !*name || sym.st_shndx == SHN_UNDEF || shndx == (GElf_Word)-1 ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		st->v[st->n++] = (struct sym_ent){ addr, sym.st_size, name,
						   bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2 };
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
 * The logical frames at pc (a Dwfl address), innermost first: each inlined
 * function at the place it is executing, then the function it was inlined
 * into at the call site, out to the real function. Returns how many.
 */
static uint32_t resolve(Dwfl_Module *mod, const struct symtab *st, Dwarf_Addr pc,
			struct ht__symbol *out, struct names *nm)
{
	const char *symname = symtab_find(st, pc);
	const char *file = NULL;
	int line = 0;
	Dwfl_Line *dl = dwfl_module_getsrc(mod, pc);
	if (dl)
		file = dwfl_lineinfo(dl, NULL, &line, NULL, NULL, NULL);

	uint32_t n = 0;
	const char *outer = NULL;
	Dwarf_Addr dwbias;
	Dwarf_Die *cu = dwfl_module_addrdie(mod, pc, &dwbias);
	if (cu) {
		Dwarf_Die *scopes = NULL;
		int ns = dwarf_getscopes(cu, pc - dwbias, &scopes);
		Dwarf_Files *files = NULL;
		size_t nfiles = 0;
		if (dwarf_getsrcfiles(cu, &files, &nfiles) != 0)
			files = NULL;
		for (int i = 0; i < ns && n < MAX_INLINE; i++) {
			int tag = dwarf_tag(&scopes[i]);
			if (tag == DW_TAG_subprogram) {
				outer = die_name(nm, &scopes[i]);
				break;
			}
			if (tag != DW_TAG_inlined_subroutine)
				continue;
			out[n++] = (struct ht__symbol){ die_name(nm, &scopes[i]), file,
							(uint32_t)(line > 0 ? line : 0) };
			/* The caller's position is where this one was inlined. */
			Dwarf_Attribute a;
			Dwarf_Word w;
			file = NULL;
			line = 0;
			if (files && dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &a), &w) == 0 &&
			    w < nfiles)
				file = dwarf_filesrc(files, w, NULL, NULL);
			if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &a), &w) == 0)
				line = (int)w;
		}
		free(scopes);
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
		out[n++] = (struct ht__symbol){ fn, file, (uint32_t)(line > 0 ? line : 0) };
	return n;
}

int ht__symbolize(struct ht__session *s, ht__progress_fn progress, void *ctx)
{
	if (!s->nframes || !s->sink || !s->sink->symbols)
		return 0;
	/* Group the frames by module: one Dwfl per module file, opened once. */
	uint32_t nm = s->nmods;
	uint32_t *start = calloc(nm + 1, sizeof(*start));
	uint32_t *order = malloc(s->nframes * sizeof(*order));
	if (!start || !order) {
		free(start);
		free(order);
		return HT_ERR_NOMEM;
	}
	for (uint32_t f = 0; f < s->nframes; f++)
		if (s->frames[f].module < nm)
			start[s->frames[f].module + 1]++;
	for (uint32_t m = 0; m < nm; m++)
		start[m + 1] += start[m];
	uint32_t total = start[nm];
	uint32_t *fill = calloc(nm + 1, sizeof(*fill));
	if (!fill) {
		free(start);
		free(order);
		return HT_ERR_NOMEM;
	}
	for (uint32_t f = 0; f < s->nframes; f++) {
		uint32_t m = s->frames[f].module;
		if (m < nm)
			order[start[m] + fill[m]++] = f;
	}
	free(fill);

	int rc = 0;
	uint64_t done = 0;
	for (uint32_t m = 0; m < nm && rc >= 0; m++) {
		if (start[m] == start[m + 1])
			continue;
		Dwfl *dwfl;
		Dwfl_Module *mod = open_module(&dwfl, &s->mods[m]);
		GElf_Addr bias = 0;
		if (mod && !dwfl_module_getelf(mod, &bias))
			mod = NULL;
		struct symtab st = { NULL, 0 };
		if (mod)
			symtab_build(mod, &st);
		for (uint32_t i = start[m]; i < start[m + 1] && rc >= 0; i++) {
			uint32_t f = order[i];
			struct ht__symbol syms[MAX_INLINE + 1];
			struct names names = { .n = 0 };
			/* Return addresses point after the call: look up the call itself. */
			uint64_t rel = s->frames[f].rel;
			uint32_t n = mod && rel ? resolve(mod, &st, rel - 1 + bias, syms, &names) : 0;
			if (n) {
				if (syms[n - 1].function || n > 1)
					s->stats.frames_symbolized++;
				rc = s->sink->symbols(s->sink_ctx, f, syms, n);
			}
			names_free(&names);
			if (progress && (++done % 256 == 0 || done == total))
				progress(ctx, done, total);
		}
		free(st.v);
		if (dwfl)
			dwfl_end(dwfl);
	}
	if (progress && done != total)
		progress(ctx, total, total);
	free(start);
	free(order);
	if (rc < 0 && !s->sink_err)
		s->sink_err = rc;
	return rc < 0 ? rc : 0;
}
