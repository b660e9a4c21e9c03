/*
 * window.h - time windows over lifetimes, as WPA's Heap Allocations and
 * VirtualAlloc Commit Lifetimes tables see them: each heap block or committed
 * range is classified against a window [start, end) as AIFI, AIFO, AOFI or
 * AOFO, and aggregated into WPA's expandable tree (process, handle, type,
 * impacting type, stack, frame, image, thread) with Count, Size and Impacting
 * Size at every level.
 *
 * The rules (docs/tables.md says the same for users):
 *   - "inside" means start <= t < end. An allocation at exactly start is inside;
 *     one at exactly end is outside (after the window). A free at exactly end is
 *     outside: the block is still outstanding at the window's end.
 *   - a block is in the window when alloc_ts < end and free_ts >= start (it is
 *     live for at least part of the window, or freed at its first instant).
 *   - bytes outstanding at time t are the blocks with alloc_ts < t <= free_ts,
 *     so Impacting Size = outstanding(end) - outstanding(start) = AIFO - AOFI.
 *   - Count and Size count only allocations made inside (AIFI + AIFO).
 *   - Impacting Type: AIFI is Transient; AIFO and AOFO (live at the end) and
 *     AOFI (whose free lowers the outstanding bytes) are Impacting, so the
 *     Transient group's Impacting Size is always 0 and the Impacting group
 *     holds the window's whole net change.
 *
 * Memory grows with the number of distinct groups (and with the rows kept when
 * asked for), never with the number of blocks seen. Not thread-safe.
 */
#ifndef HT_ANALYSIS_WINDOW_H
#define HT_ANALYSIS_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include "analysis/lifetime.h"
#include "base/vec.h"

/* A window [start, end) in ns since the trace start; start < end. */
struct ht__window {
	uint64_t start;
	uint64_t end;
};

/* The four ways a block can meet a window (WPA's Type column). */
enum ht__wtype {
	HT_AIFI = 0, /* allocated inside, freed inside: transient */
	HT_AIFO = 1, /* allocated inside, outstanding at the end */
	HT_AOFI = 2, /* allocated before, freed inside */
	HT_AOFO = 3, /* allocated before, outstanding through the end */
};

/*
 * The type of a block allocated at alloc_ts and freed at free_ts (HT_TS_NEVER
 * when never freed) in window w, or -1 when the block does not meet the window.
 */
int ht__window_classify(const struct ht__window *w, uint64_t alloc_ts, uint64_t free_ts);

/* "AIFI", "AIFO", "AOFI", "AOFO"; "?" out of range. */
const char *ht__wtype_name(int type);

/* True for the types WPA calls Impacting (all but AIFI). */
bool ht__wtype_impacting(int type);

/* "Transient" or "Impacting" for a type. */
const char *ht__wtype_impacting_name(int type);

/* The levels a tree can group by. */
enum ht__wkey {
	HT_WK_PROCESS = 0,   /* value: process index */
	HT_WK_HANDLE = 1,    /* value: heap handle */
	HT_WK_TYPE = 2,	     /* value: enum ht__wtype */
	HT_WK_IMPACTING = 3, /* value: 0 Transient, 1 Impacting */
	HT_WK_STACK = 4,     /* value: the item's (culled) stack id */
	HT_WK_FRAME = 5,     /* value: a frame key of the item (an item joins each it has) */
	HT_WK_IMAGE = 6,     /* value: an image key of the item (an item joins each it has) */
	HT_WK_THREAD = 7,    /* value: process index << 32 | tid */
	HT_WK__COUNT
};

#define HT_WK_MAX_LEVELS 16

/* "process", "handle", "type", "impacting-type", "stack", "frame", "image", "thread". */
const char *ht__wkey_name(enum ht__wkey key);

/* The key named s (the names above, "impacting" too), or -1. */
int ht__wkey_parse(const char *s);

/*
 * One heap block or committed range, as the caller resolved it. frames and
 * images are the distinct frame and image keys of the culled stack (what
 * they mean is the caller's: interned names, ids); they are read during
 * ht__wtree_add() only.
 */
struct ht__witem {
	uint64_t alloc_ts;
	uint64_t free_ts; /* HT_TS_NEVER: never freed */
	uint64_t size;
	uint64_t addr;
	uint64_t heap;
	uint32_t process;
	int32_t tid;
	uint32_t stack; /* culled stack id, 0 = none */
	uint32_t nframes;
	uint32_t nimages;
	const uint64_t *frames;
	const uint64_t *images;
	uint64_t raw_stack; /* kept in rows for the caller (e.g. the unculled stack id) */
	/*
	 * A further piece of an allocation already added (a committed range
	 * that was decommitted in parts): its bytes count, the allocation does
	 * not count again in Count.
	 */
	bool piece;
	uint64_t count; /* blocks it stands for: 1, or a sampled trace's estimate */
	/* A committed range found in /proc/PID/maps, no hook saw it
	   (HT_EVF_UNSEEN): the commit table marks its rows. */
	bool unseen;
};

/* One block kept as a row (ht__wtree_new with keep_rows). */
struct ht__wrow {
	uint64_t alloc_ts;
	uint64_t free_ts;
	uint64_t size;
	uint64_t addr;
	uint64_t heap;
	uint64_t raw_stack;
	uint32_t process;
	int32_t tid;
	uint32_t stack;
	uint8_t type;	/* enum ht__wtype */
	uint8_t unseen; /* ht__witem.unseen */
};

/*
 * A group. The root (depth 0) holds everything in the window. count and size
 * are the blocks allocated inside the window; impacting is AIFO minus AOFI
 * bytes; live counts every block of the group that meets the window.
 * children are the groups of the next level; after ht__wtree_sort() they are in
 * order and nchildren is cut to the top N. rows (leaves only, when kept) are
 * in allocation time order.
 */
struct ht__wnode {
	enum ht__wkey key; /* the level's key (meaningless at the root) */
	uint32_t depth;
	uint64_t value;
	uint64_t count;
	uint64_t size;
	int64_t impacting;
	uint64_t live;
	uint32_t nchildren;
	struct ht__wnode **children;
	uint32_t nrows;
	struct ht__wrow *rows;
	/* Internal: every child (nchildren may be cut by top), the index, the rows' capacity. */
	uint32_t nall;
	uint32_t cap;
	struct ht__hindex index;
	uint32_t rows_cap;
	struct ht__wnode *last; /* the child child_get() found last */
};

enum ht__wsort {
	HT_WSORT_IMPACTING = 0, /* Impacting Size, largest first */
	HT_WSORT_SIZE = 1,
	HT_WSORT_COUNT = 2,
};

struct ht__wtree;

/*
 * A tree grouping by keys[0..nkeys) (nkeys may be 0: just the root). With
 * keep_rows, every block in the window is kept as a row of its leaf group.
 * Returns NULL when out of memory or when w or the keys are invalid.
 */
struct ht__wtree *ht__wtree_new(const struct ht__window *w, const enum ht__wkey *keys,
				uint32_t nkeys, bool keep_rows);

/*
 * Add one block: returns 1 when it meets the window (and was counted), 0 when
 * it does not, HT_ERR_NOMEM.
 */
int ht__wtree_add(struct ht__wtree *t, const struct ht__witem *it);

/*
 * Sort every level's children by the key (ties: size, count, value) and keep
 * the top N (0: all). The tree is final afterwards: add nothing more.
 */
void ht__wtree_sort(struct ht__wtree *t, enum ht__wsort by, uint32_t top);

const struct ht__wnode *ht__wtree_root(const struct ht__wtree *t);

void ht__wtree_free(struct ht__wtree *t);

/*
 * Stacks as the tables see them: each raw stack id of a reader culled (with a
 * frame matcher built from the cull list, or not at all), then given a
 * canonical id shared by every raw stack whose culled frames have the same
 * texts (as analyze merges stacks), and the frame and image keys the frame
 * and image levels group by: the text ("module!function") of the topmost
 * frame left after culling and its module id, as 'heaptrail analyze
 * -frames/-images' groups. Results are cached per raw stack id, so
 * memory grows with the number of distinct stacks only.
 */
struct ht__frame_matcher;
struct ht_reader;
struct ht__wstacks;

/* cull may be NULL (no culling); reader and matcher must outlive the result. */
int ht__wstacks_new(struct ht__wstacks **out, const struct ht_reader *r,
		    struct ht__frame_matcher *cull);

/*
 * Fill it->stack, frames, nframes, images, nimages from the raw stack id
 * (it->raw_stack is set to raw too). The arrays stay valid until
 * ht__wstacks_free(); on an unfinished trace (whose stack table grows as it
 * is read) only until the next ht__wstacks_resolve(). Returns 0 or
 * HT_ERR_NOMEM.
 */
int ht__wstacks_resolve(struct ht__wstacks *s, uint32_t raw, struct ht__witem *it);

/* The culled logical frames (innermost first) of a canonical stack id; 0 for none. */
uint32_t ht__wstacks_frames(const struct ht__wstacks *s, uint32_t stack, const uint32_t **frames);

/* The text of a frame key ("module!function"), "?" when unknown. */
const char *ht__wstacks_frame_name(const struct ht__wstacks *s, uint64_t key);

/*
 * The text ("module!function", untruncated) of a logical frame of a stack
 * that went through ht__wstacks_resolve(), as ht__wstacks_frames() returns
 * them; "?" for other frames.
 */
const char *ht__wstacks_frame_text(const struct ht__wstacks *s, uint32_t frame);

/* ht__wstacks_frame_text(), and its length in *len. */
const char *ht__wstacks_frame_text_len(const struct ht__wstacks *s, uint32_t frame, size_t *len);

/* The name of an image key (the module's file name), "?" when none. */
const char *ht__wstacks_image_name(const struct ht__wstacks *s, uint64_t key);

void ht__wstacks_free(struct ht__wstacks *s);

/*
 * The heap table (commit false: every heap block) or the commit table
 * (committed ranges, pieces of one commit counted once) of window w as a
 * consumer of trace pass p (pass.h): what the pass ends, in q's pids (q may
 * be NULL) and holding a frame of require (NULL: any), goes into tree with
 * its stack resolved by stacks. The pass ends an image's blocks and ranges
 * at its exit, the one rule of every front end. With stop_at_end the pass
 * may stop at the window's end (rows then show no free time after it).
 * *out lives until ht__wfeed_free(), after the pass. 0 or HT_ERR_NOMEM.
 */
struct ht__pass;
struct ht__query;
struct ht__wfeed;
int ht__wtable_attach(struct ht__pass *p, bool commit, struct ht__wtree *tree,
		      const struct ht__window *w, struct ht__wstacks *stacks,
		      struct ht__frame_matcher *require, const struct ht__query *q,
		      bool stop_at_end, struct ht__wfeed **out);
void ht__wfeed_free(struct ht__wfeed *f);

#endif
