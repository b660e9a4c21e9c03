/*
 * reader.c - reads .htr traces (include/heaptrail/trace.h): the tables from
 * the chunks the footer points at, then the events chunk by chunk. A trace
 * without a usable footer is scanned from the start and its tables are filled
 * from the inline definitions. Every byte read is checked: bad input ends the
 * stream with a warning, never a crash.
 */
#define _GNU_SOURCE /* mremap */
#include "heaptrail/trace.h"
#include "base/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "format/codec.h"
#include "format/notes.h"
#include "format/reader_phys.h"
#include "format/reader_ref.h"

/* Strings and stack frame lists live in blocks that never move, so pointers
   handed out stay valid while the tables grow. */
struct arena_block {
	struct arena_block *next;
	size_t used;
	size_t size;
	char data[];
};

struct arena {
	struct arena_block *head;
};

#define BLOCK_ELEMS 4096u /* elements per block of a stable vector */

/* An array whose elements never move: blocks of BLOCK_ELEMS elements. */
struct svec {
	char **blocks;
	uint32_t nblocks;
	uint32_t n;
	size_t elem;
};

struct phys_frame {
	uint32_t module;
	uint32_t first; /* first logical frame */
	uint32_t nlog;	/* 0: not defined */
	uint64_t rel;
};

struct stack_ent {
	const uint32_t *frames;
	uint32_t n;
	uint32_t defined;
};

struct sym_tmp { /* symbols of a physical frame, while the tables load */
	const char *function;
	const char *file;
	uint32_t line;
};

/* The stack definitions of a stream so far: the previous one, whose outer
   frames the next one may share. */
struct stackprev {
	uint32_t *scratch; /* the previous stack's physical frames (inline defs) */
	size_t scratch_cap;
	uint32_t prev_n;    /* how many; 0 at the start of each events chunk */
	uint32_t *scratch2; /* the stack being decoded */
	size_t scratch2_cap;
	/* Frames that stack definitions may still expand to: a stack shares its
	   outer frames with the previous one for a byte, so without this bound a
	   small hostile file could ask for any amount of memory. */
	uint64_t frames_left;
	/* The pass's bound that a decoder of events chunks takes its frames
	   from (frames_take), NULL for the tables' own. */
	uint64_t *pool;
	/* Version 9: ids are differences from the one after the last id of
	   their kind (module, frame, stack) in the group, -1 at its start. */
	int id_delta;
	int64_t last_id[3];
};

/* An events chunk whose DEFS stream's frame, the last of its payload, the
   tables' reading decompressed and checked (DEFINDEX): the worker's
   decode, which does not read that stream, decompresses the payload up to
   it only (dec_open()). */
struct defs_tail {
	uint64_t chunk; /* the chunk's offset */
	uint64_t at;	/* the frame's offset in the payload */
	uint32_t comp;	/* its compressed size */
	uint32_t raw;	/* the DEFS stream's length */
};

struct tables {
	struct arena arena;
	struct svec modules; /* struct ht_module */
	struct svec frames;  /* struct ht_frame: logical */
	struct phys_frame *phys;
	uint32_t nphys;
	uint32_t phys_cap;
	struct stack_ent *stacks;
	uint32_t nstacks; /* max id + 1 */
	uint32_t stacks_cap;
	struct ht__proctab procs;
	struct ht_trace_info info;
	struct stackprev sp;	 /* the DEFS table's bound on frames */
	struct defs_tail *tails; /* in file order */
	uint32_t ntails, tails_cap;
};

struct slot {
	uint32_t process;
	int32_t pid;
	int32_t tid;
	uint64_t last_addr;
	uint64_t fresh_top;
	uint32_t last_stack[HT__RING_CLASSES]; /* per size class (version 8) */
	uint32_t free_own;		       /* its free position (version 12, HT__CHUNK_FREL) */
	/* The ends of its last new blocks, the latest's (TOP's address) at
	   ends[ends_pos % HT__ADDR_ENDS]; the others for END (version 13). */
	uint32_t ends_pos;
	uint64_t ends[HT__ADDR_ENDS];
};

/* A chunk to decode: where it is and its header. */
struct chunk_ref {
	uint64_t off;
	struct ht__chunk_header h;
};

/*
 * The decoding of one group of events chunks: everything it needs besides
 * the file header, so groups decode independently of each other (on worker
 * threads, docs/trace-format.md): every field is reset at the group's
 * start; a chunk with HT__CHUNK_CONT goes on with the state the chunk
 * before it left.
 */
/* An allocation of the group at an address alloc_pack() cannot pack. */
struct alloc_far {
	uint64_t addr;
	uint32_t g; /* its index in the group */
	uint32_t cls;
};

/* Where each size class's ring of a slot starts (ring_push()). */
typedef uint8_t ring_heads[HT__RING_CLASSES];

struct dec {
	ZSTD_DCtx *dctx;
	uint8_t *comp;
	size_t comp_cap;
	uint8_t *raw;
	size_t raw_cap;
	uint32_t seq; /* of the chunk, for messages */
	uint64_t off;
	struct ht__cur cur[HT__NSTREAMS]; /* the streams of the chunk */
	uint8_t *planes;		  /* streams joined from their planes */
	size_t planes_cap;
	uint64_t prev_ts; /* in ts_unit */
	/* Version 11: the chunk packs its time deltas (HT__CHUNK_TPACK), and
	   those pending from the last TIME varint (up to two, as 2-bit
	   fields, the next highest). */
	int tpack;
	uint32_t tpend, tpend_n;
	int frel; /* version 12: its free codes have two tag bits (HT__CHUNK_FREL) */
	struct slot *slots;
	ht__rings *rings;	    /* per slot, the writer's rings in circular form */
	ring_heads *heads;	    /* per slot and size class: where its ring starts */
	struct ht__own *own;	    /* per slot: its allocations in the chunk (version 3) */
	struct ht__raw_frees *rawf; /* per slot: its last raw frees (version 14) */
	uint32_t nslots;
	uint32_t slots_cap;
	/* The allocations of the group, each its address and size class (not
	   the size: a group holds up to 16 MiB of events' allocations) in one
	   word (alloc_pack()), so a free's lookup far back in the list misses
	   the cache once, not twice (alloc_loop: the decode's largest wait).
	   Addresses of 2^56 and more (never a real heap's) are kept aside, in
	   the order made. */
	uint64_t *allocs;
	struct alloc_far *far;
	uint32_t nfar, far_cap;
	uint32_t nallocs;
	uint32_t allocs_cap;
	uint32_t cur_slot;
	struct slot *cur_sl; /* &slots[cur_slot] */
	/* The one thread slot that made every allocation of the group so far
	   (+ 1; 0 none yet, OWN_MANY two or more): its own list would be all
	   of them (glob[i] == i), so none is kept until another slot
	   allocates (jq: 1.5 million entries, 8 MB). */
	uint32_t own_solo;
	struct stackprev sp; /* inline stack definitions, parsed */
	/* The chunk that may continue this state (the seq after the last one
	   opened; 0: none, as at the start of a pass or claim) and the
	   chunks of the group so far. */
	uint32_t cont_seq;
	uint32_t group_n;
	/* The chunks of the group claimed after the one being decoded. */
	const struct chunk_ref *more;
	uint32_t nmore;
};

/*
 * Decoded events, handed from a decoder to ht_reader_next() in file order.
 * A batch ends its chunk (last), and may end the stream: at the end of the
 * events (end), with damage after its events (why), or with an error.
 */
struct batch {
	struct ht_event *ev;
	uint32_t *name_at; /* pairs: an event with a name, its name's offset in names */
	uint32_t nnamed;   /* such pairs */
	uint32_t n, cap, next;
	char *names;
	size_t names_len, names_cap;
	uint64_t ticket; /* the chunk's number in the pass */
	int last;
	int end;
	int rc; /* an error to return (NOMEM, IO) */
	const char *why;
	uint32_t seq; /* where the damage is: chunk seq (UINT32_MAX: unknown), offset */
	uint64_t off;
	struct batch *next_q;
	struct worker *owner;
};

struct pipe;
struct raw_stacks;

/*
 * The DEFS table's stacks expanded into logical frames on a thread of their
 * own (stacks_start()), while the caller goes on to read events, which need
 * only stack ids: clang++'s 55 thousand stacks of 3.7 million frames are
 * about half of what opening its trace costs. ht_reader_stack() waits for
 * it.
 */
struct stacks_job {
	struct ht_reader *r;
	struct raw_stacks *rs; /* the stacks as physical frame lists, freed when done */
	struct arena arena;    /* the logical frame lists */
	pthread_t th;
	pthread_mutex_t mu; /* who joins th */
	int rc;		    /* 0 or HT_ERR_NOMEM: the stacks after that are left undefined */
};

#define WORKER_BATCHES 8 /* batches of BATCH_EVENTS events per decoding thread */

/* A decoding thread: its decoder and its own batches. */
struct worker {
	struct ht_reader *r;
	struct pipe *pp;
	pthread_t th;
	int started;
	struct dec d;
	struct chunk_ref group[HT__GROUP_CHUNKS_V14]; /* the group it claimed */
	struct batch *free_b;			      /* batches ready to fill */
	uint32_t nfree;				      /* how many */
	struct batch *q_head, *q_tail;		      /* filled, in ticket order */
	uint32_t nqueued;			      /* how many */
	pthread_cond_t wake;			      /* half its batches are free again, or stop */
	struct batch all[WORKER_BATCHES];
};

/* The worker threads of one pass over the events, and their hand-over. */
struct pipe {
	pthread_mutex_t mu;
	pthread_cond_t to_reader; /* a batch was filled */
	uint64_t claimed;	  /* tickets handed out */
	uint64_t want;		  /* the ticket the reader reads */
	int reader_waits;	  /* the reader sleeps on to_reader */
	int woken;		  /* the reader was woken once (worker_put()) */
	int stop;		  /* rewind or close, or the reader saw the end */
	int claims_over;	  /* a claim found the end or damage: no more */
	int nworkers;
	struct worker w[];
};

struct ht_reader {
	int fd;
	uint64_t size;
	uint32_t header_size;
	int scan;	     /* no usable footer: tables come from the events */
	uint64_t events_end; /* offset where event chunks stop */

	struct tables t;
	/* The stacks' expansion while it may run (NULL: none, or joined, as
	   stacks_busy says), and its error. */
	struct stacks_job *stacks;
	int stacks_busy; /* atomic: stacks runs, or ran and is not joined */
	int stacks_rc;

	/* Event stream state. */
	uint64_t pos; /* file offset of the next chunk */
	int done;
	uint8_t *comp; /* the tables' chunks */
	size_t comp_cap;
	uint8_t *raw;
	size_t raw_cap;
	uint32_t ts_unit;      /* ns per stored timestamp unit */
	uint32_t version;      /* 4: SNAPSHOT events may follow */
	int free_stream;       /* where codes of blocks leaving are: FREE (5) or ADDR */
	uint8_t type_bits[32]; /* TB_* of each record type code */
	int own_first;	       /* version 3: frees count back in own first */
	unsigned heap_sh;      /* version 10: raw heap address codes count in 16 bytes */
	int fbases;	       /* version 14: raw free codes may count from a recent raw free */
	unsigned size0_cls;    /* the ring of a new block of no bytes (new_block_class()) */
	uint32_t group_chunks; /* the most chunks of a group: 16, 64 since version 14 */
	struct dec d;	       /* decoding on the caller's thread */
	int in_chunk;	       /* d holds a chunk with events left */
	struct batch one;      /* d's events, on the caller's thread */
	int nthreads;	       /* decoding threads for a pass (0: none) */
	struct pipe *pp;       /* while they run */
	struct batch *cur;     /* the batch being read */
	uint64_t ev_index;     /* events returned in this pass */
	uint64_t learned;      /* events whose process changes are already in the tables */
	ZSTD_DCtx *dctx;

	int damage_warned; /* the damage that ends the stream is in warning[] */
	char warning[512];
	/* An unfinished trace: its processes' exit notes (notes.h), applied
	   when the stream has been read to its end once. */
	struct ht__notes notes;
	int notes_applied;
};

/*
 * Blocks of 64 KiB, each new one twice the one before up to 1 MiB. On a
 * thread of its own (the stacks' expansion, python: 8 MB of frame lists),
 * each 64 KiB block grew malloc's heap of that thread by one mprotect(),
 * 131 calls, each taking the process's memory map lock for writing
 * against the page faults of the other threads; from 128 KiB malloc maps
 * them, and their pages not yet written cost no memory.
 */
#define ARENA_FIRST 65536u
#define ARENA_MAX (1u << 20)

static void *arena_alloc(struct arena *a, size_t n)
{
	n = (n + 7) & ~(size_t)7;
	struct arena_block *b = a->head;
	if (!b || b->size - b->used < n) {
		size_t want = b ? sizeof(*b) + b->size : ARENA_FIRST / 2;
		want = want * 2 < ARENA_MAX ? want * 2 : ARENA_MAX;
		size_t size = n > want - sizeof(*b) ? n : want - sizeof(*b);
		b = malloc(sizeof(*b) + size);
		if (!b)
			return NULL;
		b->size = size;
		b->used = 0;
		b->next = a->head;
		a->head = b;
	}
	void *p = b->data + b->used;
	b->used += n;
	return p;
}

static const char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *d = arena_alloc(a, n + 1);
	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = 0;
	return d;
}

static void arena_release(struct arena *a)
{
	while (a->head) {
		struct arena_block *b = a->head;
		a->head = b->next;
		free(b);
	}
}

static void *svec_at(const struct svec *v, uint32_t i)
{
	return v->blocks[i / BLOCK_ELEMS] + (size_t)(i % BLOCK_ELEMS) * v->elem;
}

/* Grows v to n elements (new ones zeroed). 0 or HT_ERR_NOMEM. */
static int svec_resize(struct svec *v, uint32_t n)
{
	uint32_t need = (n + BLOCK_ELEMS - 1) / BLOCK_ELEMS;
	if (need > v->nblocks) {
		char **b = realloc(v->blocks, need * sizeof(*b));
		if (!b)
			return HT_ERR_NOMEM;
		v->blocks = b;
		for (; v->nblocks < need; v->nblocks++)
			if (!(b[v->nblocks] = calloc(BLOCK_ELEMS, v->elem)))
				return HT_ERR_NOMEM;
	}
	if (n > v->n)
		v->n = n;
	return 0;
}

static void svec_release(struct svec *v)
{
	for (uint32_t i = 0; i < v->nblocks; i++)
		free(v->blocks[i]);
	free(v->blocks);
	v->blocks = NULL;
	v->nblocks = v->n = 0;
}

static void tables_init(struct tables *t)
{
	memset(t, 0, sizeof(*t));
	t->modules.elem = sizeof(struct ht_module);
	t->frames.elem = sizeof(struct ht_frame);
	t->info.argv = NULL;
	t->info.hostname = "";
	t->info.untraced = "";
}

static void tables_release(struct tables *t)
{
	arena_release(&t->arena);
	svec_release(&t->modules);
	svec_release(&t->frames);
	free(t->phys);
	free(t->stacks);
	free(t->sp.scratch);
	free(t->sp.scratch2);
	free(t->tails);
	ht__proctab_release(&t->procs);
	tables_init(t);
}

static void add_warning(struct ht_reader *r, const char *fmt, ...)
{
	size_t len = strlen(r->warning);
	if (len && len + 3 < sizeof(r->warning)) {
		strcpy(r->warning + len, "; ");
		len += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->warning + len, sizeof(r->warning) - len, fmt, ap);
	va_end(ap);
}

static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return HT_ERR_IO;
		}
		if (n == 0)
			return HT_ERR_CORRUPT; /* short file */
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int grow(uint8_t **buf, size_t *cap, size_t n)
{
	if (*cap >= n)
		return 0;
	uint8_t *b = realloc(*buf, n);
	if (!b)
		return HT_ERR_NOMEM;
	*buf = b;
	*cap = n;
	return 0;
}

/*
 * Reads the header of the chunk at off (before limit) into *h and checks
 * it; *next is the offset after the chunk. Returns 0, HT_ERR_CORRUPT (with
 * *why set) or HT_ERR_IO.
 */
static int load_header(struct ht_reader *r, uint64_t off, uint64_t limit,
		       struct ht__chunk_header *h, uint64_t *next, const char **why)
{
	uint8_t hb[HT__CHUNK_HEADER_SIZE];
	*why = NULL;
	if (limit < off || limit - off < HT__CHUNK_HEADER_SIZE) {
		*why = "partial chunk header";
		return HT_ERR_CORRUPT;
	}
	int rc = read_at(r->fd, hb, sizeof(hb), off);
	if (rc == HT_ERR_CORRUPT)
		*why = "partial chunk header";
	if (rc < 0)
		return rc;
	if (ht__chunk_header_parse(hb, h) < 0) {
		*why = "damaged chunk header";
		return HT_ERR_CORRUPT;
	}
	if (h->comp_size > limit - off - HT__CHUNK_HEADER_SIZE) {
		*why = "partial chunk";
		return HT_ERR_CORRUPT;
	}
	if (h->raw_size > HT__RAW_MAX) {
		*why = "chunk too large";
		return HT_ERR_CORRUPT;
	}
	*next = off + HT__CHUNK_HEADER_SIZE + h->comp_size;
	return 0;
}

/* Grows the buffers for chunk c's payload and reads its compressed bytes
   into *comp. Returns 0, HT_ERR_NOMEM, or read_at()'s error (*why set). */
static int read_payload(int fd, const struct chunk_ref *c, uint8_t **comp, size_t *comp_cap,
			uint8_t **raw, size_t *raw_cap, const char **why)
{
	const struct ht__chunk_header *h = &c->h;
	*why = NULL;
	if (grow(comp, comp_cap, h->comp_size ? h->comp_size : 1) < 0 ||
	    grow(raw, raw_cap, h->raw_size ? h->raw_size : 1) < 0)
		return HT_ERR_NOMEM;
	int rc = read_at(fd, *comp, h->comp_size, c->off + HT__CHUNK_HEADER_SIZE);
	if (rc < 0)
		*why = "partial chunk";
	return rc;
}

/*
 * Reads and decompresses the payload of chunk c into *raw (buffers grown
 * as needed). Safe on any thread with its own buffers and dctx. Returns 0,
 * HT_ERR_CORRUPT (with *why set) or HT_ERR_NOMEM.
 */
static int load_payload(int fd, ZSTD_DCtx *dctx, const struct chunk_ref *c, uint8_t **comp,
			size_t *comp_cap, uint8_t **raw, size_t *raw_cap, const char **why)
{
	const struct ht__chunk_header *h = &c->h;
	int rc = read_payload(fd, c, comp, comp_cap, raw, raw_cap, why);
	if (rc < 0)
		return rc;
	size_t n = ZSTD_decompressDCtx(dctx, *raw, h->raw_size, *comp, h->comp_size);
	if (ZSTD_isError(n) || n != h->raw_size) {
		*why = "chunk fails its checksum";
		return HT_ERR_CORRUPT;
	}
	return 0;
}

/* load_payload() but for the DEFS frame of tail (NULL: none) at the end of
   the payload, which is left out when the frames before it decompress to
   the rest (*left set; the bytes of the stream are then not written), or
   else decompressed as by load_payload(). */
static int load_payload_but(int fd, ZSTD_DCtx *dctx, const struct chunk_ref *c,
			    const struct defs_tail *tail, uint8_t **comp, size_t *comp_cap,
			    uint8_t **raw, size_t *raw_cap, int *left, const char **why)
{
	const struct ht__chunk_header *h = &c->h;
	*left = 0;
	if (!tail)
		return load_payload(fd, dctx, c, comp, comp_cap, raw, raw_cap, why);
	int rc = read_payload(fd, c, comp, comp_cap, raw, raw_cap, why);
	if (rc < 0)
		return rc;
	size_t want = h->raw_size - tail->raw;
	size_t n = ZSTD_decompressDCtx(dctx, *raw, want, *comp, tail->at);
	if (!ZSTD_isError(n) && n == want) {
		*left = 1;
		return 0;
	}
	n = ZSTD_decompressDCtx(dctx, *raw, h->raw_size, *comp, h->comp_size);
	if (ZSTD_isError(n) || n != h->raw_size) {
		*why = "chunk fails its checksum";
		return HT_ERR_CORRUPT;
	}
	return 0;
}

/* The DEFS frame the tables checked at the end of the payload of the
   events chunk at off (header h), or NULL. */
static const struct defs_tail *tail_of(const struct tables *t, uint64_t off,
				       const struct ht__chunk_header *h)
{
	uint32_t lo = 0, hi = t->ntails;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (t->tails[mid].chunk < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	const struct defs_tail *x = lo < t->ntails ? &t->tails[lo] : NULL;
	if (!x || x->chunk != off || x->at + x->comp != h->comp_size || x->raw > h->raw_size)
		return NULL;
	return x;
}

static int load_chunk(struct ht_reader *r, uint64_t off, uint64_t limit, struct ht__chunk_header *h,
		      uint64_t *next, const char **why)
{
	struct chunk_ref c = {off, {0}};
	int rc = load_header(r, off, limit, &c.h, next, why);
	if (rc == 0)
		rc = load_payload(r->fd, r->dctx, &c, &r->comp, &r->comp_cap, &r->raw, &r->raw_cap,
				  why);
	*h = c.h;
	return rc;
}

/* ---- definitions ---- */

static int def_module(struct tables *t, uint32_t id, const char *path, uint32_t plen,
		      const uint8_t *bid, uint32_t blen)
{
	if (id >= HT__MAX_MODULE_ID)
		return HT_ERR_CORRUPT;
	uint32_t old = t->modules.n;
	if (svec_resize(&t->modules, id + 1) < 0)
		return HT_ERR_NOMEM;
	for (uint32_t i = old; i < t->modules.n; i++) {
		struct ht_module *m = svec_at(&t->modules, i);
		m->path = m->name = m->build_id = "";
	}
	struct ht_module *m = svec_at(&t->modules, id);
	if (*m->path) /* defined already (a rewind, or the DEFS table) */
		return 0;
	const char *p = arena_strndup(&t->arena, path, plen);
	char *hex = arena_alloc(&t->arena, (size_t)blen * 2 + 1);
	if (!p || !hex)
		return HT_ERR_NOMEM;
	for (uint32_t i = 0; i < blen; i++)
		snprintf(hex + 2 * i, 3, "%02x", bid[i]);
	hex[2 * blen] = 0;
	const char *slash = strrchr(p, '/');
	m->path = p;
	m->name = slash ? slash + 1 : p;
	m->build_id = hex;
	return 0;
}

static int phys_reserve(struct tables *t, uint32_t id)
{
	if (id >= HT__MAX_FRAME_ID)
		return HT_ERR_CORRUPT;
	if (id >= t->phys_cap &&
	    ht__grow32_zero((void **)&t->phys, &t->phys_cap, id < 1024 ? 1024 : (size_t)id + 1,
			    sizeof(*t->phys)) < 0)
		return HT_ERR_NOMEM;
	if (id >= t->nphys)
		t->nphys = id + 1;
	return 0;
}

/* Adds n logical frames for physical frame id (n = 1 without symbols). */
static int add_logical(struct tables *t, uint32_t id, const struct sym_tmp *syms, uint32_t n)
{
	struct phys_frame *pf = &t->phys[id];
	uint32_t first = t->frames.n;
	uint32_t count = n ? n : 1;
	if (first + count > HT__MAX_FRAME_ID * 2u)
		return HT_ERR_CORRUPT;
	if (svec_resize(&t->frames, first + count) < 0)
		return HT_ERR_NOMEM;
	for (uint32_t i = 0; i < count; i++) {
		struct ht_frame *f = svec_at(&t->frames, first + i);
		f->module = pf->module;
		f->rel = pf->rel;
		if (n) {
			f->function = syms[i].function;
			f->file = syms[i].file;
			f->line = syms[i].line;
			f->inlined = i + 1 < n;
		}
	}
	pf->first = first;
	pf->nlog = count;
	return 0;
}

/* Stores stack id as logical frames, their lists in arena a; phys lists
   physical frame ids. */
static int def_stack(struct tables *t, struct arena *a, uint32_t id, const uint32_t *phys,
		     uint32_t n)
{
	if (!id || id >= HT__MAX_STACK_ID)
		return HT_ERR_CORRUPT;
	if (id >= t->stacks_cap &&
	    ht__grow32_zero((void **)&t->stacks, &t->stacks_cap, id < 1024 ? 1024 : (size_t)id + 1,
			    sizeof(*t->stacks)) < 0)
		return HT_ERR_NOMEM;
	if (id >= t->nstacks)
		t->nstacks = id + 1;
	struct stack_ent *s = &t->stacks[id];
	if (s->defined)
		return 0;
	/* In locals: the stores to out[] could change t->nphys for all the
	   compiler knows. A stack of up to 512 logical frames (all but the
	   rarest) is expanded once, into buf, then copied: clang++'s 3.7
	   million frames took 35 instructions a frame in two passes. */
	const struct phys_frame *pt = t->phys;
	const uint32_t nphys = t->nphys;
	uint32_t buf[512], k = 0, *out;
	for (uint32_t i = 0; i < n; i++) {
		if (phys[i] >= nphys)
			continue; /* a frame never defined: leave it out */
		uint32_t first = pt[phys[i]].first, nlog = pt[phys[i]].nlog;
		if (nlog == 1 && k < sizeof(buf) / sizeof(buf[0])) {
			buf[k++] = first;
			continue;
		}
		if (nlog > sizeof(buf) / sizeof(buf[0]) - k)
			goto long_stack;
		for (uint32_t j = 0; j < nlog; j++)
			buf[k++] = first + j;
	}
	if (!(out = arena_alloc(a, (k ? k : 1) * sizeof(uint32_t))))
		return HT_ERR_NOMEM;
	memcpy(out, buf, k * sizeof(uint32_t));
	goto done;
long_stack:;
	size_t total = 0;
	for (uint32_t i = 0; i < n; i++)
		total += phys[i] < nphys ? pt[phys[i]].nlog : 0;
	if (!(out = arena_alloc(a, (total ? total : 1) * sizeof(uint32_t))))
		return HT_ERR_NOMEM;
	k = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (phys[i] >= nphys)
			continue;
		uint32_t first = pt[phys[i]].first, nlog = pt[phys[i]].nlog;
		for (uint32_t j = 0; j < nlog; j++)
			out[k++] = first + j;
	}
done:
	s->frames = out;
	s->n = k;
	s->defined = 1;
	return 0;
}

#define FRAMES_SLICE 65536u /* frames a decoder takes from the pass's bound at once */

/*
 * The bound on inline stack frames (frames_limit) is the pass's, shared by
 * the decoders of its chunks (on several threads): each takes slices of it
 * as its chunks need them. 0, or -1 when there are not n frames left.
 */
static int frames_take(struct stackprev *sp, uint64_t n)
{
	if (!sp->pool)
		return -1;
	uint64_t want = n - sp->frames_left;
	if (want < FRAMES_SLICE)
		want = FRAMES_SLICE;
	uint64_t left = __atomic_load_n(sp->pool, __ATOMIC_RELAXED);
	for (;;) {
		uint64_t take = left < want ? left : want;
		if (sp->frames_left + take < n)
			return -1;
		if (__atomic_compare_exchange_n(sp->pool, &left, left - take, 0, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED)) {
			sp->frames_left += take;
			return 0;
		}
	}
}

/*
 * Decodes one definition record (its code byte already read); sp is the
 * stream's previous stack and bound. With
 * stacks_raw set (loading the DEFS table), stacks are kept as physical
 * lists in *stacks_raw for later expansion; otherwise (scan) frames get one
 * logical frame each and stacks are stored at once. learn = 0 parses only.
 */
/* Stacks as they are defined: each its new physical frames (nnew[i] of
   them, as the varints of the table, zigzag deltas from the frame before,
   in bytes from off[i]) and how many outer frames of the stack before it
   follow them (keep[i]), so that reading the table copies no shared frame
   (clang++: 3.7 million frames in all, 1 million new) and decodes no
   frame: decode_def() checks the varints' ends alone (ht__varints_skip()), stacks_expand()
   reads them (on the stacks' thread, beside the events). */
struct raw_stacks {
	uint32_t *ids;
	uint32_t *off;
	uint32_t *nnew;
	uint32_t *keep;
	uint32_t n;
	uint32_t cap;
	uint32_t gstart; /* the first stack of the group: none before it is shared */
	uint32_t last_n; /* frames of the last stack in all */
	uint32_t max_n;	 /* of the most frames */
	uint64_t total;	 /* frames of every stack in all */
	uint8_t *bytes;	 /* the new frames' varints of every stack */
	size_t nbytes;
	size_t bytes_cap;
};

static size_t allocs_bytes(size_t n, size_t size);
static void *map_grow(void *p, size_t old, size_t bytes);

/* Room for need bytes of frames in rs: mapped, so that the stacks' thread
   can give back what it has read (stacks_expand()). 0 or HT_ERR_NOMEM. */
static int raw_bytes_grow(struct raw_stacks *rs, size_t need)
{
	size_t cap = rs->bytes_cap ? rs->bytes_cap : 65536;
	while (cap < need)
		cap *= 2;
	uint8_t *b = map_grow(rs->bytes, allocs_bytes(rs->bytes_cap, 1), allocs_bytes(cap, 1));
	if (!b)
		return HT_ERR_NOMEM;
	rs->bytes = b;
	rs->bytes_cap = cap;
	return 0;
}

/* A stream's definitions start afresh (a group, version 9's ids). */
static void defs_start(struct stackprev *sp, int id_delta)
{
	sp->prev_n = 0;
	sp->id_delta = id_delta;
	sp->last_id[0] = sp->last_id[1] = sp->last_id[2] = -1;
}

/* A definition's id (kind: 0 module, 1 frame, 2 stack); > UINT32_MAX when
   it cannot be one. */
static uint64_t get_def_id(struct stackprev *sp, struct ht__cur *c, int kind)
{
	uint64_t v = ht__get_varint(c);
	if (!sp->id_delta)
		return v;
	int64_t d = ht__unzigzag(v);
	if (d > (int64_t)UINT32_MAX || d < -(int64_t)UINT32_MAX - 1)
		return UINT64_MAX;
	int64_t id = sp->last_id[kind] + 1 + d; /* last_id is -1 .. UINT32_MAX */
	if (id < 0 || id > (int64_t)UINT32_MAX)
		return UINT64_MAX;
	sp->last_id[kind] = id;
	return (uint64_t)id;
}

/* A varint at p (10 bytes at least readable, no second plane: the stack
   definitions' frames, where ht__get_varint()'s test of the end per byte
   made clang++'s million frames 28 instructions each): *v, and where it
   ends, or NULL when it has more than 10 bytes (never for one that
   ht__varints_skip() checked: stacks_expand()). */
static inline const uint8_t *varint_unchecked(const uint8_t *p, uint64_t *v)
{
	if (p[0] < 0x80) {
		*v = p[0];
		return p + 1;
	}
	if (p[1] < 0x80) {
		*v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
		return p + 2;
	}
	uint64_t x = (uint64_t)(p[0] & 0x7f) | (uint64_t)(p[1] & 0x7f) << 7;
	p += 2;
	for (unsigned shift = 14; shift < 70; shift += 7) {
		uint8_t b = *p++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (b < 0x80) {
			*v = x;
			return p;
		}
	}
	return NULL;
}

/* A stack definition of the tables (id, nnew new frames at c->p, then the
   outer k frames of the stack before) kept as its varints in rs; the
   cursor is a table's plain bytes (no second plane). 0,
   HT_ERR_CORRUPT or HT_ERR_NOMEM. */
static int raw_stack_add(struct raw_stacks *rs, struct ht__cur *c, uint64_t id, uint64_t nnew,
			 uint64_t k)
{
	const uint8_t *q = c->hi ? NULL : ht__varints_skip(c->p, c->end, nnew);
	if (!q || !id || id >= HT__MAX_STACK_ID)
		return HT_ERR_CORRUPT;
	size_t len = (size_t)(q - c->p);
	if (rs->nbytes + len > UINT32_MAX)
		return HT_ERR_NOMEM; /* off[] counts in 32 bits */
	if (rs->n == rs->cap) {
		uint32_t cap = rs->cap;
		if (ht__grow32((void **)&rs->ids, &cap, rs->n < 1024 ? 1024 : rs->n + 1,
			       sizeof(*rs->ids)) < 0)
			return HT_ERR_NOMEM;
		uint32_t *off = realloc(rs->off, (size_t)cap * sizeof(*off));
		if (off)
			rs->off = off;
		uint32_t *nn = realloc(rs->nnew, (size_t)cap * sizeof(*nn));
		if (nn)
			rs->nnew = nn;
		uint32_t *keep = realloc(rs->keep, (size_t)cap * sizeof(*keep));
		if (keep)
			rs->keep = keep;
		if (!off || !nn || !keep)
			return HT_ERR_NOMEM;
		rs->cap = cap;
	}
	if (rs->nbytes + len > rs->bytes_cap && raw_bytes_grow(rs, rs->nbytes + len) < 0)
		return HT_ERR_NOMEM;
	if (len)
		memcpy(rs->bytes + rs->nbytes, c->p, len);
	c->p = q;
	uint64_t n = nnew + k;
	rs->ids[rs->n] = (uint32_t)id;
	rs->off[rs->n] = (uint32_t)rs->nbytes;
	rs->nnew[rs->n] = (uint32_t)nnew;
	rs->keep[rs->n] = (uint32_t)k;
	rs->n++;
	rs->nbytes += len;
	rs->last_n = (uint32_t)n;
	rs->max_n = n > rs->max_n ? (uint32_t)n : rs->max_n;
	rs->total += n;
	return 0;
}

static int decode_def(struct tables *t, struct stackprev *sp, struct ht__cur *c, unsigned code,
		      int learn, struct raw_stacks *rs)
{
	switch (code) {
	case HT__REC_DEF_MODULE: {
		uint64_t id = get_def_id(sp, c, 0);
		uint32_t plen, blen;
		const char *path = ht__get_bytes(c, &plen);
		const char *bid = ht__get_bytes(c, &blen);
		if (c->bad || id > UINT32_MAX)
			return HT_ERR_CORRUPT;
		if (blen > 64)
			blen = 64;
		return learn ? def_module(t, (uint32_t)id, path, plen, (const uint8_t *)bid, blen)
			     : 0;
	}
	case HT__REC_DEF_FRAME: {
		uint64_t id = get_def_id(sp, c, 1);
		uint64_t mod = ht__get_varint(c);
		uint64_t rel = ht__get_varint(c);
		if (c->bad || id > UINT32_MAX || mod > UINT32_MAX)
			return HT_ERR_CORRUPT;
		if (!learn)
			return 0;
		int rc = phys_reserve(t, (uint32_t)id);
		if (rc < 0)
			return rc;
		struct phys_frame *pf = &t->phys[id];
		if (pf->nlog || (rs && pf->first == UINT32_MAX))
			return 0;
		pf->module = mod ? (uint32_t)(mod - 1) : HT_MODULE_NONE;
		pf->rel = rel;
		if (rs) {
			pf->first = UINT32_MAX; /* defined; logical frames come later */
			return 0;
		}
		return add_logical(t, (uint32_t)id, NULL, 0);
	}
	case HT__REC_DEF_STACK: {
		uint64_t id = get_def_id(sp, c, 2);
		uint64_t nnew = ht__get_varint(c);
		uint64_t k = ht__get_varint(c);
		/* The previous stack of the same stream: its outer k frames follow
		   the nnew new ones. */
		uint64_t prev_n = sp->prev_n;
		if (rs)
			prev_n = rs->n > rs->gstart ? rs->last_n : 0;
		/* every new frame takes at least one byte */
		if (c->bad || nnew > (uint64_t)(c->end - c->p) || k > prev_n || id > UINT32_MAX ||
		    (nnew + k > sp->frames_left && frames_take(sp, nnew + k) < 0))
			return HT_ERR_CORRUPT;
		uint64_t n = nnew + k;
		sp->frames_left -= n;
		if (rs)
			return raw_stack_add(rs, c, id, nnew, k);
		if (n > sp->scratch2_cap) {
			uint32_t *f = realloc(sp->scratch2, n * sizeof(*f));
			if (!f)
				return HT_ERR_NOMEM;
			sp->scratch2 = f;
			sp->scratch2_cap = n;
		}
		uint32_t *buf = sp->scratch2;
		const uint32_t *prevf = sp->scratch;
		int64_t prev = 0;
		uint64_t i = 0;
		if (!c->hi && nnew <= (uint64_t)(c->end - c->p) / 10) {
			/* every frame's varint (10 bytes at most) is in the payload:
			   no test of the end per byte */
			const uint8_t *q = c->p;
			for (; i < nnew; i++) {
				uint64_t v;
				if (!(q = varint_unchecked(q, &v)))
					return HT_ERR_CORRUPT;
				prev += ht__unzigzag(v);
				buf[i] = (uint32_t)prev;
			}
			c->p = q;
		}
		for (; i < nnew; i++) {
			prev += ht__unzigzag(ht__get_varint(c));
			buf[i] = (uint32_t)prev;
		}
		if (k)
			memcpy(buf + nnew, prevf + prev_n - k, k * sizeof(*buf));
		if (c->bad)
			return HT_ERR_CORRUPT;
		/* this stack is the base of the next one */
		uint32_t *f = sp->scratch;
		size_t cap = sp->scratch_cap;
		sp->scratch = sp->scratch2;
		sp->scratch_cap = sp->scratch2_cap;
		sp->scratch2 = f;
		sp->scratch2_cap = cap;
		sp->prev_n = (uint32_t)n;
		buf = sp->scratch;
		if (!learn)
			return 0;
		return def_stack(t, &t->arena, (uint32_t)id, buf, (uint32_t)n);
	}
	default:
		return HT_ERR_CORRUPT;
	}
}

/* ---- tables ---- */

static int parse_meta(struct tables *t, struct ht__cur *c)
{
	struct ht_trace_info *in = &t->info;
	uint64_t layout = ht__get_varint(c);
	if (c->bad || layout < 1)
		return HT_ERR_CORRUPT;
	in->start_realtime_ns = ht__get_varint(c);
	in->duration_ns = ht__get_varint(c);
	in->events_lost = ht__get_varint(c);
	in->stack_mask = (uint32_t)ht__get_varint(c);
	in->flags = (uint32_t)ht__get_varint(c);
	ht__get_varint(c); /* event count */
	uint64_t argc = ht__get_varint(c);
	if (c->bad || argc > (uint64_t)(c->end - c->p))
		return HT_ERR_CORRUPT;
	const char **argv = arena_alloc(&t->arena, (argc + 1) * sizeof(*argv));
	if (!argv)
		return HT_ERR_NOMEM;
	for (uint64_t i = 0; i < argc; i++) {
		uint32_t len;
		const char *s = ht__get_bytes(c, &len);
		if (c->bad)
			return HT_ERR_CORRUPT;
		if (!(argv[i] = arena_strndup(&t->arena, s, len)))
			return HT_ERR_NOMEM;
	}
	argv[argc] = NULL;
	uint64_t hn = ht__get_varint(c);
	if (c->bad || (hn && hn - 1 > (uint64_t)(c->end - c->p)))
		return HT_ERR_CORRUPT;
	const char *host = hn ? arena_strndup(&t->arena, (const char *)c->p, hn - 1) : "";
	if (!host)
		return HT_ERR_NOMEM;
	c->p += hn ? hn - 1 : 0;
	/* Added later (docs/trace-format.md): absent in older traces. */
	in->untraced = "";
	if (c->p < c->end) {
		uint64_t un = ht__get_varint(c);
		if (c->bad || (un && un - 1 > (uint64_t)(c->end - c->p)))
			return HT_ERR_CORRUPT;
		const char *u = un ? arena_strndup(&t->arena, (const char *)c->p, un - 1) : "";
		if (!u)
			return HT_ERR_NOMEM;
		c->p += un ? un - 1 : 0;
		in->untraced = u;
	}
	/* Then the causes of events_lost. */
	if (c->p < c->end) {
		in->lost_lossy = ht__get_varint(c);
		in->lost_no_buffer = ht__get_varint(c);
		in->lost_in_handler = ht__get_varint(c);
		if (c->bad)
			return HT_ERR_CORRUPT;
	}
	/* Then the sample rate (0: every allocation; absent before sampling). */
	in->sample_rate = 0;
	if (c->p < c->end) {
		in->sample_rate = ht__get_varint(c);
		if (c->bad)
			return HT_ERR_CORRUPT;
	}
	/* Then a flight-recorder window's start, drops and limits. */
	if (c->p < c->end) {
		in->window_start_ns = ht__get_varint(c);
		in->window_dropped = ht__get_varint(c);
		in->ring_bytes = ht__get_varint(c);
		in->ring_ns = ht__get_varint(c);
		if (c->bad)
			return HT_ERR_CORRUPT;
	}
	in->argc = (uint32_t)argc;
	in->argv = argv;
	in->hostname = host;
	return 0;
}

/* LOSSES (after PROCESSES): the events each listed process did not record. */
static int parse_losses(struct tables *t, struct ht__cur *c)
{
	while (c->p < c->end) {
		uint64_t idx = ht__get_varint(c);
		struct ht_process l = {0};
		l.lost_lossy = ht__get_varint(c);
		l.lost_no_buffer = ht__get_varint(c);
		l.lost_in_handler = ht__get_varint(c);
		l.lost_from_ts = ht__get_varint(c);
		l.events_untraced = ht__get_varint(c);
		l.untraced_from_ts = ht__get_varint(c);
		if (c->bad || idx >= t->procs.n || !t->procs.v[idx])
			return HT_ERR_CORRUPT;
		struct ht_process *d = &t->procs.v[idx]->p;
		d->lost_lossy = l.lost_lossy;
		d->lost_no_buffer = l.lost_no_buffer;
		d->lost_in_handler = l.lost_in_handler;
		d->lost_from_ts = l.lost_from_ts;
		d->events_untraced = l.events_untraced;
		d->untraced_from_ts = l.untraced_from_ts;
	}
	return 0;
}

static int parse_processes(struct tables *t, struct ht__cur *c)
{
	const char *small[16];
	while (c->p < c->end) {
		uint64_t idx = ht__get_varint(c);
		struct ht_process d = {0};
		d.pid = (int32_t)ht__unzigzag(ht__get_varint(c));
		d.ppid = (int32_t)ht__unzigzag(ht__get_varint(c));
		uint64_t parent = ht__get_varint(c);
		d.parent = parent ? (uint32_t)(parent - 1) : UINT32_MAX;
		d.flags = (uint32_t)ht__get_varint(c);
		d.start_ts = ht__get_varint(c);
		d.end_ts = ht__get_varint(c);
		d.exit_code = (int32_t)ht__unzigzag(ht__get_varint(c));
		d.signal = (int32_t)ht__unzigzag(ht__get_varint(c));
		uint32_t len;
		const char *exe = ht__get_bytes(c, &len);
		uint64_t argc = ht__get_varint(c);
		if (c->bad || idx >= HT__MAX_PROCESSES || argc > (uint64_t)(c->end - c->p))
			return HT_ERR_CORRUPT;
		/* Strings are copied into NUL-terminated scratch first. */
		char *ex = strndup(exe, len);
		const char **argv = argc <= 16 ? small : malloc(argc * sizeof(*argv));
		int rc = ex && argv ? 0 : HT_ERR_NOMEM;
		uint64_t made = 0;
		for (; made < argc && !rc; made++) {
			const char *s = ht__get_bytes(c, &len);
			if (c->bad) {
				rc = HT_ERR_CORRUPT;
				break;
			}
			if (!(argv[made] = strndup(s, len)))
				rc = HT_ERR_NOMEM;
		}
		if (!rc) {
			d.exe = ex;
			d.argc = (uint32_t)argc;
			d.argv = argv;
			rc = ht__proctab_set(&t->procs, (uint32_t)idx, &d);
		}
		for (uint64_t i = 0; i < made && argv; i++)
			free((void *)argv[i]);
		if (argv != small)
			free(argv);
		free(ex);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A DEFS frame DEFINDEX points at: where its zstd frame is, its sizes,
   whether the definitions start afresh there; its bytes once read. */
struct defs_frame {
	uint64_t chunk; /* the events chunk's offset */
	uint64_t at;	/* the frame's offset in its payload */
	uint64_t off;	/* of the zstd frame in the file */
	uint64_t comp;	/* its compressed size */
	uint64_t raw;	/* the DEFS stream's */
	int reset;
	int rc;		/* of its reading: 0, HT_ERR_CORRUPT, HT_ERR_NOMEM or HT_ERR_IO */
	uint8_t *bytes; /* the stream, malloc'd */
};

/* Reads and decompresses frame f into f->bytes (comp: a buffer for the
   compressed bytes); sets f->rc. */
static void defs_read(int fd, ZSTD_DCtx *dctx, struct defs_frame *f, uint8_t **comp,
		      size_t *comp_cap)
{
	if (grow(comp, comp_cap, f->comp) < 0 || !(f->bytes = malloc(f->raw ? f->raw : 1))) {
		f->rc = HT_ERR_NOMEM;
		return;
	}
	if ((f->rc = read_at(fd, *comp, f->comp, f->off)) < 0)
		return;
	size_t n = ZSTD_decompressDCtx(dctx, f->bytes, f->raw, *comp, f->comp);
	f->rc = ZSTD_isError(n) || n != f->raw ? HT_ERR_CORRUPT : 0;
}

/*
 * The DEFS frames read and decompressed in order on a thread of their own
 * while the caller parses the ones before (clang++: five frames of 0.1 to
 * 0.5 MB, zstd 11.8 M instructions of the open's 39 M).
 */
struct defs_ahead {
	int fd;
	struct defs_frame *f;
	uint32_t n;
	ZSTD_DCtx *dctx;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t done;	 /* frames read, under mu */
	uint32_t parsed; /* frames the caller is done with, under mu */
	int stop;	 /* the caller reads no more, under mu */
};

/* Frames read ahead of the caller's parse at most (memory: each up to
   HT__RAW_MAX bytes). */
#define DEFS_AHEAD_FRAMES 4u

/* Frames of this many raw bytes in all, and two or more, are read ahead. */
#define DEFS_AHEAD_BYTES (64u << 10)

static void *defs_main(void *arg)
{
	struct defs_ahead *a = arg;
	uint8_t *comp = NULL;
	size_t cap = 0;
	for (uint32_t i = 0; i < a->n; i++) {
		pthread_mutex_lock(&a->mu);
		while (!a->stop && i >= a->parsed + DEFS_AHEAD_FRAMES)
			pthread_cond_wait(&a->cv, &a->mu);
		int stop = a->stop;
		pthread_mutex_unlock(&a->mu);
		if (stop)
			break;
		defs_read(a->fd, a->dctx, &a->f[i], &comp, &cap);
		pthread_mutex_lock(&a->mu);
		a->done = i + 1;
		pthread_cond_broadcast(&a->cv);
		pthread_mutex_unlock(&a->mu);
		if (a->f[i].rc < 0)
			break;
	}
	free(comp);
	return NULL;
}

/* The frames f[0..n) read ahead on a thread; NULL when not worth it or
   it cannot start (the caller reads them itself). */
static struct defs_ahead *defs_ahead_start(const struct ht_reader *r, struct defs_frame *f,
					   uint32_t n, uint64_t raw_total)
{
	if (r->nthreads <= 0 || n < 2 || raw_total < DEFS_AHEAD_BYTES)
		return NULL;
	struct defs_ahead *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->fd = r->fd;
	a->f = f;
	a->n = n;
	if ((a->dctx = ZSTD_createDCtx())) {
		pthread_mutex_init(&a->mu, NULL);
		pthread_cond_init(&a->cv, NULL);
		if (!pthread_create(&a->th, NULL, defs_main, a))
			return a;
		pthread_cond_destroy(&a->cv);
		pthread_mutex_destroy(&a->mu);
		ZSTD_freeDCtx(a->dctx);
	}
	free(a);
	return NULL;
}

/* Waits for frame i, the caller done with those before it. */
static void defs_ahead_wait(struct defs_ahead *a, uint32_t i)
{
	pthread_mutex_lock(&a->mu);
	a->parsed = i;
	pthread_cond_broadcast(&a->cv);
	while (a->done <= i)
		pthread_cond_wait(&a->cv, &a->mu);
	pthread_mutex_unlock(&a->mu);
}

static void defs_ahead_stop(struct defs_ahead *a)
{
	pthread_mutex_lock(&a->mu);
	a->stop = 1;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	pthread_join(a->th, NULL);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	ZSTD_freeDCtx(a->dctx);
	free(a);
}

/* Notes frame f (read and checked) as its chunk's tail (struct
   defs_tail); 0 or HT_ERR_NOMEM. */
static int tail_add(struct tables *t, const struct defs_frame *f)
{
	if (f->comp > UINT32_MAX || f->raw > UINT32_MAX)
		return 0; /* not one a chunk's header could match */
	if (t->ntails == t->tails_cap &&
	    ht__grow32((void **)&t->tails, &t->tails_cap, t->ntails + 1, sizeof(*t->tails)) < 0)
		return HT_ERR_NOMEM;
	t->tails[t->ntails++] =
	    (struct defs_tail){f->chunk, f->at, (uint32_t)f->comp, (uint32_t)f->raw};
	return 0;
}

/*
 * DEFINDEX (version 9): reads and parses the DEFS frames of the events
 * chunks it points at, before from (where the tables start), as the DEFS
 * table of older versions. 0, HT_ERR_CORRUPT, HT_ERR_NOMEM or HT_ERR_IO:
 * the frames are parsed in order, each after its reading, and the first
 * error ends it, as if each were read right before its parse (those read
 * ahead are dropped).
 */
static int load_defindex(struct ht_reader *r, struct ht__cur *c, uint64_t from,
			 struct raw_stacks *rs)
{
	/* The index first, up to its first bad record (bad: that record's
	   error, at its turn). */
	struct defs_frame *f = NULL;
	uint32_t n = 0, cap = 0;
	uint64_t chunk = 0, raw_total = 0;
	int bad = 0;
	while (c->p < c->end) {
		uint64_t v[5];
		for (int i = 0; i < 5; i++)
			v[i] = ht__get_varint(c);
		/* chunk offset delta, frame offset in the payload, compressed
		   and raw size, flags */
		if (c->bad || v[0] > from || (chunk += v[0]) < r->header_size || chunk > from ||
		    v[1] > from || v[2] > from || !v[2] || v[3] > HT__RAW_MAX ||
		    from - chunk - HT__CHUNK_HEADER_SIZE < v[1] + v[2] ||
		    from - chunk < HT__CHUNK_HEADER_SIZE + v[1] + v[2]) {
			bad = HT_ERR_CORRUPT;
			break;
		}
		if (n == cap && ht__grow32((void **)&f, &cap, n + 1, sizeof(*f)) < 0) {
			bad = HT_ERR_NOMEM;
			break;
		}
		f[n++] = (struct defs_frame){.chunk = chunk,
					     .at = v[1],
					     .off = chunk + HT__CHUNK_HEADER_SIZE + v[1],
					     .comp = v[2],
					     .raw = v[3],
					     .reset = (int)(v[4] & 1)};
		raw_total += v[3];
	}
	struct defs_ahead *a = defs_ahead_start(r, f, n, raw_total);
	uint8_t *comp = NULL;
	size_t comp_cap = 0;
	int rc = 0, first = 1;
	for (uint32_t i = 0; i < n && !rc; i++) {
		if (a)
			defs_ahead_wait(a, i);
		else
			defs_read(r->fd, r->dctx, &f[i], &comp, &comp_cap);
		if ((rc = f[i].rc) < 0)
			break;
		if (f[i].reset || first) { /* a new group: no previous stack, ids afresh */
			rs->gstart = rs->n;
			defs_start(&r->t.sp, 1);
			first = 0;
		}
		struct ht__cur d = {f[i].bytes, f[i].bytes + f[i].raw, 0};
		while (d.p < d.end && !rc) {
			unsigned code = *d.p++;
			rc = decode_def(&r->t, &r->t.sp, &d, code, 1, rs);
		}
		free(f[i].bytes);
		f[i].bytes = NULL;
		if (!rc && (rc = tail_add(&r->t, &f[i])) < 0)
			break;
	}
	if (!rc)
		rc = bad;
	if (a)
		defs_ahead_stop(a);
	for (uint32_t i = 0; i < n; i++)
		free(f[i].bytes);
	free(f);
	free(comp);
	return rc;
}

#define RAW_GIVE_BACK (1u << 20) /* bytes of read frames the stacks' thread gives back at once */

/*
 * Stores the stacks of rs; 0 or HT_ERR_NOMEM. give_back: the physical
 * frame lists read so far are given back to the system as it goes (each
 * stack's list holds all its frames, so none is read again), since the
 * events' pass allocates at the same time (clang++: 15 MB of lists).
 */
/* dst[j] = src[j] + add for j < n, 4 at a time with SSE2 (stacks_expand()'s
   counts for the frames a stack shares with the one before: clang++'s 2.7
   million, 8 instructions each one at a time). */
static void shift_add(uint32_t *restrict dst, const uint32_t *restrict src, uint32_t n,
		      uint32_t add)
{
	uint32_t j = 0;
#ifdef __SSE2__
	const __m128i v = _mm_set1_epi32((int)add);
	for (; j + 4 <= n; j += 4)
		_mm_storeu_si128((__m128i *)(dst + j),
				 _mm_add_epi32(_mm_loadu_si128((const __m128i *)(src + j)), v));
#endif
	for (; j < n; j++)
		dst[j] = src[j] + add;
}

static int stacks_expand(struct tables *t, struct arena *a, const struct raw_stacks *rs,
			 int give_back)
{
	size_t given = 0; /* bytes from rs->bytes */
	const struct phys_frame *pt = t->phys;
	const uint32_t nphys = t->nphys;
	/* Per frame of the stack being made and of the one before it: the
	   logical frames before it, so that the outer frames a stack shares
	   with the one before are copied from that one's logical frames, not
	   looked up again (clang++: 2.7 million of its 3.7 million frames). */
	uint32_t *cum = malloc(((size_t)rs->max_n + 1) * sizeof(*cum));
	uint32_t *pcum = malloc(((size_t)rs->max_n + 1) * sizeof(*pcum));
	uint32_t *phys = malloc(((size_t)rs->max_n + 1) * sizeof(*phys)); /* the new frames */
	const uint32_t *pout = NULL; /* the logical frames of the one before */
	uint32_t prev_n = 0;
	int rc = cum && pcum && phys ? 0 : HT_ERR_NOMEM;
	if (pcum)
		pcum[0] = 0;
	for (uint32_t i = 0; i < rs->n && !rc; i++) {
		uint32_t nnew = rs->nnew[i], k = rs->keep[i]; /* k <= prev_n: decode_def() */
		const uint8_t *q = rs->bytes + rs->off[i];
		uint64_t nl = 0;
		int64_t prev = 0;
		for (uint32_t j = 0; j < nnew; j++) {
			uint64_t v = 0;
			q = varint_unchecked(q, &v); /* checked: not NULL */
			prev += ht__unzigzag(v);
			uint32_t f = (uint32_t)prev;
			phys[j] = f;
			cum[j] = (uint32_t)nl;
			nl += f < nphys ? pt[f].nlog : 0;
		}
		uint32_t base = prev_n - k, from = pcum[base];
		uint64_t shared = pcum[prev_n] - from, total = nl + shared;
		if (total > UINT32_MAX / 2) {
			rc = HT_ERR_NOMEM; /* no stack of a real program is near */
			break;
		}
		shift_add(cum + nnew, pcum + base, k, (uint32_t)nl - from);
		cum[nnew + k] = (uint32_t)total;
		uint32_t *out = arena_alloc(a, (total ? total : 1) * sizeof(uint32_t));
		if (!out) {
			rc = HT_ERR_NOMEM;
			break;
		}
		uint32_t o = 0;
		for (uint32_t j = 0; j < nnew; j++) {
			if (phys[j] >= nphys)
				continue; /* a frame never defined: left out */
			uint32_t first = pt[phys[j]].first, n = pt[phys[j]].nlog;
			if (n == 1) { /* no inlined frames: most */
				out[o++] = first;
				continue;
			}
			for (uint32_t m = 0; m < n; m++)
				out[o++] = first + m;
		}
		if (shared)
			memcpy(out + o, pout + from, shared * sizeof(*out));
		struct stack_ent *s = &t->stacks[rs->ids[i]]; /* made by stacks_start() */
		if (!s->defined) {			      /* the first definition counts */
			s->frames = out;
			s->n = (uint32_t)total;
			s->defined = 1;
		}
		pout = out;
		prev_n = nnew + k;
		uint32_t *c = pcum;
		pcum = cum;
		cum = c;
		size_t read = (size_t)(q - rs->bytes) & ~(size_t)4095;
		if (give_back && read - given >= RAW_GIVE_BACK) {
			madvise(rs->bytes + given, read - given, MADV_DONTNEED);
			given = read;
		}
	}
	free(cum);
	free(pcum);
	free(phys);
	return rc;
}

static void raw_stacks_free(struct raw_stacks *rs)
{
	free(rs->ids);
	free(rs->off);
	free(rs->nnew);
	free(rs->keep);
	if (rs->bytes_cap)
		munmap(rs->bytes, allocs_bytes(rs->bytes_cap, 1));
	memset(rs, 0, sizeof(*rs));
}

static void *stacks_main(void *arg)
{
	struct stacks_job *j = arg;
	j->rc = stacks_expand(&j->r->t, &j->arena, j->rs, 1);
	raw_stacks_free(j->rs);
	return NULL;
}

/* Stacks of at least this many frames in all are expanded on a thread. */
#define STACKS_THREAD_FRAMES 65536u

/*
 * The stacks of the DEFS table (*rs, every id already checked by
 * decode_def()) into logical frames: on a thread of their own when the
 * reader may use threads and they are many (rs is then the thread's), here
 * otherwise. The table's size (ht_reader_stack_count()) is set at once.
 * 0 or HT_ERR_NOMEM.
 */
static int stacks_start(struct ht_reader *r, struct raw_stacks *rs)
{
	struct tables *t = &r->t;
	if (!rs->n)
		return 0;
	uint32_t top = 0;
	for (uint32_t i = 0; i < rs->n; i++)
		top = rs->ids[i] > top ? rs->ids[i] : top;
	if (top >= t->stacks_cap && ht__grow32_zero((void **)&t->stacks, &t->stacks_cap,
						    (size_t)top + 1, sizeof(*t->stacks)) < 0)
		return HT_ERR_NOMEM;
	if (top >= t->nstacks)
		t->nstacks = top + 1;
	if (r->nthreads > 0 && rs->total >= STACKS_THREAD_FRAMES) {
		struct stacks_job *j = calloc(1, sizeof(*j));
		struct raw_stacks *mine = malloc(sizeof(*mine));
		if (!j || !mine) {
			free(j);
			free(mine);
			return HT_ERR_NOMEM;
		}
		*mine = *rs;
		j->r = r;
		j->rs = mine;
		pthread_mutex_init(&j->mu, NULL);
		if (!pthread_create(&j->th, NULL, stacks_main, j)) {
			memset(rs, 0, sizeof(*rs));
			r->stacks = j;
			__atomic_store_n(&r->stacks_busy, 1, __ATOMIC_RELAXED);
			return 0;
		}
		pthread_mutex_destroy(&j->mu);
		free(mine);
		free(j);
	}
	return stacks_expand(t, &t->arena, rs, 0);
}

/* Waits for the stacks' thread, if one ran: 0, or the error it had. */
static int stacks_wait(struct ht_reader *r)
{
	if (!__atomic_load_n(&r->stacks_busy, __ATOMIC_ACQUIRE))
		return r->stacks_rc;
	struct stacks_job *j = r->stacks;
	pthread_mutex_lock(&j->mu);
	if (__atomic_load_n(&r->stacks_busy, __ATOMIC_RELAXED)) {
		pthread_join(j->th, NULL);
		r->stacks_rc = j->rc;
		__atomic_store_n(&r->stacks_busy, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&j->mu);
	return r->stacks_rc;
}

/* Reads the table chunks between from and to; 0 or an error with *why. */
static int load_tables(struct ht_reader *r, uint64_t from, uint64_t to, const char **why)
{
	struct tables *t = &r->t;
	struct raw_stacks rs = {0};
	struct sym_tmp *syms = NULL; /* per physical frame: an index into symv */
	uint32_t *sym_first = NULL, *sym_n = NULL;
	size_t nsyms = 0, syms_cap = 0, symidx_cap = 0;
	int rc = 0;
	uint64_t off = from;
	*why = NULL;

	while (off < to) {
		struct ht__chunk_header h;
		uint64_t next;
		if ((rc = load_chunk(r, off, to, &h, &next, why)) < 0)
			goto out;
		struct ht__cur c = {r->raw, r->raw + h.raw_size, 0};
		switch (h.kind) {
		case HT__CHUNK_DEFS:
			while (c.p < c.end && !rc) {
				unsigned code = *c.p++;
				rc = decode_def(t, &t->sp, &c, code, 1, &rs);
			}
			break;
		case HT__CHUNK_DEFINDEX:
			if (r->version >= HT__FILE_VERSION_DEFSTREAM) {
				rc = load_defindex(r, &c, from, &rs);
				if (rc < 0 && rc != HT_ERR_NOMEM && rc != HT_ERR_IO)
					*why = "definition index does not parse";
			}
			break;
		case HT__CHUNK_SYMBOLS:
			while (c.p < c.end && !rc) {
				uint64_t frame = ht__get_varint(&c);
				uint64_t n = ht__get_varint(&c);
				if (c.bad || frame >= HT__MAX_FRAME_ID ||
				    n > (uint64_t)(c.end - c.p)) {
					rc = HT_ERR_CORRUPT;
					break;
				}
				if (frame >= symidx_cap) {
					size_t old = symidx_cap;
					if (ht__grow2((void **)&sym_first, sizeof(*sym_first),
						      (void **)&sym_n, sizeof(*sym_n), &symidx_cap,
						      frame < 1024 ? 1024 : frame + 1) < 0) {
						rc = HT_ERR_NOMEM;
						break;
					}
					memset(sym_n + old, 0, (symidx_cap - old) * sizeof(*sym_n));
				}
				size_t need = nsyms + n;
				if (need > syms_cap &&
				    ht__grow((void **)&syms, &syms_cap, need < 1024 ? 1024 : need,
					     sizeof(*syms)) < 0) {
					rc = HT_ERR_NOMEM;
					break;
				}
				sym_first[frame] = (uint32_t)nsyms;
				sym_n[frame] = (uint32_t)n;
				for (uint64_t i = 0; i < n && !rc; i++) {
					struct sym_tmp *s = &syms[nsyms + i];
					for (int k = 0; k < 2 && !rc; k++) {
						uint64_t len = ht__get_varint(&c);
						const char *str = NULL;
						if (c.bad ||
						    (len && len - 1 > (uint64_t)(c.end - c.p)))
							rc = HT_ERR_CORRUPT;
						else if (len) {
							str = arena_strndup(
							    &t->arena, (const char *)c.p, len - 1);
							c.p += len - 1;
							if (!str)
								rc = HT_ERR_NOMEM;
						}
						if (k == 0)
							s->function = str;
						else
							s->file = str;
					}
					s->line = (uint32_t)ht__get_varint(&c);
					if (c.bad)
						rc = HT_ERR_CORRUPT;
				}
				nsyms += n;
			}
			break;
		case HT__CHUNK_PROCESSES:
			rc = parse_processes(t, &c);
			break;
		case HT__CHUNK_LOSSES:
			rc = parse_losses(t, &c);
			break;
		case HT__CHUNK_META:
			rc = parse_meta(t, &c);
			break;
		default:
			break; /* a kind from a newer writer: skip it */
		}
		if (rc < 0) {
			if (!*why)
				*why = "table chunk does not parse";
			goto out;
		}
		off = next;
	}

	/* Expand physical frames into logical ones, then stacks. */
	for (uint32_t id = 0; id < t->nphys && !rc; id++) {
		if (t->phys[id].first != UINT32_MAX)
			continue; /* never defined */
		uint32_t n = id < symidx_cap ? sym_n[id] : 0;
		rc = add_logical(t, id, n ? syms + sym_first[id] : NULL, n);
	}
	if (!rc)
		rc = stacks_start(r, &rs);
	if (rc < 0 && !*why)
		*why = "tables do not parse";
out:
	raw_stacks_free(&rs);
	free(syms);
	free(sym_first);
	free(sym_n);
	return rc;
}

/* ---- open ---- */

/* Tries the footer; 0 when it and the tables it points at are sound. */
static int open_footer(struct ht_reader *r, const char **why)
{
	uint8_t fb[HT__FOOTER_SIZE];
	struct ht__footer f;
	*why = "no footer (the recording did not finish)";
	if (r->size < r->header_size + HT__FOOTER_SIZE)
		return HT_ERR_CORRUPT;
	if (read_at(r->fd, fb, sizeof(fb), r->size - HT__FOOTER_SIZE) < 0 ||
	    ht__footer_parse(fb, &f) < 0)
		return HT_ERR_CORRUPT;
	*why = "damaged footer";
	if (f.footer_offset != r->size - HT__FOOTER_SIZE || f.tables_offset < r->header_size ||
	    f.tables_offset > f.footer_offset)
		return HT_ERR_CORRUPT;
	int rc = load_tables(r, f.tables_offset, f.footer_offset, why);
	if (rc < 0)
		return rc;
	r->events_end = f.tables_offset;
	return 0;
}

/* The bound on frames of stack definitions per pass: far above what real
   traces of the file's size hold, far below what it could ask for. */
static uint64_t frames_limit(const struct ht_reader *r)
{
	return (1ull << 24) + 64 * r->size;
}

static int reader_threads(void);
static void type_bits_init(uint8_t bits[32], uint32_t version);

int ht_reader_open(struct ht_reader **out, const char *path)
{
	*out = NULL;
	if (!path)
		return HT_ERR_INVALID;
	struct ht_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return HT_ERR_NOMEM;
	tables_init(&r->t);
	r->fd = -1;
	r->nthreads = reader_threads();
	int rc = HT_ERR_NOMEM;
	if (!(r->dctx = ZSTD_createDCtx()))
		goto fail;
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0) {
		rc = ht__error_from_errno(errno);
		goto fail;
	}
	struct stat st;
	if (fstat(r->fd, &st) < 0) {
		rc = HT_ERR_IO;
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = HT_ERR_NOT_TRACE;
		goto fail;
	}
	r->size = (uint64_t)st.st_size;
	r->t.sp.frames_left = frames_limit(r);

	uint8_t h[HT__HEADER_SIZE];
	rc = read_at(r->fd, h, sizeof(h), 0);
	if (rc == HT_ERR_CORRUPT || (!rc && memcmp(h, HT__FILE_MAGIC, 8))) {
		rc = HT_ERR_NOT_TRACE;
		goto fail;
	}
	if (rc < 0)
		goto fail;
	if (ht__get_le32(h + 60) != ht__crc32(h, 60)) {
		rc = HT_ERR_CORRUPT;
		goto fail;
	}
	uint32_t version = ht__get_le32(h + 8);
	if (version < HT__FILE_VERSION_OLDEST || version > HT__FILE_VERSION || h[12] != 1 ||
	    h[13] != 8) {
		rc = HT_ERR_VERSION;
		goto fail;
	}
	r->own_first = version >= 3;
	r->heap_sh = version >= HT__FILE_VERSION_GRAIN ? HT__HEAP_GRAIN_SHIFT : 0;
	r->fbases = version >= HT__FILE_VERSION_FBASES;
	r->size0_cls = version >= HT__FILE_VERSION_SIZE0 ? 1 : ht__size_class(0);
	r->group_chunks =
	    version >= HT__FILE_VERSION_GROUP64 ? HT__GROUP_CHUNKS_V14 : HT__GROUP_CHUNKS;
	r->version = version; /* the tables' reading depends on it */
	r->ts_unit = ht__get_le32(h + 40);
	if (!r->ts_unit)
		r->ts_unit = 1;
	if (r->ts_unit > HT__MAX_TS_UNIT) {
		rc = HT_ERR_VERSION;
		goto fail;
	}
	r->header_size = ht__get_le32(h + 16);
	if (r->header_size < HT__HEADER_SIZE || r->header_size > r->size) {
		rc = HT_ERR_CORRUPT;
		goto fail;
	}

	const char *why;
	rc = open_footer(r, &why);
	if (rc == HT_ERR_NOMEM || rc == HT_ERR_IO)
		goto fail;
	if (rc < 0) {
		/* Unfinished or damaged: start over and learn from the events. */
		tables_release(&r->t);
		r->scan = 1;
		r->events_end = r->size;
		add_warning(r, "%s: reading events up to the last whole chunk, without symbols",
			    why);
		struct ht_trace_info *in = &r->t.info;
		in->start_realtime_ns = ht__get_le64(h + 24);
		in->stack_mask = ht__get_le32(h + 32);
		/* The first chunk is the early META: the command and the host. */
		struct ht__chunk_header ch;
		uint64_t next;
		if (load_chunk(r, r->header_size, r->size, &ch, &next, &why) == 0 &&
		    ch.kind == HT__CHUNK_META) {
			struct ht__cur c = {r->raw, r->raw + ch.raw_size, 0};
			if (parse_meta(&r->t, &c) < 0)
				add_warning(r, "damaged meta chunk");
		}
		in->flags =
		    (ht__get_le32(h + 36) | in->flags | HT_TRACEF_TRUNCATED) & ~HT_TRACEF_COMPLETE;
		in->duration_ns = 0;
		in->events_lost = 0;
		if ((rc = ht__notes_load(&r->notes, path)) < 0)
			goto fail;
	}
	r->t.info.version = version;
	r->free_stream = version >= HT__FILE_VERSION_PLANES ? HT__S_FREE : HT__S_ADDR;
	type_bits_init(r->type_bits, version);
	r->t.info.ts_unit_ns = r->ts_unit;
	if (!r->t.info.argv) {
		const char **argv = arena_alloc(&r->t.arena, sizeof(*argv));
		if (!argv) {
			rc = HT_ERR_NOMEM;
			goto fail;
		}
		argv[0] = NULL;
		r->t.info.argv = argv;
	}
	ht_reader_rewind(r);
	*out = r;
	return 0;
fail:
	ht_reader_close(r);
	return rc;
}

/* ---- events: decoding a chunk ---- */

#define BATCH_EVENTS 2048u /* events a decoding thread hands over at once */
#define BATCH_HERE 256u	   /* events decoded at once on the caller's thread */
/* Bytes of the mapping holding n elements of size bytes. */
static size_t allocs_bytes(size_t n, size_t size)
{
	return (n * size + 4095) & ~(size_t)4095;
}

static void dec_release(struct dec *d)
{
	ZSTD_freeDCtx(d->dctx);
	free(d->comp);
	free(d->raw);
	free(d->planes);
	free(d->slots);
	free(d->rings);
	free(d->heads);
	free(d->rawf);
	ht__own_release(d->own, d->slots_cap);
	if (d->allocs_cap)
		munmap(d->allocs, allocs_bytes(d->allocs_cap, sizeof(*d->allocs)));
	free(d->far);
	free(d->sp.scratch);
	free(d->sp.scratch2);
	memset(d, 0, sizeof(*d));
}

static int batch_init(struct batch *b, uint32_t cap)
{
	memset(b, 0, sizeof(*b));
	b->ev = malloc(cap * sizeof(*b->ev));
	b->name_at = malloc(2 * (size_t)cap * sizeof(*b->name_at));
	b->cap = cap;
	return b->ev && b->name_at ? 0 : HT_ERR_NOMEM;
}

static void batch_release(struct batch *b)
{
	free(b->ev);
	free(b->name_at);
	free(b->names);
	memset(b, 0, sizeof(*b));
}

static void batch_reset(struct batch *b, uint64_t ticket)
{
	b->n = b->next = 0;
	b->names_len = 0;
	b->nnamed = 0;
	b->ticket = ticket;
	b->last = b->end = b->rc = 0;
	b->why = NULL;
	b->next_q = NULL;
}

/* The batch ends the stream: damage at chunk seq (UINT32_MAX: unknown) at off. */
static void batch_damage(struct batch *b, const char *why, uint32_t seq, uint64_t off)
{
	b->why = why;
	b->seq = seq;
	b->off = off;
	b->last = 1;
}

/* What a record's type code (its first byte's low 5 bits) is, in a trace
   of the reader's version (ht_reader's type_bits). */
#define TB_EVENT 0x01u	 /* an event type of this version */
#define TB_HEAP 0x02u	 /* ALLOC, FREE or REALLOC: heap address codes */
#define TB_REALLOC 0x04u /* REALLOC (a failed one has raw codes) */
#define TB_PROC 0x08u	 /* PROCESS_START or EXEC: a description follows */

static void type_bits_init(uint8_t bits[32], uint32_t version)
{
	for (unsigned t = 0; t < 32; t++) {
		unsigned b = 0;
		if (t && t < HT_EV__COUNT &&
		    (t != HT_EV_SNAPSHOT || version >= HT__FILE_VERSION_SNAPSHOT))
			b |= TB_EVENT;
		if (t == HT_EV_ALLOC || t == HT_EV_FREE || t == HT_EV_REALLOC)
			b |= TB_HEAP;
		if (t == HT_EV_REALLOC)
			b |= TB_REALLOC;
		if (t == HT_EV_PROCESS_START || t == HT_EV_PROCESS_EXEC)
			b |= TB_PROC;
		bits[t] = (uint8_t)b;
	}
}

/* The streams decode_event() reads by ht__get_varint() alone: read from
   their planes where stored so, without joining them first. */
#define VARINT_STREAMS                                                                             \
	(1u << HT__S_TIME | 1u << HT__S_ADDR | 1u << HT__S_SIZE | 1u << HT__S_STACK |              \
	 1u << HT__S_FREE)

/*
 * Reads and decompresses chunk c for decoder d and, for an events chunk,
 * starts it: the stream table, and every state of the chunk reset. 1: events
 * to decode; 0: not an events chunk, or damage (recorded in b); or
 * HT_ERR_NOMEM.
 */
static int dec_open(struct ht_reader *r, struct dec *d, const struct chunk_ref *c, struct batch *b)
{
	const char *why;
	if (!d->dctx && !(d->dctx = ZSTD_createDCtx()))
		return HT_ERR_NOMEM;
	/* With the tables read, an events chunk's DEFS stream is not read: its
	   frame, checked then, is left out when it ends the payload. */
	const struct ht__chunk_header *h = &c->h;
	const struct defs_tail *tail =
	    !r->scan && h->kind == HT__CHUNK_EVENTS ? tail_of(&r->t, c->off, h) : NULL;
	int left;
	int rc = load_payload_but(r->fd, d->dctx, c, tail, &d->comp, &d->comp_cap, &d->raw,
				  &d->raw_cap, &left, &why);
	if (rc == HT_ERR_NOMEM)
		return rc;
	if (rc < 0) {
		batch_damage(b, why, UINT32_MAX, c->off);
		return 0;
	}
	if (h->kind != HT__CHUNK_EVENTS)
		return 0; /* META, or the tables of a trace whose footer is gone */
	rc = ht__streams_open_direct(d->raw, d->raw + h->raw_size, r->version, d->cur, &d->planes,
				     &d->planes_cap, VARINT_STREAMS, &why);
	struct ht__cur *df = &d->cur[HT__S_DEFS];
	if (left && (rc < 0 || df->hi || df->p != d->raw + h->raw_size - tail->raw ||
		     df->end != d->raw + h->raw_size)) {
		/* not the plain last stream the writer makes: its bytes after all,
		   as load_payload() would have them */
		size_t n = ZSTD_decompressDCtx(d->dctx, d->raw + h->raw_size - tail->raw, tail->raw,
					       d->comp + tail->at, tail->comp);
		if (ZSTD_isError(n) || n != tail->raw) {
			batch_damage(b, "chunk fails its checksum", UINT32_MAX, c->off);
			return 0;
		}
		rc = ht__streams_open_direct(d->raw, d->raw + h->raw_size, r->version, d->cur,
					     &d->planes, &d->planes_cap, VARINT_STREAMS, &why);
	}
	if (rc == HT_ERR_NOMEM)
		return rc;
	if (rc < 0) {
		batch_damage(b, why, h->seq, c->off);
		return 0;
	}
	int cont = (h->flags & HT__CHUNK_CONT) && r->version >= HT__FILE_VERSION_GROUPS;
	if (cont && (d->cont_seq != h->seq || !h->seq || d->group_n >= r->group_chunks)) {
		batch_damage(b, "events chunk continues a group it does not follow", h->seq,
			     c->off);
		return 0;
	}
	d->seq = h->seq;
	d->off = c->off;
	d->prev_ts = h->first_ts / r->ts_unit;
	d->tpack = r->version >= HT__FILE_VERSION_TPACK && (h->flags & HT__CHUNK_TPACK);
	d->tpend_n = 0;
	d->frel = r->version >= HT__FILE_VERSION_FREL && (h->flags & HT__CHUNK_FREL);
	d->cont_seq = h->seq + 1;
	if (cont) {
		d->group_n++;
	} else {
		d->group_n = 1;
		d->nallocs = 0;
		d->nfar = 0;
		/* stacks share frames only within a group */
		defs_start(&d->sp, r->version >= HT__FILE_VERSION_DEFSTREAM);
		d->nslots = 0;
		d->own_solo = 0;
		d->cur_slot = UINT32_MAX;
	}
	/* Version 9: the chunk's definitions, learned before its events by a
	   trace without its tables (the tables have them otherwise). */
	df = &d->cur[HT__S_DEFS];
	while (r->scan && df->p < df->end) {
		unsigned code = *df->p++;
		rc = decode_def(&r->t, &d->sp, df, code, 1, NULL);
		if (rc == HT_ERR_NOMEM)
			return rc;
		if (rc < 0) {
			batch_damage(b, "definition does not parse", h->seq, c->off);
			return 0;
		}
	}
	return 1;
}

/* Reads the process description after a PROCESS_START/EXEC event. */
static int decode_proc(struct ht_reader *r, struct ht__cur *c, const struct ht_event *ev)
{
	struct ht_process d = {0};
	d.ppid = (int32_t)ht__unzigzag(ht__get_varint(c));
	uint64_t parent = ht__get_varint(c);
	d.parent = parent ? (uint32_t)(parent - 1) : UINT32_MAX;
	d.flags = (uint32_t)ht__get_varint(c);
	uint32_t elen;
	const char *exe = ht__get_bytes(c, &elen);
	uint64_t argc = ht__get_varint(c);
	if (c->bad || argc > (uint64_t)(c->end - c->p))
		return HT_ERR_CORRUPT;
	const uint8_t *args = c->p;
	for (uint64_t i = 0; i < argc; i++) {
		uint32_t len;
		ht__get_bytes(c, &len);
	}
	if (c->bad)
		return HT_ERR_CORRUPT;
	if (!r->scan || r->ev_index < r->learned)
		return 0;
	/* Learn the process (a trace without a footer is decoded on the
	   caller's thread, one event at a time, so ev_index is this event's):
	   build NUL-terminated copies for ht__proctab_set. */
	char *ex = strndup(exe, elen);
	const char **argv = calloc(argc + 1, sizeof(*argv));
	int rc = ex && argv ? 0 : HT_ERR_NOMEM;
	struct ht__cur a = {args, c->end, 0};
	for (uint64_t i = 0; i < argc && !rc; i++) {
		uint32_t len;
		const char *s = ht__get_bytes(&a, &len);
		if (!(argv[i] = strndup(s, len)))
			rc = HT_ERR_NOMEM;
	}
	if (!rc) {
		d.pid = ev->pid;
		d.exe = ex;
		d.argc = (uint32_t)argc;
		d.argv = argv;
		d.start_ts = ev->ts;
		rc = ht__proctab_set(&r->t.procs, ev->process, &d);
		if (rc == HT_ERR_INVALID)
			rc = HT_ERR_CORRUPT;
	}
	for (uint64_t i = 0; argv && i < argc; i++)
		free((void *)argv[i]);
	free(argv);
	free(ex);
	return rc;
}

/*
 * The rings of recently freed addresses (codec.h), kept circular: the
 * writer's ring[k] is ring[(head + k) % 16]. A push moves no entry and a
 * take moves the k newer than the one taken, where ht__ring_push() and
 * ht__ring_take() move 15 and 15 - k through memmove (its calls were 7 %
 * of the decode on alloc_loop).
 */
_Static_assert(HT__RING_DEPTH == 16, "ring indices wrap by a mask");
#define RING_MASK (HT__RING_DEPTH - 1)

static inline void ring_push(uint64_t *ring, uint8_t *head, uint64_t addr)
{
	*head = (uint8_t)((*head - 1) & RING_MASK);
	ring[*head] = addr; /* over the oldest */
}

/* Takes the writer's ring[k] out (0: that entry is empty). */
static inline uint64_t ring_take(uint64_t *ring, uint8_t *head, unsigned k)
{
	unsigned h = *head;
	uint64_t a = ring[(h + k) & RING_MASK];
	if (!a)
		return 0;
	for (unsigned i = k; i; i--)
		ring[(h + i) & RING_MASK] = ring[(h + i - 1) & RING_MASK];
	ring[h] = 0; /* the oldest, after the head moves on */
	*head = (uint8_t)((h + 1) & RING_MASK);
	return a;
}

/* Decodes a raw address code (tag bit clear, or the 0 escape), in units of
   2^sh bytes unless escaped. */
static uint64_t get_raw_addr(struct ht__cur *a, uint64_t v, struct slot *sl, unsigned sh)
{
	if (v)
		sl->last_addr += (uint64_t)ht__unzigzag(v >> 1) << sh;
	else
		sl->last_addr += (uint64_t)ht__unzigzag(ht__get_varint(a));
	return sl->last_addr;
}

/* get_free_addr's raw code v (tag bit clear, or the 0 escape): since
   version 14 in 16 bytes from the slot's last address or from its raw
   free before the latest (docs/trace-format.md, "Addresses"), before it
   get_raw_addr()'s. */
static inline __attribute__((always_inline)) uint64_t
get_raw_free(const struct ht_reader *r, struct dec *d, struct ht__cur *a, uint32_t si, uint64_t v)
{
	struct slot *sl = &d->slots[si];
	if (!r->fbases)
		return get_raw_addr(a, v, sl, r->heap_sh);
	struct ht__raw_frees *rf = &d->rawf[si];
	uint64_t c = v >> 1, addr;
	if (v) {
		uint64_t base = c & 1 ? rf->prev : sl->last_addr;
		if (!base && (c & 1)) {
			a->bad = 1; /* the writer never counts from a raw free not made */
			return 0;
		}
		addr = base + ((uint64_t)ht__unzigzag(c >> 1) << HT__HEAP_GRAIN_SHIFT);
	} else {
		addr = sl->last_addr + (uint64_t)ht__unzigzag(ht__get_varint(a));
	}
	rf->prev = rf->latest;
	rf->latest = addr;
	return sl->last_addr = addr;
}

/* The address and class of allocation g of the group kept aside (its
   packed word is 0): the far list is in the order of g. */
static __attribute__((noinline)) void alloc_far_get(const struct dec *d, uint32_t g, uint64_t *addr,
						    unsigned *cls)
{
	uint32_t lo = 0, hi = d->nfar;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (d->far[mid].g <= g)
			lo = mid;
		else
			hi = mid;
	}
	*addr = d->far[lo].addr;
	*cls = d->far[lo].cls;
}

/* get_free_addr's odd code v in a chunk with HT__CHUNK_FREL (version
   12): a second tag bit; set, the rest is the slot's own allocation at
   its free position - 1 + unzigzag(the rest); clear, the distance back
   as without the flag. A code naming the slot's own allocation moves its
   free position there (in such chunks only: the others pay one test). */
static inline uint32_t get_free_rel(struct dec *d, struct ht__cur *a, uint32_t si, uint64_t v)
{
	struct slot *sl = &d->slots[si];
	const struct ht__own *o = &d->own[si];
	int solo = d->own_solo == si + 1;
	uint32_t own = solo ? d->nallocs : o->n;
	uint64_t k = v >> 2;
	if (v & 2) {
		uint64_t p = (uint64_t)sl->free_own - 1 + (uint64_t)ht__unzigzag(k);
		if (p >= own) {
			a->bad = 1;
			return 0;
		}
		sl->free_own = (uint32_t)p;
	} else if (!k || (k > own && k - own > d->nallocs)) {
		a->bad = 1;
		return 0;
	} else if (k > own) {
		return d->nallocs - (uint32_t)(k - own);
	} else {
		sl->free_own = own - (uint32_t)k;
	}
	return solo ? sl->free_own : o->glob[sl->free_own];
}

/* The address of a block leaving; 0 with a->bad set when the code is bad.
   Inline in heap_run(), called by the general path (get_free_addr()). */
static inline __attribute__((always_inline)) uint64_t
free_addr_in(const struct ht_reader *r, struct dec *d, struct ht__cur *a, uint32_t si)
{
	struct slot *sl = &d->slots[si];
	uint64_t v = ht__get_varint(a);
	if (!(v & 1))
		return get_raw_free(r, d, a, si, v);
	uint32_t g;
	if (d->frel) {
		g = get_free_rel(d, a, si, v);
		if (a->bad)
			return 0;
	} else {
		/* Back among the slot's own allocations, then past them among
		   all the chunk's (version 2: all the chunk's only). */
		uint64_t k = v >> 1;
		const struct ht__own *o = &d->own[si];
		int solo = d->own_solo == si + 1;
		uint32_t own = !r->own_first ? 0 : solo ? d->nallocs : o->n;
		if (!k || (k > own && k - own > d->nallocs)) {
			a->bad = 1;
			return 0;
		}
		g = k > own ? d->nallocs - (uint32_t)(k - own)
		    : solo  ? own - (uint32_t)k
			    : o->glob[own - k];
	}
	uint64_t e = d->allocs[g], addr = e >> 8;
	unsigned cls = e & 0xff;
	if (!cls)
		alloc_far_get(d, g, &addr, &cls);
	ring_push(d->rings[si][cls], &d->heads[si][cls], addr);
	return sl->last_addr = addr;
}

static __attribute__((noinline)) uint64_t get_free_addr(const struct ht_reader *r, struct dec *d,
							struct ht__cur *a, uint32_t si)
{
	return free_addr_in(r, d, a, si);
}

/* A mapping of old bytes (0: none yet) grown to bytes, or NULL. */
static void *map_grow(void *p, size_t old, size_t bytes)
{
	void *q =
	    old ? mremap(p, old, bytes, MREMAP_MAYMOVE)
		: mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return q == MAP_FAILED ? NULL : q;
}

/* Allocations whose room the first grow_allocs() reserves. */
#define ALLOCS_RESERVE (8u << 20)

/*
 * Room for twice the group's allocations. The lists are the reader's
 * largest (jq: about 1.5 million allocations in a group) and stay as large
 * for the groups after, so they are mappings of their own, grown by
 * mremap(): no copy, and no hole left in malloc's heap (grown by realloc,
 * a python json trace's peak RSS was 4 MB larger). The first reserves room
 * for ALLOCS_RESERVE (64 MB of address space, MAP_NORESERVE): its pages
 * cost memory only once written, and a list that grew by doubling from
 * 4096 was moved by mremap() 9 times on python, each moving its page
 * tables and flushing the TLBs of the other threads' cores. Where that
 * much cannot be mapped, 4096 as before. 0 or -1.
 */
static int grow_allocs(struct dec *d)
{
	if (!d->allocs_cap) {
		size_t bytes = allocs_bytes(ALLOCS_RESERVE, sizeof(*d->allocs));
		void *q = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (q != MAP_FAILED) {
			/* no huge pages: the memory stays that of the entries */
			madvise(q, bytes, MADV_NOHUGEPAGE);
			d->allocs = q;
			d->allocs_cap = ALLOCS_RESERVE;
			return 0;
		}
	}
	uint64_t cap = d->allocs_cap ? (uint64_t)d->allocs_cap * 2 : 4096;
	if (cap > UINT32_MAX)
		cap = UINT32_MAX;
	if (cap <= d->nallocs)
		return -1;
	size_t old = d->allocs_cap ? allocs_bytes(d->allocs_cap, sizeof(*d->allocs)) : 0;
	uint64_t *a = map_grow(d->allocs, old, allocs_bytes(cap, sizeof(*a)));
	if (!a)
		return -1;
	d->allocs = a;
	d->allocs_cap = (uint32_t)cap;
	return 0;
}

#define OWN_MANY UINT32_MAX

/* Slot si made the group's next allocation (nallocs): in its own list, kept
   once a second slot allocates. 0 or -1. */
static int own_add(struct dec *d, uint32_t si)
{
	if (d->own_solo == si + 1)
		return 0;
	if (!d->own_solo) {
		d->own_solo = si + 1;
		return 0;
	}
	if (d->own_solo != OWN_MANY) {
		/* The solo slot's list is made, as if kept all along. */
		struct ht__own *o = &d->own[d->own_solo - 1];
		if (ht__grow32((void **)&o->glob, &o->cap, d->nallocs ? d->nallocs : 1,
			       sizeof(*o->glob)) < 0)
			return -1;
		for (uint32_t i = 0; i < d->nallocs; i++)
			o->glob[i] = i;
		o->n = d->nallocs;
		d->own_solo = OWN_MANY;
	}
	return ht__own_push(&d->own[si], d->nallocs);
}

/* The address of a new block of size, of size class cls; records it as an
   allocation. Inline in heap_run(), called by the general path
   (get_alloc_addr()). */
static inline __attribute__((always_inline)) uint64_t
alloc_addr_in(const struct ht_reader *r, struct dec *d, struct ht__cur *a, uint32_t si,
	      uint64_t size, unsigned cls, uint64_t old_addr)
{
	struct slot *sl = &d->slots[si];
	uint64_t v = ht__get_varint(a), addr;
	uint64_t k = v >> 1;
	int fresh = 1; /* not from a ring, nor OLD: the fresh top moves */
	if (!(v & 1)) {
		addr = get_raw_addr(a, v, sl, r->heap_sh);
	} else if (k < HT__RING_DEPTH) {
		uint8_t *head = &d->heads[si][cls];
		addr = ring_take(d->rings[si][cls], head, (unsigned)k);
		fresh = 0;
		if (!addr) {
			a->bad = 1;
			return 0;
		}
	} else if (k == HT__ADDR_TOP) {
		addr = sl->ends[sl->ends_pos % HT__ADDR_ENDS];
	} else if (k == HT__ADDR_FRESH) {
		addr = sl->fresh_top;
	} else if (k == HT__ADDR_OLD) {
		addr = old_addr;
		fresh = 0;
	} else if (k < HT__ADDR_END + HT__ADDR_ENDS - 2 && r->version >= HT__FILE_VERSION_ENDS) {
		/* END: the end of the (k - HT__ADDR_END + 2)-th new block back */
		addr = sl->ends[(sl->ends_pos - (uint32_t)(k - HT__ADDR_END + 1)) % HT__ADDR_ENDS];
	} else {
		addr = 0;
	}
	if (!addr) {
		a->bad = 1;
		return 0;
	}
	sl->last_addr = addr;
	uint64_t end = addr + ht__chunk_size(size);
	sl->ends[++sl->ends_pos % HT__ADDR_ENDS] = end;
	if (fresh)
		sl->fresh_top = end;
	if (d->nallocs == d->allocs_cap && grow_allocs(d) < 0) {
		a->bad = 1; /* reported as damage: the stream cannot go on */
		return 0;
	}
	struct ht__own *o = &d->own[si];
	/* own_add()'s commonest case with several slots inline (8 threads: a
	   call an allocation) */
	uint32_t solo = d->own_solo;
	if (solo == OWN_MANY && o->n < o->cap)
		o->glob[o->n++] = d->nallocs;
	else if (solo != si + 1 && r->own_first && own_add(d, si) < 0) {
		a->bad = 1;
		return 0;
	}
	if (addr >> 56) {
		if (d->nfar == d->far_cap &&
		    ht__grow32((void **)&d->far, &d->far_cap, d->nfar + 1, sizeof(*d->far)) < 0) {
			a->bad = 1;
			return 0;
		}
		d->far[d->nfar++] = (struct alloc_far){addr, d->nallocs, cls};
		d->allocs[d->nallocs++] = 0; /* class 0: kept aside */
	} else {
		d->allocs[d->nallocs++] = addr << 8 | cls; /* 1 (size 0) to 64 */
	}
	return addr;
}

/* The ring of a new block of size bytes: ht__new_block_class(), where a
   block of no bytes has the writer's ring 0 since version 14; the reader
   keeps that ring in its place 1, no class's (place 0 of allocs marks a
   block kept aside). 2 before version 14. */
static inline unsigned new_block_class(const struct ht_reader *r, uint64_t size)
{
	return size ? ht__size_class(size) : r->size0_cls;
}

static __attribute__((noinline)) uint64_t get_alloc_addr(const struct ht_reader *r, struct dec *d,
							 struct ht__cur *a, uint32_t si,
							 uint64_t size, uint64_t old_addr)
{
	return alloc_addr_in(r, d, a, si, size, new_block_class(r, size), old_addr);
}

/* A thread slot defined in the chunk: its process, pid and tid follow in mi. */
static int new_slot(struct dec *d, struct ht__cur *mi)
{
	if (d->nslots == d->slots_cap) {
		/* Five columns of one capacity; own's new lists start empty. */
		uint32_t c1 = d->slots_cap, c2 = c1, c3 = c1, c4 = c1, c5 = c1;
		size_t need = (size_t)d->nslots + 1;
		if (ht__grow32((void **)&d->slots, &c1, need, sizeof(*d->slots)) < 0 ||
		    ht__grow32((void **)&d->rings, &c2, need, sizeof(*d->rings)) < 0 ||
		    ht__grow32((void **)&d->heads, &c4, need, sizeof(*d->heads)) < 0 ||
		    ht__grow32((void **)&d->rawf, &c5, need, sizeof(*d->rawf)) < 0 ||
		    ht__grow32_zero((void **)&d->own, &c3, need, sizeof(*d->own)) < 0)
			return HT_ERR_NOMEM;
		d->slots_cap = c1;
	}
	struct slot *sl = &d->slots[d->nslots];
	memset(d->rings[d->nslots], 0, sizeof(d->rings[d->nslots]));
	memset(d->heads[d->nslots], 0, sizeof(d->heads[d->nslots]));
	memset(&d->rawf[d->nslots], 0, sizeof(d->rawf[d->nslots]));
	d->own[d->nslots].n = 0;
	d->nslots++;
	sl->process = (uint32_t)ht__get_varint(mi);
	sl->pid = (int32_t)ht__unzigzag(ht__get_varint(mi));
	sl->tid = (int32_t)ht__unzigzag(ht__get_varint(mi));
	sl->last_addr = 0;
	sl->fresh_top = 0;
	sl->free_own = 0;
	sl->ends_pos = 0;
	memset(sl->ends, 0, sizeof(sl->ends));
	memset(sl->last_stack, 0, sizeof(sl->last_stack));
	return 0;
}

/* The next event's time delta (docs/trace-format.md, "Events", step 3):
   one pending from the last TIME varint, or from the next one. */
static inline uint64_t time_delta(struct dec *d)
{
	if (d->tpend_n) {
		d->tpend_n--;
		return (d->tpend >> (2 * d->tpend_n)) & 3;
	}
	uint64_t v = ht__get_varint(&d->cur[HT__S_TIME]);
	if (!d->tpack)
		return (uint64_t)ht__unzigzag(v);
	if (v < HT__TIME_PAIR) {
		d->tpend = (uint32_t)v;
		d->tpend_n = 2;
		return v >> 4;
	}
	if (v < HT__TIME_ONE) {
		d->tpend = (uint32_t)(v - HT__TIME_PAIR);
		d->tpend_n = 1;
		return d->tpend >> 2;
	}
	return (uint64_t)ht__unzigzag(v - HT__TIME_ONE);
}

/* The fields of an event that few have (mask's PROT, MFLAGS, FD, and
   mask2's), in that order from mi, its name into b->names. 0,
   HT_ERR_CORRUPT or HT_ERR_NOMEM. */
static int event_rest(struct ht__cur *mi, struct batch *b, struct ht_event *ev, uint8_t mask,
		      uint8_t mask2)
{
	ev->prot = mask & HT__F_PROT ? (uint32_t)ht__get_varint(mi) : 0;
	ev->mflags = mask & HT__F_MFLAGS ? (uint32_t)ht__get_varint(mi) : 0;
	ev->fd = mask & HT__F_FD ? (int32_t)ht__unzigzag(ht__get_varint(mi)) : 0;
	ev->value = mask2 & HT__F2_VALUE ? (int32_t)ht__unzigzag(ht__get_varint(mi)) : 0;
	ev->module = mask2 & HT__F2_MODULE ? (uint32_t)ht__get_varint(mi) : 0;
	if (mask2 & HT__F2_NAME) {
		uint32_t len;
		const char *s = ht__get_bytes(mi, &len);
		if (mi->bad)
			return HT_ERR_CORRUPT;
		if (grow((uint8_t **)&b->names, &b->names_cap, b->names_len + len + 1) < 0)
			return HT_ERR_NOMEM;
		memcpy(b->names + b->names_len, s, len);
		b->names[b->names_len + len] = 0;
		/* pointed at once names stops moving (fill_batch) */
		b->name_at[2 * b->nnamed] = b->n;
		b->name_at[2 * b->nnamed + 1] = (uint32_t)b->names_len;
		b->nnamed++;
		b->names_len += len + 1;
	}
	return 0;
}

/* A hint to bring *w into the cache. GCC 12 left no instruction of
   __builtin_prefetch() in prefetch_next_free(), hence the asm where the
   instruction is known; elsewhere the builtin (at worst nothing). */
static inline void prefetch_word(const uint64_t *w)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("prefetcht0 %0" : : "m"(*w));
#else
	__builtin_prefetch(w);
#endif
}

/*
 * After an allocation of slot si in a chunk without HT__CHUNK_FREL: the
 * allocation that the FREE stream's next code names (if one or two bytes
 * long, and as if the free were the slot's), its word fetched into the
 * cache ahead of the free. A loop's frees name blocks thousands of
 * allocations back, whose words (and places in the slot's own list)
 * missed the cache: with 8 threads the decode's largest wait. (In chunks
 * with the flag, python's, it cost instructions and saved no time.)
 */
static inline void prefetch_next_free(const struct dec *d, const struct ht__cur *f, uint32_t si)
{
	const uint8_t *q = f->p;
	if (q >= f->end)
		return;
	uint32_t v = *q;
	if (v >= 0x80) {
		const uint8_t *h = f->hi ? f->hi : q + 1;
		if (h >= (f->hi ? f->hend : f->end) || *h >= 0x80)
			return;
		v = (v & 0x7f) | (uint32_t)*h << 7;
	}
	uint32_t k = v >> 1;
	int solo = d->own_solo == si + 1;
	uint32_t own = solo ? d->nallocs : d->own[si].n;
	if (!(v & 1) || !k || k > own)
		return; /* raw, or past the slot's own allocations */
	uint32_t g = solo ? own - k : d->own[si].glob[own - k];
	if (g < d->nallocs)
		prefetch_word(&d->allocs[g]);
}

/*
 * The commonest events, an ALLOC or a FREE of the thread slot before with
 * the default function and only its size and address, decoded in a run
 * into b from b->n until another record, the chunk's end or b's: what
 * decode_event() does for them, without its tests of what they lack, and
 * with the operations' cursor, the time and the batch's place in locals
 * (through the decoder and the batch, each byte stored into an event made
 * the compiler load them again). The thread slot is d->cur_slot (not
 * UINT32_MAX). 0, or HT_ERR_CORRUPT with *why set (the event that did not
 * parse is at b->n, not counted).
 */
static inline __attribute__((always_inline)) int heap_run_on(struct ht_reader *r, struct dec *d,
							     struct batch *b, const char **why,
							     struct ht__cur *st, struct ht__cur *z,
							     struct ht__cur *a, struct ht__cur *f)
{
	struct ht__cur *op = &d->cur[HT__S_OPS], *t = &d->cur[HT__S_TIME];
	const uint8_t *p = op->p, *end = op->end;
	struct ht_event *ev = b->ev + b->n, *full = b->ev + b->cap;
	const uint32_t si = d->cur_slot;
	struct slot *sl = d->cur_sl;
	const uint32_t process = sl->process;
	const int32_t pid = sl->pid, tid = sl->tid;
	const uint64_t unit = r->ts_unit;
	/* the head's stack bit where stacks are predicted (0 before) */
	const unsigned pred = r->version >= HT__FILE_VERSION_STACKPRED ? HT__REC_STACK : 0;
	const int look_ahead = !d->frel && r->own_first; /* the chunk's, read once */
	const uint8_t func_free = (uint8_t)ht__default_func(HT_EV_FREE),
		      func_alloc = (uint8_t)ht__default_func(HT_EV_ALLOC);
	uint64_t ts = d->prev_ts;
	int rc = 0;
#ifdef __SSE2__
	/* An event's type, func, flags, process, pid and tid (its first 16
	   bytes), the same for every FREE and for every ALLOC of the run. */
	_Static_assert(
	    offsetof(struct ht_event, pid) == 8 && offsetof(struct ht_event, tid) == 12 &&
		offsetof(struct ht_event, ts) == 16 && offsetof(struct ht_event, module) == 28 &&
		offsetof(struct ht_event, old_size) == 64 && offsetof(struct ht_event, fd) == 80 &&
		sizeof(struct ht_event) == 96 && sizeof(void *) == 8,
	    "heap_run() stores an event's fields in 16-byte pieces");
	const __m128i head_free =
			  _mm_set_epi32(tid, pid, (int)process, HT_EV_FREE | func_free << 8),
		      head_alloc =
			  _mm_set_epi32(tid, pid, (int)process, HT_EV_ALLOC | func_alloc << 8),
		      zero = _mm_setzero_si128();
#endif
	/* The record's head and mask byte, but the head's stack bit: one of
	   these two, or the run ends. */
	const unsigned plain_free = HT__REC_SAME | HT_EV_FREE | HT__F_ADDR << 8,
		       plain_alloc = HT__REC_SAME | HT_EV_ALLOC | (HT__F_SIZE | HT__F_ADDR) << 8;
	/* Each event of the run takes two bytes of the operations: the run
	   ends at stop at the latest (one test an event instead of two). */
	struct ht_event *stop =
	    ev + ((size_t)(end - p) / 2 < (size_t)(full - ev) ? (size_t)(end - p) / 2
							      : (size_t)(full - ev));
	while (ev < stop) {
		unsigned head = p[0], key = (head | (unsigned)p[1] << 8) & ~HT__REC_STACK;
		if (key != plain_free && key != plain_alloc)
			break;
		unsigned type = head & HT__REC_TYPE_MASK;
		p += 2;
		ts += time_delta(d);
		uint32_t stack = head & HT__REC_STACK ? (uint32_t)ht__get_varint(st) : 0;
		uint64_t size = 0, addr;
		int bad;
		if (type == HT_EV_FREE) {
			addr = free_addr_in(r, d, f, si);
			bad = t->bad | st->bad | f->bad;
		} else {
			size = ht__get_varint(z);
			unsigned cls = new_block_class(r, size);
			if ((head & pred) && size) {
				uint32_t *last = &sl->last_stack[cls];
				if (!stack && !(stack = *last)) {
					*why = "predicted stack without a previous one";
					rc = HT_ERR_CORRUPT;
					break;
				}
				*last = stack;
			}
			addr = alloc_addr_in(r, d, a, si, size, cls, 0);
			bad = t->bad | st->bad | z->bad | a->bad;
			if (look_ahead)
				prefetch_next_free(d, f, si);
		}
		if (bad) {
			*why = "event does not parse";
			rc = HT_ERR_CORRUPT;
			break;
		}
#ifdef __SSE2__
		/* Nine stores instead of seventeen: the first 16 bytes made once
		   per run, the last 32 zero, stack and module as one word. */
		_mm_storeu_si128((__m128i *)ev, type == HT_EV_FREE ? head_free : head_alloc);
		ev->ts = ts * unit;
		uint64_t stack_module = stack; /* module 0 above it (little-endian) */
		memcpy(&ev->stack, &stack_module, sizeof(stack_module));
		ev->heap = 0;
		ev->addr = addr;
		ev->size = size;
		ev->old_addr = 0;
		_mm_storeu_si128((__m128i *)&ev->old_size, zero);
		_mm_storeu_si128((__m128i *)&ev->fd, zero);
#else
		ev->type = (uint8_t)type;
		ev->func = type == HT_EV_FREE ? func_free : func_alloc;
		ev->flags = 0;
		ev->process = process;
		ev->pid = pid;
		ev->tid = tid;
		ev->ts = ts * unit;
		ev->stack = stack;
		ev->module = 0;
		ev->heap = 0;
		ev->addr = addr;
		ev->size = size;
		ev->old_addr = 0;
		ev->old_size = 0;
		ev->prot = ev->mflags = 0;
		ev->fd = ev->value = 0;
		ev->name = NULL;
#endif
		ev++;
	}
	op->p = p;
	d->prev_ts = ts;
	b->n = (uint32_t)(ev - b->ev);
	return rc;
}

/* heap_run_on() with the STACK, SIZE, ADDR and FREE cursors in locals
   (registers): in d->cur they were loaded again after every byte stored
   (a ring's head, a slot's list), two loads and a store a varint. Before
   version 5 the frees' codes are in ADDR: those cursors stay in d. */
static int heap_run(struct ht_reader *r, struct dec *d, struct batch *b, const char **why)
{
	if (r->free_stream == HT__S_ADDR)
		return heap_run_on(r, d, b, why, &d->cur[HT__S_STACK], &d->cur[HT__S_SIZE],
				   &d->cur[HT__S_ADDR], &d->cur[HT__S_ADDR]);
	/* No run (called before every other event): no copies (python) */
	const struct ht__cur *op = &d->cur[HT__S_OPS];
	if (op->end - op->p < 2 || b->n == b->cap)
		return 0;
	unsigned key = (op->p[0] | (unsigned)op->p[1] << 8) & ~HT__REC_STACK;
	if (key != (HT__REC_SAME | HT_EV_FREE | HT__F_ADDR << 8) &&
	    key != (HT__REC_SAME | HT_EV_ALLOC | (HT__F_SIZE | HT__F_ADDR) << 8))
		return 0;
	struct ht__cur st = d->cur[HT__S_STACK], z = d->cur[HT__S_SIZE], a = d->cur[HT__S_ADDR],
		       f = d->cur[r->free_stream];
	int rc = heap_run_on(r, d, b, why, &st, &z, &a, &f);
	d->cur[HT__S_STACK] = st;
	d->cur[HT__S_SIZE] = z;
	d->cur[HT__S_ADDR] = a;
	d->cur[r->free_stream] = f;
	return rc;
}

/*
 * Decodes the next event of d's chunk into b (at b->n, its name into
 * b->names). 1: an event; 0: the chunk is over; HT_ERR_CORRUPT with *why
 * set: damage ends the stream here; HT_ERR_NOMEM.
 */
static int decode_event(struct ht_reader *r, struct dec *d, struct batch *b, const char **why)
{
	struct ht__cur *op = &d->cur[HT__S_OPS], *mi = &d->cur[HT__S_MISC];
	struct ht_event *ev = &b->ev[b->n];
	int rc;
	for (;;) {
		if (op->p >= op->end) {
			if (!d->tpend_n)
				return 0;
			*why = "time deltas left at the chunk's end";
			return HT_ERR_CORRUPT;
		}
		uint8_t head = *op->p++;
		unsigned type = head & HT__REC_TYPE_MASK, tb = r->type_bits[type];
		if (!(tb & TB_EVENT)) {
			if (type < HT__REC_DEF_MODULE) {
				*why = "unknown record";
				return HT_ERR_CORRUPT;
			}
			if (r->version >= HT__FILE_VERSION_DEFSTREAM) {
				*why = "definition outside the definitions stream";
				return HT_ERR_CORRUPT;
			}
			rc = decode_def(&r->t, &d->sp, mi, type, r->scan, NULL);
			if (rc == HT_ERR_NOMEM)
				return rc;
			if (rc < 0) {
				*why = "definition does not parse";
				return HT_ERR_CORRUPT;
			}
			continue;
		}

		/* Every field is stored once below (no memset of the event: it
		   was 8 % of the decode on alloc_loop). */
		ev->type = (uint8_t)type;
		if (head & HT__REC_EXT) {
			ev->func = ht__get_byte(op);
			ev->flags = (uint16_t)ht__get_varint(mi);
			ev->heap = ht__get_varint(mi);
			if (ev->heap && type == HT_EV_SNAPSHOT &&
			    r->version < HT__FILE_VERSION_SNAPHEAP) {
				*why = "snapshot of a custom heap in a trace of an older version";
				return HT_ERR_CORRUPT;
			}
		} else {
			ev->func = (uint8_t)ht__default_func(type);
			ev->flags = 0;
			ev->heap = 0;
		}
		if (!(head & HT__REC_SAME)) {
			uint64_t s = ht__get_varint(mi);
			if (mi->bad || s > d->nslots || s >= HT__MAX_SLOTS) {
				*why = "bad thread slot";
				return HT_ERR_CORRUPT;
			}
			if (s == d->nslots && new_slot(d, mi) < 0)
				return HT_ERR_NOMEM;
			d->cur_slot = (uint32_t)s;
			d->cur_sl = &d->slots[s];
		} else if (d->cur_slot == UINT32_MAX) {
			*why = "event without a thread";
			return HT_ERR_CORRUPT;
		}
		uint32_t si = d->cur_slot;
		struct slot *sl = d->cur_sl;
		ev->process = sl->process;
		ev->pid = sl->pid;
		ev->tid = sl->tid;
		d->prev_ts += time_delta(d);
		ev->ts = d->prev_ts * r->ts_unit;
		ev->stack =
		    head & HT__REC_STACK ? (uint32_t)ht__get_varint(&d->cur[HT__S_STACK]) : 0;
		uint8_t mask = ht__get_byte(op), mask2 = 0;
		if (mask & HT__F_MORE)
			mask2 = ht__get_byte(op);
		struct ht__cur *z = &d->cur[HT__S_SIZE], *a = &d->cur[HT__S_ADDR];
		/* Codes of blocks leaving: FREE since version 5, ADDR before. */
		struct ht__cur *f = &d->cur[r->free_stream];
		ev->size = mask & HT__F_SIZE ? ht__get_varint(z) : 0;
		ev->old_size = mask & HT__F_OLD_SIZE ? ht__get_varint(z) : 0;
		if ((head & HT__REC_STACK) && ev->size &&
		    r->version >= HT__FILE_VERSION_STACKPRED) {
			/* 0: the slot's previous stack of this size class */
			uint32_t *last = &sl->last_stack[ht__size_class(ev->size)];
			if (!ev->stack && !(ev->stack = *last)) {
				*why = "predicted stack without a previous one";
				return HT_ERR_CORRUPT;
			}
			*last = ev->stack;
		}
		int heap_ev = (tb & TB_HEAP) && !((tb & TB_REALLOC) && (ev->flags & HT_EVF_FAILED));
		ev->old_addr = 0;
		if (mask & HT__F_OLD_ADDR)
			ev->old_addr = heap_ev ? get_free_addr(r, d, f, si)
					       : get_raw_addr(a, ht__get_varint(a), sl, 0);
		ev->addr = 0;
		if (mask & HT__F_ADDR) {
			if (type == HT_EV_FREE)
				ev->addr = get_free_addr(r, d, f, si);
			else if (heap_ev)
				ev->addr = get_alloc_addr(r, d, a, si, ev->size,
							  type == HT_EV_REALLOC ? ev->old_addr : 0);
			else
				ev->addr = get_raw_addr(a, ht__get_varint(a), sl, 0);
		}
		ev->name = NULL;
		if (!((mask & (HT__F_PROT | HT__F_MFLAGS | HT__F_FD)) | mask2)) {
			ev->prot = ev->mflags = 0;
			ev->fd = ev->value = 0;
			ev->module = 0;
		} else if ((rc = event_rest(mi, b, ev, mask, mask2)) < 0) {
			if (rc == HT_ERR_NOMEM)
				return rc;
			*why = "event does not parse";
			return HT_ERR_CORRUPT;
		}
		/* The streams an event reads (none of the definitions), unrolled:
		   this is on every event (2 % of analyze -stacks on python). */
		_Static_assert(HT__S_DEFS == 7, "an event reads streams 0 to 6");
		int bad = d->cur[0].bad | d->cur[1].bad | d->cur[2].bad | d->cur[3].bad |
			  d->cur[4].bad | d->cur[5].bad | d->cur[6].bad;
		if (bad) {
			*why = "event does not parse";
			return HT_ERR_CORRUPT;
		}
		if (tb & TB_PROC) {
			rc = decode_proc(r, mi, ev);
			if (rc == HT_ERR_NOMEM)
				return rc;
			if (rc < 0) {
				*why = "process event does not parse";
				return HT_ERR_CORRUPT;
			}
		}
		return 1;
	}
}

/* Decodes events of d's chunk into b (emptied first) until it is full;
   b->last when the chunk ended (or damage or an error did). */
static void fill_batch(struct ht_reader *r, struct dec *d, struct batch *b)
{
	batch_reset(b, b->ticket);
	while (b->n < b->cap) {
		const char *why = NULL;
		int rc = d->cur_slot != UINT32_MAX ? heap_run(r, d, b, &why) : 0;
		if (rc == 0 && b->n == b->cap)
			break;
		if (rc == 0)
			rc = decode_event(r, d, b, &why);
		if (rc == 1) {
			b->n++;
			continue;
		}
		if (rc == 0 && d->nmore) { /* the next chunk of the claimed group */
			d->nmore--;
			rc = dec_open(r, d, d->more++, b);
			if (rc == 1)
				continue;
			if (rc < 0)
				b->rc = rc;
			b->last = 1; /* damage (in b), an error, or not events */
			break;
		}
		if (rc == HT_ERR_CORRUPT)
			batch_damage(b, why, d->seq, d->off);
		else if (rc < 0)
			b->rc = rc;
		b->last = 1;
		break;
	}
	/* names has stopped moving: point the events at their names (an event
	   that did not end up in b, damaged, is at b->n or later) */
	for (uint32_t k = 0; k < b->nnamed; k++)
		if (b->name_at[2 * k] < b->n)
			b->ev[b->name_at[2 * k]].name = b->names + b->name_at[2 * k + 1];
}

/*
 * The next chunk of the pass (chunks are claimed in file order, by one
 * decoder at a time): 1 with *c, 0 after the last events chunk, or an
 * error: HT_ERR_CORRUPT with *why set, HT_ERR_IO.
 */
static int claim_chunk(struct ht_reader *r, struct chunk_ref *c, const char **why)
{
	*why = NULL;
	c->off = r->pos;
	if (r->pos >= r->events_end)
		return 0;
	uint64_t next;
	int rc = load_header(r, r->pos, r->events_end, &c->h, &next, why);
	if (rc == HT_ERR_IO && !*why)
		return rc;
	if (rc < 0) {
		/* A damaged header cannot tell its number. */
		*why = *why ? *why : "unreadable chunk";
		return HT_ERR_CORRUPT;
	}
	r->pos = next;
	return 1;
}

/*
 * After claim_chunk() gave c[0], the chunks that continue it (CONT), up to
 * a whole group: a decoding thread decodes a group alone, in order. A
 * header that cannot be read stops the group there; the next claim finds
 * the damage. How many chunks the claim has.
 */
static uint32_t claim_group(struct ht_reader *r, struct chunk_ref *c)
{
	uint32_t n = 1;
	if (r->version < HT__FILE_VERSION_GROUPS)
		return n;
	while (n < r->group_chunks && r->pos < r->events_end) {
		uint64_t next;
		const char *why = NULL;
		if (load_header(r, r->pos, r->events_end, &c[n].h, &next, &why) < 0 ||
		    c[n].h.kind != HT__CHUNK_EVENTS || !(c[n].h.flags & HT__CHUNK_CONT))
			break;
		c[n++].off = r->pos;
		r->pos = next;
	}
	return n;
}

/* A claim that found no chunk to decode ends the stream: b says how. */
static void batch_claim_end(struct batch *b, int rc, const char *why, uint64_t off)
{
	b->last = 1;
	if (rc == 0)
		b->end = 1;
	else if (why)
		batch_damage(b, why, UINT32_MAX, off);
	else
		b->rc = rc;
}

/* ---- events: decoding threads ---- */

/*
 * A free batch of w, or NULL when the pass stops. With pp->mu held. A
 * thread that ran out sleeps until half its batches are back, so it is
 * woken once per half, not once per batch.
 */
static struct batch *worker_take(struct worker *w)
{
	struct pipe *pp = w->pp;
	if (!w->free_b)
		while (w->nfree < WORKER_BATCHES / 2 && !pp->stop)
			pthread_cond_wait(&w->wake, &pp->mu);
	if (pp->stop)
		return NULL;
	struct batch *b = w->free_b;
	w->free_b = b->next_q;
	w->nfree--;
	return b;
}

/*
 * Hands filled batch b to the reader. With pp->mu held. A reader asleep
 * (it had read every batch there was: the pass is the quicker) is woken
 * once half of w's batches wait, or at the end of w's claim, not for each
 * batch: each wake was a futex call on the worker's thread, several
 * microseconds on this machine (a VM), the decode's own time when it is
 * the longer thread. w cannot run out of batches before it wakes the
 * reader, which waits for a batch of w's or of a claim after it. Until
 * the reader has been woken for a batch with events, it is woken for
 * each: at the start of the pass it has nothing else to do (jq: its first
 * wait for the events 0.75-0.9 ms instead of 1.1-1.3 ms).
 */
static void worker_put(struct worker *w, struct batch *b)
{
	struct pipe *pp = w->pp;
	b->next_q = NULL;
	if (w->q_tail)
		w->q_tail->next_q = b;
	else
		w->q_head = b;
	w->q_tail = b;
	if (++w->nqueued >= WORKER_BATCHES / 2 || b->last || !pp->woken) {
		if (pp->reader_waits) {
			pthread_cond_signal(&pp->to_reader);
			pp->woken |= b->n > 0; /* not for the META chunk's */
		}
	}
}

/*
 * A decoding thread: claims the next chunk, decodes it into its own batches
 * and queues them with the chunk's ticket; the reader takes them ticket by
 * ticket, so events come out in file order whichever thread decoded them.
 */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct ht_reader *r = w->r;
	struct pipe *pp = w->pp;
	pthread_mutex_lock(&pp->mu);
	while (!pp->stop && !pp->claims_over) {
		struct chunk_ref *c = w->group;
		const char *why;
		int rc = claim_chunk(r, c, &why);
		uint32_t n = rc > 0 ? claim_group(r, c) : 0;
		uint64_t ticket = pp->claimed++;
		struct batch *b = worker_take(w);
		if (!b)
			break;
		batch_reset(b, ticket);
		if (rc <= 0) {
			pp->claims_over = 1;
			batch_claim_end(b, rc, why, c->off);
			worker_put(w, b);
			break;
		}
		pthread_mutex_unlock(&pp->mu);
		w->d.cont_seq = 0; /* a claim starts a group, or continues none */
		w->d.more = c + 1;
		w->d.nmore = n - 1;
		rc = dec_open(r, &w->d, c, b);
		if (rc == 1)
			fill_batch(r, &w->d, b);
		else
			b->last = 1;
		if (rc < 0)
			b->rc = rc;
		pthread_mutex_lock(&pp->mu);
		for (;;) {
			int last = b->last;
			if (b->why || b->rc)
				pp->claims_over = 1; /* the stream ends with this chunk */
			worker_put(w, b);
			if (last || !(b = worker_take(w)))
				break;
			pthread_mutex_unlock(&pp->mu);
			b->ticket = ticket;
			fill_batch(r, &w->d, b);
			pthread_mutex_lock(&pp->mu);
		}
	}
	pthread_mutex_unlock(&pp->mu);
	return NULL;
}

/* Stops and frees the decoding threads, if any run. */
static void pipe_stop(struct ht_reader *r)
{
	struct pipe *pp = r->pp;
	if (!pp)
		return;
	pthread_mutex_lock(&pp->mu);
	pp->stop = 1;
	for (int i = 0; i < pp->nworkers; i++)
		pthread_cond_signal(&pp->w[i].wake);
	pthread_mutex_unlock(&pp->mu);
	for (int i = 0; i < pp->nworkers; i++) {
		struct worker *w = &pp->w[i];
		if (w->started)
			pthread_join(w->th, NULL);
		dec_release(&w->d);
		for (size_t k = 0; k < WORKER_BATCHES; k++)
			batch_release(&w->all[k]);
		pthread_cond_destroy(&w->wake);
	}
	pthread_cond_destroy(&pp->to_reader);
	pthread_mutex_destroy(&pp->mu);
	free(pp);
	r->pp = NULL;
	r->cur = NULL;
}

/* Starts the decoding threads of a pass; 0, or -1 to decode on the
   caller's thread instead. */
static int pipe_start(struct ht_reader *r)
{
	int n = r->nthreads;
	struct pipe *pp = calloc(1, sizeof(*pp) + (size_t)n * sizeof(pp->w[0]));
	if (!pp)
		return -1;
	pthread_mutex_init(&pp->mu, NULL);
	pthread_cond_init(&pp->to_reader, NULL);
	for (int i = 0; i < n; i++)
		pthread_cond_init(&pp->w[i].wake, NULL);
	pp->nworkers = n;
	r->pp = pp;
	for (int i = 0; i < n; i++) {
		struct worker *w = &pp->w[i];
		w->r = r;
		w->pp = pp;
		w->d.sp.pool = &r->t.sp.frames_left;
		for (size_t k = 0; k < WORKER_BATCHES; k++) {
			if (batch_init(&w->all[k], BATCH_EVENTS) < 0) {
				pipe_stop(r);
				return -1;
			}
			w->all[k].owner = w;
			w->all[k].next_q = w->free_b;
			w->free_b = &w->all[k];
			w->nfree++;
		}
	}
	int started = 0;
	pthread_mutex_lock(&pp->mu);
	for (int i = 0; i < n; i++)
		if (!pthread_create(&pp->w[i].th, NULL, worker_main, &pp->w[i])) {
			pp->w[i].started = 1;
			started++;
		}
	pthread_mutex_unlock(&pp->mu);
	if (!started) {
		pipe_stop(r);
		return -1;
	}
	return 0;
}

/* The next batch from the threads, in ticket order; gives the one read back. */
static void pipe_next(struct ht_reader *r)
{
	struct pipe *pp = r->pp;
	pthread_mutex_lock(&pp->mu);
	struct batch *b = r->cur;
	if (b) {
		struct worker *o = b->owner;
		if (b->last)
			pp->want++;
		b->next_q = o->free_b;
		o->free_b = b;
		if (++o->nfree == WORKER_BATCHES / 2)
			pthread_cond_signal(&o->wake);
	}
	for (;;) {
		for (int i = 0; i < pp->nworkers; i++) {
			struct worker *w = &pp->w[i];
			if (w->q_head && w->q_head->ticket == pp->want) {
				b = w->q_head;
				w->nqueued--;
				if (!(w->q_head = b->next_q))
					w->q_tail = NULL;
				r->cur = b;
				pthread_mutex_unlock(&pp->mu);
				return;
			}
		}
		pp->reader_waits = 1;
		pthread_cond_wait(&pp->to_reader, &pp->mu);
		pp->reader_waits = 0;
	}
}

/* The next batch decoded on the caller's thread. 0 or HT_ERR_NOMEM. */
static int here_next(struct ht_reader *r)
{
	struct batch *b = &r->one;
	if (!b->ev && batch_init(b, BATCH_HERE) < 0)
		return HT_ERR_NOMEM;
	/* A trace without a footer learns its tables from the events it
	   returns: one at a time, so the tables never run ahead of them. */
	b->cap = r->scan ? 1 : BATCH_HERE;
	r->cur = b;
	batch_reset(b, 0);
	while (!r->in_chunk) {
		struct chunk_ref c;
		const char *why;
		int rc = claim_chunk(r, &c, &why);
		if (rc <= 0) {
			batch_claim_end(b, rc, why, c.off);
			return 0;
		}
		rc = dec_open(r, &r->d, &c, b);
		if (rc < 0)
			return rc;
		if (b->last)
			return 0; /* damage */
		r->in_chunk = rc;
	}
	fill_batch(r, &r->d, b);
	if (b->last)
		r->in_chunk = 0;
	return 0;
}

/* Decoding threads for a pass: HT_READER_THREADS, or one fewer than the
   online CPUs, at most 4 (0: decode on the caller's thread). */
static int reader_threads(void)
{
	const char *e = getenv("HT_READER_THREADS");
	if (e && *e) {
		long n = strtol(e, NULL, 10);
		return n < 0 ? 0 : n > 16 ? 16 : (int)n;
	}
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	return cpus <= 1 ? 0 : cpus > 5 ? 4 : (int)cpus - 1;
}

/* ---- events: the reader's stream ---- */

int ht_reader_rewind(struct ht_reader *r)
{
	if (!r)
		return HT_ERR_INVALID;
	pipe_stop(r);
	r->pos = r->header_size;
	r->done = 0;
	r->t.sp.frames_left = frames_limit(r); /* inline stacks are decoded again */
	r->d.sp.frames_left = 0;
	r->d.sp.pool = &r->t.sp.frames_left;
	r->d.cont_seq = 0;
	r->in_chunk = 0;
	r->cur = NULL;
	r->ev_index = 0;
	return 0;
}

/*
 * What the exit notes tell of an unfinished trace: the events its
 * processes made that it does not hold, and the processes that left none.
 */
static void apply_notes(struct ht_reader *r)
{
	struct ht__notes_result res;
	r->notes_applied = 1;
	ht__notes_apply(&r->notes, &r->t.procs, &r->t.info, &res);
	uint64_t end = r->t.info.duration_ns;
	if (res.events)
		add_warning(r,
			    "the trace ends at %" PRIu64 ".%03" PRIu64
			    " s, before its processes did: %" PRIu64
			    " events of %u process%s after that are not in the trace "
			    "(counted by the processes' exit notes)",
			    end / 1000000000, end / 1000000 % 1000, res.events, res.processes,
			    res.processes == 1 ? "" : "es");
	if (res.unseen)
		add_warning(r,
			    "%u process%s of the session %s not in the trace at all (its "
			    "collector ended before writing %s events): %s exit note%s name%s "
			    "%s pid and status",
			    res.unseen, res.unseen == 1 ? "" : "es", res.unseen == 1 ? "is" : "are",
			    res.unseen == 1 ? "its" : "their", res.unseen == 1 ? "its" : "their",
			    res.unseen == 1 ? "" : "s", res.unseen == 1 ? "s" : "",
			    res.unseen == 1 ? "its" : "each one's");
	if (res.unknown)
		add_warning(
		    r,
		    "%u process%s left no exit note (still running, or killed): what %s did "
		    "after %" PRIu64 ".%03" PRIu64 " s is not known",
		    res.unknown, res.unknown == 1 ? "" : "es", res.unknown == 1 ? "it" : "they",
		    end / 1000000000, end / 1000000 % 1000);
}

/* The stream is over: an unfinished trace's processes end at its last event. */
static void end_stream(struct ht_reader *r)
{
	if (!r->done && r->scan) {
		ht__proctab_end(&r->t.procs, r->t.info.duration_ns);
		if (r->notes.present && !r->notes_applied)
			apply_notes(r);
	}
	r->done = 1;
	pipe_stop(r);
}

/* Ends the stream because of damage at the current position. */
static int stream_damaged(struct ht_reader *r, const char *why, uint32_t seq, uint64_t off)
{
	if (!r->damage_warned) {
		r->damage_warned = 1;
		if (seq != UINT32_MAX)
			add_warning(r, "%s (chunk %u at offset %llu): later events are lost", why,
				    seq, (unsigned long long)off);
		else
			add_warning(r, "%s at offset %llu: later events are lost", why,
				    (unsigned long long)off);
	}
	r->t.info.flags |= HT_TRACEF_TRUNCATED;
	end_stream(r);
	return 0;
}

/*
 * The current batch is read: ends the stream as it says, or gets the next
 * one. 1 when there may be events, 0 at the end, or an error. Apart from
 * ht__reader_next_ref(), which then stays a short loop.
 */
static __attribute__((noinline)) int next_batch(struct ht_reader *r)
{
	struct batch *b = r->cur;
	if (r->done)
		return 0;
	if (b && b->rc) {
		int rc = b->rc;
		end_stream(r);
		return rc;
	}
	if (b && b->why) {
		stream_damaged(r, b->why, b->seq, b->off);
		return 0;
	}
	if (b && b->end) {
		end_stream(r);
		/* A pass reads every stack's expansion too: its error is the pass's. */
		return r->stacks ? stacks_wait(r) : 0;
	}
	if (!r->pp && !r->scan && r->nthreads && !r->in_chunk && r->pos == r->header_size &&
	    pipe_start(r) < 0)
		r->nthreads = 0; /* no threads to be had: decode here */
	if (r->pp) {
		pipe_next(r);
		return 1;
	}
	int rc = here_next(r);
	return rc < 0 ? rc : 1;
}

/* A trace without a footer: what the event tells of the processes and the
   duration goes into the tables, once per event. */
static int learn_event(struct ht_reader *r, const struct ht_event *ev)
{
	if (ev->type == HT_EV_PROCESS_EXEC || ev->type == HT_EV_PROCESS_EXIT)
		ht__proctab_event(&r->t.procs, ev);
	if (ev->ts > r->t.info.duration_ns)
		r->t.info.duration_ns = ev->ts;
	r->learned = r->ev_index + 1;
	return ht__notes_count(&r->notes, ev); /* for the exit notes (notes.h) */
}

int ht__reader_next_ref(struct ht_reader *r, const struct ht_event **out)
{
	if (!r || !out)
		return HT_ERR_INVALID;
	for (;;) {
		struct batch *b = r->cur;
		if (b && b->next < b->n && !r->done) {
			const struct ht_event *ev = &b->ev[b->next++];
			if (r->scan && r->ev_index >= r->learned && learn_event(r, ev) < 0)
				return HT_ERR_NOMEM;
			r->ev_index++;
			*out = ev;
			return 1;
		}
		int rc = next_batch(r);
		if (rc <= 0)
			return rc;
	}
}

int ht__reader_next_run(struct ht_reader *r, const struct ht_event **out)
{
	if (!r || !out)
		return HT_ERR_INVALID;
	if (r->scan) /* each event learned as it is returned */
		return ht__reader_next_ref(r, out);
	for (;;) {
		struct batch *b = r->cur;
		if (b && b->next < b->n && !r->done) {
			uint32_t n = b->n - b->next;
			*out = &b->ev[b->next];
			b->next = b->n;
			r->ev_index += n;
			return (int)n;
		}
		int rc = next_batch(r);
		if (rc <= 0)
			return rc;
	}
}

int ht_reader_next(struct ht_reader *r, struct ht_event *ev)
{
	if (!ev)
		return HT_ERR_INVALID;
	const struct ht_event *e;
	int rc = ht__reader_next_ref(r, &e);
	if (rc > 0)
		*ev = *e;
	return rc;
}

double ht_sample_weight(uint64_t size, uint64_t rate)
{
	if (!rate || size >= rate)
		return 1.0;
	if (!size) /* a 0-byte block is sampled with probability 0: it weighs nothing */
		return 0.0;
	/* -expm1(-x) is 1 - exp(-x) without cancellation for small x. */
	return 1.0 / -expm1(-(double)size / (double)rate);
}

const char *ht_reader_warning(const struct ht_reader *r)
{
	return r && r->warning[0] ? r->warning : NULL;
}

const struct ht_trace_info *ht_reader_info(const struct ht_reader *r)
{
	return &r->t.info;
}

uint32_t ht_reader_process_count(const struct ht_reader *r)
{
	return r->t.procs.n;
}

const struct ht_process *ht_reader_process(const struct ht_reader *r, uint32_t index)
{
	return index < r->t.procs.n ? &r->t.procs.v[index]->p : NULL;
}

uint32_t ht_reader_module_count(const struct ht_reader *r)
{
	return r->t.modules.n;
}

const struct ht_module *ht_reader_module(const struct ht_reader *r, uint32_t id)
{
	return id < r->t.modules.n ? svec_at(&r->t.modules, id) : NULL;
}

uint32_t ht_reader_frame_count(const struct ht_reader *r)
{
	return r->t.frames.n;
}

const struct ht_frame *ht_reader_frame(const struct ht_reader *r, uint32_t id)
{
	return id < r->t.frames.n ? svec_at(&r->t.frames, id) : NULL;
}

uint32_t ht_reader_stack_count(const struct ht_reader *r)
{
	return r->t.nstacks ? r->t.nstacks : 1;
}

uint32_t ht_reader_stack(const struct ht_reader *r, uint32_t stack, const uint32_t **frames)
{
	/* The stacks' thread (stacks_start()) is the reader's own state: the
	   caller sees a table that was whole from the open. */
	if (r->stacks)
		stacks_wait((struct ht_reader *)r);
	if (stack >= r->t.nstacks || !r->t.stacks[stack].defined) {
		if (frames)
			*frames = NULL;
		return 0;
	}
	if (frames)
		*frames = r->t.stacks[stack].frames;
	return r->t.stacks[stack].n;
}

void ht_reader_close(struct ht_reader *r)
{
	if (!r)
		return;
	pipe_stop(r);
	if (r->stacks) {
		stacks_wait(r);
		pthread_mutex_destroy(&r->stacks->mu);
		arena_release(&r->stacks->arena);
		free(r->stacks->rs);
		free(r->stacks);
	}
	if (r->fd >= 0)
		close(r->fd);
	tables_release(&r->t);
	ZSTD_freeDCtx(r->dctx);
	free(r->comp);
	free(r->raw);
	dec_release(&r->d);
	batch_release(&r->one);
	ht__notes_free(&r->notes);
	free(r);
}

uint32_t ht__reader_phys_count(const struct ht_reader *r)
{
	return r->t.nphys;
}

int ht__reader_phys(const struct ht_reader *r, uint32_t id, struct ht__phys_frame *out)
{
	if (id >= r->t.nphys || !r->t.phys[id].nlog)
		return HT_ERR_NOT_FOUND;
	const struct phys_frame *pf = &r->t.phys[id];
	*out = (struct ht__phys_frame){pf->module, pf->rel, pf->first, pf->nlog};
	return 0;
}
