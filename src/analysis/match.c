/*
 * match.c - frame lists (cull, require), the match of one frame against a
 * list, culling, the built-in default cull list and the text of a frame.
 * See match.h for the rules.
 */
#include "analysis/match.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/vec.h"

const char *const ht__match_default_list[] = {
    /* heaptrail's own hooks, whatever the library's exact file name. */
    "libheaptrail*!",
    /* The glibc allocation functions and their internal entry points. */
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "__libc_malloc",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_reallocarray",
    "__libc_free",
    "__libc_memalign",
    "__libc_valloc",
    "__libc_pvalloc",
    "__posix_memalign",
    "_int_malloc",
    "_int_realloc",
    "_int_memalign",
    "_mid_memalign",
    "sysmalloc",
    "tcache_init",
    "malloc_hook_ini",
    "realloc_hook_ini",
    "strdup",
    "strndup",
    "__strdup",
    "__strndup",
    /*
     * operator new and new[]: the demangled forms (every overload, through
     * the match without parameter list) and the mangled ones (_Znwm, _Znam,
     * _ZnwmRKSt9nothrow_t, _ZnwmSt11align_val_t, and _Znwj on 32-bit).
     */
    "operator new",
    "operator new[]",
    "_Znw*",
    "_Zna*",
    /*
     * The allocation layers of libstdc++ (std::allocator and the
     * allocator_traits over it; __gnu_cxx::new_allocator, std::__new_allocator
     * since GCC 12) and of Rust's standard library (alloc::alloc, the Global
     * allocator, RawVec's growth; __rust_alloc and friends, the shims to the
     * global allocator), in their legacy and v0 (<Type>::method) forms.
     */
    "std::allocator*",
    "std::__new_allocator*",
    "__gnu_cxx::new_allocator*",
    "alloc::alloc::*",
    "<alloc::alloc::Global*",
    "alloc::raw_vec::*",
    "<alloc::raw_vec::*",
    "__rust_alloc",
    "__rust_alloc_zeroed",
    "__rust_realloc",
    "__rdl_alloc",
    "__rdl_alloc_zeroed",
    "__rdl_realloc",
    /* Mappings. */
    "mmap",
    "mmap64",
    "__mmap",
    "__mmap64",
    "munmap",
    "__munmap",
    "mremap",
    "__mremap",
    "mprotect",
    "__mprotect",
    "brk",
    "__brk",
    "sbrk",
    "__sbrk",
    NULL,
};

void ht__match_list_init(struct ht__match_list *l)
{
	l->items = NULL;
	l->count = 0;
	l->alloc = 0;
}

void ht__match_list_release(struct ht__match_list *l)
{
	for (size_t i = 0; i < l->count; i++) {
		free(l->items[i].module);
		free(l->items[i].symbol);
	}
	free(l->items);
	ht__match_list_init(l);
}

/* A lowercase copy of s[0..n), or NULL when out of memory. */
static char *lower_dup(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (!d)
		return NULL;
	for (size_t i = 0; i < n; i++)
		d[i] = (char)tolower((unsigned char)s[i]);
	d[n] = '\0';
	return d;
}

/* Parses "0x1f30" (hex digits only after 0x) into *out. */
static bool parse_offset(const char *s, uint64_t *out)
{
	if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !s[2])
		return false;
	uint64_t v = 0;
	for (const char *p = s + 2; *p; p++) {
		if (!isxdigit((unsigned char)*p) || v >> 60)
			return false;
		v = v * 16 + (uint64_t)(isdigit((unsigned char)*p)
					    ? *p - '0'
					    : tolower((unsigned char)*p) - 'a' + 10);
	}
	*out = v;
	return true;
}

int ht__match_list_add(struct ht__match_list *l, const char *spec)
{
	if (!spec)
		return HT_ERR_INVALID;
	while (isspace((unsigned char)*spec))
		spec++;
	size_t n = strlen(spec);
	while (n && isspace((unsigned char)spec[n - 1]))
		n--;

	struct ht__match_item it = {0};
	const char *bang = memchr(spec, '!', n);
	const char *sym = spec;
	size_t sym_len = n;
	if (bang) {
		size_t mod_len = (size_t)(bang - spec);
		sym = bang + 1;
		sym_len = n - mod_len - 1;
		if (mod_len && spec[mod_len - 1] == '*') {
			it.module_prefix = true;
			mod_len--;
		}
		/* "*!sym" is the same as "sym": any module. */
		if (mod_len) {
			it.module = lower_dup(spec, mod_len);
			if (!it.module)
				return HT_ERR_NOMEM;
		} else if (!it.module_prefix && !sym_len) {
			return HT_ERR_INVALID;
		}
	}
	if (sym_len && sym[sym_len - 1] == '*') {
		it.symbol_prefix = true;
		sym_len--;
	}
	if (sym_len) {
		it.symbol = lower_dup(sym, sym_len);
		if (!it.symbol) {
			free(it.module);
			return HT_ERR_NOMEM;
		}
		it.symbol_offset = !it.symbol_prefix && parse_offset(it.symbol, &it.offset);
	}
	if (!it.module && !it.symbol) {
		/* "", "*", "*!" and "!" would match everything: surely a mistake. */
		return HT_ERR_INVALID;
	}
	if (ht__grow((void **)&l->items, &l->alloc, l->count + 1, sizeof(*l->items)) < 0) {
		free(it.module);
		free(it.symbol);
		return HT_ERR_NOMEM;
	}
	l->items[l->count++] = it;
	return 0;
}

/* A byte a text file does not hold: NUL and control characters other than white space. */
static bool not_text(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if ((c < 0x20 && !isspace(c)) || c == 0x7f)
			return true;
	}
	return false;
}

int ht__match_list_add_file(struct ht__match_list *l, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		if (errno == ENOENT || errno == ENOTDIR)
			return HT_ERR_NOT_FOUND;
		if (errno == EACCES || errno == EPERM)
			return HT_ERR_PERM;
		return HT_ERR_IO;
	}
	size_t before = l->count;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = 0;
	int why = 0;
	size_t total = 0;
	errno = 0;
	/* Counted as read, so a device or FIFO (/dev/urandom) stops at the limit too. */
	while ((len = getline(&line, &cap, f)) >= 0) {
		total += (size_t)len;
		if (total > HT_MATCH_FILE_MAX) {
			why = EFBIG;
			break;
		}
		if (not_text(line, (size_t)len)) {
			why = EILSEQ;
			break;
		}
		const char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		rc = ht__match_list_add(l, p);
		/* A line like "!" matches nothing sensible; skip it like a blank. */
		if (rc == HT_ERR_INVALID)
			rc = 0;
		if (rc < 0)
			break;
	}
	/* getline() returns -1 at EOF and on error (EISDIR for a directory). */
	int saved = why ? why : errno;
	if (!rc && why)
		rc = HT_ERR_INVALID;
	else if (!rc && ferror(f))
		rc = HT_ERR_IO;
	free(line);
	fclose(f);
	errno = saved;
	if (rc < 0) {
		while (l->count > before) {
			l->count--;
			free(l->items[l->count].module);
			free(l->items[l->count].symbol);
		}
		return rc;
	}
	return (int)(l->count - before);
}

int ht__match_list_add_defaults(struct ht__match_list *l)
{
	for (const char *const *p = ht__match_default_list; *p; p++) {
		int rc = ht__match_list_add(l, *p);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * Length of fn[0..n) without its parameter list and the qualifiers after it:
 * "ns::f(int) const" -> 5 ("ns::f"). Names that do not end in a parameter
 * list keep their whole length.
 */
static size_t base_name_len(const char *fn, size_t n)
{
	size_t end = n;
	/* Skip trailing qualifiers: " const", " volatile", " &", " &&", " noexcept". */
	while (end && fn[end - 1] != ')') {
		char c = fn[end - 1];
		if (!(isalpha((unsigned char)c) || c == ' ' || c == '&'))
			return n;
		end--;
	}
	if (!end)
		return n;
	int depth = 0;
	for (size_t i = end; i-- > 0;) {
		if (fn[i] == ')')
			depth++;
		else if (fn[i] == '(' && --depth == 0)
			return i ? i : n;
	}
	return n;
}

static bool module_matches(const struct ht__match_item *it, const struct ht__match_frame *f)
{
	const char *name = f->module_name ? f->module_name : "?";
	size_t mlen = strlen(it->module);
	if (it->module_prefix)
		return !strncasecmp(name, it->module, mlen) ||
		       (f->module_path && !strncasecmp(f->module_path, it->module, mlen));
	if (!strcasecmp(name, it->module))
		return true;
	if (f->module_path && !strcasecmp(f->module_path, it->module))
		return true;
	/* "libc" for "libc.so.6": the name up to ".so". */
	const char *so = strstr(name, ".so");
	return so && (size_t)(so - name) == mlen && !strncasecmp(name, it->module, mlen);
}

static bool symbol_matches(const struct ht__match_item *it, const struct ht__match_frame *f)
{
	if (it->symbol_offset && f->rel == it->offset)
		return true;
	if (!f->function)
		return false;
	size_t slen = strlen(it->symbol);
	if (it->symbol_prefix)
		return !strncasecmp(f->function, it->symbol, slen);
	if (!strcasecmp(f->function, it->symbol))
		return true;
	/*
	 * Symbols from the dynamic symbol table carry an ELF version
	 * ("malloc@@GLIBC_2.2.5", "pthread_create@GLIBC_2.2.5"); "malloc"
	 * must still match, so the version is not part of the name.
	 */
	const char *at = strchr(f->function, '@');
	size_t n = at && at != f->function ? (size_t)(at - f->function) : strlen(f->function);
	if (strncasecmp(f->function, it->symbol, slen))
		return false;
	return n == slen || base_name_len(f->function, n) == slen;
}

bool ht__match_frame(const struct ht__match_list *l, const struct ht__match_frame *f)
{
	for (size_t i = 0; i < l->count; i++) {
		const struct ht__match_item *it = &l->items[i];
		if (it->module && !module_matches(it, f))
			continue;
		if (it->symbol && !symbol_matches(it, f))
			continue;
		return true;
	}
	return false;
}

uint32_t ht__match_cull_index(const bool *culled, uint32_t n)
{
	uint32_t i = 0;
	while (i < n && culled[i])
		i++;
	return i == n && n ? n - 1 : i;
}

/* Per-frame cache: 0 not tested yet, 1 matches, 2 does not. */
struct ht__frame_matcher {
	const struct ht__match_list *list;
	const struct ht_reader *reader;
	uint8_t *cache;
	size_t cache_len;
};

int ht__frame_matcher_new(struct ht__frame_matcher **out, const struct ht__match_list *l,
			  const struct ht_reader *r)
{
	struct ht__frame_matcher *m = calloc(1, sizeof(*m));
	if (!m)
		return HT_ERR_NOMEM;
	m->list = l;
	m->reader = r;
	*out = m;
	return 0;
}

void ht__frame_matcher_free(struct ht__frame_matcher *m)
{
	if (!m)
		return;
	free(m->cache);
	free(m);
}

void ht__match_frame_from_reader(const struct ht_reader *r, uint32_t frame,
				 struct ht__match_frame *mf)
{
	const struct ht_frame *fr = ht_reader_frame(r, frame);
	memset(mf, 0, sizeof(*mf));
	if (!fr)
		return;
	mf->function = fr->function;
	mf->rel = fr->rel;
	if (fr->module != HT_MODULE_NONE) {
		const struct ht_module *mod = ht_reader_module(r, fr->module);
		if (mod) {
			mf->module_name = mod->name;
			mf->module_path = mod->path;
		}
	}
}

bool ht__frame_matcher_test(struct ht__frame_matcher *m, uint32_t frame)
{
	if (!m->list->count)
		return false;
	if (frame >= m->cache_len) {
		/* Frames of an unfinished trace appear while it is read: grow. */
		size_t want = ht_reader_frame_count(m->reader);
		if (want <= frame)
			want = (size_t)frame + 1;
		(void)ht__grow_zero((void **)&m->cache, &m->cache_len, want, 1); /* else uncached */
	}
	if (frame < m->cache_len && m->cache[frame])
		return m->cache[frame] == 1;
	struct ht__match_frame mf;
	ht__match_frame_from_reader(m->reader, frame, &mf);
	bool hit = ht__match_frame(m->list, &mf);
	if (frame < m->cache_len)
		m->cache[frame] = hit ? 1 : 2;
	return hit;
}

bool ht__frame_matcher_any(struct ht__frame_matcher *m, const uint32_t *frames, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (ht__frame_matcher_test(m, frames[i]))
			return true;
	return false;
}

uint32_t ht__frame_matcher_cull(struct ht__frame_matcher *m, const uint32_t *frames, uint32_t n)
{
	uint32_t i = 0;
	while (i < n && ht__frame_matcher_test(m, frames[i]))
		i++;
	return i == n && n ? n - 1 : i;
}

size_t ht__text_char(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned c = s[0];
	if (c < 0x80)
		return c >= 0x20 && c != 0x7f;
	/* The sequence's length, its smallest code point, and the bits of the
	   lead byte; then every continuation byte (which also stops at NUL). */
	size_t n;
	unsigned cp, min;
	if ((c & 0xe0) == 0xc0)
		n = 2, cp = c & 0x1f, min = 0x80;
	else if ((c & 0xf0) == 0xe0)
		n = 3, cp = c & 0x0f, min = 0x800;
	else if ((c & 0xf8) == 0xf0)
		n = 4, cp = c & 0x07, min = 0x10000;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, UTF-16 surrogates, past U+10FFFF, and the C1
	   controls (U+0080..U+009F: a terminal may obey U+009B as CSI). */
	if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff || cp < 0xa0)
		return 0;
	return n;
}

void ht__fput_text(FILE *f, const char *s, const char *underscore)
{
	while (s && *s) {
		size_t n = 0; /* the run of plain ASCII, in one write */
		while ((unsigned char)s[n] >= 0x20 && (unsigned char)s[n] < 0x7f &&
		       !(underscore && strchr(underscore, s[n])))
			n++;
		if (n) {
			fwrite(s, 1, n, f);
			s += n;
			continue;
		}
		size_t k = ht__text_char(s);
		if (!k)
			fprintf(f, "\\x%02x", (unsigned char)*s);
		else if (underscore && strchr(underscore, *s))
			fputc('_', f);
		else
			fwrite(s, 1, k, f);
		s += k ? k : 1;
	}
}

/* Bytes of s that text output shows as \xHH. */
static size_t count_escaped(const char *s)
{
	size_t n = 0;
	if (!s)
		return 0;
	while ((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f)
		s++; /* printable ASCII, all of most names: ht__text_char() takes it */
	while (*s) {
		size_t k = ht__text_char(s);
		n += !k;
		s += k ? k : 1;
	}
	return n;
}

void ht__escape_control(char *buf, size_t len)
{
	size_t n = strlen(buf);
	char tmp[n + 1];
	memcpy(tmp, buf, n + 1);
	size_t o = 0;
	for (size_t i = 0; i < n && o + 1 < len;) {
		size_t k = ht__text_char(tmp + i);
		if (k) {
			if (o + k >= len)
				break;
			memcpy(buf + o, tmp + i, k);
			o += k;
			i += k;
		} else if (o + 4 < len) {
			snprintf(buf + o, 5, "\\x%02x", (unsigned char)tmp[i]);
			o += 4;
			i++;
		} else {
			break;
		}
	}
	buf[o] = 0;
}

int ht__frame_text(const struct ht_reader *r, uint32_t frame, bool symbols, char *buf, size_t len)
{
	struct ht__match_frame mf;
	ht__match_frame_from_reader(r, frame, &mf);
	const char *mod = mf.module_name ? mf.module_name : "?";
	const char *fn = symbols ? mf.function : NULL;
	/* snprintf()'s "%s!%s" or "%s!0x%" PRIx64 by hand: clang++'s 9 thousand
	   frame texts, of long C++ names, took 1100 instructions each in it. */
	char hex[19];
	size_t hn = 0;
	if (!fn) {
		uint64_t v = mf.rel;
		char rev[16];
		do
			rev[hn++] = "0123456789abcdef"[v & 15];
		while (v >>= 4);
		hex[0] = '0';
		hex[1] = 'x';
		for (size_t i = 0; i < hn; i++)
			hex[2 + i] = rev[hn - 1 - i];
		hn += 2;
		hex[hn] = 0;
		fn = hex;
	}
	size_t ml = strlen(mod), fl = fn == hex ? hn : strlen(fn);
	int n = (int)(ml + 1 + fl);
	if (len) {
		size_t o = ml < len - 1 ? ml : len - 1;
		memcpy(buf, mod, o);
		if (o < len - 1)
			buf[o++] = '!';
		size_t k = fl < len - 1 - o ? fl : len - 1 - o;
		memcpy(buf + o, fn, k);
		buf[o + k] = 0;
	}
	if (fn == hex)
		fn = NULL;
	size_t bad = count_escaped(mod) + count_escaped(fn);
	if (n < 0 || !bad)
		return n;
	if (len)
		ht__escape_control(buf, len);
	return n + 3 * (int)bad;
}
