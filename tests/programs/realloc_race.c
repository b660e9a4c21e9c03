/*
 * realloc_race.c - threads that malloc, realloc and free blocks of the same
 * sizes at once, for the realloc ordering test (tests/cli/e2e.py,
 * realloc-race). Run with one arena and no tcache (GLIBC_TUNABLES), a block
 * one thread's realloc frees is the next block another thread's malloc gets,
 * and a block one thread frees is the next one another thread's realloc
 * moves to: the two ways a realloc can be ordered wrongly against them.
 * Usage: realloc_race THREADS ITERATIONS LOG. Each thread does ITERATIONS
 * times p = malloc(1000); q = realloc(p, 300000); free(q), and LOG gets,
 * per thread, one line "tid malloc P 1000", "tid realloc P Q 300000" or
 * "tid free Q" per call, in the thread's order.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

struct op {
	void *a, *b;
};

struct worker {
	pthread_t th;
	pid_t tid;
	int n;
	struct op *ops; /* n of each: malloc a, realloc a -> b (free b) */
};

/* Above the mmap threshold (fixed by the test's GLIBC_TUNABLES): the block
   always moves, and the mapping one thread's free unmaps is where another
   thread's realloc is likely to move to next. */
#define BIG 300000

static pthread_barrier_t start;

static void *run(void *arg)
{
	struct worker *w = arg;
	w->tid = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(&start);
	for (int i = 0; i < w->n; i++) {
		char *p = malloc(1000);
		if (!p)
			abort();
		p[0] = 1;
		char *q = realloc(p, BIG);
		if (!q)
			abort();
		q[BIG - 1] = 2;
		w->ops[i].a = p;
		w->ops[i].b = q;
		free(q);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int nt = atoi(argv[1]), n = atoi(argv[2]);
	struct worker *w = calloc((size_t)nt, sizeof(*w));
	pthread_barrier_init(&start, NULL, (unsigned)nt);
	for (int t = 0; t < nt; t++) {
		w[t].n = n;
		w[t].ops = calloc((size_t)n, sizeof(struct op));
		if (!w[t].ops)
			return 1;
	}
	for (int t = 0; t < nt; t++)
		pthread_create(&w[t].th, NULL, run, &w[t]);
	for (int t = 0; t < nt; t++)
		pthread_join(w[t].th, NULL);
	FILE *f = fopen(argv[3], "w");
	if (!f)
		return 1;
	for (int t = 0; t < nt; t++)
		for (int i = 0; i < n; i++) {
			uintptr_t a = (uintptr_t)w[t].ops[i].a, b = (uintptr_t)w[t].ops[i].b;
			fprintf(f, "%d malloc %#lx 1000\n%d realloc %#lx %#lx %d\n%d free %#lx\n",
				(int)w[t].tid, (unsigned long)a, (int)w[t].tid, (unsigned long)a,
				(unsigned long)b, BIG, (int)w[t].tid, (unsigned long)b);
		}
	return fclose(f) == 0 ? 0 : 1;
}
