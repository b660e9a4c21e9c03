/*
 * mtfork THREADS FORKS: THREADS threads allocate and free without pause
 * while the main thread forks FORKS times. Child f makes 100 malloc/free
 * pairs of 7777 bytes and _exits with f % 7; the parent prints the sum of
 * the statuses. A fork taken while other threads are inside the recorder
 * must give a child that records and exits normally.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;

static void *spin(void *arg)
{
	(void)arg;
	void *keep[64] = {0};
	unsigned i = 0;
	while (!atomic_load(&stop)) {
		free(keep[i % 64]);
		keep[i % 64] = malloc(16 + i % 5000);
		i++;
	}
	for (int k = 0; k < 64; k++)
		free(keep[k]);
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = argc > 1 ? atoi(argv[1]) : 4, nforks = argc > 2 ? atoi(argv[2]) : 20;
	pthread_t th[64];
	if (nthreads > 64)
		nthreads = 64;
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, spin, NULL);
	int sum = 0;
	for (int f = 0; f < nforks; f++) {
		pid_t p = fork();
		if (p == 0) {
			for (int k = 0; k < 100; k++)
				free(malloc(7777));
			_exit(f % 7);
		}
		int st = 0;
		waitpid(p, &st, 0);
		sum += WIFEXITED(st) ? WEXITSTATUS(st) : 1000;
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	printf("sum=%d\n", sum);
	return 0;
}
