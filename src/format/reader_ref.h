/*
 * reader_ref.h - the reader's events in place, for the trace pass
 * (src/analysis/pass.c): ht_reader_next() copies each event out of the
 * batch the reader decoded it into; the pass reads it where it is.
 */
#ifndef HT_FORMAT_READER_REF_H
#define HT_FORMAT_READER_REF_H

#include "heaptrail/trace.h"

/*
 * As ht_reader_next(), but *ev points at the event inside the reader, valid
 * until the next call on r (its name too). 1, 0 at the end, or an error.
 */
int ht__reader_next_ref(struct ht_reader *r, const struct ht_event **ev);

/*
 * As ht__reader_next_ref(), but every event left in the reader's current
 * batch at once: *ev points at the first of the n returned (n > 0), all
 * valid until the next call on r. A trace without a footer (its tables
 * learned from the events as they are returned) gives one at a time.
 * n, 0 at the end, or an error.
 */
int ht__reader_next_run(struct ht_reader *r, const struct ht_event **ev);

#endif
