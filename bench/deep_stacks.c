/*
 * deep_stacks.c - benchmark workload: ITER malloc/free pairs, each made at
 * the bottom of a call chain 20 to 40 frames deep through four mutually
 * recursive functions, the depth (21 values) and the path (64 routes) drawn
 * from a fixed-seed LCG, keeping up to 4096 blocks live: 1344 distinct
 * stacks, consecutive ones sharing a few outer frames and differing inside,
 * as in real programs with deep call graphs. The sizes are 16 values from 8
 * to 488 bytes: with 512 (8 to 519), about 300 000 distinct (size, stack)
 * pairs made heaptrack 1.4's interpreter allocate until std::bad_alloc
 * (docs/performance.md, "The workloads"), so the bench had no heaptrack
 * column for this row.
 * Usage: deep_stacks [ITERATIONS] (default 1000000; the bench runs 300000).
 */
#include <stdint.h>
#include <stdlib.h>

#define SLOTS 4096

static uint64_t seed = 0x9e3779b97f4a7c15ULL;
static void *slots[SLOTS];
static uint64_t checksum;

static uint32_t lcg(void)
{
	seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(seed >> 33);
}

static void leaf(uint32_t r)
{
	uint32_t slot = r % SLOTS;
	free(slots[slot]);
	char *p = malloc(8 + 32 * ((r >> 16) % 16));
	if (!p)
		abort();
	p[0] = (char)r;
	checksum += (uint8_t)p[0];
	slots[slot] = p;
}

static int step_a(int depth, uint32_t r);
static int step_b(int depth, uint32_t r);
static int step_c(int depth, uint32_t r);
static int step_d(int depth, uint32_t r);

/* Each level picks the next function from two bits of the route; the result
   is used after the call, so no level becomes a tail call. */
#define STEP(name)                                                                                 \
	__attribute__((noinline)) static int name(int depth, uint32_t r)                           \
	{                                                                                          \
		if (depth == 0) {                                                                  \
			leaf(r);                                                                   \
			return 1;                                                                  \
		}                                                                                  \
		int (*next[4])(int, uint32_t) = {step_a, step_b, step_c, step_d};                  \
		return next[((r & 63) >> (depth % 5)) & 3](depth - 1, r) + 1;                      \
	}
STEP(step_a)
STEP(step_b)
STEP(step_c)
STEP(step_d)

int main(int argc, char **argv)
{
	long iterations = argc > 1 ? atol(argv[1]) : 1000000;
	long frames = 0;
	for (long i = 0; i < iterations; i++) {
		uint32_t r = lcg();
		frames += step_a(19 + (int)((r >> 8) % 21), r);
	}
	for (int i = 0; i < SLOTS; i++)
		free(slots[i]);
	return frames == 0 || checksum == 1;
}
