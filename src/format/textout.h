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
