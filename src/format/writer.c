/*
 * writer.c - writes .htr traces (see writer.h for the calls and
 * docs/trace-format.md for the bytes): encodes events into a raw chunk
 * buffer, compresses full chunks with zstd and appends them with write(2),
 * and at finish appends the table chunks and the footer.
 */
#include "format/writer.h"
#include "base/errors.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_c_literalCompressionMode (ZSTD_LEVEL_HUF) */
#include <zstd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "format/codec.h"

/* Events chunks at zstd level 6: on real traces it is 10 to 18 % smaller
   than level 3 (lazy matching finds the repeats of heap patterns) for 0 to
   40 ns more per event, and it is what keeps the python benchmark's trace
   under twice heaptrack's; the writer stays at millions of events per
   second (docs/trace-format.md). */
#define ZSTD_LEVEL 6
/* Each stream (or plane) of an events chunk is its own zstd frame, at
   level 6 where level 6 finds repeats in it and at level 1 where it is
   mostly entropy (random sizes, the free codes of a random-free loop):
   there level 6 spends five times level 1's time to gain nothing. Which one
   is chosen at the trials below (PLANE_TRIAL_BYTES): level 1 when level 1
   leaves more than ENTROPY_ABOVE/16 of the bytes (mostly entropy: level 6
   is slow on it, whatever it saves), or when level 6 makes the frame
   smaller by no more than 1/STRONG_GAIN of it. A ratio rule alone kept the
   planes of alloc_loop's address codes at level 6 (they compress to 0.39,
   but by their Huffman table, not by repeats) for nothing. */
#define ZSTD_LEVEL_FAST 1
/* Those at level 6 with hash and chain tables of 2^EVENTS_TABLE_LOG
   entries instead of the level's 2^18 to 2^19: zstd clears its tables for
   every frame, and a stream's frame is a few hundred KiB at most. On the
   python json and alloc_loop streams, 4 to 11 % fewer instructions and
   about 10 % less time in zstd for 0.02 % more bytes. And matches of at
   least EVENTS_MIN_MATCH bytes, as the level has for 256 KiB or more
   (4 below; in streams of varints short repeats say little): 10 to 15 %
   less time in those frames, python json's trace 0.2 % smaller, clang++'s 0.3 %
   larger (docs/performance.md, "zstd per stream"). And zstd's greedy
   parser with 2^EVENTS_SEARCH_LOG tries a match (level 6: lazy, 2^3):
   on the bench traces' streams 20 to 25 % less time in zstd, and smaller
   traces but for clang++'s (+0.2 %; jq and python -1.8 %, the loops
   -0.1 to -0.3 %; docs/performance.md, "The writer, session 24"). */
#define EVENTS_TABLE_LOG 16
#define EVENTS_MIN_MATCH 5
#define EVENTS_STRATEGY ZSTD_greedy
#ifndef EVENTS_SEARCH_LOG
#define EVENTS_SEARCH_LOG 4
#endif
/* A third way, below level 1 (ZSTD_LEVEL_HUF): zstd's fastest level with
   its literals Huffman coded (ZSTD_c_literalCompressionMode, which
   libzstd 1.5 takes from a program linked to it dynamically; negative
   levels leave literals raw unless told), which next to never looks for a
   match. On streams of entropy without repeats (the address codes and
   sizes of a random-free loop) level 1's few short matches cost more than
   they save: alloc_loop's address codes 8 % and its sizes 2 % smaller, in
   a third of level 1's time. A trial takes it where it is smaller than the
   level it would keep by more than 1/HUF_GAIN, and tries it only where the
   bytes' entropy allows that (huf_bound). HUF_AGAIN: a stream that took
   it in the writer's first trial is tried again in the next chunk, the
   first one being often a program's start unlike its run (python's chose
   it for the sizes, where later chunks find repeats). Its hash table is
   small: zstd clears it for every frame and hardly uses it. */
#define ZSTD_LEVEL_HUF (-1000)
#define HUF_TABLE_LOG 10
#define HUF_GAIN 64
/* A fourth, between levels 1 and 6 (ZSTD_LEVEL_MID, a code of its own):
   zstd's double-fast matcher (level 3's: two hash tables, no chains) with
   the events' tables and matches of MID_MIN_MATCH bytes or more. Where
   level 6 saves a stream more than 1/STRONG_GAIN but less than
   1/MID_BELOW of level 1's frame, a trial tries it too and keeps it when
   it is within 1/MID_SLACK of level 6: the random-free loop's packed time
   deltas, level 6's most expensive stream there (1 to 4 % smaller than
   level 1 for three times its time), are 0.7 % larger with it in half of
   level 6's time; python's and jq's level-6 streams save more than 1/16
   and are not tried (docs/performance.md, "The writer, session 27"). */
#define ZSTD_LEVEL_MID 3
#define MID_MIN_MATCH 6
#define MID_BELOW 16
#define MID_SLACK 64
/* An events chunk packs its time deltas (HT__CHUNK_TPACK) when at least
   TPACK_SHARE eighths of the previous chunk's deltas were 0 to 3. */
#ifndef TPACK_SHARE
#define TPACK_SHARE 6
#endif
/* The chunks of a group after its first have free codes with two tag
   bits (HT__CHUNK_FREL) when those codes of the first chunk's frees took
   fewer bytes than with one, plus 1/FREL_SLACK: codes that repeat
   compress better than their bytes say (python json's chunks came to
   0.36 to 1.02 of the bytes, the random-free loops' and deep stacks' to
   1.07 to 1.08). */
#define FREL_SLACK 32
#define STRONG_GAIN 256
#define ENTROPY_ABOVE 11 /* 11/16 */
/* The streams of varints, which may be stored as two planes (codec.h): on
   the benchmark traces planes make the stack ids 25 to 45 % smaller and
   the address codes of a random-free loop 10 %, but the free codes of jq
   13 % larger (planes cut the repeats zstd finds in them). So in the first
   events chunk, and then once PLANE_TRIAL_BYTES of raw events have been
   written since the last trial, each such stream is compressed both ways,
   each at both levels, and keeps the smallest; the chunks in between are
   written the way the last trial chose. A trial compresses a stream up to
   six times: every 8 MiB they were a third of the compression's
   instructions on the random-free loop and a sixth on jq, and their
   choices changed none of the bench traces by more than 0.3 % (python
   json's became 0.3 % smaller without them): every 64 MiB, with the
   retries below for a stream that changes (docs/performance.md, "The
   writer, session 27"). */
#define PLANE_STREAMS                                                                              \
	(1u << HT__S_TIME | 1u << HT__S_ADDR | 1u << HT__S_SIZE | 1u << HT__S_STACK |              \
	 1u << HT__S_FREE)
#ifndef PLANE_TRIAL_BYTES
#define PLANE_TRIAL_BYTES (64u << 20)
#endif
/* A trial judges a stream by one chunk, which may not be like the next
   ones. One of fewer than TRIAL_MIN bytes says little (jq's frees while
   it reads its input): that stream is tried again at the next chunk,
   cheap while it stays that small. A stream that compresses more than
   half worse than when it was judged (jq's frees when it ends, smaller as
   planes where the ones before were smaller whole) is judged again at the
   next chunk, planes against whole at the levels it has: one more
   compression of it. A judgement keeps the planes-or-whole choice the
   stream has unless the other is more than 1/KEEP_GAIN smaller, so
   chunks that differ by little do not flip it. docs/performance.md has
   the sizes and the cost. */
#define TRIAL_MIN (16u << 10)
#define WORSE 2 /* more than 1/WORSE worse */
#define KEEP_GAIN 32
/* Tables are written once, at finish, while the user waits for the
   recording to end: up to TABLE_STRONG_MAX raw bytes they get level 10
   (2 to 3 % smaller than level 6); larger ones the events level. Level 15
   took 0.23 s of CPU on clang++'s 1.8 MB DEFS and 0.46 MB SYMBOLS (format
   version 8, whose definitions were a table), level 10 0.05 s for 0.3 %
   more trace; its SYMBOLS alone, 0.039 s and 0.004 s. */
#define ZSTD_LEVEL_TABLES 10
#define TABLE_STRONG_MAX (4u << 20)
/* The DEFS stream of an events chunk (format version 9: the definitions'
   only copy, which the DEFS table at finish repeated before). */
#define DEFS_LEVEL ZSTD_LEVEL_TABLES

/* The most bytes one event adds to a stream, and to MISC without a name or
   a process description (head, func and masks; raw address codes; varints). */
#define EV_MAX 32
#define EV_MAX_MISC 128

/* Threads seen in the current chunk: events name a slot, not (process, tid). */
struct slot {
	uint32_t process;
	int32_t pid;
	int32_t tid;
	uint64_t last_addr; /* base of the next address delta */
	uint64_t next_top;  /* the end of the thread's last new block */
	uint64_t fresh_top; /* the end of its last block not taken from a ring */
	/* The ends of its last HT__ADDR_ENDS new blocks, the latest at
	   ends[ends_pos % HT__ADDR_ENDS] (version 13's END codes). */
	uint64_t ends[HT__ADDR_ENDS];
	uint32_t ends_pos;
	/* Per size class, the stack of its last event with a stack and a
	   size: a stack code 0 says the same again (docs/trace-format.md). */
	uint32_t last_stack[HT__RING_CLASSES];
	/* Its free position: the number among its own allocations of its
	   own block that left last by an index code in a chunk with
	   HT__CHUNK_FREL (version 12); est_own the same in a chunk without
	   it that weighs the two forms, for the weighing. */
	uint32_t free_own, est_own;
};

/* Open-addressing map (process, tid) -> slot, emptied per chunk by a
   generation bump instead of a memset. */
struct slot_map_entry {
	uint64_t key;
	uint32_t slot;
	uint32_t gen;
};

/* A live block allocated in the current group of chunks, by address: the
   thread slot that made it, its number among that slot's allocations and
   its size class. Stale generations (and generation 0) are empty; a block
   freed is taken out, so the map holds the group's live blocks only (with
   tombstones it held every allocation of a group, 32 MB for 8 MiB of
   alloc_loop's events where its live blocks take 64 KB). It is kept at
   most a quarter full: probes stay short. */
/* 16 bytes: the map is probed at random once per event, and its misses in
   the cache were a quarter of the encoder's time with 24-byte entries. */
#define AMAP_GEN_MAX 0x1fffu /* the group generation wraps at 2^13 */
struct amap_ent {
	uint64_t addr;
	uint32_t own;
	uint32_t gen : 13; /* amap_gen when made */
	uint32_t slot : 12;
	uint32_t cls : 7; /* ht__new_block_class of the block */
};
_Static_assert(HT__MAX_SLOTS <= 4096 && HT__RING_CLASSES <= 128, "amap_ent bit fields");
static void amap_release(struct ht__writer *w, struct amap_ent *m);
static void amap_set_size(struct ht__writer *w, uint32_t size);

/* An events chunk handed to its compression: the header's fields that
   encoding decides (the rest is the compression's). */
struct chunk_meta {
	size_t raw_len; /* its streams' total length */
	uint32_t ev_count;
	uint64_t first_ts, last_ts;
	bool cont;	 /* it continues the group of the chunk before */
	bool defs_reset; /* a new group began since the last chunk with definitions */
	bool tpack;	 /* its time deltas are packed (HT__CHUNK_TPACK) */
	bool frel;	 /* its free codes have two tag bits (HT__CHUNK_FREL) */
	uint32_t tsaved; /* the bytes packing saved (ht__writer's tsaved) */
};

/* A zstd context and what compressing a stream needs beside it. The
   writer has three: its own, for tables and a chunk's table and
   definitions (Z_WRITER), and one for each thread that compresses a
   chunk's streams, the compression's thread (Z_THREAD) and the encoder,
   which takes the streams the thread has not begun when it would wait
   for them (Z_ENCODER; compress_share). */
struct zctx {
	ZSTD_CCtx *cctx;
	int level;	      /* the cctx's compression level */
	int tlog;	      /* and its table logs (EVENTS_TABLE_LOG), 0: the level's */
	struct ht__buf plane; /* a stream's planes: the first, then at its length the second */
};
enum { Z_WRITER, Z_THREAD, Z_ENCODER, Z_COUNT };

struct ht__writer {
	int fd;
	int err;	     /* sticky: the first error ends writing */
	int cerr;	     /* the same, of compressing and writing chunks (their thread) */
	uint64_t off;	     /* bytes written so far */
	uint32_t seq;	     /* next chunk number */
	size_t plane_budget; /* raw bytes before the next trial (PLANE_TRIAL_BYTES) */
	bool tried;	     /* a chunk was a trial (HUF_AGAIN) */
	struct zctx z[Z_COUNT];
	struct ht__buf comp;
	/* The chunk being compressed: its streams and meta, whether it is a
	   trial and the writer's first, each stream's frames (zout) and the
	   length of its first plane or whole (zlo; compress_events_stream). */
	struct ht__buf *zst;
	const struct chunk_meta *zmeta;
	bool ztrial, zfirst;
	struct ht__buf zout[HT__S_DEFS];
	size_t zlo[HT__NSTREAMS];

	struct ht__buf st[HT__NSTREAMS]; /* streams of the current events chunk */
	uint32_t fits;			 /* events known to fit in the streams' room (EV_MAX) */
	/* The zstd level of each stream, whole and as its two planes
	   (STRONG_GAIN), and whether the last trial chose planes. */
	int st_level[HT__NSTREAMS][3];
	bool planes_on[HT__NSTREAMS];
	/* Per stream: the next chunk is its trial (RETRY_FULL: TRIAL_MIN) or
	   judges planes against whole (RETRY_PLANES: WORSE), and its
	   compressed bytes per 4096 raw ones when it was last judged. */
	uint8_t retry[HT__NSTREAMS];
	uint32_t judged_ratio[HT__NSTREAMS];
	size_t raw_len; /* their total length */
	/* Plain events (put_plain_heap) that surely leave raw_len and tsaved
	   below chunk_target: the streams are summed only when they are used
	   up (close_check). */
	uint32_t close_in;
	uint32_t ev_count;
	uint64_t first_ts;
	uint64_t last_ts; /* of the current chunk */
	uint64_t prev_ts; /* base of the next timestamp delta, in ts_unit */
	/* Whether the chunk packs its time deltas (HT__CHUNK_TPACK): when
	   at least TPACK_SHARE eighths of the previous chunk's deltas were
	   small (tsmall of its events). Then small deltas are held until three
	   fill a TIME varint, as 2-bit fields, the oldest highest. */
	bool tpack;
	uint32_t tsmall;
	uint32_t tpend, tpend_n;
	/* Bytes that packing saved in the chunk (a varint per delta less
	   what TIME took): a chunk's size and so its group's count them, so
	   that they hold the events they held before packing, and the
	   reader's list of a group's allocations is no longer (9 bytes an
	   allocation: jq's analyze took 1.3 MB more without). */
	uint32_t tsaved;
	/* Whether the chunk's free codes have two tag bits (HT__CHUNK_FREL):
	   as the first chunk of the group chose (frel_judge), when over its
	   frees of a slot's own blocks the codes with two (the shorter form)
	   took fewer bytes than with one (frel_one, frel_two). Only that
	   chunk weighs the two forms: weighing every chunk cost the
	   random-free loop's writer 43 instructions a free (its chunks never
	   chose two tag bits). */
	bool frel, frel_judge, frel_any; /* frel_any: either */
	uint64_t frel_one, frel_two;
	/* The search for a new block's END code (about 60 instructions, on
	   the way to a raw code): after END_MISSES searches in a row that
	   found none the next END_SKIP are skipped (those blocks are raw).
	   The random-free loop's new blocks come from glibc's bins, where
	   END never hits: searching each cost it 23 instructions an
	   allocation; python finds one in about 4 searches of 10. */
	uint32_t end_miss, end_skip;
	uint32_t ts_unit; /* ns per stored timestamp unit, >= 1 */
	uint64_t event_total;
	uint64_t lost_by_cause[3]; /* ht__writer_set_losses() */
	uint64_t sample_rate;	   /* ht__trace_meta.sample_rate */
	uint64_t window[4];	   /* ht__writer_set_window() */
	uint32_t event_chunks;
	uint64_t max_ts;
	uint32_t chunk_target; /* raw bytes that close an events chunk */
	/* The group of chunks being written (HT__CHUNK_CONT): its chunks so
	   far, their raw bytes, the bytes after which the next chunk starts a
	   new group, and whether it must (the slots are used up). */
	uint32_t group_chunks;
	size_t group_bytes;
	size_t group_target;
	bool group_full;

	struct slot *slots;
	ht__rings *rings;	    /* per slot: recently freed addresses by size class */
	struct ht__own *own;	    /* per slot: its allocations in the chunk */
	struct ht__raw_frees *rawf; /* per slot: its last raw frees (version 14) */
	uint32_t nslots;
	uint32_t slots_cap;
	/* Allocations of the chunk (address prediction, codec.h): how many, and
	   the latest at each address. */
	uint32_t nallocs;
	struct amap_ent *amap;
	/* The mapping that a map of AMAP_HUGE_BYTES or more lives at the
	   start of and grows into (amap_grow), and its length; NULL: none. */
	struct amap_ent *amap_region;
	size_t amap_region_bytes;
	uint32_t amap_size;  /* power of two, */
	uint32_t amap_limit; /* amap_live that makes it grow (amap_full) */
	uint32_t amap_shift; /* 64 - its log2 */
	uint32_t amap_gen;
	uint32_t amap_live; /* its entries of this generation */
	uint32_t cur_slot;  /* slot of the previous event, UINT32_MAX at chunk start */
	struct slot_map_entry *map;
	uint32_t map_size; /* power of two */
	uint32_t gen;

	/* The previous stack defined in the group of chunks: a stack is
	   written as the frames it does not share with it. */
	uint32_t *prev_stack;
	uint32_t prev_n;
	uint32_t prev_cap;
	/* The last module, frame and stack id defined in the group (-1:
	   none): an id is written as its difference from the next one. */
	int64_t last_id[3];

	/* The DEFINDEX table: a record per events chunk with definitions,
	   the offset of the last one's chunk, and whether the previous stack
	   was reset (a new group) since that chunk. */
	struct ht__buf defidx;
	uint64_t defidx_off;
	bool defs_reset;
	struct ht__buf syms; /* SYMBOLS table payload */
	uint32_t syms_count;
	struct ht__proctab procs;

	uint64_t start_realtime_ns;
	uint32_t stack_mask;
	uint32_t flags;
	struct ht__buf cmd; /* argc and argv as encoded in META */
	char *hostname;
	char *untraced; /* NULL: nothing known against tracing the program */

	/* Events chunks compressed and written on a thread of their own
	   (ht__writer_set_async): the encoder hands a full chunk's streams
	   over and goes on with the next chunk in the other set; when the
	   chunk before is not written yet, it compresses the streams of it
	   the thread has not begun (compress_share), then waits. What the
	   compression uses (comp, z, zout, the trials' state, seq, off,
	   defidx, cerr) belongs to the job while one is out: each stream's to
	   the thread that took it (z[Z_THREAD] or z[Z_ENCODER]), the rest to
	   the thread that ends the last stream; the encoder's state is never
	   the thread's. */
	bool async;	/* asked for; the thread starts with the first chunk */
	bool thread_on; /* it runs */
	bool job_full;	/* job_st holds a chunk to write (under mu) */
	bool quit;	/* the thread ends when idle (under mu) */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct ht__buf job_st[HT__NSTREAMS];
	struct chunk_meta job;
	/* The job's streams are taken one at a time by whichever thread comes
	   (job_next: the next to take, HT__S_DEFS and more: none left);
	   job_done of them are compressed, and the thread that compresses the
	   last writes the chunk (job_err: the first failure). */
	atomic_uint job_next, job_done;
	atomic_int job_err;
};

static int write_all(struct ht__writer *w, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = write(w->fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return w->cerr = ht__error_from_errno(errno);
		}
		p += n;
		len -= (size_t)n;
		w->off += (uint64_t)n;
	}
	return 0;
}

/* A zstd context at level with the writer's parameters (a checksum per
   frame, literals Huffman coded), or NULL. */
static ZSTD_CCtx *cctx_new(int level)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();
	if (c && (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level)) ||
		  ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1)) ||
		  ZSTD_isError(
		      ZSTD_CCtx_setParameter(c, ZSTD_c_literalCompressionMode, ZSTD_ps_enable)))) {
		ZSTD_freeCCtx(c);
		c = NULL;
	}
	return c;
}

/* Appends to out one zstd frame of payload at level on z, with hash and
   chain tables of 2^tlog entries (0: the level's); its size, or 0 when
   it fails. */
static size_t zframe(struct zctx *z, struct ht__buf *out, int level, int tlog,
		     const uint8_t *payload, size_t len)
{
	size_t bound = ZSTD_compressBound(len);
	if (level != z->level || tlog != z->tlog) {
		if (ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_hashLog, tlog)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_chainLog, tlog)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_minMatch,
							level == ZSTD_LEVEL_MID ? MID_MIN_MATCH
							: tlog == EVENTS_TABLE_LOG
							    ? EVENTS_MIN_MATCH
							    : 0)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_strategy,
							level == ZSTD_LEVEL_MID	   ? ZSTD_dfast
							: tlog == EVENTS_TABLE_LOG ? EVENTS_STRATEGY
										   : 0)) ||
		    ZSTD_isError(
			ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_searchLog,
					       tlog == EVENTS_TABLE_LOG ? EVENTS_SEARCH_LOG : 0))) {
			z->level = INT32_MIN; /* set again next time */
			return 0;
		}
		z->level = level;
		z->tlog = tlog;
	}
	if (ht__buf_reserve(out, bound) < 0)
		return 0;
	size_t c = ZSTD_compress2(z->cctx, out->data + out->len, bound, payload, len);
	if (ZSTD_isError(c))
		return 0;
	out->len += c;
	return c;
}

/* A frame of the writer's own (tables, a chunk's table and definitions)
   appended to w->comp; its size, or 0 with w->cerr set. */
static size_t compress_frame(struct ht__writer *w, int level, const uint8_t *payload, size_t len)
{
	size_t c = zframe(&w->z[Z_WRITER], &w->comp, level, 0, payload, len);
	if (!c)
		w->cerr = HT_ERR_NOMEM;
	return c;
}

/* A frame of an events stream (EVENTS_TABLE_LOG, HUF_TABLE_LOG). */
static size_t compress_ev(struct zctx *z, struct ht__buf *out, int level, const uint8_t *d,
			  size_t len)
{
	int tlog = level == ZSTD_LEVEL || level == ZSTD_LEVEL_MID ? EVENTS_TABLE_LOG
		   : level == ZSTD_LEVEL_HUF			  ? HUF_TABLE_LOG
								  : 0;
	return zframe(z, out, level, tlog, d, len);
}

/* Appends a chunk of raw_size bytes whose compressed frames are in w->comp. */
static int append_chunk(struct ht__writer *w, uint8_t kind, uint8_t flags, size_t raw_size,
			uint32_t count, uint64_t first_ts, uint64_t last_ts)
{
	struct ht__chunk_header h = {
	    .kind = kind,
	    .flags = flags,
	    .raw_size = (uint32_t)raw_size,
	    .comp_size = (uint32_t)w->comp.len,
	    .count = count,
	    .seq = w->seq++,
	    .first_ts = first_ts,
	    .last_ts = last_ts,
	};
	uint8_t hb[HT__CHUNK_HEADER_SIZE];
	ht__chunk_header_pack(hb, &h);
	if (write_all(w, hb, sizeof(hb)) < 0 || write_all(w, w->comp.data, w->comp.len) < 0)
		return w->cerr;
	return 0;
}

/* The level of a table chunk of len raw bytes. */
static int table_level(size_t len)
{
	return len <= TABLE_STRONG_MAX ? ZSTD_LEVEL_TABLES : ZSTD_LEVEL;
}

/* Compresses payload and appends it as one chunk. */
static int write_chunk(struct ht__writer *w, uint8_t kind, const uint8_t *payload, size_t len,
		       uint32_t count, uint64_t first_ts, uint64_t last_ts)
{
	int level = kind != HT__CHUNK_EVENTS ? table_level(len) : ZSTD_LEVEL;
	w->comp.len = 0;
	if (!compress_frame(w, level, payload, len))
		return w->cerr;
	return append_chunk(w, kind, 0, len, count, first_ts, last_ts);
}

/* The bytes no Huffman code of d's bytes goes below: their order-0
   entropy in each zstd block (a block has a table of its own). */
static size_t huf_bound(const uint8_t *d, size_t len)
{
	double bits = 0;
	for (size_t off = 0; off < len; off += ZSTD_BLOCKSIZE_MAX) {
		size_t n = len - off < ZSTD_BLOCKSIZE_MAX ? len - off : ZSTD_BLOCKSIZE_MAX;
		uint32_t h[256] = {0};
		for (size_t i = 0; i < n; i++)
			h[d[off + i]]++;
		for (int k = 0; k < 256; k++)
			if (h[k])
				bits += h[k] * log2((double)n / h[k]);
	}
	return (size_t)(bits / 8);
}

/* Appends a frame of d at ZSTD_LEVEL_HUF after the frame of size best
   at out->len - best and keeps the smaller (HUF_GAIN); the size kept.
   Not tried where the bytes' entropy says it cannot be smaller: where
   level 1 or 6 found repeats (nearly every stream of python and jq),
   trying cost the python recode 6 % more instructions in zstd. */
static size_t try_huf(struct zctx *z, struct ht__buf *out, int *level, size_t best,
		      const uint8_t *d, size_t len)
{
	if (huf_bound(d, len) >= best)
		return best;
	size_t at = out->len - best, huf = compress_ev(z, out, ZSTD_LEVEL_HUF, d, len);
	if (!huf)
		return 0;
	if (huf + huf / HUF_GAIN >= best) {
		out->len = at + best;
		return best;
	}
	memmove(out->data + at, out->data + at + best, huf);
	out->len = at + huf;
	*level = ZSTD_LEVEL_HUF;
	return huf;
}

/* Appends one frame of a stream or plane at its level; in a trial, at
   level 1 and level 6, keeping the smaller and its level (STRONG_GAIN),
   where level 6 gains little at ZSTD_LEVEL_MID too (MID_BELOW,
   MID_SLACK), and at ZSTD_LEVEL_HUF as well (HUF_GAIN), to out on z. Its
   size, or 0 when it fails. */
static size_t compress_stream(struct zctx *z, struct ht__buf *out, int *level, bool trial,
			      const uint8_t *d, size_t len)
{
	if (!trial)
		return compress_ev(z, out, *level, d, len);
	size_t at = out->len, fast = compress_ev(z, out, ZSTD_LEVEL_FAST, d, len);
	if (!fast)
		return 0;
	*level = ZSTD_LEVEL_FAST;
	if (fast * 16 > len * ENTROPY_ABOVE) /* mostly entropy: level 6 is not tried */
		return try_huf(z, out, level, fast, d, len);
	size_t at2 = out->len, strong = compress_ev(z, out, ZSTD_LEVEL, d, len);
	if (!strong)
		return 0;
	if (fast <= strong + strong / STRONG_GAIN) {
		out->len = at2;
		return try_huf(z, out, level, fast, d, len);
	}
	if (fast < strong + strong / MID_BELOW) {
		size_t at3 = out->len, mid = compress_ev(z, out, ZSTD_LEVEL_MID, d, len);
		if (!mid)
			return 0;
		if (mid <= strong + strong / MID_SLACK) {
			memmove(out->data + at, out->data + at3, mid);
			out->len = at + mid;
			*level = ZSTD_LEVEL_MID;
			return try_huf(z, out, level, mid, d, len);
		}
		out->len = at3;
	}
	memmove(out->data + at, out->data + at2, strong);
	out->len = at + strong;
	*level = ZSTD_LEVEL;
	return try_huf(z, out, level, strong, d, len);
}

enum { RETRY_FULL = 1, RETRY_PLANES = 2 };

/* Appends stream i (b) to out on z, whole or as its planes
   (PLANE_TRIAL_BYTES; judge: planes against whole at the levels the
   stream has, TRIAL_MIN); *lo is then the length of its first plane,
   else of the stream. 0 or HT_ERR_NOMEM. */
static int compress_events_stream(struct ht__writer *w, struct zctx *z, struct ht__buf *out,
				  struct ht__buf *b, int i, bool trial, bool judge, size_t *lo)
{
	*lo = b->len;
	if (!b->len)
		return 0;
	judge |= trial; /* planes against whole; a trial tries the levels too */
	bool planes = (PLANE_STREAMS >> i & 1) && (judge || w->planes_on[i]);
	if (planes) {
		if (ht__buf_reserve(&z->plane, 2 * b->len) < 0)
			return HT_ERR_NOMEM;
		*lo = ht__planes_split(b->data, b->len, z->plane.data, z->plane.data + b->len);
		planes = *lo < b->len; /* else every varint is one byte */
	}
	size_t at = out->len, whole = SIZE_MAX;
	if ((!planes || judge) &&
	    !(whole = compress_stream(z, out, &w->st_level[i][0], trial, b->data, b->len)))
		return HT_ERR_NOMEM;
	if (planes) {
		size_t at2 = out->len;
		size_t c = compress_stream(z, out, &w->st_level[i][1], trial, z->plane.data, *lo);
		size_t c2 = c ? compress_stream(z, out, &w->st_level[i][2], trial,
						z->plane.data + b->len, b->len - *lo)
			      : 0;
		if (!c2)
			return HT_ERR_NOMEM;
		c += c2;
		bool keep = whole == SIZE_MAX ? true
			    : w->planes_on[i] ? c < whole + whole / KEEP_GAIN
					      : c + c / KEEP_GAIN < whole;
		if (keep) { /* keep the planes */
			if (whole != SIZE_MAX)
				memmove(out->data + at, out->data + at2, c);
			out->len = at + c;
		} else { /* keep the whole stream */
			out->len = at2;
			planes = false;
		}
	}
	if (judge)
		w->planes_on[i] = planes;
	if (!planes)
		*lo = b->len;
	return 0;
}

/* Makes the events chunk of streams st and meta m the one compressed
   next: whether it is a trial. On the encoder's thread, in chunk order. */
static void chunk_begin(struct ht__writer *w, struct ht__buf *st, const struct chunk_meta *m)
{
	bool trial = !w->plane_budget;
	if (trial)
		w->plane_budget = PLANE_TRIAL_BYTES;
	w->zfirst = trial && !w->tried; /* the writer's first trial (HUF_AGAIN) */
	w->tried |= trial;
	w->ztrial = trial;
	size_t as_raw = m->raw_len + m->tsaved; /* the events' size before packing */
	w->plane_budget -= as_raw < w->plane_budget ? as_raw : w->plane_budget;
	w->zst = st;
	w->zmeta = m;
}

/* Compresses stream i of the chunk begun into w->zout[i] on z, and
   judges how its next chunk is compressed: on any thread, each stream by
   one (the stream's state is its own). 0 or HT_ERR_NOMEM. */
static int compress_one(struct ht__writer *w, struct zctx *z, int i)
{
	struct ht__buf *b = &w->zst[i], *out = &w->zout[i];
	size_t len = b->len;
	bool t = w->ztrial || w->retry[i] == RETRY_FULL, judge = w->retry[i] == RETRY_PLANES;
	out->len = 0;
	int rc = compress_events_stream(w, z, out, b, i, t, judge, &w->zlo[i]);
	if (rc < 0 || !len)
		return rc;
	uint32_t ratio = (uint32_t)(out->len * 4096 / len);
	if (t || judge) {
		w->judged_ratio[i] = ratio;
		const int *lv = w->st_level[i]; /* HUF_AGAIN: */
		bool huf = w->zfirst && (lv[0] == ZSTD_LEVEL_HUF || lv[1] == ZSTD_LEVEL_HUF ||
					 lv[2] == ZSTD_LEVEL_HUF);
		w->retry[i] = t && (len < TRIAL_MIN || huf) ? RETRY_FULL : 0;
	} else if (ratio > w->judged_ratio[i] + w->judged_ratio[i] / WORSE) {
		w->retry[i] = RETRY_PLANES;
	}
	return 0;
}

/* Writes the chunk begun, its streams compressed (w->zout), and empties
   its streams: on the thread that compressed the last of them. */
static int chunk_finish(struct ht__writer *w)
{
	struct ht__buf *st = w->zst;
	const struct chunk_meta *m = w->zmeta;
	size_t *lo = w->zlo;
	if (w->cerr)
		return w->cerr;
	/* The streams, each its own zstd frame or two, then in front of them
	   their table (each stream's length, and its first plane's when it is
	   stored as planes) as a frame of its own: a reader decompresses the
	   concatenated frames in one call. */
	w->comp.len = 0;
	for (int i = 0; i < HT__S_DEFS; i++) {
		if (!w->zout[i].len) /* an empty stream: no frame, maybe no buffer yet */
			continue;
		if (ht__buf_reserve(&w->comp, w->zout[i].len) < 0)
			return w->cerr = HT_ERR_NOMEM;
		memcpy(w->comp.data + w->comp.len, w->zout[i].data, w->zout[i].len);
		w->comp.len += w->zout[i].len;
	}
	/* The definitions: one frame at the tables' level, which DEFINDEX
	   points at. */
	_Static_assert(HT__S_DEFS == HT__NSTREAMS - 1, "DEFS is the last stream");
	size_t defs_at = w->comp.len, defs_comp = 0;
	lo[HT__S_DEFS] = st[HT__S_DEFS].len;
	if (lo[HT__S_DEFS] &&
	    !(defs_comp = compress_frame(w, DEFS_LEVEL, st[HT__S_DEFS].data, lo[HT__S_DEFS])))
		return w->cerr;
	uint8_t table[11 * (2 * HT__NSTREAMS + 1)];
	uint8_t *p = ht__put_varint(table, HT__NSTREAMS);
	for (int i = 0; i < HT__NSTREAMS; i++) {
		p = ht__put_varint(p, (uint64_t)st[i].len << 1 | (lo[i] < st[i].len));
		if (lo[i] < st[i].len)
			p = ht__put_varint(p, lo[i]);
	}
	size_t tlen = p - table, streams = w->comp.len;
	uint8_t tframe[256];
	_Static_assert(sizeof(table) + 64 <= sizeof(tframe), "a table's frame fits");
	size_t tc = compress_frame(w, ZSTD_LEVEL_FAST, table, tlen);
	if (!tc)
		return w->cerr;
	memcpy(tframe, w->comp.data + streams, tc);
	memmove(w->comp.data + tc, w->comp.data, streams);
	memcpy(w->comp.data, tframe, tc);
	size_t raw = tlen + m->raw_len;
	if (defs_comp) {
		if (ht__buf_reserve(&w->defidx, 5 * 10) < 0)
			return w->cerr = HT_ERR_NOMEM;
		uint8_t *q = w->defidx.data + w->defidx.len;
		q = ht__put_varint(q, w->off - w->defidx_off);
		q = ht__put_varint(q, tc + defs_at);
		q = ht__put_varint(q, defs_comp);
		q = ht__put_varint(q, st[HT__S_DEFS].len);
		q = ht__put_varint(q, m->defs_reset ? 1 : 0);
		w->defidx.len = q - w->defidx.data;
		w->defidx_off = w->off;
	}
	for (int i = 0; i < HT__NSTREAMS; i++)
		st[i].len = 0;
	return append_chunk(w, HT__CHUNK_EVENTS,
			    (m->cont ? HT__CHUNK_CONT : 0) | (m->tpack ? HT__CHUNK_TPACK : 0) |
				(m->frel ? HT__CHUNK_FREL : 0),
			    raw, m->ev_count, m->first_ts, m->last_ts);
}

/* Compresses the streams st of an events chunk and appends the chunk;
   empties the streams. Without the compression's thread. */
static int compress_chunk(struct ht__writer *w, struct ht__buf *st, const struct chunk_meta *m)
{
	if (w->cerr)
		return w->cerr;
	chunk_begin(w, st, m);
	for (int i = 0; i < HT__S_DEFS; i++) {
		int rc = compress_one(w, &w->z[Z_ENCODER], i);
		if (rc < 0)
			return w->cerr = rc;
	}
	return chunk_finish(w);
}

/*
 * Compresses on z the streams of the chunk handed over that no thread has
 * taken yet, one at a time; the thread that compresses the last one
 * writes the chunk and says so (job_full). The compression's thread does
 * it, and the encoder too when it would wait for that thread: with three
 * busy threads (the program, the collector's, the compression's) on two
 * cores the encoder, waiting, left the compression's thread a core alone
 * while the program waited for room, asleep (docs/performance.md, "The
 * collector, session 28").
 */
static void compress_share(struct ht__writer *w, struct zctx *z)
{
	for (;;) {
		/* looked at first: job_next goes past HT__S_DEFS only by the
		   takers that race for a job's last stream, never wraps */
		if (atomic_load(&w->job_next) >= HT__S_DEFS)
			return;
		unsigned i = atomic_fetch_add(&w->job_next, 1);
		if (i >= HT__S_DEFS)
			return;
		if (!atomic_load(&w->job_err)) {
			int rc = compress_one(w, z, (int)i);
			if (rc < 0)
				atomic_store(&w->job_err, rc);
		}
		if (atomic_fetch_add(&w->job_done, 1) + 1 < HT__S_DEFS)
			continue;
		int rc = atomic_load(&w->job_err);
		if (rc < 0 && !w->cerr)
			w->cerr = rc;
		chunk_finish(w); /* sets cerr when it fails */
		pthread_mutex_lock(&w->mu);
		w->job_full = false;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		return;
	}
}

/* Hands the chunk of streams job_st and meta job to the compression. */
static void hand_job(struct ht__writer *w)
{
	chunk_begin(w, w->job_st, &w->job);
	atomic_store(&w->job_done, 0);
	atomic_store(&w->job_err, 0);
	atomic_store(&w->job_next, 0); /* after the job: a taker sees it */
	pthread_mutex_lock(&w->mu);
	w->job_full = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void *compress_main(void *arg)
{
	struct ht__writer *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!(w->job_full && atomic_load(&w->job_next) < HT__S_DEFS) && !w->quit)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!(w->job_full && atomic_load(&w->job_next) < HT__S_DEFS))
			break;
		pthread_mutex_unlock(&w->mu);
		compress_share(w, &w->z[Z_THREAD]);
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* Waits until the chunk handed over last is written, compressing the
   streams of it that the compression's thread has not begun; its error,
   if any. */
static int wait_written(struct ht__writer *w)
{
	if (!w->thread_on)
		return w->cerr;
	compress_share(w, &w->z[Z_ENCODER]);
	pthread_mutex_lock(&w->mu);
	while (w->job_full)
		pthread_cond_wait(&w->cv, &w->mu);
	int rc = w->cerr;
	pthread_mutex_unlock(&w->mu);
	return rc;
}

/* Ends the compression's thread once the chunk it has is written. */
static void stop_thread(struct ht__writer *w)
{
	if (!w->thread_on)
		return;
	compress_share(w, &w->z[Z_ENCODER]); /* the last chunk's streams not begun */
	pthread_mutex_lock(&w->mu);
	w->quit = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	w->thread_on = false;
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
}

/* Starts the compression's thread; false when it cannot (then the encoder
   compresses as without one). */
static bool start_thread(struct ht__writer *w)
{
	if (pthread_mutex_init(&w->mu, NULL))
		return false;
	if (pthread_cond_init(&w->cv, NULL)) {
		pthread_mutex_destroy(&w->mu);
		return false;
	}
	/* Blocked signals: the collector's handlers run on its main thread. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&w->thread, NULL, compress_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		return false;
	}
	w->thread_on = true;
	return true;
}

static void put_time_held(struct ht__writer *w);

/*
 * Whether a group that holds its target's bytes goes on, up to twice
 * them: while at least an eighth of its allocations are still live, and
 * it has made fewer than HT__GROUP_ALLOCS. A block the group made and a
 * later group frees costs a raw address (python json: 27 % of its frees,
 * 79 % of its free codes' bytes); a reader keeps a group's allocations,
 * 8 bytes each, so a group that goes on costs it memory: only where
 * many of them are live, and the live ones are what it saves.
 */
static bool group_goes_on(const struct ht__writer *w)
{
	return w->group_bytes < 2 * (uint64_t)w->group_target && w->nallocs < HT__GROUP_ALLOCS &&
	       (uint64_t)w->amap_live * 8 >= w->nallocs;
}

/* The streams' total length: raw_len where it is kept (close_in). */
static size_t streams_len(const struct ht__writer *w)
{
	_Static_assert(HT__NSTREAMS == 8, "streams_len sums every stream");
	return w->st[0].len + w->st[1].len + w->st[2].len + w->st[3].len + w->st[4].len +
	       w->st[5].len + w->st[6].len + w->st[7].len;
}

/* Ends the events chunk being encoded: compressed and written now, or
   handed to the compression's thread. */
static int flush_events(struct ht__writer *w)
{
	if (w->err)
		return w->err;
	w->raw_len = streams_len(w);
	w->close_in = 0;
	if (!w->raw_len)
		return 0;
	if (w->tpend_n) { /* no delta is held past the chunk's end */
		if (ht__buf_reserve(&w->st[HT__S_TIME], 1) < 0)
			return w->err = HT_ERR_NOMEM;
		put_time_held(w);
		w->raw_len++;
	}
	struct chunk_meta m = {
	    .raw_len = w->raw_len,
	    .ev_count = w->ev_count,
	    .first_ts = w->first_ts,
	    .last_ts = w->last_ts,
	    .cont = w->group_chunks != 0,
	    .defs_reset = w->defs_reset,
	    .tpack = w->tpack,
	    .frel = w->frel,
	    .tsaved = w->tsaved,
	};
	if (w->frel_judge)
		w->frel = w->frel_two < w->frel_one + w->frel_one / FREL_SLACK;
	w->frel_one = w->frel_two = 0;
	/* The next chunk packs its time deltas if enough of this one's were
	   small: not at 1 ns, where deltas are hundreds of units and packing
	   would only make the single ones longer. */
	w->tpack = w->tsmall >= (uint64_t)w->ev_count * TPACK_SHARE / 8;
	w->tsmall = 0;
	if (w->st[HT__S_DEFS].len)
		w->defs_reset = false;
	if (w->async && !w->thread_on && !start_thread(w))
		w->async = false;
	int rc;
	if (w->thread_on) {
		if ((rc = wait_written(w)) < 0)
			return w->err = rc;
		for (int i = 0; i < HT__NSTREAMS; i++) {
			struct ht__buf b = w->job_st[i];
			w->job_st[i] = w->st[i];
			w->st[i] = b;
		}
		w->job = m;
		w->fits = 0; /* the other set's room is looked at again */
		hand_job(w);
	} else if ((rc = compress_chunk(w, w->st, &m)) < 0) {
		return w->err = rc;
	}
	if (w->ev_count)
		w->event_chunks++;
	w->raw_len = 0;
	w->ev_count = 0;
	w->first_ts = w->last_ts = 0;
	/* The next chunk continues this one's state (its group) unless the
	   group is full: then every state starts afresh. */
	w->group_bytes += m.raw_len + m.tsaved;
	w->tsaved = 0;
	if (++w->group_chunks < HT__GROUP_CHUNKS_V14 && !w->group_full &&
	    (w->group_bytes < w->group_target || group_goes_on(w))) {
		w->frel_judge = false;
		w->frel_any = w->frel;
		return 0;
	}
	w->frel_judge = w->frel_any = true;
	w->group_chunks = 0;
	w->group_bytes = 0;
	w->group_full = false;
	w->nallocs = 0;
	w->prev_n = 0; /* the next chunk's stacks share nothing yet */
	w->defs_reset = true;
	w->last_id[0] = w->last_id[1] = w->last_id[2] = -1;
	w->amap_live = 0;
	if (++w->amap_gen > AMAP_GEN_MAX) {
		memset(w->amap, 0, w->amap_size * sizeof(*w->amap));
		w->amap_gen = 1;
	}
	w->nslots = 0;
	w->cur_slot = UINT32_MAX;
	w->gen++;
	if (!w->gen) { /* wrapped: really clear the map once every 2^32 chunks */
		memset(w->map, 0, w->map_size * sizeof(*w->map));
		w->gen = 1;
	}
	return 0;
}

/* META payload: see docs/trace-format.md. */
static int write_meta(struct ht__writer *w, uint64_t duration_ns, uint64_t events_lost,
		      uint32_t flags)
{
	struct ht__buf b = {0};
	int rc = ht__buf_reserve(&b, 128 + w->cmd.len);
	if (rc < 0)
		return w->err = rc;
	uint8_t *p = b.data;
	p = ht__put_varint(p, 1); /* meta layout version */
	p = ht__put_varint(p, w->start_realtime_ns);
	p = ht__put_varint(p, duration_ns);
	p = ht__put_varint(p, events_lost);
	p = ht__put_varint(p, w->stack_mask);
	p = ht__put_varint(p, flags);
	p = ht__put_varint(p, w->event_total);
	b.len = p - b.data;
	memcpy(b.data + b.len, w->cmd.data, w->cmd.len);
	b.len += w->cmd.len;
	if (ht__buf_nstr(&b, w->hostname) < 0 || ht__buf_nstr(&b, w->untraced) < 0 ||
	    ht__buf_reserve(&b, 40) < 0) {
		ht__buf_release(&b);
		return w->err = HT_ERR_NOMEM;
	}
	p = b.data + b.len;
	for (int i = 0; i < 3; i++)
		p = ht__put_varint(p, w->lost_by_cause[i]);
	p = ht__put_varint(p, w->sample_rate);
	b.len = p - b.data;
	if (ht__buf_reserve(&b, 40) < 0) {
		ht__buf_release(&b);
		return w->err = HT_ERR_NOMEM;
	}
	p = b.data + b.len;
	for (int i = 0; i < 4; i++)
		p = ht__put_varint(p, w->window[i]);
	b.len = p - b.data;
	rc = write_chunk(w, HT__CHUNK_META, b.data, b.len, 1, 0, duration_ns);
	ht__buf_release(&b);
	return rc;
}

/* Opens path (created, mode 0600) when fd < 0, else writes to fd. */
static int writer_open(struct ht__writer **out, const char *path, int fd,
		       const struct ht__trace_meta *meta)
{
	*out = NULL;
	if ((!path && fd < 0) || !meta)
		return HT_ERR_INVALID;
	struct ht__writer *w = calloc(1, sizeof(*w));
	if (!w)
		return HT_ERR_NOMEM;
	w->fd = -1;
	w->cur_slot = UINT32_MAX;
	w->defs_reset = true;
	w->last_id[0] = w->last_id[1] = w->last_id[2] = -1;
	w->chunk_target = HT__CHUNK_TARGET;
	w->group_target = HT__GROUP_BYTES;
	w->gen = 1;
	w->map_size = 256;
	w->map = calloc(w->map_size, sizeof(*w->map));
	amap_set_size(w, 4096);
	w->amap_shift = 64 - 12;
	w->amap_gen = 1;
	w->amap = calloc(w->amap_size, sizeof(*w->amap));
	bool zok = true;
	for (int i = 0; i < Z_COUNT; i++) {
		w->z[i].cctx = cctx_new(ZSTD_LEVEL);
		w->z[i].level = ZSTD_LEVEL;
		zok &= w->z[i].cctx != NULL;
	}
	atomic_init(&w->job_next, HT__S_DEFS); /* no job */
	atomic_init(&w->job_done, 0);
	atomic_init(&w->job_err, 0);
	int rc = HT_ERR_NOMEM;
	if (!w->map || !w->amap || !zok)
		goto fail;
	for (int i = 0; i < HT__NSTREAMS; i++)
		for (int k = 0; k < 3; k++)
			w->st_level[i][k] = ZSTD_LEVEL;
	w->start_realtime_ns = meta->start_realtime_ns;
	w->ts_unit = meta->ts_unit_ns > 1 ? meta->ts_unit_ns : 1;
	w->tpack = w->ts_unit > 1; /* the first chunk's guess: exact times are rarely close */
	w->frel_judge = w->frel_any = true; /* the first chunk weighs the forms of free codes */
	if (w->ts_unit > HT__MAX_TS_UNIT) {
		rc = HT_ERR_INVALID;
		goto fail;
	}
	w->stack_mask = meta->stack_mask;
	w->sample_rate = meta->sample_rate;
	w->flags = meta->flags & ~(HT_TRACEF_COMPLETE | HT_TRACEF_TRUNCATED | HT_TRACEF_SYMBOLS);
	if (meta->hostname && !(w->hostname = strdup(meta->hostname)))
		goto fail;
	if (meta->untraced && *meta->untraced && !(w->untraced = strdup(meta->untraced)))
		goto fail;
	if (ht__buf_reserve(&w->cmd, 10) < 0)
		goto fail;
	w->cmd.len = ht__put_varint(w->cmd.data, meta->argc) - w->cmd.data;
	for (uint32_t i = 0; i < meta->argc; i++) {
		const char *a = meta->argv && meta->argv[i] ? meta->argv[i] : "";
		if (ht__buf_str(&w->cmd, a, strlen(a)) < 0)
			goto fail;
	}
	for (int i = 0; i < HT__NSTREAMS; i++)
		if (ht__buf_reserve(&w->st[i], 65536) < 0)
			goto fail;

	w->fd = fd >= 0 ? fd : open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		rc = ht__error_from_errno(errno);
		goto fail;
	}
	/* File header: see docs/trace-format.md. */
	uint8_t h[HT__HEADER_SIZE] = {0};
	memcpy(h, HT__FILE_MAGIC, 8);
	ht__put_le32(h + 8, HT__FILE_VERSION);
	h[12] = 1; /* little-endian */
	h[13] = 8; /* pointer size */
	ht__put_le32(h + 16, HT__HEADER_SIZE);
	ht__put_le64(h + 24, w->start_realtime_ns);
	ht__put_le32(h + 32, w->stack_mask);
	ht__put_le32(h + 36, w->flags);
	ht__put_le32(h + 40, w->ts_unit);
	ht__put_le32(h + 60, ht__crc32(h, 60));
	if ((rc = write_all(w, h, sizeof(h))) < 0)
		goto fail_unlink;
	/* An early META chunk, so an unfinished trace still names its command. */
	if ((rc = write_meta(w, 0, 0, w->flags)) < 0)
		goto fail_unlink;
	*out = w;
	return 0;

fail_unlink:
	if (fd < 0) {
		unlink(path);
	} else {
		w->fd = -1; /* the caller's, on failure */
	}
fail:
	ht__writer_abort(w);
	return rc;
}

int ht__writer_open(struct ht__writer **out, const char *path, const struct ht__trace_meta *meta)
{
	return writer_open(out, path, -1, meta);
}

int ht__writer_open_fd(struct ht__writer **out, int fd, const struct ht__trace_meta *meta)
{
	return fd < 0 ? HT_ERR_INVALID : writer_open(out, NULL, fd, meta);
}

/* The most bytes a plain event (put_plain_heap) adds to the streams and to
   tsaved: 2 of OPS, 11 of TIME (a single delta after the held ones) and 2
   saved, 5 of STACK, 10 of SIZE, 11 of an address (the escape and a
   zigzag); with room to spare. */
#define EV_RAW_MAX 64

/* Sums the streams into raw_len and closes the chunk when it reached its
   target, else counts the plain events that surely leave it below
   (close_in). Summing eight lengths at every event was about 16
   instructions of the allocation loop's 380 in the encoder. */
static __attribute__((noinline)) int close_check(struct ht__writer *w)
{
	w->raw_len = streams_len(w);
	size_t have = w->raw_len + w->tsaved;
	if (have >= w->chunk_target)
		return flush_events(w);
	w->close_in = (uint32_t)((w->chunk_target - have - 1) / EV_RAW_MAX);
	return 0;
}

/* Appends a definition record to the events chunk's DEFS stream, its only
   copy (format version 9). */
static int add_def(struct ht__writer *w, const uint8_t *rec, size_t len)
{
	if (w->err)
		return w->err;
	if (ht__buf_reserve(&w->st[HT__S_DEFS], len) < 0)
		return w->err = HT_ERR_NOMEM;
	memcpy(w->st[HT__S_DEFS].data + w->st[HT__S_DEFS].len, rec, len);
	w->st[HT__S_DEFS].len += len;
	return close_check(w);
}

/* A definition's id: its difference from the one after the last id of its
   kind (0 module, 1 frame, 2 stack) in the group, zigzag. Ids come in
   order, so this is 0 where the id itself took two to four bytes that
   zstd could not shrink (python json's definitions 40 % smaller). */
static uint8_t *put_def_id(struct ht__writer *w, uint8_t *p, int kind, uint32_t id)
{
	p = ht__put_varint(p, ht__zigzag((int64_t)id - w->last_id[kind] - 1));
	w->last_id[kind] = id;
	return p;
}

/* Encodes stack id as the frames it does not share with the previous stack
   of the group and makes it that stack. */
static uint8_t *put_stack(struct ht__writer *w, uint8_t *p, uint32_t id, const uint32_t *frames,
			  uint32_t n)
{
	const uint32_t *prev = w->prev_stack;
	uint32_t pn = w->prev_n, k = 0;
	while (k < n && k < pn && frames[n - 1 - k] == prev[pn - 1 - k])
		k++;
	*p++ = HT__REC_DEF_STACK;
	p = put_def_id(w, p, 2, id);
	p = ht__put_varint(p, n - k);
	p = ht__put_varint(p, k);
	/* Frame ids of one stack are often close: store deltas. */
	int64_t d = 0;
	for (uint32_t i = 0; i < n - k; i++) {
		p = ht__put_varint(p, ht__zigzag((int64_t)frames[i] - d));
		d = frames[i];
	}
	if (n)
		memcpy(w->prev_stack, frames, n * sizeof(*frames));
	w->prev_n = n;
	return p;
}

int ht__writer_set_chunk_size(struct ht__writer *w, uint32_t bytes)
{
	if (!w || bytes < 256 || bytes > HT__RAW_MAX / 4)
		return HT_ERR_INVALID;
	w->chunk_target = bytes;
	w->close_in = 0;
	return 0;
}

int ht__writer_set_group_size(struct ht__writer *w, uint32_t bytes)
{
	if (!w)
		return HT_ERR_INVALID;
	w->group_target = bytes;
	return 0;
}

int ht__writer_module(struct ht__writer *w, uint32_t id, const char *path, const uint8_t *build_id,
		      uint32_t build_id_len)
{
	if (!w)
		return HT_ERR_INVALID;
	if (!path)
		path = "";
	size_t plen = strlen(path);
	struct ht__buf b = {0};
	if (ht__buf_reserve(&b, 16) < 0)
		return HT_ERR_NOMEM;
	b.data[0] = HT__REC_DEF_MODULE;
	b.len = put_def_id(w, b.data + 1, 0, id) - b.data;
	int rc = ht__buf_str(&b, path, plen);
	if (!rc)
		rc = ht__buf_str(&b, (const char *)build_id, build_id ? build_id_len : 0);
	if (!rc)
		rc = add_def(w, b.data, b.len);
	ht__buf_release(&b);
	return rc;
}

int ht__writer_frame(struct ht__writer *w, uint32_t id, uint32_t module, uint64_t rel)
{
	if (!w)
		return HT_ERR_INVALID;
	uint8_t rec[32], *p = rec;
	*p++ = HT__REC_DEF_FRAME;
	p = put_def_id(w, p, 1, id);
	p = ht__put_varint(p, module == HT_MODULE_NONE ? 0 : (uint64_t)module + 1);
	p = ht__put_varint(p, rel);
	return add_def(w, rec, p - rec);
}

int ht__writer_stack(struct ht__writer *w, uint32_t id, const uint32_t *frames, uint32_t n)
{
	if (!w || !id || (n && !frames))
		return HT_ERR_INVALID;
	if (n > w->prev_cap) {
		uint32_t *f = realloc(w->prev_stack, n * sizeof(*f));
		if (!f)
			return w->err = HT_ERR_NOMEM;
		w->prev_stack = f;
		w->prev_cap = n;
	}
	uint8_t small[512];
	size_t need = 1 + 3 * 10 + (size_t)n * 10;
	uint8_t *rec = need <= sizeof(small) ? small : malloc(need);
	if (!rec)
		return HT_ERR_NOMEM;
	uint8_t *p = put_stack(w, rec, id, frames, n);
	int rc = add_def(w, rec, p - rec);
	if (rec != small)
		free(rec);
	return rc;
}

static uint32_t slot_hash(uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 40);
}

static int make_room(struct ht__writer *w, size_t need);

/* Slot of (process, pid, tid) in this chunk, made when new (*fresh = 1),
   for an event counted in w->fits that needs need bytes of MISC
   (make_room). */
static int find_slot(struct ht__writer *w, uint32_t process, int32_t pid, int32_t tid,
		     uint32_t *out, int *fresh, size_t need)
{
	uint64_t key = (uint64_t)process << 32 | (uint32_t)tid;
	uint32_t mask = w->map_size - 1;
	uint32_t i = slot_hash(key) & mask;
	for (;; i = (i + 1) & mask) {
		struct slot_map_entry *e = &w->map[i];
		if (e->gen != w->gen)
			break;
		if (e->key == key && w->slots[e->slot].pid == pid) {
			*out = e->slot;
			*fresh = 0;
			return 0;
		}
	}
	if (w->nslots >= HT__MAX_SLOTS) { /* absurdly many threads: start a group */
		w->group_full = true;
		int rc = flush_events(w);
		if (rc < 0)
			return rc;
		/* The event's room again, in the streams the flush left: with the
		   compression's thread the other set, which has no memory at all
		   the first time (a program that started over 4096 threads in
		   its first chunk crashed the collector). */
		if (make_room(w, need) < 0)
			return w->err;
		w->fits--;
		return find_slot(w, process, pid, tid, out, fresh, need);
	}
	if ((w->nslots + 1) * 2 > w->map_size) {
		/* Grow the map and re-insert this chunk's slots. Not a base/vec.h
		   ht__hindex on purpose: entries carry their key and a generation,
		   so a new chunk empties the map by bumping gen, not clearing it. */
		uint32_t size = w->map_size * 2;
		struct slot_map_entry *m = calloc(size, sizeof(*m));
		if (!m)
			return w->err = HT_ERR_NOMEM;
		free(w->map);
		w->map = m;
		w->map_size = size;
		w->gen = 1;
		for (uint32_t s = 0; s < w->nslots; s++) {
			uint64_t k =
			    (uint64_t)w->slots[s].process << 32 | (uint32_t)w->slots[s].tid;
			uint32_t j = slot_hash(k) & (size - 1);
			while (m[j].gen == w->gen)
				j = (j + 1) & (size - 1);
			m[j] = (struct slot_map_entry){k, s, w->gen};
		}
		mask = size - 1;
		i = slot_hash(key) & mask;
		while (w->map[i].gen == w->gen)
			i = (i + 1) & mask;
	}
	if (w->nslots == w->slots_cap) {
		/* Four columns of one capacity; own's new lists start empty. */
		uint32_t c1 = w->slots_cap, c2 = c1, c3 = c1, c4 = c1;
		size_t need = (size_t)w->nslots + 1;
		if (ht__grow32((void **)&w->slots, &c1, need, sizeof(*w->slots)) < 0 ||
		    ht__grow32((void **)&w->rings, &c2, need, sizeof(*w->rings)) < 0 ||
		    ht__grow32((void **)&w->rawf, &c4, need, sizeof(*w->rawf)) < 0 ||
		    ht__grow32_zero((void **)&w->own, &c3, need, sizeof(*w->own)) < 0)
			return w->err = HT_ERR_NOMEM;
		w->slots_cap = c1;
	}
	uint32_t s = w->nslots++;
	w->slots[s] = (struct slot){process, pid, tid, 0, 0, 0};
	memset(w->rings[s], 0, sizeof(w->rings[s]));
	memset(&w->rawf[s], 0, sizeof(w->rawf[s]));
	w->own[s].n = 0;
	w->map[i] = (struct slot_map_entry){key, s, w->gen};
	*out = s;
	*fresh = 1;
	return 0;
}

/*
 * The address map's memory. A map of AMAP_HUGE_BYTES and more lives at
 * the start of a mapping of AMAP_REGION_BYTES (or more) asked for huge
 * pages, and grows into the rest of it: it holds a group's live blocks
 * (jq's group: a million, 64 MiB half full), and every allocation and
 * free looks at a random slot of it, which with 4 KiB pages missed the TLB
 * as well as the cache (docs/performance.md, "The collector on jq"). The
 * part past the map is never written until the map grows over it, so it
 * is zero and takes no memory: every map made afresh was memory the
 * kernel cleared on its first write, at times 0.28 s of the collector's
 * CPU on jq (126 MiB in all; now the 64 MiB the last map uses;
 * docs/performance.md, "The writer, session 24").
 */
#define AMAP_HUGE_BYTES (2u << 20)
#define AMAP_REGION_BYTES ((size_t)128 << 20)

static struct amap_ent *amap_region_new(size_t bytes)
{
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	madvise(m, bytes, MADV_HUGEPAGE); /* a hint: without it, 4 KiB pages */
#endif
	return m;
}

static void amap_release(struct ht__writer *w, struct amap_ent *m)
{
	if (m && m == w->amap_region) {
		munmap(m, w->amap_region_bytes);
		w->amap_region = NULL;
		w->amap_region_bytes = 0;
	} else {
		free(m);
	}
}

/* Home of addr in the address map: its 4 KiB page gets a random home (the
   top bits of a product) and its blocks follow their address from there,
   a slot per 16 bytes, so that blocks made one after the other from the
   same page share cache lines of the map. A random home per block (the
   product of the whole address) missed the cache on nearly every
   allocation and free of a map larger than the cache: the collector's CPU
   on jq 1.86 s -> 0.90 s, python 0.42 s -> 0.28 s (docs/performance.md,
   "The collector on jq"). */
static uint32_t amap_hash(const struct ht__writer *w, uint64_t addr)
{
	uint32_t page = (uint32_t)(((addr >> 12) * 0x9e3779b97f4a7c15ull) >> w->amap_shift);
	return (page + (uint32_t)((addr >> 4) & 255)) & (w->amap_size - 1);
}

/* The address map's size from which the merge's hints pay: 1 MiB, half
   of the core's L2 cache. Below it (alloc_loop with 1 thread: 4096 live
   blocks and a few more, 512 KiB) the hints cost the collector about 20
   instructions per event for nothing (docs/performance.md, "The address
   map with many live blocks"). */
#define AMAP_HINT_SLOTS 65536u

bool ht__writer_prefetch(const struct ht__writer *w, const uint64_t *addr, uint32_t n)
{
	const struct amap_ent *m = w->amap;
	for (uint32_t i = 0; i < n; i++)
		__builtin_prefetch(&m[amap_hash(w, addr[i])], 1, 3);
	return w->amap_size >= AMAP_HINT_SLOTS;
}

/* Inline: a call on every allocation and free cost about 7 instructions
   of the encoder's (docs/performance.md, "The writer, session 26"). */
static inline __attribute__((always_inline)) struct amap_ent *amap_slot(struct ht__writer *w,
									uint64_t addr)
{
	uint32_t mask = w->amap_size - 1;
	for (uint32_t i = amap_hash(w, addr);; i = (i + 1) & mask) {
		struct amap_ent *e = &w->amap[i];
		if (e->gen != w->amap_gen || e->addr == addr)
			return e;
	}
}

/* Takes entry e out of the map: the entries after it in its probe chain
   move back into the hole when their home allows (linear probing without
   tombstones). Inline: its call on every free of a mapped block spilled
   and reloaded six of the free's values (the encoder 9 instructions an
   event on the loops, 8 on python; docs/performance.md, "The writer,
   session 27"). */
static inline __attribute__((always_inline)) void amap_remove(struct ht__writer *w,
							      struct amap_ent *e)
{
	uint32_t mask = w->amap_size - 1, i = (uint32_t)(e - w->amap);
	for (uint32_t j = (i + 1) & mask;; j = (j + 1) & mask) {
		struct amap_ent *f = &w->amap[j];
		if (f->gen != w->amap_gen)
			break;
		/* f may fill the hole at i unless its home lies in (i, j] */
		if (((j - amap_hash(w, f->addr)) & mask) >= ((j - i) & mask)) {
			w->amap[i] = *f;
			i = j;
		}
	}
	w->amap[i].gen = 0;
	w->amap_live--;
}

/* The address map grows once a quarter full while it is smaller than
   AMAP_SPARSE_SLOTS (4 MiB), from there once half full: every map is
   fresh memory, which the kernel clears as it is first written. jq's map
   reached 128 MiB (256 MiB cleared in all: at times 13 % of the whole
   run's samples in clear_page_erms; docs/performance.md, "The collector's
   merge, session 23"). Short probes pay more than a small map up to a
   few MiB: a free's removal walks its probe chain to the first empty
   slot, which at half full is often on the next cache line, one the
   hints did not load. alloc_loop with 8 threads (32 768 live blocks)
   half full in 1 MiB, quarter full in 2 MiB: the collector's main thread
   6 % faster in the second (docs/performance.md, "The writer, session
   25"). */
#define AMAP_SPARSE_SLOTS 262144u

/* The map's size and the live entries at which the next allocation
   grows it (a product and a compare on every allocation were 5
   instructions of it). */
static void amap_set_size(struct ht__writer *w, uint32_t size)
{
	w->amap_size = size;
	w->amap_limit = size < AMAP_SPARSE_SLOTS ? size / 4 : size / 2;
}

static inline bool amap_full(const struct ht__writer *w)
{
	return w->amap_live >= w->amap_limit;
}

/* The entries of generation g of a map that has just doubled over zeroed
   memory (its first half holds them), each put where a map of its new
   size wants it, as generation g + 1 (which no entry has: generations only
   grow between two clearings of the map). An entry whose place holds one
   not moved yet takes it, and that one is placed in turn. From the top
   down: a page's home in the doubled map is twice its old one (the
   product's next bit below it), so an entry at i goes near 2i, into the
   part already done, which it reads and writes in one descending sweep.
   From the bottom up each entry went into the part not done yet,
   displaced an entry there, which went further up in turn: chains of
   random accesses over the whole map (jq's map of 64 MiB: amap_grow 6 %
   of the collector's samples; docs/performance.md, "The writer, session
   25"). */
static void amap_rehash_in_place(struct ht__writer *w, uint32_t old_size)
{
	struct amap_ent *m = w->amap;
	uint32_t g = w->amap_gen, ng = g + 1, mask = w->amap_size - 1;
	for (uint32_t i = old_size; i-- > 0;) {
		if (m[i].gen != g)
			continue;
		struct amap_ent e = m[i];
		m[i].gen = 0;
		for (;;) {
			uint32_t j = amap_hash(w, e.addr);
			while (m[j].gen == ng)
				j = (j + 1) & mask;
			struct amap_ent d = m[j];
			m[j] = e;
			m[j].gen = ng;
			if (d.gen != g)
				break;
			e = d;
		}
	}
	w->amap_gen = ng;
}

/* Doubles the address map: in place where it lives in its region and
   the region has room (and a generation is left for the move), else
   into a fresh map that this generation's entries move to. The address
   map stays specialised on purpose (not ht__hindex): it is on every
   allocation and free of the writer, keeps the address in the slot,
   hashes by shift and empties by generation. 0 or HT_ERR_NOMEM. Out of
   line: inlined into every new block's path it cost jq's encoder 2.5
   instructions an event, python's 1.2 (docs/performance.md, "The
   writer, session 25"). */
static __attribute__((noinline)) int amap_grow(struct ht__writer *w)
{
	uint32_t old_size = w->amap_size, size = old_size * 2;
	size_t bytes = (size_t)size * sizeof(struct amap_ent);
	if (w->amap == w->amap_region && bytes <= w->amap_region_bytes &&
	    w->amap_gen < AMAP_GEN_MAX) {
		amap_set_size(w, size);
		w->amap_shift--;
		amap_rehash_in_place(w, old_size);
		return 0;
	}
	struct amap_ent *old = w->amap, *m = NULL;
	size_t rbytes = 0;
	if (bytes >= AMAP_HUGE_BYTES) {
		rbytes = bytes > AMAP_REGION_BYTES ? bytes : AMAP_REGION_BYTES;
		m = amap_region_new(rbytes);
	} else {
		m = calloc(size, sizeof(*m));
	}
	if (!m)
		return HT_ERR_NOMEM;
	uint32_t gen = w->amap_gen;
	w->amap = m;
	amap_set_size(w, size);
	w->amap_shift--;
	w->amap_gen = 1;
	for (uint32_t i = 0; i < old_size; i++) {
		if (old[i].gen != gen)
			continue;
		struct amap_ent *e = amap_slot(w, old[i].addr);
		*e = old[i];
		e->gen = 1;
	}
	amap_release(w, old);
	if (rbytes) {
		w->amap_region = m;
		w->amap_region_bytes = rbytes;
	}
	return 0;
}

/* Records an allocation of the group by slot si, of size class cls; 0
   or HT_ERR_NOMEM. */
static int note_alloc(struct ht__writer *w, uint32_t si, uint64_t addr, unsigned cls)
{
	if (amap_full(w) && amap_grow(w) < 0)
		return HT_ERR_NOMEM;
	struct ht__own *o = &w->own[si];
	if (ht__own_push(o, w->nallocs++) < 0)
		return HT_ERR_NOMEM;
	struct amap_ent *e = amap_slot(w, addr);
	w->amap_live += e->gen != w->amap_gen;
	e->addr = addr;
	e->own = o->n - 1;
	e->gen = w->amap_gen;
	e->slot = si;
	e->cls = cls;
	return 0;
}

/* A raw address: a delta from the thread's previous address, tagged even;
   in units of 2^sh bytes when it is a multiple of them (heap blocks:
   HT__HEAP_GRAIN_SHIFT), else after the escape. */
static uint8_t *put_raw_addr(uint8_t *p, struct slot *sl, uint64_t addr, unsigned sh)
{
	uint64_t delta = addr - sl->last_addr;
	uint64_t zz = ht__zigzag(delta & ((1ull << sh) - 1) ? 0 : (int64_t)delta >> sh);
	if (zz && zz < (1ull << 63)) {
		p = ht__put_varint(p, zz << 1);
	} else { /* 0 escapes: the full zigzag follows, in bytes */
		*p++ = 0;
		p = ht__put_varint(p, ht__zigzag((int64_t)delta));
	}
	sl->last_addr = addr;
	return p;
}

/* Bytes of v as a varint: ceil(bits / 7), at least 1, without a loop (a
   free weighs its index code against a raw one, of 1 to 4 bytes at
   random on the loops: the loop's exits were mispredicted; the division
   by 7 is (bits + 6) * 37 >> 8, exact for 0 to 64 bits). */
static inline unsigned varint_len(uint64_t v)
{
	return (unsigned)((64 - __builtin_clzll(v | 1) + 6) * 37u >> 8);
}

/* varint_len for the values that are nearly always below 2^14 */
static inline unsigned small_len(uint64_t v)
{
	return v < 0x80 ? 1 : v < 0x4000 ? 2 : varint_len(v);
}

/* A block leaving by a raw code (version 14): in 16 bytes, from the
   slot's last address (b = 0) or from its raw free before the latest
   one (b = 1), whichever code is the smaller, as v = (zigzag(delta / 16)
   * 2 + b) << 1; the 0 escape (a delta that is no multiple of 16, or 0)
   as put_raw_addr()'s. jq frees the blocks of two data structures in
   turn, each in the order it made them: from the last address every
   delta jumps between the two. Without branches (which code wins is
   anybody's guess); both codes are below 2^62, UINT64_MAX one that
   cannot be. */
static uint8_t *put_raw_free(uint8_t *p, struct slot *sl, struct ht__raw_frees *rf, uint64_t addr)
{
	uint64_t delta = addr - sl->last_addr, d1 = addr - rf->prev;
	uint64_t c0 = ht__zigzag((int64_t)delta >> 4) << 1;
	uint64_t c1 = ht__zigzag((int64_t)d1 >> 4) << 1 | 1;
	c0 = (delta & 15) || !c0 ? UINT64_MAX : c0;
	c1 = (d1 & 15) || !rf->prev ? UINT64_MAX : c1;
	uint64_t best = c1 < c0 ? c1 : c0;
	rf->prev = rf->latest;
	rf->latest = addr;
	sl->last_addr = addr;
	if (best != UINT64_MAX)
		return ht__put_varint(p, best << 1);
	*p++ = 0; /* the escape: the delta in bytes */
	return ht__put_varint(p, ht__zigzag((int64_t)delta));
}

/* Bytes of addr as a raw code in bytes: what a free by index is weighed
   against (in 16 bytes, the raw codes of the random-free loop are a byte
   shorter; weighed against that, more of its frees went raw and its trace
   grew 0.6 %). Inline: a call for a few instructions. */
static inline __attribute__((always_inline)) unsigned raw_addr_len(const struct slot *sl,
								   uint64_t addr)
{
	uint64_t zz = ht__zigzag((int64_t)(addr - sl->last_addr));
	return zz && zz < (1ull << 63) ? varint_len(zz << 1) : 1 + varint_len(zz);
}

/* The free code, in a chunk with two tag bits (w->frel) or one that
   weighs the two forms (w->frel_judge), of a block d allocations back
   that is the slot's own allocation number own (UINT32_MAX: another
   slot's): the shorter of d and the distance from the slot's free
   position (est_own when the chunk only weighs). Out of line: the other
   chunks pay one test for it. */
static __attribute__((noinline)) uint64_t frel_code(struct ht__writer *w, const struct slot *sl,
						    uint32_t own, uint64_t d)
{
	if (own == UINT32_MAX)
		return w->frel ? d << 2 | 1 : d << 1 | 1;
	/* the smaller value, so never the longer varint */
	int64_t base = (int64_t)(w->frel ? sl->free_own : sl->est_own) - 1;
	uint64_t rel = ht__zigzag((int64_t)own - base) << 2 | 3;
	uint64_t two = rel < (d << 2 | 1) ? rel : d << 2 | 1;
	if (w->frel_judge) {
		w->frel_one += small_len(d << 1 | 1);
		w->frel_two += small_len(two);
	}
	return w->frel ? two : d << 1 | 1;
}

/* A block leaving: the allocation of this chunk it came from, or raw.
   Inline: its call saved and restored six registers on every free (the
   encoder -6 instructions an event on the loops, -10 on jq). */
static inline __attribute__((always_inline)) uint8_t *
put_free_addr(struct ht__writer *w, uint8_t *p, uint32_t si, uint64_t addr)
{
	struct slot *sl = &w->slots[si];
	struct amap_ent *e = amap_slot(w, addr);
	if (e->gen != w->amap_gen)
		return put_raw_free(p, sl, &w->rawf[si], addr);
	struct amap_ent b = *e;
	amap_remove(w, e);
	e = &b;
	/* The distance back among the slot's own allocations, or past all of
	   them into the chunk's list for a block another thread made. */
	bool mine = e->slot == si;
	uint64_t d = mine ? w->own[si].n - e->own
			  : (uint64_t)w->own[si].n + w->nallocs - w->own[e->slot].glob[e->own];
	uint64_t code = d << 1 | 1;
	if (w->frel_any)
		code = frel_code(w, sl, mine ? e->own : UINT32_MAX, d);
	/* A block allocated long ago is often cheaper as a delta from the
	   thread's last address (it lies near the blocks freed around it) than
	   as a distance back of many allocations: the shorter code wins (a
	   code of one byte always does). */
	if (code >= 0x80 && varint_len(code) > raw_addr_len(sl, addr))
		return put_raw_free(p, sl, &w->rawf[si], addr);
	if (mine && w->frel)
		sl->free_own = e->own;
	else if (mine && w->frel_judge)
		sl->est_own = e->own;
	ht__ring_push(w->rings[si][e->cls], addr);
	sl->last_addr = addr;
	return ht__put_varint(p, code);
}

#define END_MISSES 32u
#define END_SKIP 256u

/* The END code of a new block at addr right after one of the slot's new
   blocks before the latest (whose end is at ends[ends_pos - 1], the new
   block's own at ends[ends_pos]), or 0. Only on
   the way to a raw code: a tenth of python's new blocks. */
static __attribute__((noinline)) unsigned end_code(const struct slot *sl, uint64_t addr)
{
	uint32_t latest = sl->ends_pos - 1; /* ends_pos: this block's */
	for (unsigned i = 1; i < HT__ADDR_ENDS - 1; i++)
		if (sl->ends[(latest - i) % HT__ADDR_ENDS] == addr)
			return addr ? HT__ADDR_END + i - 1 : 0;
	return 0;
}

/* The first place of addr (not 0) in a ring, or -1. The first place is
   looked at alone (most hits are there: 37 to 70 % of the new blocks of
   the bench programs), then all sixteen at once: two bits a place from
   SSE2's 32-bit compares, both set where the place holds addr. A block
   in no ring (jq's new blocks nearly all, python's three in five) took
   sixteen compares and branches, about 66 instructions more. */
static inline int ring_find(const uint64_t *ring, uint64_t addr)
{
	_Static_assert(HT__RING_DEPTH == 16, "ring_find looks at 16 places");
	if (ring[0] == addr)
		return 0;
#ifdef __SSE2__
	__m128i a = _mm_set1_epi64x((long long)addr);
#define RING_EQ(k) _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(ring + (k))), a)
	__m128i lo = _mm_packs_epi16(_mm_packs_epi32(RING_EQ(0), RING_EQ(2)),
				     _mm_packs_epi32(RING_EQ(4), RING_EQ(6)));
	__m128i hi = _mm_packs_epi16(_mm_packs_epi32(RING_EQ(8), RING_EQ(10)),
				     _mm_packs_epi32(RING_EQ(12), RING_EQ(14)));
#undef RING_EQ
	uint32_t m = (uint32_t)_mm_movemask_epi8(lo) | (uint32_t)_mm_movemask_epi8(hi) << 16;
	m &= m >> 1 & 0x55555555u;
	return m ? __builtin_ctz(m) >> 1 : -1;
#else
	for (int k = 1; k < HT__RING_DEPTH; k++)
		if (ring[k] == addr)
			return k;
	return -1;
#endif
}

/* A new block: a recently freed address of its size class cls, or raw. */
static uint8_t *put_alloc_addr(struct ht__writer *w, uint8_t *p, uint32_t si, uint64_t addr,
			       uint64_t size, unsigned cls, uint64_t old_addr)
{
	struct slot *sl = &w->slots[si];
	uint64_t *ring = w->rings[si][cls];
	uint64_t top = sl->next_top, fresh = sl->fresh_top;
	sl->next_top = addr + ht__chunk_size(size);
	/* its end, for the END codes after; it takes the place of the oldest
	   end, which no code names */
	sl->ends[++sl->ends_pos % HT__ADDR_ENDS] = sl->next_top;
	int k = ring_find(ring, addr);
	if (k >= 0) {
		ht__ring_take(ring, (unsigned)k);
		sl->last_addr = addr;
		*p = (uint8_t)(k << 1 | 1); /* one byte: k < HT__RING_DEPTH */
		return p + 1;
	}
	/* Not reused from a ring: a realloc that stayed in place, or a block
	   carved from fresh memory, usually right after the previous new block
	   (TOP) or the previous fresh one (FRESH, when reused blocks came in
	   between). */
	unsigned code = 0;
	if (addr == old_addr)
		code = HT__ADDR_OLD;
	else if (addr == top && top)
		code = HT__ADDR_TOP;
	else if (addr == fresh && fresh)
		code = HT__ADDR_FRESH;
	else if (w->end_skip)
		w->end_skip--;
	else if ((code = end_code(sl, addr)))
		w->end_miss = 0;
	else if (++w->end_miss == END_MISSES)
		w->end_miss = 0, w->end_skip = END_SKIP;
	if (code != HT__ADDR_OLD)
		sl->fresh_top = sl->next_top;
	if (code) {
		sl->last_addr = addr;
		_Static_assert(HT__ADDR_END + HT__ADDR_ENDS < 64,
			       "the address codes take one byte");
		*p = (uint8_t)(code << 1 | 1);
		return p + 1;
	}
	return put_raw_addr(p, sl, addr, HT__HEAP_GRAIN_SHIFT);
}

/* Writes the small time deltas held (fewer than three) to TIME: two as a
   pair, one alone. At most one byte. */
static void put_time_held(struct ht__writer *w)
{
	if (!w->tpend_n)
		return;
	struct ht__buf *tb = &w->st[HT__S_TIME];
	tb->data[tb->len++] = (uint8_t)(w->tpend_n == 2 ? HT__TIME_PAIR + w->tpend
							: HT__TIME_ONE + ht__zigzag(w->tpend));
	w->tsaved += w->tpend_n - 1;
	w->tpend = w->tpend_n = 0;
}

/* The time delta and the stack id of an event (every event has both);
   size: the event's, whose size class cls picks the stack's prediction
   (the caller's, which the address code uses too). In a chunk that
   packs its deltas (tpack), deltas of 0 to 3 are held until three share
   a TIME varint (put_time_held), the others are single (times are below
   2^62 units, so HT__TIME_ONE plus the zigzag never wraps). */
static inline __attribute__((always_inline)) void put_time_stack(struct ht__writer *w, uint64_t ts,
								 uint32_t stack, uint64_t size,
								 unsigned cls, uint32_t si)
{
	uint64_t q = ts / w->ts_unit, delta = q - w->prev_ts;
	w->prev_ts = q;
	struct ht__buf *tb = &w->st[HT__S_TIME];
	if (delta < HT__TIME_SMALL) {
		w->tsmall++;
		if (w->tpack) {
			w->tpend = w->tpend << 2 | (uint32_t)delta;
			if (++w->tpend_n == 3) {
				tb->data[tb->len++] = (uint8_t)w->tpend; /* < HT__TIME_PAIR */
				w->tpend = w->tpend_n = 0;
				w->tsaved += 2;
			}
		} else {
			tb->data[tb->len++] = (uint8_t)ht__zigzag((int64_t)delta);
		}
	} else if (w->tpack) {
		put_time_held(w);
		tb->len =
		    ht__put_varint(tb->data + tb->len, HT__TIME_ONE + ht__zigzag((int64_t)delta)) -
		    tb->data;
	} else {
		tb->len = ht__put_varint(tb->data + tb->len, ht__zigzag((int64_t)delta)) - tb->data;
	}
	if (stack) {
		uint32_t code = stack;
		if (size) {
			uint32_t *last = &w->slots[si].last_stack[cls];
			code = *last == stack ? 0 : stack;
			*last = stack;
		}
		struct ht__buf *sb = &w->st[HT__S_STACK];
		sb->len = ht__put_varint(sb->data + sb->len, code) - sb->data;
	}
}

/* The address code of a block of size class cls that slot si allocated
   (put_alloc_addr), noted in the chunk's map; 0 or HT_ERR_NOMEM. Out of
   line, as the compiler left it before version 13 (inlined into both
   callers it cost the random-free loop 5 instructions an event more).
   The class is the caller's, computed once for the stack's prediction,
   the ring and the map (three times, it cost an allocation about 18
   instructions; docs/performance.md, "The writer, session 26"). */
static __attribute__((noinline)) int put_new_block(struct ht__writer *w, uint32_t si, uint64_t addr,
						   uint64_t size, unsigned cls, uint64_t old_addr)
{
	struct ht__buf *ab = &w->st[HT__S_ADDR];
	ab->len = put_alloc_addr(w, ab->data + ab->len, si, addr, size, cls, old_addr) - ab->data;
	return note_alloc(w, si, addr, cls) < 0 ? (w->err = HT_ERR_NOMEM) : 0;
}

/* Counts an event stamped ts in the chunk, which it closes when full;
   plain: it is one of put_plain_heap's (EV_RAW_MAX bytes at most), else
   the streams are summed now. */
static inline __attribute__((always_inline)) int event_done(struct ht__writer *w, uint64_t ts,
							    bool plain)
{
	w->ev_count++;
	w->event_total++;
	w->last_ts = ts;
	if (ts > w->max_ts)
		w->max_ts = ts;
	if (plain && w->close_in) {
		w->close_in--;
		return 0;
	}
	return close_check(w);
}

/*
 * A plain allocation or free: nothing but an address, a size and a stack
 * (nearly every event of a heap trace). Only put_plain_heap() and
 * put_plain_first() write them, ht__writer_event() too.
 */
static bool plain_fields(const struct ht_event *ev)
{
	if ((ev->type != HT_EV_ALLOC && ev->type != HT_EV_FREE) ||
	    ev->func != ht__default_func(ev->type))
		return false;
	return !(ev->flags | ev->heap | ev->old_addr | ev->old_size | ev->prot | ev->mflags |
		     (uint32_t)ev->fd | (uint32_t)ev->value | ev->module ||
		 ev->name);
}

/* The slot of an event's thread: the previous event's (most events come
   from it), else found or made (*fresh: new in the chunk). 0 or an
   error. */
static inline __attribute__((always_inline)) int event_slot(struct ht__writer *w, uint32_t process,
							    int32_t pid, int32_t tid, uint32_t *si,
							    int *fresh, size_t need)
{
	*fresh = 0;
	if (w->cur_slot != UINT32_MAX && w->slots[w->cur_slot].tid == tid &&
	    w->slots[w->cur_slot].process == process && w->slots[w->cur_slot].pid == pid) {
		*si = w->cur_slot;
		return 0;
	}
	return find_slot(w, process, pid, tid, si, fresh, need);
}

/* An event stamped ts by slot si: the chunk's first time if it opens the
   chunk, and in MISC at mi its slot when that is not the previous
   event's, with the thread's process, pid and tid the first time in the
   chunk (fresh); si is then the current slot. Where MISC goes on. */
static inline __attribute__((always_inline)) uint8_t *
put_event_thread(struct ht__writer *w, uint8_t *mi, uint32_t si, int fresh, uint32_t process,
		 int32_t pid, int32_t tid, uint64_t ts)
{
	if (!w->ev_count) {
		w->first_ts = ts;
		w->prev_ts = ts / w->ts_unit;
	}
	if (si != w->cur_slot) {
		mi = ht__put_varint(mi, si);
		if (fresh) {
			mi = ht__put_varint(mi, process);
			mi = ht__put_varint(mi, ht__zigzag(pid));
			mi = ht__put_varint(mi, ht__zigzag(tid));
		}
		w->cur_slot = si;
	}
	return mi;
}

/* A plain allocation or free by slot si, the previous event's (same), its
   room counted (w->fits) and its thread written; plain: as
   put_plain_heap() (event_done). */
static inline __attribute__((always_inline)) int put_heap(struct ht__writer *w, uint32_t si,
							  bool same, uint8_t type, uint32_t stack,
							  uint64_t addr, uint64_t size, uint64_t ts,
							  bool plain)
{
	struct ht__buf *ob = &w->st[HT__S_OPS];
	uint8_t *op = ob->data + ob->len;
	*op++ = type | (same ? HT__REC_SAME : 0) | (stack ? HT__REC_STACK : 0);
	*op++ = (addr ? HT__F_ADDR : 0) | (size ? HT__F_SIZE : 0);
	ob->len = op - ob->data;
	unsigned cls = ht__new_block_class(size);
	put_time_stack(w, ts, stack, size, cls, si);
	if (size) {
		struct ht__buf *zb = &w->st[HT__S_SIZE];
		zb->len = ht__put_varint(zb->data + zb->len, size) - zb->data;
	}
	if (addr) {
		if (type == HT_EV_FREE) {
			struct ht__buf *fb = &w->st[HT__S_FREE];
			fb->len = put_free_addr(w, fb->data + fb->len, si, addr) - fb->data;
		} else if (put_new_block(w, si, addr, size, cls, 0) < 0) {
			return w->err;
		}
	}
	return event_done(w, ts, plain);
}

/* A plain allocation or free by the thread of the previous event of the
   chunk, when the streams have room. */
static inline __attribute__((always_inline)) int put_plain_heap(struct ht__writer *w, uint8_t type,
								uint32_t stack, uint64_t addr,
								uint64_t size, uint64_t ts)
{
	w->fits--;
	return put_heap(w, w->cur_slot, true, type, stack, addr, size, ts, true);
}

/*
 * A plain allocation or free that put_plain_heap() does not take: the
 * first of a chunk, or of a run by another thread than the previous
 * event's, or one whose room is to be made. The general path of
 * ht__writer_event() wrote these before session 27 (byte for byte the
 * same: the slot's code in MISC when it changes, the chunk's first time);
 * with 8 threads of alloc_loop the merge's runs switch threads some
 * 150 000 times a run, and that path was 5 % of the collector's main
 * thread (docs/performance.md, "The writer, session 27"). Now it writes
 * none: one encoder of plain events.
 */

static __attribute__((noinline)) int put_plain_first(struct ht__writer *w, uint32_t process,
						     int32_t pid, int32_t tid,
						     const struct ht__heap_plain *h)
{
	if (!w->fits && make_room(w, EV_MAX_MISC) < 0)
		return w->err;
	w->fits--;
	uint32_t si;
	int fresh, rc = event_slot(w, process, pid, tid, &si, &fresh, EV_MAX_MISC);
	if (rc < 0)
		return rc;
	bool same = si == w->cur_slot;
	struct ht__buf *mb = &w->st[HT__S_MISC];
	mb->len =
	    put_event_thread(w, mb->data + mb->len, si, fresh, process, pid, tid, h->ts) - mb->data;
	return put_heap(w, si, same, (uint8_t)h->type, h->stack, h->addr, h->size, h->ts, false);
}

/*
 * Room in every stream, looked at only when the events known to fit are
 * used up: checking the six streams at every event was a tenth of the
 * encoder's instructions on an allocation loop. An event takes at most
 * EV_MAX bytes of a stream and EV_MAX_MISC of MISC, unless it has a name or
 * a process description (need is larger then). Sets w->fits, at least 1:
 * room for this one was made.
 */
static __attribute__((noinline)) int make_room(struct ht__writer *w, size_t need)
{
	uint32_t fits = UINT32_MAX;
	for (int i = 0; i < HT__S_DEFS; i++) { /* events write no definitions */
		size_t n = i == HT__S_MISC ? need : EV_MAX;
		if (w->st[i].cap - w->st[i].len < n && ht__buf_reserve(&w->st[i], n) < 0)
			return w->err = HT_ERR_NOMEM;
		size_t k = (w->st[i].cap - w->st[i].len) / (i == HT__S_MISC ? EV_MAX_MISC : EV_MAX);
		if (k < fits)
			fits = (uint32_t)k;
	}
	w->fits = need > EV_MAX_MISC ? 1 : fits;
	return 0;
}

/* Out of line: the frame of a whole struct ht_event is not set up for the
   events of the fast path. */
static __attribute__((noinline)) int heap_event_any(struct ht__writer *w,
						    const struct ht__heap_event *h)
{
	struct ht_event ev = {.type = h->type,
			      .func = h->func,
			      .flags = h->flags,
			      .process = h->process,
			      .pid = h->pid,
			      .tid = h->tid,
			      .ts = h->ts,
			      .stack = h->stack,
			      .addr = h->addr,
			      .size = h->size};
	return ht__writer_event(w, &ev, NULL);
}

int ht__writer_heap_event(struct ht__writer *w, const struct ht__heap_event *h)
{
	if (w->err)
		return w->err;
	if ((h->type == HT_EV_ALLOC || h->type == HT_EV_FREE) &&
	    h->func == ht__default_func(h->type) && !h->flags && w->fits && w->ev_count) {
		const struct slot *sl = &w->slots[w->cur_slot]; /* ev_count: a slot is current */
		if (sl->tid == h->tid && sl->process == h->process && sl->pid == h->pid)
			return put_plain_heap(w, h->type, h->stack, h->addr, h->size, h->ts);
	}
	return heap_event_any(w, h);
}

int ht__writer_heap_plain(struct ht__writer *w, uint32_t process, int32_t pid, int32_t tid,
			  const struct ht__heap_plain *h, uint32_t n)
{
	if (w->err)
		return w->err;
	/* The address map's slots of the run's blocks are loaded first: a
	   lookup that missed the cache waited for it (with 1 thread of
	   alloc_loop, 512 KiB of map, in the second-level cache: 8 % of the
	   run's samples in amap_slot, nearly all on its first load). A map
	   from AMAP_HINT_SLOTS on has the merge's hints, further ahead. */
	if (w->amap_size < AMAP_HINT_SLOTS)
		for (uint32_t i = 0; i < n; i++)
			__builtin_prefetch(&w->amap[amap_hash(w, h[i].addr)], 1, 3);
	const struct ht__heap_plain *end = h + n;
	while (h < end) {
		/* The run's thread is the current slot's: its events go the
		   short way while the chunk goes on (a chunk's first event says
		   its thread), the streams' room made first when the events
		   known to fit are used up (once every 55 events or so: through
		   heap_event_any() that was 12 instructions an event). The
		   others, a chunk's first and another thread's, go through
		   put_plain_first(). */
		if (w->ev_count) {
			const struct slot *sl = &w->slots[w->cur_slot];
			if (sl->tid == tid && sl->process == process && sl->pid == pid) {
				if (!w->fits && make_room(w, EV_MAX_MISC) < 0)
					return w->err;
				do {
					int rc = put_plain_heap(w, (uint8_t)h->type, h->stack,
								h->addr, h->size, h->ts);
					if (rc < 0)
						return rc;
				} while (++h < end && w->fits && w->ev_count);
				continue;
			}
		}
		int rc = put_plain_first(w, process, pid, tid, h);
		if (rc < 0)
			return rc;
		h++;
	}
	return 0;
}

int ht__writer_event(struct ht__writer *w, const struct ht_event *ev, const struct ht_process *proc)
{
	if (!w || !ev)
		return HT_ERR_INVALID;
	if (w->err)
		return w->err;
	if (plain_fields(ev)) {
		if (w->fits && w->ev_count) {
			const struct slot *sl = &w->slots[w->cur_slot]; /* ev_count: one is */
			if (sl->tid == ev->tid && sl->process == ev->process && sl->pid == ev->pid)
				return put_plain_heap(w, ev->type, ev->stack, ev->addr, ev->size,
						      ev->ts);
		}
		struct ht__heap_plain h = {.ts = ev->ts,
					   .addr = ev->addr,
					   .size = ev->size,
					   .stack = ev->stack,
					   .type = ev->type};
		return put_plain_first(w, ev->process, ev->pid, ev->tid, &h);
	}
	if (!ev->type || ev->type >= HT_EV__COUNT ||
	    (ev->type == HT_EV_SNAPSHOT && !(w->flags & HT_TRACEF_SNAPSHOT)))
		return HT_ERR_INVALID;
	int is_proc = ev->type == HT_EV_PROCESS_START || ev->type == HT_EV_PROCESS_EXEC;
	size_t name_len = ev->name ? strlen(ev->name) : 0;
	size_t need = EV_MAX_MISC + name_len;
	if (is_proc && proc) {
		need += (proc->exe ? strlen(proc->exe) : 0) + 10;
		for (uint32_t i = 0; i < proc->argc; i++)
			need += (proc->argv[i] ? strlen(proc->argv[i]) : 0) + 10;
	}
	if ((!w->fits || need > EV_MAX_MISC) && make_room(w, need) < 0)
		return w->err;
	w->fits--;

	uint32_t si;
	int fresh, rc = event_slot(w, ev->process, ev->pid, ev->tid, &si, &fresh, need);
	if (rc < 0)
		return rc;
	uint8_t *op = w->st[HT__S_OPS].data + w->st[HT__S_OPS].len;
	uint8_t *mi = w->st[HT__S_MISC].data + w->st[HT__S_MISC].len;
	int ext = ev->func != ht__default_func(ev->type) || ev->flags || ev->heap;
	uint8_t head = ev->type;
	if (ext)
		head |= HT__REC_EXT;
	if (si == w->cur_slot)
		head |= HT__REC_SAME;
	if (ev->stack)
		head |= HT__REC_STACK;
	*op++ = head;
	if (ext) {
		*op++ = ev->func;
		mi = ht__put_varint(mi, ev->flags);
		mi = ht__put_varint(mi, ev->heap);
	}
	mi = put_event_thread(w, mi, si, fresh, ev->process, ev->pid, ev->tid, ev->ts);
	unsigned cls = ht__new_block_class(ev->size);
	put_time_stack(w, ev->ts, ev->stack, ev->size, cls, si);

	uint8_t mask = 0, mask2 = 0;
	if (ev->addr)
		mask |= HT__F_ADDR;
	if (ev->size)
		mask |= HT__F_SIZE;
	if (ev->old_addr)
		mask |= HT__F_OLD_ADDR;
	if (ev->old_size)
		mask |= HT__F_OLD_SIZE;
	if (ev->prot)
		mask |= HT__F_PROT;
	if (ev->mflags)
		mask |= HT__F_MFLAGS;
	if (ev->fd)
		mask |= HT__F_FD;
	if (ev->value)
		mask2 |= HT__F2_VALUE;
	if (ev->module)
		mask2 |= HT__F2_MODULE;
	if (ev->name)
		mask2 |= HT__F2_NAME;
	if (mask2)
		mask |= HT__F_MORE;
	*op++ = mask;
	if (mask2)
		*op++ = mask2;
	w->st[HT__S_OPS].len = op - w->st[HT__S_OPS].data;

	struct ht__buf *zb = &w->st[HT__S_SIZE];
	uint8_t *z = zb->data + zb->len;
	if (mask & HT__F_SIZE)
		z = ht__put_varint(z, ev->size);
	if (mask & HT__F_OLD_SIZE)
		z = ht__put_varint(z, ev->old_size);
	zb->len = z - zb->data;

	/* Addresses, the old one first (a realloc frees before it allocates);
	   the codes of blocks leaving in FREE, the others in ADDR. */
	struct ht__buf *ab = &w->st[HT__S_ADDR], *fb = &w->st[HT__S_FREE];
	uint8_t *a = ab->data + ab->len;
	int heap_ev = ev->type == HT_EV_ALLOC || ev->type == HT_EV_FREE ||
		      (ev->type == HT_EV_REALLOC && !(ev->flags & HT_EVF_FAILED));
	if (mask & HT__F_OLD_ADDR) {
		if (heap_ev)
			fb->len = put_free_addr(w, fb->data + fb->len, si, ev->old_addr) - fb->data;
		else
			a = put_raw_addr(a, &w->slots[si], ev->old_addr, 0);
	}
	if (mask & HT__F_ADDR) {
		if (ev->type == HT_EV_FREE)
			fb->len = put_free_addr(w, fb->data + fb->len, si, ev->addr) - fb->data;
		else if (heap_ev) {
			ab->len = a - ab->data;
			if (put_new_block(w, si, ev->addr, ev->size, cls,
					  ev->type == HT_EV_REALLOC ? ev->old_addr : 0) < 0)
				return w->err;
			a = ab->data + ab->len;
		} else
			a = put_raw_addr(a, &w->slots[si], ev->addr, 0);
	}
	ab->len = a - ab->data;

	if (mask & HT__F_PROT)
		mi = ht__put_varint(mi, ev->prot);
	if (mask & HT__F_MFLAGS)
		mi = ht__put_varint(mi, ev->mflags);
	if (mask & HT__F_FD)
		mi = ht__put_varint(mi, ht__zigzag(ev->fd));
	if (mask2 & HT__F2_VALUE)
		mi = ht__put_varint(mi, ht__zigzag(ev->value));
	if (mask2 & HT__F2_MODULE)
		mi = ht__put_varint(mi, ev->module);
	if (mask2 & HT__F2_NAME) {
		mi = ht__put_varint(mi, name_len);
		memcpy(mi, ev->name, name_len);
		mi += name_len;
	}
	struct ht__buf *mb = &w->st[HT__S_MISC];
	mb->len = mi - mb->data;

	if (is_proc) {
		struct ht_process d = {0};
		if (proc)
			d = *proc;
		else
			d.parent = UINT32_MAX;
		d.pid = ev->pid;
		d.start_ts = ev->ts;
		d.end_ts = 0;
		d.flags &= HT_PROCF_ROOT | HT_PROCF_FORK | HT_PROCF_EXEC | HT_PROCF_ATTACHED |
			   HT_PROCF_UNSEEN;
		if (ev->type == HT_EV_PROCESS_EXEC)
			d.flags |= HT_PROCF_EXEC;
		uint8_t *q = mb->data + mb->len;
		q = ht__put_varint(q, ht__zigzag(d.ppid));
		q = ht__put_varint(q, d.parent == UINT32_MAX ? 0 : (uint64_t)d.parent + 1);
		q = ht__put_varint(q, d.flags);
		mb->len = q - mb->data;
		const char *exe = d.exe ? d.exe : "";
		ht__buf_str(mb, exe, strlen(exe)); /* space reserved above */
		q = ht__put_varint(mb->data + mb->len, d.argc);
		mb->len = q - mb->data;
		for (uint32_t i = 0; i < d.argc; i++) {
			const char *arg = d.argv[i] ? d.argv[i] : "";
			ht__buf_str(mb, arg, strlen(arg));
		}
		rc = ht__proctab_set(&w->procs, ev->process, &d);
		if (rc < 0)
			return w->err = rc;
	}
	if (ev->type == HT_EV_PROCESS_EXEC || ev->type == HT_EV_PROCESS_EXIT)
		ht__proctab_event(&w->procs, ev);

	return event_done(w, ev->ts, false);
}

int ht__writer_symbols(struct ht__writer *w, uint32_t frame, const struct ht__symbol *syms,
		       uint32_t n)
{
	if (!w || (n && !syms))
		return HT_ERR_INVALID;
	if (w->err)
		return w->err;
	size_t need = 20;
	for (uint32_t i = 0; i < n; i++)
		need += 30 + (syms[i].function ? strlen(syms[i].function) : 0) +
			(syms[i].file ? strlen(syms[i].file) : 0);
	if (ht__buf_reserve(&w->syms, need) < 0)
		return w->err = HT_ERR_NOMEM;
	uint8_t *p = w->syms.data + w->syms.len;
	p = ht__put_varint(p, frame);
	p = ht__put_varint(p, n);
	w->syms.len = p - w->syms.data;
	for (uint32_t i = 0; i < n; i++) {
		ht__buf_nstr(&w->syms, syms[i].function);
		ht__buf_nstr(&w->syms, syms[i].file);
		p = ht__put_varint(w->syms.data + w->syms.len, syms[i].line);
		w->syms.len = p - w->syms.data;
	}
	w->syms_count++;
	return 0;
}

int ht__writer_flush(struct ht__writer *w)
{
	if (!w)
		return HT_ERR_INVALID;
	int rc = flush_events(w);
	if (rc < 0)
		return rc;
	/* Written when this returns, also with the compression's thread: once
	   a second, a chunk's compression. */
	if ((rc = wait_written(w)) < 0)
		return w->err = rc;
	return 0;
}

int ht__writer_hand_over(struct ht__writer *w)
{
	return w ? flush_events(w) : HT_ERR_INVALID;
}

int ht__writer_settle(struct ht__writer *w)
{
	if (!w)
		return HT_ERR_INVALID;
	int rc = wait_written(w);
	return rc < 0 ? (w->err = rc) : 0;
}

void ht__writer_set_async(struct ht__writer *w, bool on)
{
	if (w && !w->thread_on)
		w->async = on;
}

/* Writes a table payload as chunks of at most HT__TABLE_CHUNK_MAX raw bytes,
   cut at record boundaries found by walking the records with skip(). */
static int write_table(struct ht__writer *w, uint8_t kind, const struct ht__buf *b,
		       size_t (*skip)(const uint8_t *p, const uint8_t *end))
{
	size_t start = 0, pos = 0;
	uint32_t count = 0;
	while (pos < b->len) {
		size_t n = skip(b->data + pos, b->data + b->len);
		if (!n)
			return w->err = HT_ERR_INVALID;
		if (pos + n - start > HT__TABLE_CHUNK_MAX && pos > start) {
			int rc = write_chunk(w, kind, b->data + start, pos - start, count, 0, 0);
			if (rc < 0)
				return rc;
			start = pos;
			count = 0;
		}
		pos += n;
		count++;
	}
	if (pos > start)
		return write_chunk(w, kind, b->data + start, pos - start, count, 0, 0);
	return 0;
}

/*
 * A table that fits one chunk, compressed into pre on a zstd context of
 * its own while the compression's thread may still be writing the last
 * events chunk (handed over before the symbols: ht__writer_hand_over).
 * write_chunk's level and parameters, so the same bytes; the records
 * counted as write_table counts them. false (pre empty) when there is no
 * such thread or anything fails: write_table then does it all as before.
 */
static bool table_ahead(struct ht__writer *w, const struct ht__buf *b,
			size_t (*skip)(const uint8_t *p, const uint8_t *end), struct ht__buf *pre,
			uint32_t *count)
{
	if (!w->thread_on || !b->len || b->len > HT__TABLE_CHUNK_MAX)
		return false;
	uint32_t n = 0;
	for (size_t pos = 0, k; pos < b->len; pos += k, n++)
		if (!(k = skip(b->data + pos, b->data + b->len)))
			return false;
	size_t bound = ZSTD_compressBound(b->len), z = 0;
	ZSTD_CCtx *c = cctx_new(table_level(b->len));
	bool ok = c && ht__buf_reserve(pre, bound) == 0 &&
		  !ZSTD_isError(z = ZSTD_compress2(c, pre->data, bound, b->data, b->len));
	ZSTD_freeCCtx(c);
	if (!ok) {
		ht__buf_release(pre);
		return false;
	}
	pre->len = z;
	*count = n;
	return true;
}

/* Appends the chunk table_ahead() compressed into pre. */
static int append_ahead(struct ht__writer *w, uint8_t kind, struct ht__buf *pre, size_t raw_size,
			uint32_t count)
{
	struct ht__buf own = w->comp;
	w->comp = *pre;
	int rc = append_chunk(w, kind, 0, raw_size, count, 0, 0);
	*pre = w->comp;
	w->comp = own;
	return rc;
}

/* A DEFINDEX record: five varints. */
static size_t skip_defidx(const uint8_t *p, const uint8_t *end)
{
	struct ht__cur c = {p, end, 0};
	for (int i = 0; i < 5; i++)
		ht__get_varint(&c);
	return c.bad ? 0 : (size_t)(c.p - p);
}

static size_t skip_nstr(struct ht__cur *c)
{
	uint64_t n = ht__get_varint(c);
	if (n && !c->bad) {
		if (n - 1 > (uint64_t)(c->end - c->p))
			c->bad = 1;
		else
			c->p += n - 1;
	}
	return 0;
}

static size_t skip_sym(const uint8_t *p, const uint8_t *end)
{
	struct ht__cur c = {p, end, 0};
	ht__get_varint(&c);
	uint64_t n = ht__get_varint(&c);
	for (uint64_t i = 0; i < n && !c.bad; i++) {
		skip_nstr(&c);
		skip_nstr(&c);
		ht__get_varint(&c);
	}
	return c.bad ? 0 : (size_t)(c.p - p);
}

static int write_processes(struct ht__writer *w)
{
	struct ht__buf b = {0};
	int rc = 0;
	for (uint32_t i = 0; i < w->procs.n && !rc; i++) {
		const struct ht_process *d = &w->procs.v[i]->p;
		if ((rc = ht__buf_reserve(&b, 128)) < 0)
			break;
		uint8_t *p = b.data + b.len;
		p = ht__put_varint(p, i);
		p = ht__put_varint(p, ht__zigzag(d->pid));
		p = ht__put_varint(p, ht__zigzag(d->ppid));
		p = ht__put_varint(p, d->parent == UINT32_MAX ? 0 : (uint64_t)d->parent + 1);
		p = ht__put_varint(p, d->flags);
		p = ht__put_varint(p, d->start_ts);
		p = ht__put_varint(p, d->end_ts);
		p = ht__put_varint(p, ht__zigzag(d->exit_code));
		p = ht__put_varint(p, ht__zigzag(d->signal));
		b.len = p - b.data;
		rc = ht__buf_str(&b, d->exe, strlen(d->exe));
		if (!rc && !(rc = ht__buf_reserve(&b, 10)))
			b.len = ht__put_varint(b.data + b.len, d->argc) - b.data;
		for (uint32_t a = 0; a < d->argc && !rc; a++)
			rc = ht__buf_str(&b, d->argv[a], strlen(d->argv[a]));
	}
	if (!rc && b.len)
		rc = write_chunk(w, HT__CHUNK_PROCESSES, b.data, b.len, w->procs.n, 0, 0);
	ht__buf_release(&b);
	return rc < 0 ? (w->err = rc) : 0;
}

int ht__writer_process_loss(struct ht__writer *w, uint32_t process, const struct ht_process *loss)
{
	if (!w || process >= w->procs.n || !w->procs.v[process])
		return HT_ERR_INVALID;
	struct ht_process *d = &w->procs.v[process]->p;
	d->lost_lossy = loss->lost_lossy;
	d->lost_no_buffer = loss->lost_no_buffer;
	d->lost_in_handler = loss->lost_in_handler;
	d->lost_from_ts = loss->lost_from_ts;
	d->events_untraced = loss->events_untraced;
	d->untraced_from_ts = loss->untraced_from_ts;
	return 0;
}

/* LOSSES: the processes that did not record every event (none: no chunk). */
static int write_losses(struct ht__writer *w)
{
	struct ht__buf b = {0};
	int rc = 0;
	uint32_t n = 0;
	for (uint32_t i = 0; i < w->procs.n && !rc; i++) {
		const struct ht_process *d = w->procs.v[i] ? &w->procs.v[i]->p : NULL;
		if (!d || !(d->lost_lossy | d->lost_no_buffer | d->lost_in_handler |
			    d->events_untraced | d->lost_from_ts | d->untraced_from_ts))
			continue;
		if ((rc = ht__buf_reserve(&b, 80)) < 0)
			break;
		uint8_t *p = b.data + b.len;
		p = ht__put_varint(p, i);
		p = ht__put_varint(p, d->lost_lossy);
		p = ht__put_varint(p, d->lost_no_buffer);
		p = ht__put_varint(p, d->lost_in_handler);
		p = ht__put_varint(p, d->lost_from_ts);
		p = ht__put_varint(p, d->events_untraced);
		p = ht__put_varint(p, d->untraced_from_ts);
		b.len = p - b.data;
		n++;
	}
	if (!rc && b.len)
		rc = write_chunk(w, HT__CHUNK_LOSSES, b.data, b.len, n, 0, 0);
	ht__buf_release(&b);
	return rc < 0 ? (w->err = rc) : 0;
}

void ht__writer_set_losses(struct ht__writer *w, uint64_t lossy, uint64_t no_buffer,
			   uint64_t in_handler)
{
	w->lost_by_cause[0] = lossy;
	w->lost_by_cause[1] = no_buffer;
	w->lost_by_cause[2] = in_handler;
}

void ht__writer_set_window(struct ht__writer *w, uint64_t start_ns, uint64_t dropped,
			   uint64_t ring_bytes, uint64_t ring_ns)
{
	w->window[0] = start_ns;
	w->window[1] = dropped;
	w->window[2] = ring_bytes;
	w->window[3] = ring_ns;
	w->flags |= HT_TRACEF_WINDOW;
}

int ht__writer_finish(struct ht__writer *w, uint64_t duration_ns, uint64_t events_lost,
		      uint32_t flags)
{
	if (!w)
		return HT_ERR_INVALID;
	int rc = flush_events(w);
	/* The symbols, the largest table (python json: 214 KB raw, 4 ms at
	   level 10), compress while the last events chunk may still be. */
	struct ht__buf syms_ahead = {0};
	uint32_t syms_count = 0;
	bool ahead = !rc && table_ahead(w, &w->syms, skip_sym, &syms_ahead, &syms_count);
	stop_thread(w); /* the chunks are all written: the tables follow them */
	if (!rc && w->cerr)
		rc = w->err = w->cerr;
	if (duration_ns < w->max_ts)
		duration_ns = w->max_ts;
	uint64_t tables = w->off;
	ht__proctab_end(&w->procs, duration_ns);
	bool incomplete = flags & HT__FINISH_INCOMPLETE;
	flags = (w->flags | flags | HT_TRACEF_COMPLETE) &
		~(HT_TRACEF_TRUNCATED | HT__FINISH_INCOMPLETE);
	if (incomplete)
		flags &= ~HT_TRACEF_COMPLETE;
	if (w->syms_count)
		flags |= HT_TRACEF_SYMBOLS;
	if (events_lost)
		flags |= HT_TRACEF_LOSSY;
	if (!rc)
		rc = write_table(w, HT__CHUNK_DEFINDEX, &w->defidx, skip_defidx);
	if (!rc)
		rc = ahead
			 ? append_ahead(w, HT__CHUNK_SYMBOLS, &syms_ahead, w->syms.len, syms_count)
			 : write_table(w, HT__CHUNK_SYMBOLS, &w->syms, skip_sym);
	ht__buf_release(&syms_ahead);
	if (!rc)
		rc = write_processes(w);
	if (!rc)
		rc = write_losses(w);
	if (!rc)
		rc = write_meta(w, duration_ns, events_lost, flags);
	if (!rc) {
		struct ht__footer f = {
		    .tables_offset = tables,
		    .footer_offset = w->off,
		    .event_count = w->event_total,
		    .event_chunks = w->event_chunks,
		};
		uint8_t fb[HT__FOOTER_SIZE];
		ht__footer_pack(fb, &f);
		rc = write_all(w, fb, sizeof(fb));
	}
	if (!rc && close(w->fd) < 0)
		rc = ht__error_from_errno(errno);
	else if (rc)
		close(w->fd);
	w->fd = -1;
	ht__writer_abort(w);
	return rc;
}

void ht__writer_abort(struct ht__writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		flush_events(w); /* best effort: keep what was given so far */
	stop_thread(w);
	if (w->fd >= 0)
		close(w->fd);
	for (int i = 0; i < Z_COUNT; i++) {
		ZSTD_freeCCtx(w->z[i].cctx);
		ht__buf_release(&w->z[i].plane);
	}
	ht__buf_release(&w->comp);
	for (int i = 0; i < HT__S_DEFS; i++)
		ht__buf_release(&w->zout[i]);
	for (int i = 0; i < HT__NSTREAMS; i++) {
		ht__buf_release(&w->st[i]);
		ht__buf_release(&w->job_st[i]);
	}
	amap_release(w, w->amap);
	free(w->rings);
	free(w->rawf);
	ht__own_release(w->own, w->slots_cap);
	free(w->prev_stack);
	ht__buf_release(&w->defidx);
	ht__buf_release(&w->syms);
	ht__buf_release(&w->cmd);
	ht__proctab_release(&w->procs);
	free(w->slots);
	free(w->map);
	free(w->hostname);
	free(w->untraced);
	free(w);
}
