/*
 * table_util.c - units, sizes, windows and the shared options of the table
 * and timeline commands (see table_util.h).
 */
#include "cli/table_util.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"
#include "cli/query_opts.h"

/* The normalized arguments and the strings made for them, freed by tu_args_release(). */
static char **norm_args;
static char **norm_made;
static int norm_nmade;

char **tu_normalize_args(int argc, char **argv, int *out_argc)
{
	tu_args_release();
	norm_args = calloc((size_t)argc * 2 + 1, sizeof(*norm_args));
	norm_made = calloc((size_t)argc + 1, sizeof(*norm_made));
	if (!norm_args || !norm_made)
		die("out of memory");
	int n = 0;
	for (int i = 0; i < argc; i++) {
		char *a = argv[i];
		bool xperf = !strcmp(a, "-cullFrames") || !strcmp(a, "-cullLists") ||
			     !strcmp(a, "-requireFrames");
		if (i > 0 && a[0] == '-' && a[1] != '-' && isalpha((unsigned char)a[1]) && a[2] &&
		    !xperf) {
			char *l = malloc(strlen(a) + 2);
			if (!l)
				die("out of memory");
			l[0] = '-';
			strcpy(l + 1, a);
			norm_made[norm_nmade++] = l;
			a = l;
		}
		char *eq = a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
		if (i > 0 && eq) {
			/* "--name=value" becomes "--name" and "value", cut in a copy we own. */
			size_t at = (size_t)(eq - a);
			char *name = strdup(a);
			if (!name)
				die("out of memory");
			if (a != argv[i]) {
				free(a); /* the "-name=value" copy made above */
				norm_made[norm_nmade - 1] = name;
			} else {
				norm_made[norm_nmade++] = name;
			}
			name[at] = 0;
			norm_args[n++] = name;
			norm_args[n++] = name + at + 1;
		} else {
			norm_args[n++] = a;
		}
	}
	*out_argc = n;
	return norm_args;
}

void tu_args_release(void)
{
	for (int i = 0; i < norm_nmade; i++)
		free(norm_made[i]);
	free(norm_made);
	free(norm_args);
	norm_made = NULL;
	norm_args = NULL;
	norm_nmade = 0;
}

int tu_parse_unit(const char *s, struct tu_unit *out)
{
	static const struct tu_unit units[] = {
	    {"s", 1000000000ull, 6, 9},
	    {"ms", 1000000ull, 3, 6},
	    {"us", 1000ull, 1, 3},
	    {"ns", 1ull, 0, 0},
	};
	for (size_t i = 0; s && i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(s, units[i].name)) {
			*out = units[i];
			return 0;
		}
	return -1;
}

/* The decimal digits of v at p; returns their end. */
static char *put_u64(char *p, uint64_t v)
{
	char b[24], *d = b + sizeof(b);
	do {
		*--d = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	size_t n = (size_t)(b + sizeof(b) - d);
	memcpy(p, d, n);
	return p + n;
}

/* s[0 .. n) into buf as snprintf(buf, len, "%s", s) would (the tables make
   millions of these: printf's parsing was most of their cost). */
static void put_buf(char *buf, size_t len, const char *s, size_t n)
{
	if (!len)
		return;
	if (n >= len)
		n = len - 1;
	memcpy(buf, s, n);
	buf[n] = 0;
}

static void time_digits(char *buf, size_t len, uint64_t ns, const struct tu_unit *u, int digits)
{
	uint64_t whole = ns / u->ns, frac = ns % u->ns;
	char b[48], *p = b;
	if (digits) {
		/*
		 * Integer arithmetic: doubles would lose ns on long traces. Rounded
		 * to nearest (half up), not truncated: 1,655,015,900 ns is 1.655016 s.
		 */
		uint64_t div = 1, one = 1;
		for (int d = digits; d < u->exact_digits; d++)
			div *= 10;
		for (int d = 0; d < digits; d++)
			one *= 10;
		frac = (frac + div / 2) / div;
		if (frac >= one) {
			whole++;
			frac -= one;
		}
	}
	p = put_u64(p, whole);
	if (digits) { /* "%" PRIu64 ".%0*" PRIu64 */
		*p++ = '.';
		for (int d = digits - 1; d >= 0; d--, frac /= 10)
			p[d] = (char)('0' + frac % 10);
		p += digits;
	}
	put_buf(buf, len, b, (size_t)(p - b));
}

void tu_time(char *buf, size_t len, uint64_t ns, const struct tu_unit *u)
{
	time_digits(buf, len, ns, u, u->text_digits);
}

void tu_time_exact(char *buf, size_t len, uint64_t ns, const struct tu_unit *u)
{
	time_digits(buf, len, ns, u, u->exact_digits);
}

/*
 * "%.1f" of a / 2^shift (a * 10 < 2^64): tenths rounded to nearest, a tie
 * to the even one, as printf rounds the exact binary value.
 */
static char *put_tenths(char *p, uint64_t a, int shift)
{
	uint64_t t = a * 10, q = t >> shift, r = t & ((1ull << shift) - 1),
		 half = 1ull << (shift - 1);
	if (r > half || (r == half && (q & 1)))
		q++;
	p = put_u64(p, q / 10);
	*p++ = '.';
	*p++ = (char)('0' + q % 10);
	return p;
}

void tu_size(char *buf, size_t len, int64_t bytes)
{
	uint64_t a = bytes < 0 ? (uint64_t)0 - (uint64_t)bytes : (uint64_t)bytes;
	const char *sign = bytes < 0 ? "-" : "";
	char b[48], *p = b;
	if (a >= 1024ull * 1024 * 1024) {
		snprintf(buf, len, "%s%.2f GiB", sign, (double)a / (1024.0 * 1024 * 1024));
		return;
	}
	if (bytes < 0)
		*p++ = '-';
	if (a < 1024) {
		p = put_u64(p, a);
		memcpy(p, " B", 2);
		p += 2;
	} else if (a < 1024ull * 1024) {
		p = put_tenths(p, a, 10);
		memcpy(p, " KiB", 4);
		p += 4;
	} else {
		p = put_tenths(p, a, 20);
		memcpy(p, " MiB", 4);
		p += 4;
	}
	put_buf(buf, len, b, (size_t)(p - b));
}

const char *tu_basename(const char *path)
{
	if (!path)
		return "?";
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

void tu_parse_range(const char *a, const char *b, uint64_t *t1, uint64_t *t2)
{
	if (parse_time_ns(a, 1000, t1) < 0)
		die("invalid time '%s'; use microseconds or a suffix s, ms, us, ns", a);
	if (parse_time_ns(b, 1000, t2) < 0)
		die("invalid time '%s'; use microseconds or a suffix s, ms, us, ns", b);
	if (*t2 <= *t1)
		die("invalid range '%s' '%s': T2 must be after T1", a, b);
}

void tu_parse_pids(const char *opt, const char *v, struct ht__query *q)
{
	if (!v || !*v)
		die("'%s' needs a process id", opt);
	const char *p = v;
	while (*p) {
		char *end;
		errno = 0;
		long pid = strtol(p, &end, 10);
		if (errno || end == p || pid <= 0 || pid > INT32_MAX || (*end && *end != ','))
			die("invalid process id list '%s'", v);
		if (ht__query_add_pid(q, (int32_t)pid) < 0)
			die("out of memory");
		p = *end ? end + 1 : end;
	}
}

uint64_t tu_parse_count(const char *opt, const char *v)
{
	char *end;
	if (!v || !*v || *v == '-')
		die("'%s' needs a number", opt);
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (errno || *end || n > UINT32_MAX)
		die("invalid number '%s' for '%s'", v, opt);
	return n;
}

static void add_items(struct ht__match_list *l, const char *opt, const char *arg)
{
	char *copy = strdup(arg);
	if (!copy)
		die("out of memory");
	char *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int rc = ht__match_list_add(l, tok);
		if (rc < 0)
			die("invalid frame '%s' for '%s'", tok, opt);
	}
	free(copy);
}

bool tu_parse_frames_option(struct ht__query *q, int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	if (!strcmp(a, "--no-default-cull")) {
		q->default_cull = false;
		return true;
	}
	bool cull = !strcmp(a, "-cullFrames") || !strcmp(a, "--cull-frames");
	bool lists = !strcmp(a, "-cullLists") || !strcmp(a, "--cull-lists");
	bool require = !strcmp(a, "-requireFrames") || !strcmp(a, "--require-frames");
	if (!cull && !lists && !require)
		return false;
	int n = 0;
	while (*i + 1 < argc && argv[*i + 1][0] != '-') {
		const char *v = argv[++*i];
		n++;
		if (cull)
			add_items(&q->cull, a, v);
		else if (require)
			add_items(&q->require, a, v);
		else {
			opt_cull_list(&q->cull, v);
		}
	}
	if (!n)
		die("'%s' needs at least one %s", a, lists ? "file" : "frame");
	return true;
}

static uint64_t trace_end(const struct ht_reader *r)
{
	return ht_reader_info(r)->duration_ns;
}

struct ht__window tu_window(const struct ht_reader *r, bool has_range, uint64_t t1, uint64_t t2)
{
	struct ht__window w = {0, UINT64_MAX};
	uint64_t end = trace_end(r);
	bool known = ht_reader_info(r)->flags & HT_TRACEF_COMPLETE;
	if (has_range) {
		w.start = t1;
		w.end = t2;
		tu_window_check(r, has_range, &w);
	} else if (known) {
		/* One past the last event, so that an event at the very end is inside. */
		w.end = end + 1;
	}
	return w;
}

void tu_window_check(const struct ht_reader *r, bool has_range, struct ht__window *w)
{
	uint64_t end = trace_end(r);
	if (!has_range) {
		if (w->end == UINT64_MAX)
			w->end = end + 1;
		return;
	}
	bool known = (ht_reader_info(r)->flags & HT_TRACEF_COMPLETE) || end;
	if (known && w->start > end) {
		char a[40];
		struct tu_unit s;
		tu_parse_unit("s", &s);
		tu_time(a, sizeof(a), end, &s);
		die("the window starts after the end of the trace (%s s); use a range within it",
		    a);
	}
}
