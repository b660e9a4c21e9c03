/*
 * codec.h - the bytes of the .htr format shared by writer.c and reader.c:
 * file header, chunk header and footer layouts, record codes, varints, CRC-32
 * and the process table both sides keep from process events.
 * docs/trace-format.md describes the same thing in prose.
 */
#ifndef HT_FORMAT_CODEC_H
#define HT_FORMAT_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "heaptrail/trace.h"
#include "base/vec.h"

#define HT__FILE_MAGIC "HTRACE\r\n" /* 8 bytes; \r\n catches text-mode mangling */
/* Version 14: a raw free code may count from one of the thread's last
   raw frees (HT__FILE_VERSION_FBASES). Every trace is written as version
   14, snapshot traces too. A reader also reads versions 2 to 13. */
#define HT__FILE_VERSION 14u
#define HT__FILE_VERSION_OLDEST 2u
/* Version 4: a heap snapshot trace (HT_TRACEF_SNAPSHOT), version 3 plus
   SNAPSHOT events (code 21), which an older reader must refuse rather than
   misread. From this version on SNAPSHOT events may appear. */
#define HT__FILE_VERSION_SNAPSHOT 4u
/* Version 5: the codes of blocks leaving have their own stream (FREE), and
   a stream of varints may be stored as two planes, first bytes then
   continuation bytes. */
#define HT__FILE_VERSION_PLANES 5u
/* Version 6: a SNAPSHOT event's heap is the custom heap its stack's blocks
   are in (before, always the process heap): an older reader must refuse it
   rather than show those blocks in the process heap. */
#define HT__FILE_VERSION_SNAPHEAP 6u
/* Version 7: chunk groups (HT__CHUNK_CONT). */
#define HT__FILE_VERSION_GROUPS 7u
/* Version 8: predicted stacks (a stack code 0 of an event with a size). */
#define HT__FILE_VERSION_STACKPRED 8u
/* Version 9: the DEFS stream and the DEFINDEX table instead of DEFS. */
#define HT__FILE_VERSION_DEFSTREAM 9u
/* Version 10: raw heap address codes count in HT__HEAP_GRAIN bytes. */
#define HT__FILE_VERSION_GRAIN 10u
/* Version 11: packed time deltas in the events chunks with flag
   HT__CHUNK_TPACK. A TIME varint below HT__TIME_PAIR holds three deltas
   of 0 to 3 (2 bits each, the first event's highest), one below
   HT__TIME_ONE two (HT__TIME_PAIR plus 2 bits each), any other one delta
   (HT__TIME_ONE plus its zigzag). */
#define HT__FILE_VERSION_TPACK 11u
#define HT__TIME_SMALL 4u /* deltas below this are packed */
/* Version 12: in the events chunks with flag HT__CHUNK_FREL an odd free
   code has a second tag bit: d << 2 | 1 counts back as before, r << 2 | 3
   names the slot's own allocation at its free position - 1 +
   unzigzag(r) (docs/trace-format.md, "Relative frees"). */
#define HT__FILE_VERSION_FREL 12u
/* Version 13: a new block's code HT__ADDR_END + i names the end of the
   slot's (i + 2)-th previous new block (the latest's end being
   HT__ADDR_TOP's address): docs/trace-format.md, "Addresses". */
#define HT__FILE_VERSION_ENDS 13u
/* Version 14: an even free code v (raw) is (zigzag(delta / 16) * 2 +
   b) << 1: the delta from the slot's last address (b = 0) or from its
   raw free before the latest (b = 1; docs/trace-format.md, "Addresses"). */
#define HT__FILE_VERSION_FBASES 14u
/* Version 14: a group holds up to HT__GROUP_CHUNKS_V14 chunks (16 before). */
#define HT__FILE_VERSION_GROUP64 14u
/* Version 14: a new block of size 0 (malloc(0), calloc of no bytes) has a
   ring of its own, ring 0 (the writer's since it computes a block's class
   once, ht__new_block_class()); before, the class of size 0 was 2. */
#define HT__FILE_VERSION_SIZE0 14u
/* Per thread slot, both sides: the addresses of its last two blocks that
   left by a raw code (0: none yet). A column of its own beside the
   slots: in them it cost every event two or three instructions more
   (the slot's size). */
struct ht__raw_frees {
	uint64_t latest;
	uint64_t prev;
};
#define HT__TIME_PAIR 64u
#define HT__TIME_ONE 80u
#define HT__HEADER_SIZE 64u
#define HT__CHUNK_MAGIC 0x4b435448u /* "HTCK" as a little-endian u32 */
#define HT__CHUNK_HEADER_SIZE 48u
#define HT__FOOTER_MAGIC "HTRFOOT1"
#define HT__FOOTER_SIZE 48u

/* Raw payload bytes after which the writer closes an events chunk. Larger
   chunks make smaller traces (a free of a block from an earlier chunk costs
   a raw address: 4 MiB makes the 8-thread alloc_loop trace 11 % smaller)
   but a collector killed without warning loses the chunk it was filling,
   and with 4 MiB qa.collector-killed loses all of a 200000-pair churn that
   1 MiB keeps: docs/trace-format.md. */
#define HT__CHUNK_TARGET (1u << 20)
/* Flag of an events chunk (header byte 5, version 7): it continues the
   decoding state of the events chunk before it. A group (a chunk without
   it and the chunks with it after) holds at most HT__GROUP_CHUNKS chunks;
   the writer starts a new one after HT__GROUP_BYTES of raw payload: a free
   names blocks of the earlier chunks of its group by index (the 8-thread
   alloc_loop trace 14 % smaller) while each chunk is written as it fills,
   so a collector killed loses no more than with 1 MiB chunks. */
#define HT__CHUNK_CONT 0x01u
/* Flag of an events chunk (version 11): its TIME varints are packed
   (HT__FILE_VERSION_TPACK); without it, one zigzag delta each. */
#define HT__CHUNK_TPACK 0x02u
/* Flag of an events chunk (version 12): its free codes have two tag bits
   (HT__FILE_VERSION_FREL); without it, one. */
#define HT__CHUNK_FREL 0x04u
#define HT__GROUP_CHUNKS 16u
/* Since version 14 a group holds at most this many chunks: the collector
   ends a chunk each second, and under load (a program running slower,
   the same events in more and smaller chunks) 16 of them ended python's
   group before its bytes did, and the frees after it were raw (+6 to 8 %
   of its trace). */
#define HT__GROUP_CHUNKS_V14 64u
#define HT__GROUP_BYTES (8u << 20)
/* A group past HT__GROUP_BYTES goes on up to twice them while at least an
   eighth of its allocations are live and it made fewer than this many
   (the reader keeps 8 bytes each): writer.c, group_goes_on(). */
#define HT__GROUP_ALLOCS (1u << 20)
/* Table chunks are split at this raw size; a reader refuses larger chunks. */
#define HT__TABLE_CHUNK_MAX (16u << 20)
#define HT__RAW_MAX (64u << 20)

enum ht__chunk_kind {
	HT__CHUNK_EVENTS = 1,	 /* events and inline definitions */
	HT__CHUNK_DEFS = 2,	 /* every definition again (versions 2 to 8) */
	HT__CHUNK_SYMBOLS = 3,	 /* symbols of physical frames */
	HT__CHUNK_PROCESSES = 4, /* the process table */
	HT__CHUNK_META = 5,	 /* command, hostname; at finish also duration, lost */
	HT__CHUNK_LOSSES = 6,	 /* events each process did not record */
	HT__CHUNK_DEFINDEX = 7,	 /* where the events chunks' DEFS streams are (version 9) */
};

/* Record codes in the low 5 bits of a record's first byte. Events use their
   enum ht_event_type value (1..20); definitions use the codes below. */
#define HT__REC_DEF_MODULE 28u
#define HT__REC_DEF_FRAME 29u
#define HT__REC_DEF_STACK 30u
#define HT__REC_TYPE_MASK 0x1fu
#define HT__REC_EXT 0x20u   /* func byte, flags and heap varints follow */
#define HT__REC_SAME 0x40u  /* same thread slot as the previous event */
#define HT__REC_STACK 0x80u /* a stack id varint follows */

/*
 * An events chunk's payload is split into streams, one per kind of value, so
 * that zstd sees long runs of alike bytes (sizes next to sizes, timestamps
 * next to timestamps). The payload starts with varint HT__NSTREAMS and the
 * varint length of each stream; the streams follow in this order.
 */
enum ht__stream {
	HT__S_OPS = 0,	 /* record first bytes, func bytes, field masks */
	HT__S_MISC = 1,	 /* flags, heap, thread slots, prot, mflags, fd, value, module, names,
			    process descriptions (and definition bodies up to version 8) */
	HT__S_TIME = 2,	 /* timestamp deltas */
	HT__S_ADDR = 3,	 /* address codes */
	HT__S_SIZE = 4,	 /* size, old_size */
	HT__S_STACK = 5, /* stack ids */
	HT__S_FREE = 6,	 /* address codes of blocks leaving (version 5; before, in ADDR) */
	HT__S_DEFS = 7,	 /* definition records (version 9; before, in OPS and MISC) */
	HT__NSTREAMS = 8
};
/* Streams of a version 2 to 4 events chunk, and of a version 5 to 8 one. */
#define HT__NSTREAMS_V4 6
#define HT__NSTREAMS_V8 7

/*
 * Since version 5 a stream of varints may be stored as two planes: the
 * first byte of every varint, then the bytes after the first (docs/
 * trace-format.md, "Planes"). Each plane then gets its own byte statistics
 * in zstd's entropy coder, which the mixed bytes of two-byte varints spoil.
 */
/* Writes the planes of the varints in[0..len) to lo and hi (room for len
   bytes each); returns the length of the first plane (that of the second
   is len minus it). */
size_t ht__planes_split(const uint8_t *in, size_t len, uint8_t *lo, uint8_t *hi);
/* The same a byte at a time, as it is done where pext is slow or absent
   (the tests compare both). */
size_t ht__planes_split_plain(const uint8_t *in, size_t len, uint8_t *lo, uint8_t *hi);

/*
 * Parses the stream table at the start of an events chunk's payload
 * [p, end) of a file of the given version and points cur[0..HT__NSTREAMS)
 * at the streams (those a version lacks are empty). Streams stored as
 * planes are joined into *buf (grown as needed). Returns 0, HT_ERR_NOMEM,
 * or HT_ERR_CORRUPT with *why set.
 */
struct ht__cur;
/* Where the n varints at p end, each of 10 bytes at most and all before
   end (ht__get_varint()'s rules), or NULL: the reader's check of a stack
   definition's frames, whose values it reads later on another thread. */
const uint8_t *ht__varints_skip(const uint8_t *p, const uint8_t *end, uint64_t n);

int ht__streams_open(const uint8_t *p, const uint8_t *end, uint32_t version, struct ht__cur *cur,
		     uint8_t **buf, size_t *cap, const char **why);
/*
 * As ht__streams_open(), but a stream i with bit i of direct set that is
 * stored as planes is not joined: its cursor reads each varint's first
 * byte from the first plane and the rest from the second (ht__cur's hi),
 * after the same check that the planes pair up. Only for streams read by
 * ht__get_varint() alone: the reader's decode of events, where joining
 * was 8 % of its work on alloc_loop.
 */
int ht__streams_open_direct(const uint8_t *p, const uint8_t *end, uint32_t version,
			    struct ht__cur *cur, uint8_t **buf, size_t *cap, unsigned direct,
			    const char **why);

/*
 * Heap addresses are predicted the way malloc reuses memory, per chunk: a
 * free names its block by how many allocations of the chunk ago it was made,
 * and an allocation takes the address of a block of its size class that its
 * thread freed recently (rings of HT__RING_DEPTH addresses per size class).
 * Anything else is a delta from the thread's previous address.
 */
/* Classes 2 to 64 (ht__size_class) and ring 0 of the blocks of no bytes
   (ht__new_block_class()): 65 rings per slot. */
#define HT__RING_CLASSES 65
#define HT__RING_DEPTH 16

/* Allocation codes past the ring entries: the address right after the
   slot's previous new block; right after its previous block not taken from
   a ring; a realloc's old address (it stayed in place). */
#define HT__ADDR_TOP HT__RING_DEPTH
#define HT__ADDR_FRESH (HT__RING_DEPTH + 1)
#define HT__ADDR_OLD (HT__RING_DEPTH + 2)
/* Version 13: the end of an earlier new block than the latest, codes
   HT__ADDR_END to HT__ADDR_END + HT__ADDR_ENDS - 3 (the 2nd to the 15th
   back); a slot keeps the ends of its last HT__ADDR_ENDS new blocks (a
   power of two; the writer puts a block's own end in before it codes it,
   in the place of the 16th back). */
#define HT__ADDR_END (HT__RING_DEPTH + 3)
#define HT__ADDR_ENDS 16u
/* Version 10: a raw heap address code (of a block leaving or a new one)
   counts in 16 bytes, glibc's alignment, unless escaped: the low 4 bits of
   a heap delta are nearly always 0 (docs/trace-format.md, "Addresses"). */
#define HT__HEAP_GRAIN_SHIFT 4u

/* glibc's chunk for a request: max(32, size + 8 rounded up to 16) bytes
   (a size within 23 of 2^64 wraps to below 32: 32 too). */
static inline uint64_t ht__chunk_size(uint64_t size)
{
	uint64_t chunk = (size + 8 + 15) & ~15ull;
	return chunk < 32 ? 32 : chunk;
}

/* glibc's bins: freed chunks of one size are reused first. */
/* Sizes of 1008 and more are class 63; sizes 993 to 1007 (a 1024-byte
   chunk) are class 64, as the format has always computed it: there were 64
   rings, and class 64 reached past a slot's own (the next slot's unused
   classes 0 and 1, or past the array for the last slot). */
static inline unsigned ht__size_class(uint64_t size)
{
	if (size >= 63 * 16)
		return 63;
	return (unsigned)(ht__chunk_size(size) >> 4);
}

/* The ring of a new block of size bytes: its size class, and for a block of
   no bytes, ring 0 (version 14, HT__FILE_VERSION_SIZE0; a reader of an
   older version takes ht__size_class(0), 2). */
static inline unsigned ht__new_block_class(uint64_t size)
{
	return size ? ht__size_class(size) : 0;
}

typedef uint64_t ht__rings[HT__RING_CLASSES][HT__RING_DEPTH];

/*
 * A thread slot's own allocations in the chunk, as indices into the chunk's
 * list of allocations: since version 3 a free names its block by how many of
 * its own thread's allocations ago it was made, so threads interleaved in a
 * chunk do not make each other's codes longer (docs/trace-format.md).
 */
struct ht__own {
	uint32_t *glob;
	uint32_t n, cap;
};

/* Room for one more in o (out of line: the push is on every allocation). */
static __attribute__((noinline, unused)) int codec_own_grow(struct ht__own *o)
{
	return ht__grow32((void **)&o->glob, &o->cap, o->n < 256 ? 256 : (size_t)o->n + 1,
			  sizeof(*o->glob));
}

/* Appends chunk allocation index g; 0, or -1 when out of memory. */
static inline int ht__own_push(struct ht__own *o, uint32_t g)
{
	if (o->n == o->cap && codec_own_grow(o) < 0)
		return -1;
	o->glob[o->n++] = g;
	return 0;
}

/* Releases the lists of n slots and the array holding them. */
static inline void ht__own_release(struct ht__own *o, uint32_t n)
{
	for (uint32_t i = 0; o && i < n; i++)
		free(o[i].glob);
	free(o);
}

/* A ring's places move by one on a push and on a take of its first
   place with eight 16-byte loads and stores inline: through libc's
   memmove each cost about 26 instructions and a call (the writer pushes
   on nearly every free and takes on most new blocks, 60 % of the loops'
   at the first place; docs/performance.md, "The writer, session 26"). */
#ifdef __SSE2__
#define HT__RING_LD(k) _mm_loadu_si128((const __m128i *)(ring + (k)))
#define HT__RING_ST(k, v) _mm_storeu_si128((__m128i *)(ring + (k)), v)
#endif

static inline void ht__ring_push(uint64_t *ring, uint64_t addr)
{
#ifdef __SSE2__
	_Static_assert(HT__RING_DEPTH == 16, "ht__ring_push moves 16 places");
	__m128i a0 = HT__RING_LD(0), a1 = HT__RING_LD(2), a2 = HT__RING_LD(4), a3 = HT__RING_LD(6);
	__m128i a4 = HT__RING_LD(8), a5 = HT__RING_LD(10), a6 = HT__RING_LD(12);
	__m128i a7 = HT__RING_LD(13); /* places 13 and 14 to 14 and 15 */
	HT__RING_ST(14, a7);
	HT__RING_ST(13, a6);
	HT__RING_ST(11, a5);
	HT__RING_ST(9, a4);
	HT__RING_ST(7, a3);
	HT__RING_ST(5, a2);
	HT__RING_ST(3, a1);
	HT__RING_ST(1, a0);
#else
	memmove(ring + 1, ring, (HT__RING_DEPTH - 1) * sizeof(*ring));
#endif
	ring[0] = addr;
}

static inline uint64_t ht__ring_take(uint64_t *ring, unsigned k)
{
	uint64_t a = ring[k];
#ifdef __SSE2__
	if (k == 0) {
		__m128i a0 = HT__RING_LD(1), a1 = HT__RING_LD(3), a2 = HT__RING_LD(5);
		__m128i a3 = HT__RING_LD(7), a4 = HT__RING_LD(9), a5 = HT__RING_LD(11);
		__m128i a6 = HT__RING_LD(13);
		__m128i a7 = _mm_srli_si128(HT__RING_LD(14), 8); /* place 15, then 0 */
		HT__RING_ST(0, a0);
		HT__RING_ST(2, a1);
		HT__RING_ST(4, a2);
		HT__RING_ST(6, a3);
		HT__RING_ST(8, a4);
		HT__RING_ST(10, a5);
		HT__RING_ST(12, a6);
		HT__RING_ST(14, a7);
		return a;
	}
#endif
	memmove(ring + k, ring + k + 1, (HT__RING_DEPTH - 1 - k) * sizeof(*ring));
	ring[HT__RING_DEPTH - 1] = 0;
	return a;
}
#ifdef __SSE2__
#undef HT__RING_LD
#undef HT__RING_ST
#endif

/* Bits of an event's field mask: which optional fields follow. */
#define HT__F_ADDR 0x01u
#define HT__F_SIZE 0x02u
#define HT__F_OLD_ADDR 0x04u
#define HT__F_OLD_SIZE 0x08u
#define HT__F_PROT 0x10u
#define HT__F_MFLAGS 0x20u
#define HT__F_FD 0x40u
#define HT__F_MORE 0x80u /* a second mask byte follows */
#define HT__F2_VALUE 0x01u
#define HT__F2_MODULE 0x02u
#define HT__F2_NAME 0x04u

/* Id limits a reader accepts; they bound the memory a hostile file can ask for. */
#define HT__MAX_MODULE_ID (1u << 20)
#define HT__MAX_FRAME_ID (1u << 27)
#define HT__MAX_STACK_ID (1u << 27)
#define HT__MAX_PROCESSES (1u << 22)
#define HT__MAX_TS_UNIT 1000000u /* 1 ms: coarser timestamps are refused */
#define HT__MAX_SLOTS 4096u	 /* rings of 8 KiB each: at most 32 MiB */

struct ht__chunk_header {
	uint8_t kind;
	uint8_t flags; /* HT__CHUNK_CONT, HT__CHUNK_TPACK, HT__CHUNK_FREL */
	uint32_t raw_size;
	uint32_t comp_size;
	uint32_t count; /* events (EVENTS) or entries (tables) */
	uint32_t seq;	/* position of the chunk in the file, from 0 */
	uint64_t first_ts;
	uint64_t last_ts;
};

struct ht__footer {
	uint64_t tables_offset; /* first table chunk; events end here */
	uint64_t footer_offset; /* where the footer itself starts */
	uint64_t event_count;
	uint32_t event_chunks;
};

uint32_t ht__crc32(const void *buf, size_t len);

void ht__chunk_header_pack(uint8_t out[HT__CHUNK_HEADER_SIZE], const struct ht__chunk_header *h);
/* 0, or HT_ERR_CORRUPT when the magic or CRC is wrong. */
int ht__chunk_header_parse(const uint8_t in[HT__CHUNK_HEADER_SIZE], struct ht__chunk_header *h);

void ht__footer_pack(uint8_t out[HT__FOOTER_SIZE], const struct ht__footer *f);
int ht__footer_parse(const uint8_t in[HT__FOOTER_SIZE], struct ht__footer *f);

/* Default func of an event type: an event with it needs no EXT byte. */
static inline unsigned ht__default_func(unsigned type)
{
#define HT__DEFAULT_FUNC(id, value, name, func, fields) [HT_EV_##id] = func,
	static const uint8_t def[HT_EV__COUNT] = {HT_EVENT_TYPES(HT__DEFAULT_FUNC)};
#undef HT__DEFAULT_FUNC
	return type < HT_EV__COUNT ? def[type] : HT_FN_NONE;
}

static inline void ht__put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void ht__put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void ht__put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t ht__get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t ht__get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t ht__get_le64(const uint8_t *p)
{
	return (uint64_t)ht__get_le32(p) | (uint64_t)ht__get_le32(p + 4) << 32;
}

static inline uint64_t ht__zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t ht__unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Writes v as LEB128 at p (up to 10 bytes); returns the new end. */
static inline uint8_t *ht__put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/*
 * A bounds-checked cursor over a decompressed payload. Every get sets bad
 * instead of reading past end, so a decoder checks once per record.
 */
struct ht__cur {
	const uint8_t *p;
	const uint8_t *end;
	int bad;
	/* A stream read from its planes (ht__streams_open_direct): p and end
	   are the first plane, hi and hend the second; NULL otherwise. */
	const uint8_t *hi;
	const uint8_t *hend;
};

/* A varint of a stream read from its planes, whose first byte at c->p has
   bit 7 set or is past the end: its other bytes are in the second plane. */
static inline uint64_t ht__get_varint_planes(struct ht__cur *c)
{
	const uint8_t *h = c->hi;
	if (c->p >= c->end) {
		c->bad = 1;
		return 0;
	}
	uint64_t v = *c->p & 0x7f;
	for (unsigned shift = 7; shift < 64; shift += 7) {
		if (h >= c->hend) {
			c->bad = 1;
			return 0;
		}
		uint8_t b = *h++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			c->p++;
			c->hi = h;
			return v;
		}
	}
	c->bad = 1;
	return 0;
}

static inline uint64_t ht__get_varint(struct ht__cur *c)
{
	const uint8_t *p = c->p;
	if (p < c->end && *p < 0x80) { /* the common one-byte case */
		c->p = p + 1;
		return *p;
	}
	if (c->hi)
		return ht__get_varint_planes(c);
	if (c->end - p >= 2 && p[1] < 0x80) { /* two bytes: sizes, raw addresses */
		c->p = p + 2;
		return (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
	}
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (p >= c->end) {
			c->bad = 1;
			return 0;
		}
		uint8_t b = *p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			c->p = p;
			return v;
		}
	}
	c->bad = 1;
	return 0;
}

static inline uint8_t ht__get_byte(struct ht__cur *c)
{
	if (c->p >= c->end) {
		c->bad = 1;
		return 0;
	}
	return *c->p++;
}

/* A length-prefixed byte string; returns a pointer into the payload (not
   NUL-terminated) or NULL with bad set when it does not fit. */
static inline const char *ht__get_bytes(struct ht__cur *c, uint32_t *len)
{
	uint64_t n = ht__get_varint(c);
	if (c->bad || n > (uint64_t)(c->end - c->p)) {
		c->bad = 1;
		*len = 0;
		return NULL;
	}
	const char *s = (const char *)c->p;
	c->p += n;
	*len = (uint32_t)n;
	return s;
}

/* A growable byte buffer for encoding. */
struct ht__buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

/* Makes room for n more bytes; 0 or HT_ERR_NOMEM. */
int ht__buf_reserve(struct ht__buf *b, size_t n);
/* Appends len bytes of s with a varint length in front. */
int ht__buf_str(struct ht__buf *b, const char *s, size_t len);
/* Appends a string that may be NULL: varint 0 for NULL, else length + 1. */
int ht__buf_nstr(struct ht__buf *b, const char *s);
void ht__buf_release(struct ht__buf *b);

/*
 * The process table, kept from PROCESS_START / EXEC / EXIT events by the
 * writer (to store it at finish) and by a reader of an unfinished trace.
 * Entries never move once made, so pointers to them stay valid.
 */
struct ht__proctab_ent {
	struct ht_process p; /* first: an entry pointer is a struct ht_process * */
	char *strings;	     /* exe and argv bytes, owned */
	const char **argv;   /* owned */
};

struct ht__proctab {
	struct ht__proctab_ent **v;
	uint32_t n;
	uint32_t cap;
};

/* Entry index (made blank when new): NULL when out of memory or too large. */
struct ht__proctab_ent *ht__proctab_get(struct ht__proctab *t, uint32_t index);
/* Copies *src (exe, argv) into entry index. 0 or HT_ERR_NOMEM / INVALID. */
int ht__proctab_set(struct ht__proctab *t, uint32_t index, const struct ht_process *src);
/* Applies a PROCESS_EXEC (ends the pid's earlier image) or PROCESS_EXIT event. */
void ht__proctab_event(struct ht__proctab *t, const struct ht_event *ev);
/* Sets end_ts of every image still running to ts. */
void ht__proctab_end(struct ht__proctab *t, uint64_t ts);
void ht__proctab_release(struct ht__proctab *t);

#endif
