/*
 * output.h - the one way every heaptrail writer opens the file it was told to
 * write (traces of record and start, report pages, SVG timelines, rewritten
 * traces): nothing but a regular file is ever replaced, and a regular file
 * only with --force and atomically (docs/outputs.md has the rules).
 *
 * Calls: ht__output_open(), write to o.fd (or ht__output_fdopen()), close
 * it, then ht__output_commit() or ht__output_abort(). A regular file is
 * written under a temporary name next to it; a writer whose file must be
 * readable while it grows (a trace being recorded) calls ht__output_publish()
 * once it has started writing.
 */
#ifndef HT_FORMAT_OUTPUT_H
#define HT_FORMAT_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

enum {
	/* An existing regular file may be replaced (--force). */
	HT__OUT_FORCE = 1u << 0,
};

struct ht__output {
	int fd;		/* where to write; -1 once closed */
	char *path;	/* the name written (a symbolic link resolved) */
	char *tmp;	/* the temporary name renamed to path at commit, or NULL */
	bool in_place;	/* a device or FIFO, written where it is */
	bool replace;	/* commit may replace an existing file (--force) */
	bool published; /* the data is under path already */
};

/*
 * Open path for writing, mode `mode` for a created file. A device or FIFO is
 * written in place (never truncated, never replaced); a socket or directory
 * is refused; an existing regular file without HT__OUT_FORCE is refused.
 * Returns 0, or a negative ht_error with a whole message in why ("'x' exists;
 * use --force to replace it").
 */
int ht__output_open(struct ht__output *o, const char *path, unsigned flags, mode_t mode, char *why,
		    size_t whylen);

/*
 * Give the file its name now (rename of the temporary; a file that appeared
 * since open is replaced only with HT__OUT_FORCE). Returns 0 or a negative
 * ht_error with why set. Commit does it when it was not done.
 */
int ht__output_publish(struct ht__output *o, char *why, size_t whylen);

/* A stdio stream on o->fd (which it then owns; fclose it before commit). */
FILE *ht__output_fdopen(struct ht__output *o);

/*
 * After everything is written and the descriptor closed: the temporary file
 * takes the final name (a file that appeared meanwhile is not replaced
 * without HT__OUT_FORCE). Returns 0 or a negative ht_error with why set.
 * Frees what o holds.
 */
int ht__output_commit(struct ht__output *o, char *why, size_t whylen);

/* Remove what was created (the temporary, or the published file) and free o. */
void ht__output_abort(struct ht__output *o);

/* True when the name is a regular file, i.e. the output can be read back. */
bool ht__output_is_file(const struct ht__output *o);

#endif
