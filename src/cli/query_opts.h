/*
 * query_opts.h - the options every analysis command (analyze, export, diff)
 * takes to fill a struct ht__query: process, range, lifetime and size
 * filters, required and culled frames, symbols, the peak and temporary
 * allocations. One place, so the commands spell and check them the same way.
 * Option names are compared without dashes and underscores, lowercase
 * ("-cullFrames", "--cull-frames" -> "cullframes").
 */
#ifndef HT_CLI_QUERY_OPTS_H
#define HT_CLI_QUERY_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/query.h"

/* The option name arg[0..len) without dashes and underscores, lowercase. */
void opt_norm_name(const char *arg, size_t len, char *out, size_t cap);

/* The value of option opt: inline_val (the "=VALUE" part), or the next argument. */
const char *opt_value(int argc, char **argv, int *i, const char *inline_val, const char *opt);

/* Two values: "-range T1 T2", or "--range=T1,T2" (split into buf). */
void opt_two(int argc, char **argv, int *i, const char *inline_val, const char *opt,
	     const char *what, char *buf, size_t cap, const char **a, const char **b);

/* A time (microseconds unless suffixed); dies with a message when malformed. */
uint64_t opt_time(const char *s, const char *opt);

/*
 * Adds the frames of a -cullLists file to l, or dies saying why the file is
 * not a cull list (missing, unreadable, not text, larger than 16 MiB).
 */
void opt_cull_list(struct ht__match_list *l, const char *path);

/*
 * Handle option arg (normalized name, inline value val or NULL) when it is a
 * query option, taking its values from argv and moving *i past them; dies on
 * a bad value. A list option's value ending in ".htr" becomes *file when no
 * trace was named yet. Returns false when name is not a query option.
 */
bool query_option(const char *name, const char *arg, const char *val, int argc, char **argv, int *i,
		  struct ht__query *q, const char **file);

/*
 * --snapshot N of a heap snapshot trace: N (from 1), which every trace pass
 * made afterwards delivers (pass.h); dies on a bad N.
 */
uint32_t opt_snapshot(const char *v, const char *opt);

/*
 * After the trace at path is open as r: dies saying why when snapshot n
 * (0: the one --snapshot asked for, if any) is not in it (not a heap
 * snapshot trace, or fewer snapshots).
 */
struct ht_reader;
void snapshot_check(struct ht_reader *r, const char *path, uint32_t n);

/* The help lines of those options, for the commands' usage texts. */
extern const char query_opts_help[];

#endif
