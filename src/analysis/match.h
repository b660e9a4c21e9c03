/*
 * match.h - frame matching for every analysis front end: the frame lists of
 * -cullFrames, -cullLists and -requireFrames (with heaptrail's built-in
 * default cull list), the test of one frame against a list, culling of a
 * stack, and the text of a frame ("module!function" or "module!0xOFFSET").
 *
 * A list item is written in one of three forms, case-insensitive:
 *
 *     module!          any frame of that module
 *     module!symbol    that symbol in that module
 *     symbol           that symbol in any module
 *
 * A module matches by its file name ("libc.so.6"), its full path
 * ("/usr/lib/x86_64-linux-gnu/libc.so.6") or its name up to ".so" ("libc").
 * A symbol matches the demangled function name, or that name without its
 * parameter list, so "operator new" matches "operator new(unsigned long)",
 * "ns::f" matches "ns::f(int) const" and "Cmp::operator()" matches
 * "Cmp::operator()(int, int) const"; an ELF symbol version is ignored, so
 * "malloc" matches "malloc@@GLIBC_2.2.5". A
 * trailing '*' on the module or the symbol matches any name that starts with
 * the text before it ("std::vector*"). A symbol "0x1f30" matches a frame at
 * that offset in its module, with or without a symbol.
 *
 * Culling (as the xperf heap actions): the longest prefix of the stack, from
 * the allocation end (innermost frame), whose every frame matches some item is
 * removed; when that prefix is the whole stack only the bottom (outermost)
 * frame is kept.
 *
 * Example:
 *
 *     struct ht__match_list cull = HT_MATCH_LIST_INIT;
 *     ht__match_list_add_defaults(&cull);
 *     ht__match_list_add(&cull, "libfoo.so!pool_alloc");
 *     struct ht__frame_matcher *m;
 *     ht__frame_matcher_new(&m, &cull, reader);
 *     n = ht_reader_stack(reader, stack_id, &frames);
 *     first = ht__frame_matcher_cull(m, frames, n);   // frames[first..n) remain
 *     ht__frame_matcher_free(m);
 *     ht__match_list_release(&cull);
 *
 * Ownership: a list owns copies of its items. A matcher keeps pointers to its
 * list and reader, which must outlive it. Not thread-safe: one matcher per
 * thread (lists may be shared read-only once built).
 */
#ifndef HT_ANALYSIS_MATCH_H
#define HT_ANALYSIS_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "heaptrail/trace.h"

/* One parsed item. */
struct ht__match_item {
	char *module;	    /* NULL: any module; lowercase */
	char *symbol;	    /* NULL: any symbol of the module; lowercase */
	bool module_prefix; /* module ended with '*' (module holds the text before it) */
	bool symbol_prefix; /* symbol ended with '*' */
	bool symbol_offset; /* symbol is "0x…": matches by offset */
	uint64_t offset;    /* valid with symbol_offset */
};

struct ht__match_list {
	struct ht__match_item *items;
	size_t count;
	size_t alloc;
};

#define HT_MATCH_LIST_INIT                                                                         \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}

void ht__match_list_init(struct ht__match_list *l);
/* Frees the items; the list is empty and reusable afterwards. */
void ht__match_list_release(struct ht__match_list *l);

/*
 * Add one item ("module!", "module!symbol" or "symbol"); surrounding blanks are
 * ignored. Returns 0, HT_ERR_INVALID for an empty item ("", "!", "*!") or
 * HT_ERR_NOMEM.
 */
int ht__match_list_add(struct ht__match_list *l, const char *spec);

/*
 * Add the items of a cull list file: one item per line; blank lines and lines
 * whose first non-blank character is '#' are ignored. Returns the number of
 * items added (>= 0), or HT_ERR_NOT_FOUND / HT_ERR_PERM / HT_ERR_IO when the
 * file cannot be read (errno says why, EISDIR for a directory), HT_ERR_NOMEM,
 * or HT_ERR_INVALID when it is no cull list: errno EILSEQ for a file that is
 * not text (a NUL or control byte), EFBIG for one larger than
 * HT_MATCH_FILE_MAX (a device like /dev/urandom stops there too).
 * Lines that hold no item ("!") are skipped. On error nothing of the
 * file has been added.
 */
int ht__match_list_add_file(struct ht__match_list *l, const char *path);
#define HT_MATCH_FILE_MAX (16u << 20)

/*
 * The built-in default cull list, NULL-terminated: heaptrail's own frames, the
 * glibc allocation functions, operator new / new[] in their mangled and
 * demangled forms, and mmap and friends.
 */
extern const char *const ht__match_default_list[];

/* Add every item of ht__match_default_list. Returns 0 or HT_ERR_NOMEM. */
int ht__match_list_add_defaults(struct ht__match_list *l);

/* What the matcher sees of one frame. */
struct ht__match_frame {
	const char *module_name; /* file name; NULL when the frame has no module */
	const char *module_path; /* NULL when none */
	const char *function;	 /* demangled; NULL when no symbol */
	uint64_t rel;		 /* offset in the module */
};

/* True when f matches at least one item of l (false for an empty list). */
bool ht__match_frame(const struct ht__match_list *l, const struct ht__match_frame *f);

/*
 * Index of the first frame kept after culling frames[0..n) (innermost first)
 * where culled[i] says whether frame i matches the cull list: the length of
 * the matching prefix, or n - 1 when every frame matches. 0 when n is 0.
 */
uint32_t ht__match_cull_index(const bool *culled, uint32_t n);

/*
 * A list bound to a reader, caching the result per frame id so that each
 * distinct frame is tested once however many stacks hold it.
 */
struct ht__frame_matcher;

/* Returns 0, HT_ERR_NOMEM. */
int ht__frame_matcher_new(struct ht__frame_matcher **out, const struct ht__match_list *l,
			  const struct ht_reader *r);
void ht__frame_matcher_free(struct ht__frame_matcher *m);

/* Whether frame id (a logical frame of the reader) matches the list. */
bool ht__frame_matcher_test(struct ht__frame_matcher *m, uint32_t frame);

/* Whether any of frames[0..n) matches (the -requireFrames test). */
bool ht__frame_matcher_any(struct ht__frame_matcher *m, const uint32_t *frames, uint32_t n);

/*
 * Culling of frames[0..n) (innermost first): the index of the first frame that
 * remains, as ht__match_cull_index().
 */
uint32_t ht__frame_matcher_cull(struct ht__frame_matcher *m, const uint32_t *frames, uint32_t n);

/* Fill *mf from the reader's frame id (module "?" handling is up to callers). */
void ht__match_frame_from_reader(const struct ht_reader *r, uint32_t frame,
				 struct ht__match_frame *mf);

/*
 * The text of a frame, as every output prints it: "module!function" with
 * symbols (when the frame has one), otherwise "module!0xOFFSET"; module is the
 * file name, "?" for an address in no known module (then the offset is the
 * raw address). Control bytes are written as \xHH. Writes at most len bytes
 * including the NUL (truncating) and returns the length the full text has,
 * as snprintf.
 */
int ht__frame_text(const struct ht_reader *r, uint32_t frame, bool symbols, char *buf, size_t len);

/*
 * Rewrites the control bytes and the bytes that are not UTF-8 of buf (a C
 * string in a buffer of len bytes) as \xHH, as far as they fit: a module
 * path, a symbol or a heap name read from a trace must not move a
 * terminal's cursor or break a CSV row.
 */
void ht__escape_control(char *buf, size_t len);
/*
 * The one rule of every text output (text, CSV, JSON, SVG, the report): how
 * many bytes at s form one character that may be written as it is, a whole
 * valid UTF-8 sequence that is no control character (C0, DEL, C1); 0 when
 * the byte at s must be escaped, each output its own way (text and CSV
 * \xHH, JSON \u00HH, SVG the text \xHH). 0 at the terminating NUL.
 */
size_t ht__text_char(const char *s);
/* Writes s as text output does: refused bytes as \xHH, and each character
   of underscore (NULL: none) as '_' (a format's own separators). */
void ht__fput_text(FILE *f, const char *s, const char *underscore);

#endif
