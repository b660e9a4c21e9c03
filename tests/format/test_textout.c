/*
 * test_textout.c - textout.h's writers give byte for byte what the printf
 * conversions they replace give: every KiB value up to 256 KiB (each rounding
 * case, ties to even included), the powers of two and their neighbours up to
 * 2^64, pseudo-random values, negative numbers, hexadecimal, and the column
 * widths, left-aligned ones too.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/textout.h"
#include "testutil.h"

static char got[64], want[64];
static int mismatches;

/* What writer wrote into a memory stream, in got. */
#define WRITE(call)                                                                                \
	do {                                                                                       \
		FILE *m = fmemopen(got, sizeof(got), "w");                                         \
		call;                                                                              \
		fclose(m);                                                                         \
	} while (0)

static void same(const char *what, uint64_t v)
{
	if (strcmp(got, want)) {
		if (mismatches++ < 10)
			fprintf(stderr, "%s(%" PRIu64 "): got '%s', want '%s'\n", what, v, got,
				want);
	}
}

static void check_u64(uint64_t v)
{
	static const int widths[] = {0, 1, 10, 12, 25, 40, -1, -14, -25, -40};
	for (size_t w = 0; w < sizeof(widths) / sizeof(*widths); w++) {
		memset(got, 0, sizeof(got));
		WRITE(ht__out_u64(m, v, widths[w]));
		snprintf(want, sizeof(want), "%*" PRIu64, widths[w], v);
		same("u64", v);
		memset(got, 0, sizeof(got));
		WRITE(ht__out_i64(m, (int64_t)v, widths[w]));
		snprintf(want, sizeof(want), "%*" PRId64, widths[w], (int64_t)v);
		same("i64", v);
		memset(got, 0, sizeof(got));
		WRITE(ht__out_kib(m, v, widths[w]));
		snprintf(want, sizeof(want), "%*.1f", widths[w], (double)v / 1024.0);
		same("kib", v);
		memset(got, 0, sizeof(got));
		WRITE(ht__out_x64(m, v, widths[w]));
		snprintf(want, sizeof(want), "%*" PRIx64, widths[w], v);
		same("x64", v);
	}
}

/* ht__out_pad() against "%*s" for every width from -12 to 12. */
static void check_pad(const char *s)
{
	for (int w = -12; w <= 12; w++) {
		memset(got, 0, sizeof(got));
		WRITE(ht__out_pad(m, s, w));
		snprintf(want, sizeof(want), "%*s", w, s);
		same("pad", (uint64_t)(int64_t)w);
	}
}

int main(void)
{
	for (uint64_t v = 0; v <= 1u << 18; v++) {
		memset(got, 0, sizeof(got));
		WRITE(ht__out_kib(m, v, 14));
		snprintf(want, sizeof(want), "%14.1f", (double)v / 1024.0);
		same("kib", v);
	}
	for (int b = 0; b < 64; b++)
		for (int d = -3; d <= 3; d++)
			check_u64((1ull << b) + (uint64_t)(int64_t)d);
	check_u64(UINT64_MAX);
	check_u64((uint64_t)INT64_MIN);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < 20000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		check_u64(x >> (i % 64));
	}
	check_pad("");
	check_pad("Size");
	check_pad("1234567890");
	/* A tie rounds to the even tenth: 0.25 KiB is 0.2, 0.75 KiB is 0.8. */
	WRITE(ht__out_kib(m, 256, 0));
	CHECK_STR(got, "0.2");
	WRITE(ht__out_kib(m, 768, 0));
	CHECK_STR(got, "0.8");
	WRITE(ht__out_str(m, "a"); ht__out_chr(m, 'b'); ht__out_mem(m, "cde", 2));
	CHECK_STR(got, "abcd");
	CHECK_EQ(mismatches, 0);
	return test_result("test_textout");
}
