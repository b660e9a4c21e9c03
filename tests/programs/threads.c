/*
 * threads.c - four named threads, each making PER_THREAD allocations of its own
 * size (100 + 10 * index bytes) and freeing them, for tests/cli/: per-thread
 * counts and thread start/name events.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "prog.h"

#define THREADS 4
#define PER_THREAD 250

/* Every thread starts together so that the four rings are in use at once. */
static pthread_barrier_t start_line;

NOINLINE static void *thread_alloc(size_t n)
{
	return malloc(n); /* @thread_alloc */
}

static void *worker(void *arg)
{
	long index = (long)arg;
	char name[16];
	snprintf(name, sizeof(name), "worker-%ld", index);
	pthread_setname_np(pthread_self(), name);
	pthread_barrier_wait(&start_line);
	void *blocks[PER_THREAD];
	for (int i = 0; i < PER_THREAD; i++) {
		blocks[i] = thread_alloc(100 + 10 * (size_t)index);
		PROG_CHECK(blocks[i]);
	}
	for (int i = 0; i < PER_THREAD; i++)
		free(blocks[i]);
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	PROG_CHECK(pthread_barrier_init(&start_line, NULL, THREADS) == 0);
	for (long i = 0; i < THREADS; i++)
		PROG_CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
	for (int i = 0; i < THREADS; i++)
		PROG_CHECK(pthread_join(t[i], NULL) == 0);
	pthread_barrier_destroy(&start_line);
	return 0;
}
