/*
 * common.h - what every heaptrail command shares: messages and exit codes,
 * parsing of sizes, times and --format, and a small streaming JSON writer so
 * every command's JSON is valid and escaped the same way.
 */
#ifndef HT_CLI_COMMON_H
#define HT_CLI_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "format/output.h"

struct ht_trace_info;
struct ht_reader;

/* "heaptrail: error: MSG" on stderr, then exit(2). Messages: lowercase, no period. */
_Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "heaptrail: error: MSG" on stderr; returns -1. */
int error_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "heaptrail: warning: MSG" on stderr. */
void warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The warning of a flight recorder's crashes without a window (n > 0): the
   crash table was full (record, stop, sessions say it the same way). */
void warn_crashes_unreported(uint64_t n);
/* The warning of a start session's crash windows that could not be written
   (stop and sessions say it, from the session's status or stop line). */
struct ht_trace_properties;
void warn_crash_windows_failed(const struct ht_trace_properties *p);
/* The warning of a recording whose frames went unsymbolized (why: libdw
   cannot be loaded, naming the package; NULL: the session said so). */
void warn_no_symbols(const char *why, const char *trace);

/*
 * Opens a trace for a command, the same way for every command: dies with
 * "cannot open 'F': <errno text>" (missing, unreadable), "'F' is not a
 * heaptrail trace", or "cannot read 'F': <what is wrong>" (damaged header,
 * a format version this build cannot read).
 */
struct ht_reader *open_trace(const char *path);
/* Dies with "cannot read 'F': <ht_strerror(rc)>" after a failed pass. */
_Noreturn void read_failed(const char *path, int rc);
/* After a pass: the reader's warning (damage, a recording that did not
   finish), as "warning: 'F': <why>"; nothing for a whole trace. */
void reader_warning(struct ht_reader *r, const char *path);
/* reader_warning(), then a warning when events were lost while recording. */
void trace_warnings(struct ht_reader *r, const char *path);

/* The system root that `ifeo` and `autologger` write under: "" (the real
   one) unless HEAPTRAIL_ROOT moves it (tests). */
const char *root_dir(void);
/* root_dir() + rel into out; dies if it does not fit. */
void root_path(char *out, size_t n, const char *rel);

/* "4096", "64K", "1M", "2G" (powers of 1024). Returns 0, or -1 if malformed. */
int parse_size(const char *s, uint64_t *out);
/* --sample-rate SIZE: bytes from 1 to 1 TiB; dies with the rule otherwise. */
uint64_t parse_sample_rate(const char *s);

/*
 * A time: a number with an optional unit suffix s, ms, us or ns; without a
 * suffix it is in default_unit_ns (1000 for microseconds, as xperf). Decimals
 * are allowed ("1.5s"). Returns 0, or -1 if malformed or negative.
 */
int parse_time_ns(const char *s, uint64_t default_unit_ns, uint64_t *out);

enum out_format { FMT_TEXT, FMT_CSV, FMT_JSON };
/* "text", "csv", "json"; returns -1 when none. */
int parse_format(const char *s, enum out_format *out);

/* Streaming JSON writer: handles commas, nesting and string escaping. */
struct jw {
	FILE *f;
	int depth;
	bool need_comma[64];
	bool after_key;
	bool pretty;
};

void jw_init(struct jw *j, FILE *f, bool pretty);
void jw_obj_begin(struct jw *j);
void jw_obj_end(struct jw *j);
void jw_arr_begin(struct jw *j);
void jw_arr_end(struct jw *j);
void jw_key(struct jw *j, const char *key);
void jw_str(struct jw *j, const char *s); /* NULL writes null */
void jw_u64(struct jw *j, uint64_t v);
void jw_i64(struct jw *j, int64_t v);
void jw_double(struct jw *j, double v);
void jw_bool(struct jw *j, bool v);
void jw_null(struct jw *j);
/* Ends the document with a newline. */
void jw_finish(struct jw *j);

/*
 * Sampled traces (--sample-rate): every output says its numbers are
 * estimates and from what rate. sample_rate_text(): the rate as the option
 * takes it ("512KiB"). sample_note(): one line for text headers, or NULL
 * for a trace of every allocation. jw_sampling(): the JSON fields
 * "sample_rate" and "estimated": true, in a sampled trace's output only.
 */
const char *sample_rate_text(uint64_t rate, char *buf, size_t n);
const char *sample_note(const struct ht_trace_info *in, char *buf, size_t n);
void jw_sampling(struct jw *j, const struct ht_trace_info *in);

/* Writes s as one CSV field (quoted when it needs to be). */
void csv_field(FILE *f, const char *s);

/*
 * A command's output file (-o, --svg, ...) opened the one safe way
 * (format/output.h: a device or FIFO written in place, an existing file
 * replaced atomically only with --force) as a stdio stream; dies with the
 * reason when it is refused. Open it before the long work, so a refusal
 * comes first; a die() before output_end() removes the temporary file.
 */
FILE *output_begin(struct ht__output *o, const char *path, bool force, unsigned mode);
/*
 * Dies when an output file is named "-": export alone takes it for standard
 * output; every other command would have written a file named '-' (qa:
 * `report app.htr -o -` did). trace: a trace being recorded, whose
 * program's own output goes to standard output.
 */
void output_not_dash(const char *path, const char *opt, bool trace);
/* Closes f and gives the file its name; dies (removing the temporary) on a write error. */
void output_end(struct ht__output *o, FILE *f);

/*
 * Text that came from a trace (argv, paths, host and thread names) written
 * for a terminal: a control byte (below 0x20, 0x7f) is shown as \xHH, so a
 * name cannot move the cursor or change the terminal's state. has_control()
 * tells whether s holds one.
 */
void put_text(FILE *f, const char *s);

/*
 * Before a command's first output: stdout is written 256 KiB at a time
 * instead of stdio's 4 KiB (python's 92 MB of `analyze -stacks` took 15
 * thousand writes), a terminal too (not a line at a time: analyze writes a
 * stack's frames a line at a time into the buffer). For commands that
 * write their output once, at the end.
 */
void buffer_stdout(void);

/*
 * Writes into buf (size n) why `total` events were lost, cause by cause, with
 * what to do about each: no free buffer names --buffers, a signal handler that
 * interrupted the recorder, --lossy. A trace written before the causes were
 * kept (all three 0) gets the plain count.
 */
void describe_loss(char *buf, size_t n, uint64_t total, uint64_t lossy, uint64_t no_buffer,
		   uint64_t in_handler);
bool has_control(const char *s);

/* True when stderr is a terminal (progress goes there only then). */
bool progress_wanted(void);

/*
 * Progress of a pass over a trace, on stderr: "heaptrail: VERB 42%", shown
 * only on a terminal, only after the first second and four times a second.
 * progress_show() has the signature of the analysis core's progress
 * callbacks; progress_done() clears the line.
 */
struct progress {
	struct timespec start;
	const char *verb;
	double last; /* seconds since start of the last line written */
	bool shown;
};
void progress_init(struct progress *p, const char *verb);
void progress_show(void *ctx, uint64_t ts, uint64_t duration);
void progress_done(struct progress *p);

#endif
