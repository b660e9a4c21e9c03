/*
 * common.c - messages, argument parsing and JSON/CSV output shared by the
 * commands (see common.h).
 */
#include "cli/common.h"
#include "analysis/match.h"
#include "format/output.h"
#include "format/textout.h"
#include "heaptrail/control.h"
#include "heaptrail/trace.h"
#include "session/ring_keep.h"
#include "session/symbolize.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The output of output_begin() not yet ended: die() removes its temporary. */
static struct ht__output *pending_output;

static void vreport(const char *prefix, const char *fmt, va_list ap)
{
	fflush(stdout);
	fprintf(stderr, "heaptrail: %s", prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("error: ", fmt, ap);
	va_end(ap);
	if (pending_output)
		ht__output_abort(pending_output);
	exit(2);
}

int error_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("error: ", fmt, ap);
	va_end(ap);
	return -1;
}

void warning(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("warning: ", fmt, ap);
	va_end(ap);
}

void warn_crashes_unreported(uint64_t n)
{
	if (n)
		warning("%llu crashes had no room in the session's crash table: their windows "
			"were not written",
			(unsigned long long)n);
}

void warn_crash_windows_failed(const struct ht_trace_properties *p)
{
	if (!p->crash_windows_failed)
		return;
	char tag[32], path[4200];
	snprintf(tag, sizeof(tag), "crash-%d", (int)p->crash_failed_pid);
	ht__ring_keep_path(path, sizeof(path), p->file, tag);
	char more[64] = "";
	if (p->crash_windows_failed > 1)
		snprintf(more, sizeof(more), " (and %u more crash windows)",
			 p->crash_windows_failed - 1);
	warning("the window of process %d's crash could not be written to '%s': %s%s",
		(int)p->crash_failed_pid, path, ht_strerror(p->crash_error), more);
}

void warn_no_symbols(const char *why, const char *trace)
{
	if (!why)
		why = ht__symbolizer_missing();
	warning("%s; the trace has no symbols for frames the symbol cache did not have: after "
		"installing it, 'heaptrail symbolize %s' adds them",
		why ? why
		    : "the session could not load libdw.so.1, which symbolizes frames: install "
		      "the Debian package libdw1",
		trace);
}

struct ht_reader *open_trace(const char *path)
{
	struct ht_reader *r;
	errno = 0;
	int rc = ht_reader_open(&r, path);
	if (rc == HT_ERR_NOT_TRACE) {
		/* The reader opens a directory and finds no magic there: say what it is. */
		struct stat st;
		if (!stat(path, &st) && S_ISDIR(st.st_mode))
			die("cannot open '%s': %s", path, strerror(EISDIR));
		die("'%s' is not a heaptrail trace", path);
	}
	if (rc == HT_ERR_NOT_FOUND || (rc == HT_ERR_IO && errno))
		die("cannot open '%s': %s", path, strerror(errno ? errno : ENOENT));
	if (rc < 0)
		read_failed(path, rc);
	return r;
}

void read_failed(const char *path, int rc)
{
	die("cannot read '%s': %s", path, ht_strerror(rc));
}

void reader_warning(struct ht_reader *r, const char *path)
{
	const char *w = ht_reader_warning(r);
	if (w)
		warning("'%s': %s", path, w);
}

void trace_warnings(struct ht_reader *r, const char *path)
{
	reader_warning(r, path);
	const struct ht_trace_info *info = ht_reader_info(r);
	if (info->events_lost)
		warning("'%s' lost %" PRIu64 " events while recording; counts may be low", path,
			info->events_lost);
}

const char *root_dir(void)
{
	const char *r = getenv("HEAPTRAIL_ROOT");
	return r ? r : "";
}

void root_path(char *out, size_t n, const char *rel)
{
	if ((size_t)snprintf(out, n, "%s%s", root_dir(), rel) >= n)
		die("the path '%s%s' is too long", root_dir(), rel);
}

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	uint64_t mul = 1;
	if (*end) {
		switch (toupper((unsigned char)*end)) {
		case 'K':
			mul = 1ull << 10;
			break;
		case 'M':
			mul = 1ull << 20;
			break;
		case 'G':
			mul = 1ull << 30;
			break;
		default:
			return -1;
		}
		end++;
		if (toupper((unsigned char)*end) == 'I')
			end++;
		if (toupper((unsigned char)*end) == 'B')
			end++;
		if (*end)
			return -1;
	}
	if (v > UINT64_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}

const char *sample_rate_text(uint64_t rate, char *buf, size_t n)
{
	static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	while (u < 4 && rate && !(rate & 1023)) {
		rate >>= 10;
		u++;
	}
	snprintf(buf, n, "%" PRIu64 "%s", rate, unit[u]);
	return buf;
}

const char *sample_note(const struct ht_trace_info *in, char *buf, size_t n)
{
	if (!in || !in->sample_rate)
		return NULL;
	char r[32];
	snprintf(buf, n,
		 "sampled trace (--sample-rate %s): heap sizes and counts are estimates from "
		 "one allocation per %s on average",
		 sample_rate_text(in->sample_rate, r, sizeof(r)), r);
	return buf;
}

void jw_sampling(struct jw *j, const struct ht_trace_info *in)
{
	if (!in || !in->sample_rate)
		return;
	jw_key(j, "sample_rate");
	jw_u64(j, in->sample_rate);
	jw_key(j, "estimated");
	jw_bool(j, true);
}

uint64_t parse_sample_rate(const char *s)
{
	uint64_t v;
	if (parse_size(s, &v) < 0 || v == 0 || v > (1ull << 40))
		die("invalid sample rate '%s': a size from 1 byte to 1TiB, like 512KiB or 1MiB "
		    "(the mean bytes allocated between two recorded allocations)",
		    s);
	return v;
}

int parse_time_ns(const char *s, uint64_t default_unit_ns, uint64_t *out)
{
	char *end;
	if (!s || !*s || !(isdigit((unsigned char)*s) || *s == '.'))
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -1;
	double unit = (double)default_unit_ns;
	if (*end) {
		if (!strcmp(end, "s"))
			unit = 1e9;
		else if (!strcmp(end, "ms"))
			unit = 1e6;
		else if (!strcmp(end, "us"))
			unit = 1e3;
		else if (!strcmp(end, "ns"))
			unit = 1;
		else
			return -1;
	}
	double ns = v * unit;
	if (ns > 1.8e19)
		return -1;
	*out = (uint64_t)llround(ns);
	return 0;
}

int parse_format(const char *s, enum out_format *out)
{
	if (!s)
		return -1;
	if (!strcmp(s, "text"))
		*out = FMT_TEXT;
	else if (!strcmp(s, "csv"))
		*out = FMT_CSV;
	else if (!strcmp(s, "json"))
		*out = FMT_JSON;
	else
		return -1;
	return 0;
}

void jw_init(struct jw *j, FILE *f, bool pretty)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
	j->pretty = pretty;
}

static void jw_indent(struct jw *j)
{
	if (!j->pretty)
		return;
	ht__out_chr(j->f, '\n');
	for (int i = 0; i < j->depth; i++)
		ht__out_mem(j->f, "  ", 2);
}

/* Called before every value: writes the comma and indentation it needs. */
static void jw_value(struct jw *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (j->depth > 0) {
		if (j->need_comma[j->depth])
			ht__out_chr(j->f, ',');
		j->need_comma[j->depth] = true;
		jw_indent(j);
	}
}

static void jw_open(struct jw *j, char c)
{
	jw_value(j);
	ht__out_chr(j->f, c);
	if (j->depth < 63)
		j->depth++;
	j->need_comma[j->depth] = false;
}

static void jw_close(struct jw *j, char c)
{
	bool had = j->need_comma[j->depth];
	if (j->depth > 0)
		j->depth--;
	if (had)
		jw_indent(j);
	ht__out_chr(j->f, c);
}

void jw_obj_begin(struct jw *j)
{
	jw_open(j, '{');
}
void jw_obj_end(struct jw *j)
{
	jw_close(j, '}');
}
void jw_arr_begin(struct jw *j)
{
	jw_open(j, '[');
}
void jw_arr_end(struct jw *j)
{
	jw_close(j, ']');
}

static void jw_raw_string(FILE *f, const char *s)
{
	ht__out_chr(f, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		/* The run of ASCII bytes that need no escape, in one write. */
		size_t n = 0;
		while (p[n] >= 0x20 && p[n] < 0x7f && p[n] != '"' && p[n] != '\\')
			n++;
		if (n) {
			ht__out_mem(f, p, n);
			p += n - 1;
			continue;
		}
		switch (*p) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			ht__out_str(f, "\\\\");
			break;
		case '\n':
			ht__out_str(f, "\\n");
			break;
		case '\r':
			ht__out_str(f, "\\r");
			break;
		case '\t':
			ht__out_str(f, "\\t");
			break;
		default: {
			/* Control bytes, and bytes that are not UTF-8 (as the code
			   point of the same number), so the JSON is valid UTF-8. */
			size_t k = ht__text_char((const char *)p);
			if (!k)
				fprintf(f, "\\u%04x", *p);
			else
				ht__out_mem(f, p, k);
			p += k ? k - 1 : 0;
		}
		}
	}
	ht__out_chr(f, '"');
}

void jw_key(struct jw *j, const char *key)
{
	jw_value(j);
	jw_raw_string(j->f, key);
	ht__out_str(j->f, j->pretty ? ": " : ":");
	j->after_key = true;
}

void jw_str(struct jw *j, const char *s)
{
	jw_value(j);
	if (s)
		jw_raw_string(j->f, s);
	else
		ht__out_str(j->f, "null");
}

void jw_u64(struct jw *j, uint64_t v)
{
	jw_value(j);
	ht__out_u64(j->f, v, 0);
}

void jw_i64(struct jw *j, int64_t v)
{
	jw_value(j);
	ht__out_i64(j->f, v, 0);
}

void jw_double(struct jw *j, double v)
{
	jw_value(j);
	if (isfinite(v))
		fprintf(j->f, "%.17g", v);
	else
		ht__out_str(j->f, "null");
}

void jw_bool(struct jw *j, bool v)
{
	jw_value(j);
	ht__out_str(j->f, v ? "true" : "false");
}

void jw_null(struct jw *j)
{
	jw_value(j);
	ht__out_str(j->f, "null");
}

void jw_finish(struct jw *j)
{
	fputc('\n', j->f);
	fflush(j->f);
}

void csv_field(FILE *f, const char *s)
{
	if (!s)
		return;
	/* Control bytes and bytes that are not UTF-8 as \xHH (never a raw line
	   break or escape inside a row), quoted when a comma or quote is left. */
	bool quote = strpbrk(s, ",\"") != NULL;
	if (quote)
		ht__out_chr(f, '"');
	while (*s) {
		size_t n = 0; /* the run of plain ASCII, in one write */
		while ((unsigned char)s[n] >= 0x20 && (unsigned char)s[n] < 0x7f && s[n] != '"')
			n++;
		if (n) {
			ht__out_mem(f, s, n);
			s += n;
			continue;
		}
		size_t k = ht__text_char(s);
		if (!k) {
			fprintf(f, "\\x%02x", (unsigned char)*s++);
			continue;
		}
		if (*s == '"')
			ht__out_chr(f, '"');
		ht__out_mem(f, s, k);
		s += k;
	}
	if (quote)
		ht__out_chr(f, '"');
}

bool progress_wanted(void)
{
	return isatty(STDERR_FILENO);
}

void output_not_dash(const char *path, const char *opt, bool trace)
{
	if (!path || strcmp(path, "-"))
		return;
	if (trace)
		die("%s -: a trace being recorded is not written to standard output (the program's "
		    "own output goes there); give a file name ('./-' for a file named '-')",
		    opt);
	die("%s -: this command does not write to standard output by '-'; give a file name, or "
	    "/dev/stdout for a pipe ('./-' for a file named '-')",
	    opt);
}

FILE *output_begin(struct ht__output *o, const char *path, bool force, unsigned mode)
{
	char why[1024];
	if (ht__output_open(o, path, force ? HT__OUT_FORCE : 0, (mode_t)mode, why, sizeof(why)) < 0)
		die("%s", why);
	FILE *f = ht__output_fdopen(o);
	if (!f) {
		int e = errno;
		ht__output_abort(o);
		die("cannot write '%s': %s", path, strerror(e));
	}
	pending_output = o;
	return f;
}

void output_end(struct ht__output *o, FILE *f)
{
	char why[1024];
	pending_output = NULL;
	bool bad = ferror(f) != 0;
	bad |= fclose(f) != 0;
	if (bad) {
		int e = errno;
		snprintf(why, sizeof(why), "cannot write '%s': %s", o->path, strerror(e));
		ht__output_abort(o);
		die("%s", why);
	}
	if (ht__output_commit(o, why, sizeof(why)) < 0)
		die("%s", why);
}

void progress_init(struct progress *p, const char *verb)
{
	memset(p, 0, sizeof(*p));
	p->verb = verb;
	clock_gettime(CLOCK_MONOTONIC, &p->start);
}

static double elapsed(const struct timespec *t0)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

void progress_show(void *ctx, uint64_t ts, uint64_t duration)
{
	struct progress *p = ctx;
	double now = elapsed(&p->start);
	if (now < 1.0 || (p->shown && now - p->last < 0.25))
		return;
	p->last = now;
	if (duration)
		fprintf(stderr, "\rheaptrail: %s %3.0f%%", p->verb,
			100.0 * (double)ts / (double)duration);
	else
		fprintf(stderr, "\rheaptrail: %s %.1f s", p->verb, (double)ts / 1e9);
	p->shown = true;
}

void progress_done(struct progress *p)
{
	if (p->shown)
		fprintf(stderr, "\r%40s\r", "");
	p->shown = false;
}

bool has_control(const char *s)
{
	for (size_t k; *s; s += k)
		if (!(k = ht__text_char(s)))
			return true;
	return false;
}

void put_text(FILE *f, const char *s)
{
	ht__fput_text(f, s, NULL);
}

void buffer_stdout(void)
{
	static char buf[1 << 18];
	setvbuf(stdout, buf, _IOFBF, sizeof(buf));
}

void describe_loss(char *buf, size_t n, uint64_t total, uint64_t lossy, uint64_t no_buffer,
		   uint64_t in_handler)
{
	int k = snprintf(buf, n, "%" PRIu64 " events were lost", total);
	const char *sep = ": ";
	if (no_buffer && k >= 0 && (size_t)k < n) {
		k += snprintf(buf + k, n - k,
			      "%s%" PRIu64 " because a thread found no free buffer (more threads "
			      "at once than --buffers; record with a larger --buffers)",
			      sep, no_buffer);
		sep = "; ";
	}
	if (in_handler && k >= 0 && (size_t)k < n) {
		k += snprintf(buf + k, n - k,
			      "%s%" PRIu64 " made by signal handlers that interrupted the recorder",
			      sep, in_handler);
		sep = "; ";
	}
	if (lossy && k >= 0 && (size_t)k < n)
		snprintf(buf + k, n - k, "%s%" PRIu64 " dropped by --lossy when a buffer was full",
			 sep, lossy);
}
