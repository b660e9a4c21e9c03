/*
 * sampled.c - the workload of the sampling tests (tests/cli/e2e.py, case
 * sampling): known bytes from known stacks, so the estimates of a sampled
 * trace can be checked against the truth. Sizes come from a fixed
 * generator: every run allocates the same.
 *   many_small: 64 MiB live, in blocks of 1..4 KiB (prints their count)
 *   one_big:    one block of 1 MiB, live
 *   churn:      64 MiB in blocks of 1..4 KiB, every one freed (a third
 *               through realloc to another small size first)
 * It prints the true numbers the tests compare the estimates with.
 */
#include <stdint.h>
#include <string.h>

#include "prog.h"

static uint64_t state = 12345;

static size_t next_size(void)
{
	state = state * 6364136223846793005ull + 1442695040888963407ull;
	return 1024 + (size_t)((state >> 33) % 3073); /* 1 KiB .. 4 KiB */
}

#define TOTAL (64ull << 20)

static void **kept;
static size_t nkept;

static NOINLINE void many_small(void)
{
	kept = malloc(sizeof(void *) * (TOTAL / 1024 + 1));
	PROG_CHECK(kept);
	for (uint64_t sum = 0; sum < TOTAL;) {
		size_t n = next_size();
		if (sum + n > TOTAL)
			n = TOTAL - sum;
		void *p = malloc(n);
		PROG_CHECK(p);
		memset(p, 1, n);
		kept[nkept++] = p;
		sum += n;
	}
}

static NOINLINE void *one_big(void)
{
	void *p = malloc(1u << 20);
	PROG_CHECK(p);
	memset(p, 2, 1u << 20);
	return p;
}

static uint64_t churn_bytes, churn_blocks; /* allocated by churn, reallocs included */

static NOINLINE void churn(void)
{
	for (uint64_t sum = 0, i = 0; sum < TOTAL; i++) {
		size_t n = next_size();
		char *p = malloc(n);
		PROG_CHECK(p);
		p[0] = 1;
		churn_bytes += n;
		churn_blocks++;
		if (i % 3 == 0) {
			n = next_size();
			p = realloc(p, n);
			PROG_CHECK(p);
			churn_bytes += n;
			churn_blocks++;
		}
		sum += n;
		free(p);
	}
}

int main(void)
{
	many_small();
	prog_sink(one_big());
	churn();
	/* many_small also holds its array of pointers (one block). */
	printf("held bytes: %llu\nheld blocks: %zu\nchurn bytes: %llu\nchurn blocks: %llu\n",
	       (unsigned long long)(TOTAL + sizeof(void *) * (TOTAL / 1024 + 1)), nkept + 1,
	       (unsigned long long)churn_bytes, (unsigned long long)churn_blocks);
	return 0;
}
