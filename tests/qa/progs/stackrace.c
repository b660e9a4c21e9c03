/*
 * stackrace THREADS BITS ROUNDS: threads reach the same new call stacks at
 * the same moment, for the time order of a stack's definition against the
 * allocations that name it (tests/qa/qa.py, stack-race). Path k (of
 * 2^BITS) is BITS nested calls, each of step_a or step_b as k's bits say,
 * ending in a malloc and free of 24 bytes: 2^BITS distinct stacks. Every
 * thread takes the paths in the same order, all starting together each
 * round, so one thread's allocation names the stack another thread's
 * defined a moment before. Prints "mallocs M" and exits 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int bits, rounds, nt;
static pthread_barrier_t round_start;
static volatile long sink;

static __attribute__((noinline)) void step_a(unsigned k, int depth);
static __attribute__((noinline)) void step_b(unsigned k, int depth);

static __attribute__((noinline)) void next(unsigned k, int depth)
{
	if (depth == bits) {
		char *p = malloc(24);
		if (!p)
			abort();
		p[0] = (char)k;
		sink += p[0];
		free(p);
	} else if (k >> depth & 1) {
		step_b(k, depth + 1);
	} else {
		step_a(k, depth + 1);
	}
}

static __attribute__((noinline)) void step_a(unsigned k, int depth)
{
	next(k, depth);
	sink++;
}

static __attribute__((noinline)) void step_b(unsigned k, int depth)
{
	next(k, depth);
	sink--;
}

static void *run(void *arg)
{
	(void)arg;
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&round_start);
		for (unsigned k = 0; k < 1u << bits; k++)
			next(k, 0);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	nt = atoi(argv[1]);
	bits = atoi(argv[2]);
	rounds = atoi(argv[3]);
	pthread_t *th = calloc((size_t)nt, sizeof(*th));
	if (!th)
		return 1;
	pthread_barrier_init(&round_start, NULL, (unsigned)nt);
	for (int i = 0; i < nt; i++)
		pthread_create(&th[i], NULL, run, NULL);
	for (int i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
	printf("mallocs %ld\n", (long)nt * rounds * (1l << bits));
	free(th);
	return 0;
}
