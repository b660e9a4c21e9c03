/*
 * textout.h - output without a printf per field: decimal numbers, padded
 * columns and strings written straight into a stdio stream's buffer
 * (unlocked: every writer of the tree writes a stream from one thread).
 * Each function writes exactly what the printf conversion it names writes;
 * on outputs of millions of lines (analyze's stacks, the tables, CSV and
 * JSON) printf's format parsing was a fifth of the time.
 */
#ifndef HT_FORMAT_TEXTOUT_H
#define HT_FORMAT_TEXTOUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* fputs(s, f) */
void ht__out_str(FILE *f, const char *s);

/* fwrite(p, 1, n, f) */
void ht__out_mem(FILE *f, const void *p, size_t n);

/*
 * ht__out_mem() for bytes s[0 .. n) with HT__OUT_SLACK more readable past
 * them, inline and without a call when the stream's buffer has room for
 * n + HT__OUT_SLACK (glibc's FILE: its free part is _IO_write_ptr to
 * _IO_write_end, as textout.c's put() uses it): copied 32 bytes at a time,
 * up to 31 past n read and written. analyze's frame lines: a memcpy and a
 * call a line were about 40 instructions of clang++'s 700 thousand lines.
 */
#define HT__OUT_SLACK 32
static inline void ht__out_mem_slack(FILE *f, const char *s, size_t n)
{
	if ((size_t)(f->_IO_write_end - f->_IO_write_ptr) >= n + HT__OUT_SLACK) {
		char *d = f->_IO_write_ptr;
		for (size_t i = 0; i < n; i += 32) {
			__builtin_memcpy(d + i, s + i, 16);
			__builtin_memcpy(d + i + 16, s + i + 16, 16);
		}
		f->_IO_write_ptr += n;
	} else {
		ht__out_mem(f, s, n);
	}
}

/* fputc(c, f) */
void ht__out_chr(FILE *f, char c);

/*
 * Widths are printf's: right-aligned in width, left-aligned in -width
 * (0: no padding).
 */

/* fprintf(f, "%*s", width, s) */
void ht__out_pad(FILE *f, const char *s, int width);

/* fprintf(f, "%*" PRIx64, width, v) */
void ht__out_x64(FILE *f, uint64_t v, int width);

/* fprintf(f, "%*" PRIu64, width, v) */
void ht__out_u64(FILE *f, uint64_t v, int width);

/* fprintf(f, "%*" PRIu32 / "%*" PRId64, width, v) */
void ht__out_i64(FILE *f, int64_t v, int width);

/* fprintf(f, "%*.1f", width, (double)bytes / 1024.0): KiB with one decimal. */
void ht__out_kib(FILE *f, uint64_t bytes, int width);

#endif
