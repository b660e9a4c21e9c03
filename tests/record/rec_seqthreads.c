/*
 * rec_seqthreads.c - argv[1] threads (default 200), one after the other, each
 * making and freeing one block of 777 bytes: more threads over time than
 * rings, so rings must come back when threads end.
 */
#include <pthread.h>
#include <stdlib.h>

static void *volatile keep;

static void *worker(void *arg)
{
	keep = malloc(777);
	free(keep);
	return arg;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200;
	for (int i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, worker, NULL))
			return 1;
		pthread_join(t, NULL);
	}
	return 0;
}
