/*
 * fake_producer.h - a recorder stand-in for the session's protocol tests: maps
 * a session file the way libheaptrail.so does and writes records into rings by
 * the rules of src/base/protocol.h (8-byte records, PAD at the ring's end,
 * write_pos published with release). Header-only: tests include it once.
 */
#ifndef HT_TESTS_FAKE_PRODUCER_H
#define HT_TESTS_FAKE_PRODUCER_H

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/protocol.h"

struct fake {
	uint8_t *map;
	size_t size;
	struct ht__shm_header *h;
};

static inline uint64_t fake_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int fake_open(struct fake *f, const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -1;
	f->size = (size_t)st.st_size;
	f->map = mmap(NULL, f->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (f->map == MAP_FAILED)
		return -1;
	f->h = (struct ht__shm_header *)f->map;
	return f->h->magic == HT_SHM_MAGIC && f->h->version == HT_PROTO_VERSION ? 0 : -1;
}

static inline struct ht__ring *fake_ring(struct fake *f, uint32_t i)
{
	return (struct ht__ring *)(f->map + f->h->header_size +
				   (size_t)i * (HT_RING_HEADER_SIZE + f->h->ring_size));
}

/* Claim ring i (FREE -> OWNED) for pid/tid/instance. Returns 0 or -1. */
static inline int fake_claim(struct fake *f, uint32_t i, int32_t pid, int32_t tid, uint32_t inst)
{
	struct ht__ring *r = fake_ring(f, i);
	uint32_t exp = HT_RING_FREE;
	if (!atomic_compare_exchange_strong(&r->state, &exp, HT_RING_OWNED))
		return -1;
	ht__ring_reached(f->h, i);
	r->pid = pid;
	r->tid = tid;
	r->instance = inst;
	return 0;
}

/* Append one record (len a multiple of 8) to ring i, padding the tail when it
   does not fit. Returns 0, or -1 when the ring is full. */
static inline int fake_put(struct fake *f, uint32_t i, const void *rec, uint32_t len)
{
	struct ht__ring *r = fake_ring(f, i);
	uint8_t *data = (uint8_t *)r + HT_RING_HEADER_SIZE;
	uint32_t size = f->h->ring_size;
	uint64_t w = atomic_load_explicit(&r->write_pos, memory_order_relaxed);
	uint64_t rd = atomic_load_explicit(&r->read_pos, memory_order_acquire);
	uint32_t off = (uint32_t)(w & (size - 1));
	/* As the recorder: never leave a tail too short for a PAD header. */
	uint32_t pad = (off + len > size || size - off - len == 8) ? size - off : 0;
	if (w + pad + len - rd > size)
		return -1;
	if (pad) {
		struct ht__rec p = {.type = HT_REC_PAD, .len = (uint16_t)pad};
		memcpy(data + off, &p, sizeof(p));
		w += pad;
		off = 0;
	}
	memcpy(data + off, rec, len);
	atomic_store_explicit(&r->write_pos, w + len, memory_order_release);
	return 0;
}

/* PROCESS_START with exe and one argument. */
static inline int fake_process(struct fake *f, uint32_t ring, uint64_t ts, int32_t pid,
			       int32_t ppid, uint32_t flags, uint32_t inst, const char *exe)
{
	uint8_t buf[256] = {0};
	struct ht__rec_process *p = (void *)buf;
	uint32_t el = (uint32_t)strlen(exe);
	p->h.type = HT_REC_PROCESS_START;
	p->h.ts = ts;
	p->pid = pid;
	p->ppid = ppid;
	p->flags = flags;
	p->instance = inst;
	p->exe_len = el;
	p->args_len = el + 1;
	memcpy(buf + sizeof(*p), exe, el);
	memcpy(buf + sizeof(*p) + el, exe, el + 1);
	p->h.len = (uint16_t)ht__rec_align((uint32_t)sizeof(*p) + 2 * el + 1);
	return fake_put(f, ring, buf, p->h.len);
}

static inline int fake_alloc(struct fake *f, uint32_t ring, uint64_t ts, uint64_t addr,
			     uint64_t size, uint32_t stack)
{
	struct ht__rec_alloc a = {
	    .h = {.type = HT_REC_ALLOC, .func = 1, .len = sizeof(a), .stack = stack, .ts = ts},
	    .addr = addr,
	    .size = size};
	return fake_put(f, ring, &a, sizeof(a));
}

static inline int fake_free(struct fake *f, uint32_t ring, uint64_t ts, uint64_t addr)
{
	struct ht__rec_free a = {.h = {.type = HT_REC_FREE, .func = 5, .len = sizeof(a), .ts = ts},
				 .addr = addr};
	return fake_put(f, ring, &a, sizeof(a));
}

/* A REALLOC begun at ts before the real call, which returned at end (0:
   stamped after the call, ts is the event's time). */
static inline int fake_realloc(struct fake *f, uint32_t ring, uint64_t ts, uint64_t end,
			       uint64_t old_addr, uint64_t new_addr, uint64_t size)
{
	struct ht__rec_realloc a = {
	    .h = {.type = HT_REC_REALLOC, .func = 3, .len = sizeof(a), .ts = ts},
	    .old_addr = old_addr,
	    .new_addr = new_addr,
	    .size = size,
	    .end = end};
	return fake_put(f, ring, &a, sizeof(a));
}

static inline int fake_exit(struct fake *f, uint32_t ring, uint64_t ts, int32_t pid, int32_t code)
{
	struct ht__rec_exit e = {.h = {.type = HT_REC_PROCESS_EXIT, .len = sizeof(e), .ts = ts},
				 .pid = pid,
				 .kind = HT_EXIT_CODE,
				 .value = code};
	return fake_put(f, ring, &e, sizeof(e));
}

static inline int fake_module(struct fake *f, uint32_t ring, uint64_t ts, uint32_t index,
			      const char *path, uint8_t bid0)
{
	uint8_t buf[512] = {0};
	struct ht__rec_module *m = (void *)buf;
	uint32_t pl = (uint32_t)strlen(path);
	m->h.type = HT_REC_MODULE_LOAD;
	m->h.ts = ts;
	m->index = index;
	m->path_len = pl;
	m->bias = 0x7f0000000000ull;
	m->start = 0x7f0000000000ull;
	m->size = 0x10000;
	m->build_id_len = 4;
	m->build_id[0] = bid0;
	m->build_id[1] = 0xbe;
	m->build_id[2] = 0xef;
	m->build_id[3] = 0x01;
	memcpy(buf + sizeof(*m), path, pl);
	m->h.len = (uint16_t)ht__rec_align((uint32_t)sizeof(*m) + pl);
	return fake_put(f, ring, buf, m->h.len);
}

static inline int fake_stack(struct fake *f, uint32_t ring, uint64_t ts, uint32_t id, uint32_t n,
			     const uint64_t *rel, const uint32_t *mod)
{
	uint8_t buf[2048] = {0};
	struct ht__rec_stack *s = (void *)buf;
	s->h.type = HT_REC_STACK;
	s->h.stack = id;
	s->h.ts = ts;
	s->nframes = n;
	memcpy(buf + sizeof(*s), rel, n * 8);
	memcpy(buf + sizeof(*s) + n * 8, mod, n * 4);
	s->h.len = (uint16_t)ht__rec_align((uint32_t)sizeof(*s) + n * 12);
	return fake_put(f, ring, buf, s->h.len);
}

#endif
