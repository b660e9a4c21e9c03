/*
 * lockthreads N: N threads each make their first allocation (6666 bytes)
 * while holding one global mutex, then wait on a barrier until all have,
 * like Python threads under the GIL. More threads than the session has
 * buffers must not make them wait for each other's buffer, one by one.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static int made;

static void *run(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	void *p = malloc(6666);
	made += p != NULL;
	free(p);
	pthread_mutex_unlock(&lock);
	pthread_barrier_wait(&bar);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 40;
	pthread_t *t = malloc(sizeof *t * (size_t)n);
	pthread_barrier_init(&bar, NULL, (unsigned)n);
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("made %d\n", made);
	return 0;
}
