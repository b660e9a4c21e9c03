/*
 * reader_phys.h - the physical frames (module + return address, as recorded)
 * behind a trace's logical frames, for `heaptrail symbolize`, which rewrites
 * a trace's symbols: each physical frame is the run of logical frames
 * [first, first + nlog) (its inlined functions, then the real one; one frame
 * when it has no symbols), and a stack's logical frames are such runs end to
 * end. Read the events first: an unfinished trace's frames load with them.
 */
#ifndef HT_FORMAT_READER_PHYS_H
#define HT_FORMAT_READER_PHYS_H

#include <stdint.h>

#include "heaptrail/trace.h"

struct ht__phys_frame {
	uint32_t module;
	uint64_t rel;
	uint32_t first; /* its first logical frame (ht_reader_frame) */
	uint32_t nlog;
};

/* Physical frame ids are 0 .. count - 1. */
uint32_t ht__reader_phys_count(const struct ht_reader *r);
/* 0, or HT_ERR_NOT_FOUND for an id that was never defined. */
int ht__reader_phys(const struct ht_reader *r, uint32_t id, struct ht__phys_frame *out);

#endif
