/*
 * relay THREADS TURNS: threads pass a block around a ring, one turn at a
 * time, for the time order of the trace (tests/qa/qa.py, handoff-*): the
 * tightest cross-thread reuse a program can make. On its turn a thread
 * mallocs a block, then frees the block the thread before it handed over
 * (every other turn reallocs it away instead, and frees that after passing
 * the turn on) and hands its own to the next thread, whose malloc then gets
 * the block just freed (one arena, no tcache: the test's GLIBC_TUNABLES)
 * within a few hundred nanoseconds on another core. Waiting threads spin,
 * then yield. Prints "mallocs M reallocs R frees F" and exits 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_long turn;
static char *_Atomic baton;
static long turns;
static int nt;
static atomic_long n_malloc, n_realloc, n_free;

static void *run(void *arg)
{
	long me = (long)(size_t)arg, m = 0, r = 0, f = 0;
	for (long t = me; t < turns; t += nt) {
		for (int k = 0; atomic_load_explicit(&turn, memory_order_acquire) != t; k++)
			if (k > 200)
				sched_yield();
		char *p = malloc(64), *b = atomic_load(&baton), *q = NULL;
		if (!p)
			abort();
		p[0] = 1;
		m++;
		if (b && (t & 1)) {
			q = realloc(b, 300);
			if (!q)
				abort();
			r++;
		} else if (b) {
			free(b);
			f++;
		}
		atomic_store(&baton, p);
		atomic_store_explicit(&turn, t + 1, memory_order_release);
		if (q) {
			free(q);
			f++;
		}
	}
	atomic_fetch_add(&n_malloc, m);
	atomic_fetch_add(&n_realloc, r);
	atomic_fetch_add(&n_free, f);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	nt = atoi(argv[1]);
	turns = atol(argv[2]);
	pthread_t *th = calloc((size_t)nt, sizeof(*th));
	if (!th)
		return 1;
	for (long i = 0; i < nt; i++)
		pthread_create(&th[i], NULL, run, (void *)(size_t)i);
	for (int i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
	long f = atomic_load(&n_free);
	char *b = atomic_exchange(&baton, NULL);
	if (b) {
		free(b);
		f++;
	}
	printf("mallocs %ld reallocs %ld frees %ld\n", atomic_load(&n_malloc),
	       atomic_load(&n_realloc), f);
	free(th);
	return 0;
}
