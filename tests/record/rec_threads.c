/*
 * rec_threads.c - argv[1] threads (default 4), each making argv[2] (default
 * 50000) blocks of 100 + thread index bytes and freeing each at once, all at
 * the same time: many rings filling together, for the merge and
 * lossless-wait tests.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

static void *volatile keep;
static long per_thread = 50000;
static pthread_barrier_t start;

static void *worker(void *arg)
{
	size_t size = 100 + (size_t)(uintptr_t)arg;
	pthread_barrier_wait(&start);
	for (long i = 0; i < per_thread; i++) {
		void *p = malloc(size);
		keep = p;
		free(p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	if (argc > 2)
		per_thread = atol(argv[2]);
	pthread_t t[64];
	if (n < 1 || n > 64)
		return 2;
	pthread_barrier_init(&start, NULL, (unsigned)n);
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}
