/*
 * flood THREADS COUNT [PAUSE_US]: THREADS threads (started together) each
 * malloc(12001) and free COUNT times, sleeping PAUSE_US every 1000 pairs.
 * Prints the total number of pairs; exits 3 when a hook changed errno (its
 * waits for room in a full ring make system calls).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static long count, pause_us;
static _Atomic long errno_changed;

static void *run(void *arg)
{
	for (long i = 0; i < count; i++) {
		errno = 4242;
		void *p = malloc(12001);
		if (errno != 4242)
			errno_changed++;
		errno = 4343;
		free(p);
		if (errno != 4343)
			errno_changed++;
		if (pause_us && i % 1000 == 999)
			usleep((useconds_t)pause_us);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int n = atoi(argv[1]);
	count = atol(argv[2]);
	pause_us = argc > 3 ? atol(argv[3]) : 0;
	pthread_t t[64];
	for (int i = 0; i < n && i < 64; i++)
		pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < n && i < 64; i++)
		pthread_join(t[i], NULL);
	printf("%ld\n", (long)n * count);
	if (errno_changed) {
		fprintf(stderr, "flood: errno changed by %ld calls\n", (long)errno_changed);
		return 3;
	}
	return 0;
}
