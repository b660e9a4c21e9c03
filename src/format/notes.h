/*
 * notes.h - the exit notes next to a trace whose collector may have died
 * (notes.c; docs/session-protocol.md, "A collector killed"), read by the
 * reader of an unfinished trace.
 */
#ifndef HT_FORMAT_NOTES_H
#define HT_FORMAT_NOTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/protocol.h"
#include "heaptrail/trace.h"

struct ht__proctab;

struct ht__notes {
	bool present; /* TRACE.lost exists */
	struct ht__exit_note *v;
	size_t n;
	uint64_t *counts; /* per process index: its heap and memory events read */
	uint32_t ncounts;
};

struct ht__notes_result {
	uint32_t noted;	    /* processes of the trace with a note */
	uint32_t processes; /* of those, how many have events the trace lacks */
	uint64_t events;    /* how many events those are */
	uint32_t unknown;   /* processes running at the trace's end without a note */
	uint32_t unseen;    /* noted processes the trace never showed (given entries) */
};

/* Reads TRACE.lost when there is one. 0 (also when absent) or HT_ERR_NOMEM. */
int ht__notes_load(struct ht__notes *n, const char *trace_path);
/* One event read from the trace: counted for its process. 0 or HT_ERR_NOMEM. */
int ht__notes_count(struct ht__notes *n, const struct ht_event *ev);
/* The stream is over: the notes into the processes and the trace's info. */
void ht__notes_apply(struct ht__notes *n, struct ht__proctab *t, struct ht_trace_info *in,
		     struct ht__notes_result *res);
void ht__notes_free(struct ht__notes *n);

#endif
