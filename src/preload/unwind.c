/*
 * The recorder's own table-driven unwinder for x86-64: for a return address,
 * the rule that gives its frame's CFA, return address and saved rbp, read
 * from the module's .eh_frame (found through _dl_find_object) and kept in a
 * lock-free table, so that a frame costs a lookup and two loads. It takes
 * only what it can follow exactly as libunwind does (CFA from rsp or rbp,
 * return address at CFA-8, rbp unchanged or saved at CFA+n); anything else
 * (signal frames, DWARF expressions, code without unwind tables) answers
 * "unknown" and the caller unwinds with libunwind instead.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#if defined(__x86_64__)

/* DWARF register numbers of x86-64. */
#define R_RBP 6
#define R_RSP 7
#define R_RA 16

/* One rule set while running a CFA program. */
struct cfi_state {
	int cfa_reg;		 /* R_RSP or R_RBP, else unsupported */
	int64_t cfa_off;	 /* CFA = reg + cfa_off */
	int rbp_how, ra_how;	 /* HOW_* */
	int64_t rbp_off, ra_off; /* saved at CFA + off */
};

enum { HOW_SAME, HOW_OFFSET, HOW_UNDEF, HOW_BAD };

struct cie_info {
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc;
	int has_z, signal;
	const uint8_t *insns, *insns_end;
};

static uint64_t uleb(const uint8_t **p, const uint8_t *end, int *bad)
{
	uint64_t v = 0;
	unsigned shift = 0;
	while (*p < end) {
		uint8_t b = *(*p)++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return v;
	}
	*bad = 1;
	return 0;
}

static int64_t sleb(const uint8_t **p, const uint8_t *end, int *bad)
{
	int64_t v = 0;
	unsigned shift = 0;
	uint8_t b = 0;
	while (*p < end) {
		b = *(*p)++;
		if (shift < 64)
			v |= (int64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				v |= -((int64_t)1 << shift);
			return v;
		}
	}
	*bad = 1;
	return 0;
}

/* An encoded pointer (DW_EH_PE_*): absolute or pc-relative, 4 or 8 bytes. */
static int read_enc(const uint8_t **p, const uint8_t *end, uint8_t enc, uintptr_t *out)
{
	const uint8_t *at = *p;
	int64_t v;
	switch (enc & 0x0f) {
	case 0x00: /* absptr */
	case 0x04: /* udata8 */
	case 0x0c: /* sdata8 */
		if (end - at < 8)
			return 0;
		memcpy(&v, at, 8);
		*p += 8;
		break;
	case 0x03: { /* udata4 */
		uint32_t u;
		if (end - at < 4)
			return 0;
		memcpy(&u, at, 4);
		v = u;
		*p += 4;
		break;
	}
	case 0x0b: { /* sdata4 */
		int32_t s;
		if (end - at < 4)
			return 0;
		memcpy(&s, at, 4);
		v = s;
		*p += 4;
		break;
	}
	default:
		return 0;
	}
	switch (enc & 0x70) {
	case 0x00:
		break;
	case 0x10: /* pcrel */
		v += (int64_t)(uintptr_t)at;
		break;
	default:
		return 0;
	}
	*out = (uintptr_t)v;
	return 1;
}

static int parse_cie(const uint8_t *cie, struct cie_info *ci)
{
	uint32_t len;
	memcpy(&len, cie, 4);
	if (len == 0 || len == 0xffffffffu)
		return 0;
	const uint8_t *p = cie + 8, *end = cie + 4 + len;
	int bad = 0;
	uint8_t version = *p++;
	if (version != 1 && version != 3)
		return 0;
	const char *aug = (const char *)p;
	size_t alen = strnlen(aug, (size_t)(end - p));
	p += alen + 1;
	ci->code_align = uleb(&p, end, &bad);
	ci->data_align = sleb(&p, end, &bad);
	uint64_t ra = version == 1 ? *p++ : uleb(&p, end, &bad);
	if (ra != R_RA)
		return 0;
	ci->fde_enc = 0;
	ci->has_z = 0;
	ci->signal = 0;
	const uint8_t *aug_end = NULL;
	for (size_t i = 0; i < alen; i++) {
		switch (aug[i]) {
		case 'z': {
			if (i != 0)
				return 0;
			uint64_t n = uleb(&p, end, &bad);
			ci->has_z = 1;
			aug_end = p + n;
			break;
		}
		case 'R':
			ci->fde_enc = *p++;
			break;
		case 'L':
			p++;
			break;
		case 'P': {
			uintptr_t dummy;
			uint8_t enc = *p++;
			if (!read_enc(&p, end, enc & 0x7f, &dummy))
				return 0;
			break;
		}
		case 'S':
			ci->signal = 1;
			break;
		default:
			return 0; /* "eh", 'B' and the like: not ours to guess */
		}
	}
	if (aug_end)
		p = aug_end;
	if (bad || p > end)
		return 0;
	ci->insns = p;
	ci->insns_end = end;
	return 1;
}

static int set_rule(struct cfi_state *s, uint64_t reg, int how, int64_t off)
{
	if (reg == R_RBP) {
		s->rbp_how = how;
		s->rbp_off = off;
	} else if (reg == R_RA) {
		s->ra_how = how;
		s->ra_off = off;
	} else if (reg == R_RSP && how != HOW_SAME) {
		return 0; /* rsp is always the CFA here */
	}
	return 1;
}

#define CFI_STACK 8

/*
 * Runs a CFA program from loc while the row's address is <= pc. init is
 * the CIE's rules (for DW_CFA_restore), NULL while running the CIE's own.
 * Returns 0 on anything unsupported.
 */
static int run_cfi(const uint8_t *p, const uint8_t *end, const struct cie_info *ci, uintptr_t loc,
		   uintptr_t pc, struct cfi_state *s, const struct cfi_state *init)
{
	struct cfi_state stack[CFI_STACK];
	int depth = 0, bad = 0;
	while (p < end && !bad) {
		uint8_t op = *p++;
		uint64_t reg, a;
		int64_t off;
		switch (op & 0xc0) {
		case 0x40:
			loc += (op & 0x3f) * ci->code_align;
			if (loc > pc)
				return 1;
			continue;
		case 0x80:
			a = uleb(&p, end, &bad);
			if (!set_rule(s, op & 0x3f, HOW_OFFSET, (int64_t)a * ci->data_align))
				return 0;
			continue;
		case 0xc0:
			if (!init)
				return 0;
			reg = op & 0x3f;
			if (reg == R_RBP) {
				s->rbp_how = init->rbp_how;
				s->rbp_off = init->rbp_off;
			} else if (reg == R_RA) {
				s->ra_how = init->ra_how;
				s->ra_off = init->ra_off;
			}
			continue;
		}
		switch (op) {
		case 0x00: /* nop */
			break;
		case 0x02:
		case 0x03:
		case 0x04: { /* advance_loc1/2/4 */
			int n = op == 0x02 ? 1 : op == 0x03 ? 2 : 4;
			uint32_t d = 0;
			if (end - p < n)
				return 0;
			memcpy(&d, p, (size_t)n);
			p += n;
			loc += d * ci->code_align;
			if (loc > pc)
				return 1;
			break;
		}
		case 0x05: /* offset_extended */
			reg = uleb(&p, end, &bad);
			a = uleb(&p, end, &bad);
			if (!set_rule(s, reg, HOW_OFFSET, (int64_t)a * ci->data_align))
				return 0;
			break;
		case 0x06: /* restore_extended */
			reg = uleb(&p, end, &bad);
			if (!init || reg == R_RBP || reg == R_RA)
				return 0;
			break;
		case 0x07: /* undefined */
			reg = uleb(&p, end, &bad);
			if (!set_rule(s, reg, HOW_UNDEF, 0))
				return 0;
			break;
		case 0x08: /* same_value */
			reg = uleb(&p, end, &bad);
			if (!set_rule(s, reg, HOW_SAME, 0))
				return 0;
			break;
		case 0x09: /* register */
			reg = uleb(&p, end, &bad);
			uleb(&p, end, &bad);
			if (!set_rule(s, reg, HOW_BAD, 0))
				return 0;
			break;
		case 0x0a: /* remember_state */
			if (depth == CFI_STACK)
				return 0;
			stack[depth++] = *s;
			break;
		case 0x0b: /* restore_state: the whole row, CFA included (as libunwind) */
			if (depth == 0)
				return 0;
			*s = stack[--depth];
			break;
		case 0x0c: /* def_cfa */
			s->cfa_reg = (int)uleb(&p, end, &bad);
			s->cfa_off = (int64_t)uleb(&p, end, &bad);
			break;
		case 0x0d: /* def_cfa_register */
			s->cfa_reg = (int)uleb(&p, end, &bad);
			break;
		case 0x0e: /* def_cfa_offset */
			s->cfa_off = (int64_t)uleb(&p, end, &bad);
			break;
		case 0x10: /* expression */
		case 0x16: /* val_expression */
			reg = uleb(&p, end, &bad);
			a = uleb(&p, end, &bad);
			if (reg == R_RBP || reg == R_RA || reg == R_RSP || a > (uint64_t)(end - p))
				return 0;
			p += a;
			break;
		case 0x11: /* offset_extended_sf */
			reg = uleb(&p, end, &bad);
			off = sleb(&p, end, &bad);
			if (!set_rule(s, reg, HOW_OFFSET, off * ci->data_align))
				return 0;
			break;
		case 0x12: /* def_cfa_sf */
			s->cfa_reg = (int)uleb(&p, end, &bad);
			s->cfa_off = sleb(&p, end, &bad) * ci->data_align;
			break;
		case 0x13: /* def_cfa_offset_sf */
			s->cfa_off = sleb(&p, end, &bad) * ci->data_align;
			break;
		case 0x14: /* val_offset */
		case 0x15: /* val_offset_sf */
			reg = uleb(&p, end, &bad);
			if (op == 0x14)
				uleb(&p, end, &bad);
			else
				sleb(&p, end, &bad);
			if (!set_rule(s, reg, HOW_BAD, 0))
				return 0;
			break;
		case 0x2e: /* GNU_args_size: no bearing on the CFA */
			uleb(&p, end, &bad);
			break;
		case 0x2f: /* GNU_negative_offset_extended */
			reg = uleb(&p, end, &bad);
			a = uleb(&p, end, &bad);
			if (!set_rule(s, reg, HOW_OFFSET, -(int64_t)a * ci->data_align))
				return 0;
			break;
		default: /* set_loc, def_cfa_expression, vendor ops */
			return 0;
		}
	}
	return !bad;
}

/* The FDE covering pc from a .eh_frame_hdr search table, or NULL. */
static const uint8_t *find_fde(const uint8_t *hdr, uintptr_t pc)
{
	if (hdr[0] != 1 || hdr[2] != 0x03 || hdr[3] != 0x3b)
		return NULL; /* udata4 count, datarel|sdata4 table: what ld writes */
	const uint8_t *p = hdr + 4;
	uintptr_t eh;
	if (!read_enc(&p, p + 8, hdr[1], &eh))
		return NULL;
	uint32_t count;
	memcpy(&count, p, 4);
	const int32_t *tab = (const int32_t *)(p + 4);
	intptr_t rel = (intptr_t)(pc - (uintptr_t)hdr);
	if (count == 0 || rel < tab[0])
		return NULL;
	uint32_t lo = 0, hi = count;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (tab[2 * mid] <= rel)
			lo = mid;
		else
			hi = mid;
	}
	return hdr + tab[2 * lo + 1];
}

/* Computes the rule of a return address the slow way (cold: once per pc). */
static uint64_t describe(uintptr_t ra)
{
	uintptr_t pc = ra - 1; /* the call, as libunwind looks it up */
	struct dl_find_object fo;
	if (_dl_find_object((void *)pc, &fo) != 0 || !fo.dlfo_eh_frame)
		return HT_CFI_UNKNOWN;
	const uint8_t *fde = find_fde(fo.dlfo_eh_frame, pc);
	if (!fde)
		return HT_CFI_UNKNOWN;
	uint32_t len, cie_off;
	memcpy(&len, fde, 4);
	if (len == 0 || len == 0xffffffffu)
		return HT_CFI_UNKNOWN;
	memcpy(&cie_off, fde + 4, 4);
	struct cie_info ci;
	if (cie_off == 0 || !parse_cie(fde + 4 - cie_off, &ci))
		return HT_CFI_UNKNOWN;
	if (ci.signal)
		return HT_CFI_SIGNAL;
	const uint8_t *p = fde + 8, *end = fde + 4 + len;
	uintptr_t start, range;
	if (!read_enc(&p, end, ci.fde_enc, &start) || !read_enc(&p, end, ci.fde_enc & 0x0f, &range))
		return HT_CFI_UNKNOWN;
	if (pc < start || pc >= start + range)
		return HT_CFI_UNKNOWN;
	if (ci.has_z) {
		int bad = 0;
		uint64_t n = uleb(&p, end, &bad);
		if (bad || n > (uint64_t)(end - p))
			return HT_CFI_UNKNOWN;
		p += n;
	}
	struct cfi_state s = {-1, 0, HOW_SAME, HOW_SAME, 0, 0};
	if (!run_cfi(ci.insns, ci.insns_end, &ci, 0, UINTPTR_MAX, &s, NULL))
		return HT_CFI_UNKNOWN;
	struct cfi_state init = s;
	if (!run_cfi(p, end, &ci, start, pc, &s, &init))
		return HT_CFI_UNKNOWN;
	if ((s.cfa_reg != R_RSP && s.cfa_reg != R_RBP) || s.rbp_how == HOW_BAD ||
	    s.rbp_how == HOW_UNDEF)
		return HT_CFI_UNKNOWN;
	if (s.ra_how == HOW_UNDEF)
		return HT_CFI_LAST;
	if (s.ra_how != HOW_OFFSET || s.ra_off != -8)
		return HT_CFI_UNKNOWN;
	if (s.cfa_off <= 0 || s.cfa_off > (1 << 24))
		return HT_CFI_UNKNOWN;
	if (s.rbp_how == HOW_OFFSET && (s.rbp_off > -8 || s.rbp_off < -(1 << 24)))
		return HT_CFI_UNKNOWN;
	uint64_t d = HT_CFI_OK | (uint64_t)(uint32_t)s.cfa_off;
	if (s.cfa_reg == R_RBP)
		d |= HT_CFI_CFA_RBP;
	if (s.rbp_how == HOW_OFFSET)
		d |= HT_CFI_RBP_SAVED | (uint64_t)(uint32_t)(-s.rbp_off) << 32;
	return d;
}

/* ---- the table: return address -> rule, lock-free, per instance ---- */

#define CFI_SLOTS (1u << 17)
#define CFI_PROBES 32

struct cfi_slot {
	_Atomic uintptr_t ra;
	_Atomic uint64_t rule; /* 0 while being written */
};

static _Atomic(struct cfi_slot *) cfi_table;

/* A fresh table: modules went away, so addresses may mean other code. */
void ht__cfi_reset(void)
{
	struct cfi_slot *tb = ht__raw_mmap(CFI_SLOTS * sizeof *tb);
	if (tb)
		atomic_store(&cfi_table, tb);
}

uint64_t ht__cfi_rule(uintptr_t ra)
{
	struct cfi_slot *tb = atomic_load_explicit(&cfi_table, memory_order_acquire);
	if (!tb || !ra)
		return HT_CFI_UNKNOWN;
	uint64_t h = (ra * 0x9e3779b97f4a7c15ull) >> 47;
	for (unsigned k = 0; k < CFI_PROBES; k++) {
		struct cfi_slot *s = &tb[(h + k) & (CFI_SLOTS - 1)];
		uintptr_t cur = atomic_load_explicit(&s->ra, memory_order_acquire);
		if (cur == ra) {
			uint64_t r = atomic_load_explicit(&s->rule, memory_order_acquire);
			return r ? r : describe(ra);
		}
		if (cur != 0)
			continue;
		if (!atomic_compare_exchange_strong(&s->ra, &cur, ra)) {
			if (cur == ra)
				return describe(ra);
			continue;
		}
		uint64_t r = describe(ra);
		atomic_store_explicit(&s->rule, r, memory_order_release);
		return r;
	}
	return describe(ra);
}

#else

void ht__cfi_reset(void) {}

uint64_t ht__cfi_rule(uintptr_t ra)
{
	(void)ra;
	return HT_CFI_UNKNOWN;
}

#endif
