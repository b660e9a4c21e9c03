/*
 * alloc_loop.c - the allocation-heavy benchmark workload: each thread makes
 * ITER malloc/free pairs of small pseudo-random sizes (8..520 bytes) through
 * a few call levels and paths, keeping up to 4096 blocks live, so a tracer
 * pays for stack capture, deduplication and event writing on every call.
 * Deterministic: the sizes and slots come from a per-thread LCG with a fixed
 * seed. Usage: alloc_loop [ITERATIONS [THREADS]] (default 2000000 1).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 4096

struct worker {
	pthread_t thread;
	uint64_t seed;
	long iterations;
	uint64_t checksum;
};

static inline uint32_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(*s >> 33);
}

/* Three levels and two paths: the stacks are few but not trivial. */
__attribute__((noinline)) static void *leaf_alloc(size_t n)
{
	return malloc(n);
}

__attribute__((noinline)) static void *path_a(size_t n)
{
	return leaf_alloc(n);
}

__attribute__((noinline)) static void *path_b(size_t n)
{
	return leaf_alloc(n + 8);
}

__attribute__((noinline)) static void *middle(uint32_t r, size_t n)
{
	return (r & 1) ? path_a(n) : path_b(n);
}

static void *run(void *arg)
{
	struct worker *w = arg;
	void **slots = calloc(SLOTS, sizeof(void *));
	uint64_t s = w->seed;
	if (!slots)
		abort();
	for (long i = 0; i < w->iterations; i++) {
		uint32_t r = lcg(&s);
		uint32_t slot = r % SLOTS;
		free(slots[slot]);
		char *p = middle(r >> 12, 8 + (r >> 16) % 512);
		if (!p)
			abort();
		p[0] = (char)i; /* touch it so it is really used */
		w->checksum += (uintptr_t)p[0];
		slots[slot] = p;
	}
	for (int i = 0; i < SLOTS; i++)
		free(slots[i]);
	free(slots);
	return NULL;
}

int main(int argc, char **argv)
{
	long iterations = argc > 1 ? atol(argv[1]) : 2000000;
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	if (iterations <= 0 || threads <= 0 || threads > 64) {
		fprintf(stderr, "usage: alloc_loop [ITERATIONS [THREADS]]\n");
		return 2;
	}
	struct worker w[64];
	for (int t = 0; t < threads; t++) {
		w[t].seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(t + 1);
		w[t].iterations = iterations;
		w[t].checksum = 0;
		if (pthread_create(&w[t].thread, NULL, run, &w[t]) != 0)
			return 1;
	}
	uint64_t sum = 0;
	for (int t = 0; t < threads; t++) {
		pthread_join(w[t].thread, NULL);
		sum += w[t].checksum;
	}
	/* The checksum keeps the loop observable; it is the same on every run. */
	return sum == 0xffffffffffffffffULL;
}
