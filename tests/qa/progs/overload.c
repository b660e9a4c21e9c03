/*
 * overload THREADS COUNT: THREADS threads, started together, each make COUNT
 * malloc(16 + (i & 255)) / free pairs. Prints the number of pairs. More
 * busy writers than cores: the collector must keep up without any of them
 * taking it for dead. Every thread makes its first pair before any goes on,
 * so all THREADS hold a buffer at once (or wait for one) however fast the
 * machine: with fewer buffers than threads, some must find none.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long count;
static pthread_barrier_t start_line, all_in;

static void *run(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&start_line);
	for (long i = 0; i < count; i++) {
		if (i == 1)
			pthread_barrier_wait(&all_in);
		void *p = malloc(16 + (size_t)(i & 255));
		if (!p)
			abort();
		free(p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int n = atoi(argv[1]);
	count = atol(argv[2]);
	pthread_t *t = calloc((size_t)n, sizeof *t);
	if (!t || pthread_barrier_init(&start_line, NULL, (unsigned)n) ||
	    pthread_barrier_init(&all_in, NULL, (unsigned)n))
		return 3;
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, run, NULL))
			return 4;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("%ld\n", (long)n * count);
	return 0;
}
