/*
 * textout.c - the number and string writers of textout.h.
 */
#define _GNU_SOURCE /* fwrite_unlocked */
#include "format/textout.h"

#include <string.h>

/* The digits of v, ending at end; returns where they start. */
static char *digits(char *end, uint64_t v)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return end;
}

/*
 * Bytes go straight into the stream's buffer when they fit, as putc_unlocked
 * does for one (glibc's FILE keeps the free part of its buffer between
 * _IO_write_ptr and _IO_write_end; a line-buffered or unbuffered stream has
 * none, so it always takes the call): fwrite_unlocked cost about a hundred
 * instructions a call, for fields of a few bytes.
 */
static inline void put(FILE *f, const char *s, size_t n)
{
	if (!n)
		return; /* (a stream not written yet has no buffer at all) */
	if ((size_t)(f->_IO_write_end - f->_IO_write_ptr) >= n) {
		memcpy(f->_IO_write_ptr, s, n);
		f->_IO_write_ptr += n;
	} else {
		fwrite_unlocked(s, 1, n, f);
	}
}

/* n spaces (a table's columns pad tens of them a row) */
static void spaces(FILE *f, size_t n)
{
	if (!n)
		return;
	if ((size_t)(f->_IO_write_end - f->_IO_write_ptr) >= n) {
		memset(f->_IO_write_ptr, ' ', n);
		f->_IO_write_ptr += n;
		return;
	}
	for (; n; n--)
		putc_unlocked(' ', f);
}

/* s[0 .. len) padded to |width| with spaces, on the left (width > 0) or
   the right (width < 0), as printf's "%*s". */
static void pad_write(FILE *f, const char *s, size_t len, int width)
{
	int left = width < 0;
	size_t w = left ? (size_t)(0 - (int64_t)width) : (size_t)width;
	size_t pad = w > len ? w - len : 0;
	if (!left)
		spaces(f, pad);
	put(f, s, len);
	if (left)
		spaces(f, pad);
}

void ht__out_str(FILE *f, const char *s)
{
	put(f, s, strlen(s));
}

void ht__out_mem(FILE *f, const void *p, size_t n)
{
	put(f, p, n);
}

void ht__out_pad(FILE *f, const char *s, int width)
{
	pad_write(f, s, strlen(s), width);
}

void ht__out_x64(FILE *f, uint64_t v, int width)
{
	char b[24];
	char *p = b + sizeof(b);
	do {
		*--p = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	pad_write(f, p, (size_t)(b + sizeof(b) - p), width);
}

void ht__out_chr(FILE *f, char c)
{
	putc_unlocked(c, f);
}

void ht__out_u64(FILE *f, uint64_t v, int width)
{
	char b[24];
	char *p = digits(b + sizeof(b), v);
	pad_write(f, p, (size_t)(b + sizeof(b) - p), width);
}

void ht__out_i64(FILE *f, int64_t v, int width)
{
	char b[24];
	char *p = digits(b + sizeof(b), v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
	if (v < 0)
		*--p = '-';
	pad_write(f, p, (size_t)(b + sizeof(b) - p), width);
}

void ht__out_kib(FILE *f, uint64_t bytes, int width)
{
	/* Past 2^53 the double printf sees is rounded already: let it say so. */
	if (bytes >= (1ull << 53)) {
		fprintf(f, "%*.1f", width, (double)bytes / 1024.0);
		return;
	}
	/* Tenths of a KiB: bytes * 10 / 1024, rounded to nearest, a tie to the
	   even one (as printf rounds the exact binary value bytes / 1024). */
	uint64_t t = bytes * 5, q = t >> 9, r = t & 511;
	if (r > 256 || (r == 256 && (q & 1)))
		q++;
	char b[32];
	char *p = b + sizeof(b);
	*--p = (char)('0' + q % 10);
	*--p = '.';
	p = digits(p, q / 10);
	pad_write(f, p, (size_t)(b + sizeof(b) - p), width);
}
