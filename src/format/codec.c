/*
 * codec.c - the pieces of the .htr byte format that writer.c and reader.c
 * share: CRC-32, chunk header and footer packing, the stream table and
 * planes of events chunks, encoding buffers and the process table kept from
 * process events.
 */
#include "format/codec.h"

#include <stdlib.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/vec.h"

/* CRC-32 (IEEE, reflected, as zlib and PNG), table built on first use. */
static uint32_t crc_table[256];
static int crc_ready;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
	crc_ready = 1;
}

uint32_t ht__crc32(const void *buf, size_t len)
{
	if (!crc_ready)
		crc_init();
	const uint8_t *p = buf;
	uint32_t c = 0xffffffffu;
	while (len--)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

/*
 * Chunk header, 48 bytes little-endian:
 *   0 magic u32, 4 kind u8, 5 flags u8, 6..7 zero, 8 raw_size u32, 12 comp_size u32,
 *   16 count u32, 20 seq u32, 24 first_ts u64, 32 last_ts u64,
 *   40 reserved u32 (0), 44 crc32 of bytes 0..43.
 */
void ht__chunk_header_pack(uint8_t out[HT__CHUNK_HEADER_SIZE], const struct ht__chunk_header *h)
{
	memset(out, 0, HT__CHUNK_HEADER_SIZE);
	ht__put_le32(out, (uint32_t)HT__CHUNK_MAGIC);
	out[4] = h->kind;
	out[5] = h->flags;
	ht__put_le32(out + 8, h->raw_size);
	ht__put_le32(out + 12, h->comp_size);
	ht__put_le32(out + 16, h->count);
	ht__put_le32(out + 20, h->seq);
	ht__put_le64(out + 24, h->first_ts);
	ht__put_le64(out + 32, h->last_ts);
	ht__put_le32(out + 44, ht__crc32(out, 44));
}

int ht__chunk_header_parse(const uint8_t in[HT__CHUNK_HEADER_SIZE], struct ht__chunk_header *h)
{
	if (ht__get_le32(in) != (uint32_t)HT__CHUNK_MAGIC)
		return HT_ERR_CORRUPT;
	if (ht__get_le32(in + 44) != ht__crc32(in, 44))
		return HT_ERR_CORRUPT;
	h->kind = in[4];
	h->flags = in[5];
	h->raw_size = ht__get_le32(in + 8);
	h->comp_size = ht__get_le32(in + 12);
	h->count = ht__get_le32(in + 16);
	h->seq = ht__get_le32(in + 20);
	h->first_ts = ht__get_le64(in + 24);
	h->last_ts = ht__get_le64(in + 32);
	return 0;
}

/*
 * Footer, 48 bytes at the very end of the file:
 *   0 magic "HTRFOOT1", 8 tables_offset u64, 16 footer_offset u64,
 *   24 event_count u64, 32 event_chunks u32, 36 reserved u32 (0),
 *   40 reserved u32 (0), 44 crc32 of bytes 0..43.
 */
void ht__footer_pack(uint8_t out[HT__FOOTER_SIZE], const struct ht__footer *f)
{
	memset(out, 0, HT__FOOTER_SIZE);
	memcpy(out, HT__FOOTER_MAGIC, 8);
	ht__put_le64(out + 8, f->tables_offset);
	ht__put_le64(out + 16, f->footer_offset);
	ht__put_le64(out + 24, f->event_count);
	ht__put_le32(out + 32, f->event_chunks);
	ht__put_le32(out + 44, ht__crc32(out, 44));
}

int ht__footer_parse(const uint8_t in[HT__FOOTER_SIZE], struct ht__footer *f)
{
	if (memcmp(in, HT__FOOTER_MAGIC, 8))
		return HT_ERR_CORRUPT;
	if (ht__get_le32(in + 44) != ht__crc32(in, 44))
		return HT_ERR_CORRUPT;
	f->tables_offset = ht__get_le64(in + 8);
	f->footer_offset = ht__get_le64(in + 16);
	f->event_count = ht__get_le64(in + 24);
	f->event_chunks = ht__get_le32(in + 32);
	return 0;
}

int ht__buf_reserve(struct ht__buf *b, size_t n)
{
	if (n > SIZE_MAX - b->len)
		return HT_ERR_NOMEM;
	/* From 4 KiB: the buffers hold chunks and tables, never a few bytes. */
	return ht__grow((void **)&b->data, &b->cap, b->len + n < 4096 ? 4096 : b->len + n, 1);
}

int ht__buf_str(struct ht__buf *b, const char *s, size_t len)
{
	if (ht__buf_reserve(b, len + 10) < 0)
		return HT_ERR_NOMEM;
	b->len = ht__put_varint(b->data + b->len, len) - b->data;
	if (len)
		memcpy(b->data + b->len, s, len);
	b->len += len;
	return 0;
}

int ht__buf_nstr(struct ht__buf *b, const char *s)
{
	if (!s) {
		if (ht__buf_reserve(b, 1) < 0)
			return HT_ERR_NOMEM;
		b->data[b->len++] = 0;
		return 0;
	}
	size_t len = strlen(s);
	if (ht__buf_reserve(b, len + 10) < 0)
		return HT_ERR_NOMEM;
	b->len = ht__put_varint(b->data + b->len, (uint64_t)len + 1) - b->data;
	memcpy(b->data + b->len, s, len);
	b->len += len;
	return 0;
}

void ht__buf_release(struct ht__buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

static const char *const empty_argv[1] = {NULL};

static void proc_blank(struct ht__proctab_ent *e)
{
	memset(e, 0, sizeof(*e));
	e->p.pid = -1;
	e->p.ppid = -1;
	e->p.parent = UINT32_MAX;
	e->p.exe = "";
	e->p.argv = empty_argv;
}

struct ht__proctab_ent *ht__proctab_get(struct ht__proctab *t, uint32_t index)
{
	if (index >= HT__MAX_PROCESSES)
		return NULL;
	if (ht__grow32_zero((void **)&t->v, &t->cap, (size_t)index + 1, sizeof(*t->v)) < 0)
		return NULL;
	/* Gaps get blank entries too, so every index below n answers. */
	for (uint32_t i = t->n; i <= index; i++) {
		struct ht__proctab_ent *e = malloc(sizeof(*e));
		if (!e)
			return NULL;
		proc_blank(e);
		t->v[i] = e;
		t->n = i + 1;
	}
	return t->v[index];
}

int ht__proctab_set(struct ht__proctab *t, uint32_t index, const struct ht_process *src)
{
	struct ht__proctab_ent *e = ht__proctab_get(t, index);
	if (!e)
		return index >= HT__MAX_PROCESSES ? HT_ERR_INVALID : HT_ERR_NOMEM;
	size_t bytes = strlen(src->exe ? src->exe : "") + 1;
	for (uint32_t i = 0; i < src->argc; i++)
		bytes += strlen(src->argv[i] ? src->argv[i] : "") + 1;
	char *strings = malloc(bytes);
	const char **argv = malloc((src->argc + 1) * sizeof(*argv));
	if (!strings || !argv) {
		free(strings);
		free(argv);
		return HT_ERR_NOMEM;
	}
	char *p = strings;
	size_t n = strlen(src->exe ? src->exe : "") + 1;
	memcpy(p, src->exe ? src->exe : "", n);
	const char *exe = p;
	p += n;
	for (uint32_t i = 0; i < src->argc; i++) {
		n = strlen(src->argv[i] ? src->argv[i] : "") + 1;
		memcpy(p, src->argv[i] ? src->argv[i] : "", n);
		argv[i] = p;
		p += n;
	}
	argv[src->argc] = NULL;
	free(e->strings);
	free(e->argv);
	e->p = *src;
	e->p.exe = exe;
	e->p.argv = argv;
	e->strings = strings;
	e->argv = argv;
	return 0;
}

void ht__proctab_event(struct ht__proctab *t, const struct ht_event *ev)
{
	if (ev->type == HT_EV_PROCESS_EXEC) {
		/* The latest earlier image of the same pid that still runs ends here. */
		for (uint32_t i = t->n; i-- > 0;) {
			struct ht_process *p = &t->v[i]->p;
			if (i == ev->process || p->pid != ev->pid)
				continue;
			if (p->flags & (HT_PROCF_EXECED | HT_PROCF_EXITED | HT_PROCF_SIGNALED))
				continue;
			p->flags |= HT_PROCF_EXECED;
			p->end_ts = ev->ts;
			break;
		}
	} else if (ev->type == HT_EV_PROCESS_EXIT) {
		if (ev->process >= t->n)
			return;
		struct ht_process *p = &t->v[ev->process]->p;
		if (ev->flags & HT_EVF_EXEC) {
			p->flags |= HT_PROCF_EXECED; /* into an untraced program */
		} else if (ev->flags & HT_EVF_SIGNAL) {
			p->flags |= HT_PROCF_SIGNALED;
			p->signal = ev->value;
		} else {
			p->flags |= HT_PROCF_EXITED;
			p->exit_code = ev->value;
		}
		p->end_ts = ev->ts;
	}
}

void ht__proctab_end(struct ht__proctab *t, uint64_t ts)
{
	for (uint32_t i = 0; i < t->n; i++) {
		struct ht_process *p = &t->v[i]->p;
		if (!(p->flags & (HT_PROCF_EXECED | HT_PROCF_EXITED | HT_PROCF_SIGNALED)) &&
		    p->end_ts < ts)
			p->end_ts = ts;
	}
}

void ht__proctab_release(struct ht__proctab *t)
{
	for (uint32_t i = 0; i < t->n; i++) {
		free(t->v[i]->strings);
		free(t->v[i]->argv);
		free(t->v[i]);
	}
	free(t->v);
	memset(t, 0, sizeof(*t));
}

/* Eight bytes of which none has bit 7 set: eight one-byte varints. */
static inline int eight_firsts(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return !(v & 0x8080808080808080ull);
}

#if defined(__x86_64__) && defined(__GNUC__)
/*
 * The split eight bytes at a time with BMI2's pext: a byte starts a varint
 * where the byte before it has bit 7 clear, so the eight bytes' first-byte
 * mask is their continuation bits moved up a byte (with the last one of
 * the eight before), and pext packs the bytes of each plane. Each eight
 * bytes' planes are stored whole: neither plane is ever ahead of the
 * input (its bytes are at most those read), so the stores stay within
 * lo[0..len) and hi[0..len). The bytes left (fewer than eight) are the
 * caller's. The loop below took 46 instructions an event of alloc_loop's
 * compression (docs/performance.md, "The writer, session 24").
 */
__attribute__((target("bmi2,popcnt"))) static size_t split_pext(const uint8_t *in, size_t len,
								uint8_t **lo, uint8_t **hi)
{
	const uint64_t top = 0x8080808080808080ull;
	uint8_t *l = *lo, *h = *hi;
	uint64_t carry = 0; /* 0x80: the byte before these eight continues */
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, in + i, 8);
		uint64_t cont = w & top;
		uint64_t starts = ~(cont << 8 | carry) & top;
		uint64_t mask = (starts >> 7) * 0xff;
		uint64_t a = _pext_u64(w, mask), b = _pext_u64(w, ~mask);
		unsigned n = (unsigned)__builtin_popcountll(starts);
		memcpy(l, &a, 8);
		memcpy(h, &b, 8);
		l += n;
		h += 8 - n;
		carry = cont >> 56;
	}
	*lo = l;
	*hi = h;
	return i;
}

/* Whether pext is fast here: BMI2 on Intel (Haswell and later) or AMD
   from Zen 3 (family 19h). Zen 1 and 2 run it in microcode, about 250
   cycles: there, and on any other CPU, the split goes a byte at a time. */
static int has_pext(void)
{
	static int known; /* 1 + the answer */
	if (!known) {
		__builtin_cpu_init();
		known = 1 + (__builtin_cpu_supports("bmi2") &&
			     (__builtin_cpu_is("intel") || __builtin_cpu_is("amdfam19h")));
	}
	return known - 1;
}
#endif

/* The split a byte at a time of in[i..len) into lo's bytes from l and
   hi's from h (first: in[i] starts a varint); the first plane's length. */
static size_t split_bytes(const uint8_t *in, size_t len, size_t i, unsigned first,
			  const uint8_t *lo, uint8_t *l, uint8_t *h)
{
	while (i < len) {
		if (first && i + 8 <= len && eight_firsts(in + i)) {
			memcpy(l, in + i, 8); /* the common run of one-byte varints */
			l += 8;
			i += 8;
			continue;
		}
		/* Without a branch: the byte goes to both, only one moves on. */
		uint8_t b = in[i++];
		*l = b;
		*h = b;
		l += first;
		h += !first;
		first = !(b & 0x80);
	}
	return (size_t)(l - lo);
}

size_t ht__planes_split_plain(const uint8_t *in, size_t len, uint8_t *lo, uint8_t *hi)
{
	return split_bytes(in, len, 0, 1, lo, lo, hi);
}

size_t ht__planes_split(const uint8_t *in, size_t len, uint8_t *lo, uint8_t *hi)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (len >= 8 && has_pext()) {
		uint8_t *l = lo, *h = hi;
		size_t i = split_pext(in, len, &l, &h);
		return split_bytes(in, len, i, !(in[i - 1] & 0x80), lo, l, h);
	}
#endif
	return split_bytes(in, len, 0, 1, lo, lo, hi);
}

/* Joins the planes lo[0..nlo) and hi[0..nhi) into out; 0, or -1 when they do
   not pair up (a continuation byte missing or left over). */
static int planes_join(const uint8_t *lo, size_t nlo, const uint8_t *hi, size_t nhi, uint8_t *out)
{
	const uint8_t *hend = hi + nhi;
	size_t i = 0;
	while (i < nlo) {
		if (i + 8 <= nlo && eight_firsts(lo + i)) {
			memcpy(out, lo + i, 8);
			out += 8;
			i += 8;
			continue;
		}
		uint8_t b = lo[i++];
		*out++ = b;
		while (b & 0x80) {
			if (hi == hend)
				return -1;
			*out++ = b = *hi++;
		}
	}
	return hi == hend ? 0 : -1;
}

/* Bytes of the 8 at p with bit 7 set. */
static inline unsigned eight_high(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return (unsigned)((((v >> 7) & 0x0101010101010101ull) * 0x0101010101010101ull) >> 56);
}

/* Bytes of p[0..n) with bit 7 set. With SSE2, 16 at a time: a byte's
   count in each of 16 lanes for up to 255 blocks, then summed
   (alloc_loop's planes, read in place at every chunk's open: 12.8 M
   instructions of its reader's worker, 1.3 %, with 8 at a time). */
/* Bits i to i + 9 of m all set for some i: ten continuation bytes in a
   row, a varint of more than 10 bytes. */
static inline int run_of_ten(unsigned m)
{
	unsigned a2 = m & m >> 1, a4 = a2 & a2 >> 2, a8 = a4 & a4 >> 4;
	return (a8 & a2 >> 8) != 0;
}

/* The bits set in t < 2^16, without a call (x86-64's baseline has no
   popcnt, and __builtin_popcount() is then a call of libgcc's). */
static inline unsigned popcount16(unsigned t)
{
	t -= t >> 1 & 0x5555u;
	t = (t & 0x3333u) + (t >> 2 & 0x3333u);
	t = (t + (t >> 4)) & 0x0f0fu;
	return (t + (t >> 8)) & 0x1fu;
}

/*
 * Where the n varints at p end, each of 10 bytes at most and all before
 * end (the rules of ht__get_varint() and varint_unchecked()), or NULL:
 * codec.h. 16 bytes at a time with SSE2: each byte's top bit says
 * whether the varint goes on.
 */
const uint8_t *ht__varints_skip(const uint8_t *p, const uint8_t *end, uint64_t n)
{
	unsigned run = 0; /* continuation bytes right before p */
	if (!n)
		return p;
#if defined(__x86_64__) && defined(__GNUC__)
	while (end - p >= 16) {
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)p));
		unsigned t = ~m & 0xffffu; /* the varints' last bytes */
		if (!t) {
			if ((run += 16) >= 10)
				return NULL;
			p += 16;
			continue;
		}
		if (run + (unsigned)__builtin_ctz(t) >= 10)
			return NULL;
		unsigned cnt = popcount16(t);
		if (cnt >= n) { /* the n-th last byte here ends them */
			for (uint64_t i = 1; i < n; i++)
				t &= t - 1;
			unsigned at = (unsigned)__builtin_ctz(t);
			return run_of_ten(m & ((2u << at) - 1)) ? NULL : p + at + 1;
		}
		if (run_of_ten(m))
			return NULL;
		run = (unsigned)__builtin_clz(t) - 16; /* the run at the block's end */
		n -= cnt;
		p += 16;
	}
#endif
	for (; p < end; p++) {
		if (*p < 0x80) {
			run = 0;
			if (!--n)
				return p + 1;
		} else if (++run >= 10) {
			return NULL;
		}
	}
	return NULL;
}

static size_t count_high(const uint8_t *p, size_t n)
{
	size_t k = 0, i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
	const __m128i zero = _mm_setzero_si128();
	while (n - i >= 16) {
		size_t blocks = (n - i) / 16 < 255 ? (n - i) / 16 : 255;
		__m128i acc = zero;
		for (size_t b = 0; b < blocks; b++, i += 16) {
			__m128i v = _mm_loadu_si128((const __m128i *)(p + i));
			acc = _mm_sub_epi8(acc, _mm_cmplt_epi8(v, zero)); /* -1 where bit 7 */
		}
		__m128i sum = _mm_sad_epu8(acc, zero);
		k += (size_t)_mm_cvtsi128_si32(sum) + (size_t)_mm_extract_epi16(sum, 4);
	}
#endif
	for (; i + 8 <= n; i += 8)
		k += eight_high(p + i);
	for (; i < n; i++)
		k += p[i] >> 7;
	return k;
}

/* 0 when planes_join() would join lo[0..nlo) and hi[0..nhi), -1 when it
   would fail: the second plane is whole varint tails (its last byte ends
   one), one for each first byte that says more follow. */
static int planes_pair(const uint8_t *lo, size_t nlo, const uint8_t *hi, size_t nhi)
{
	if (nhi && (hi[nhi - 1] & 0x80))
		return -1;
	return count_high(lo, nlo) == nhi - count_high(hi, nhi) ? 0 : -1;
}

int ht__streams_open(const uint8_t *p, const uint8_t *end, uint32_t version, struct ht__cur *cur,
		     uint8_t **buf, size_t *cap, const char **why)
{
	return ht__streams_open_direct(p, end, version, cur, buf, cap, 0, why);
}

int ht__streams_open_direct(const uint8_t *p, const uint8_t *end, uint32_t version,
			    struct ht__cur *cur, uint8_t **buf, size_t *cap, unsigned direct,
			    const char **why)
{
	int planes = version >= HT__FILE_VERSION_PLANES;
	unsigned known = version >= HT__FILE_VERSION_DEFSTREAM ? HT__NSTREAMS
			 : planes			       ? HT__NSTREAMS_V8
							       : HT__NSTREAMS_V4;
	struct ht__cur c = {p, end, 0};
	uint64_t n = ht__get_varint(&c);
	uint64_t len[HT__NSTREAMS] = {0}, lo[HT__NSTREAMS] = {0}, total = 0, joined = 0;
	size_t room = (size_t)(end - p);
	*why = "bad stream table";
	if (c.bad || n < known || n >= 64)
		return HT_ERR_CORRUPT;
	for (uint64_t i = 0; i < n && !c.bad; i++) {
		uint64_t v = ht__get_varint(&c), l = planes ? v >> 1 : v, nlo = l;
		if (planes && (v & 1)) {
			nlo = ht__get_varint(&c);
			if (nlo > l)
				return HT_ERR_CORRUPT;
		}
		if (l > room)
			return HT_ERR_CORRUPT;
		if (i < known) {
			len[i] = l;
			lo[i] = nlo;
			if (nlo != l && !(direct >> i & 1))
				joined += l;
		}
		total += l;
	}
	if (c.bad || total > (uint64_t)(end - c.p))
		return HT_ERR_CORRUPT;
	if (joined && *cap < joined) {
		uint8_t *b = realloc(*buf, joined);
		if (!b)
			return HT_ERR_NOMEM;
		*buf = b;
		*cap = joined;
	}
	const uint8_t *s = c.p;
	uint8_t *out = *buf;
	for (unsigned i = 0; i < HT__NSTREAMS; i++) {
		if (lo[i] == len[i]) {
			cur[i] = (struct ht__cur){s, s + len[i], 0, NULL, NULL};
		} else if (direct >> i & 1) {
			const uint8_t *h = s + lo[i], *hend = s + len[i];
			if (planes_pair(s, lo[i], h, len[i] - lo[i]) < 0) {
				*why = "bad stream planes";
				return HT_ERR_CORRUPT;
			}
			cur[i] = (struct ht__cur){s, h, 0, h, hend};
		} else {
			if (planes_join(s, lo[i], s + lo[i], len[i] - lo[i], out) < 0) {
				*why = "bad stream planes";
				return HT_ERR_CORRUPT;
			}
			cur[i] = (struct ht__cur){out, out + len[i], 0, NULL, NULL};
			out += len[i];
		}
		s += len[i];
	}
	return 0;
}
