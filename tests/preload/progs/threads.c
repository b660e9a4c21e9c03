/*
 * Four threads allocate and free concurrently, each with its own size and a
 * name, so the recorder's per-thread rings must give exact totals. The main
 * thread renames worker 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N 20000

static pthread_barrier_t go;

static void *worker(void *arg)
{
	long i = (long)arg;
	char name[16];
	snprintf(name, sizeof name, "worker%ld", i);
	pthread_setname_np(pthread_self(), name);
	pthread_barrier_wait(&go);
	for (int k = 0; k < N; k++) {
		void *p = malloc(5000 + i);
		free(p);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[4];
	pthread_barrier_init(&go, NULL, 5);
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	/* Every worker has named itself (and so has a ring): rename one. */
	pthread_barrier_wait(&go);
	pthread_setname_np(t[0], "renamed0");
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}
