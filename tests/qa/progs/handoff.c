/*
 * handoff THREADS ITERATIONS [SIGNALS]: threads hand blocks to each other as
 * fast as they can, for the time order of the trace (tests/qa/qa.py,
 * handoff-*). Each iteration a thread mallocs a block, swaps it into one of
 * 64 shared slots and frees (every fourth time first reallocs) the block it
 * took out, which another thread made: with one arena and no tcache (the
 * test's GLIBC_TUNABLES) the block one thread frees is the next one another
 * thread's malloc or realloc gets. With SIGNALS, one more thread sends that
 * many SIGUSR1 to the workers while they run (the handler only counts).
 * Prints "mallocs M reallocs R frees F" (the calls the workers and main's
 * final sweep made) and exits 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 64

static _Atomic(char *) slots[SLOTS];
static atomic_long n_malloc, n_realloc, n_free;
static atomic_int running; /* workers not done */
static volatile sig_atomic_t handled;
static pthread_barrier_t start;

static void on_usr1(int sig)
{
	(void)sig;
	handled = handled + 1;
}

struct worker {
	pthread_t th;
	long n;
	unsigned seed;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	long m = 0, r = 0, f = 0;
	pthread_barrier_wait(&start);
	for (long i = 0; i < w->n; i++) {
		w->seed = w->seed * 1103515245u + 12345u;
		size_t size = 32 + ((w->seed >> 16) & 3) * 16;
		char *p = malloc(size);
		if (!p)
			abort();
		p[0] = (char)i;
		m++;
		char *old = atomic_exchange(&slots[(w->seed >> 20) % SLOTS], p);
		if (!old)
			continue;
		if ((i & 3) == 3) {
			char *q = realloc(old, size + 200);
			if (!q)
				abort();
			q[size + 199] = 1;
			old = q;
			r++;
		}
		free(old);
		f++;
	}
	atomic_fetch_add(&n_malloc, m);
	atomic_fetch_add(&n_realloc, r);
	atomic_fetch_add(&n_free, f);
	atomic_fetch_sub(&running, 1);
	return NULL;
}

struct storm {
	pthread_t th;
	long n;
	struct worker *w;
	int nw;
};

static void *storm(void *arg)
{
	struct storm *s = arg;
	for (long i = 0; i < s->n && atomic_load(&running); i++)
		pthread_kill(s->w[i % s->nw].th, SIGUSR1);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int nt = atoi(argv[1]);
	long n = atol(argv[2]), nsig = argc > 3 ? atol(argv[3]) : 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	struct worker *w = calloc((size_t)nt, sizeof(*w));
	if (!w)
		return 1;
	pthread_barrier_init(&start, NULL, (unsigned)nt + 1);
	atomic_store(&running, nt);
	for (int t = 0; t < nt; t++) {
		w[t].n = n;
		w[t].seed = (unsigned)t * 7919u + 1;
		pthread_create(&w[t].th, NULL, work, &w[t]);
	}
	struct storm s = {.n = nsig, .w = w, .nw = nt};
	pthread_barrier_wait(&start);
	if (nsig)
		pthread_create(&s.th, NULL, storm, &s);
	/* The storm ends when the last worker does, before any is joined. */
	if (nsig)
		pthread_join(s.th, NULL);
	for (int t = 0; t < nt; t++)
		pthread_join(w[t].th, NULL);
	long f = atomic_load(&n_free);
	for (int i = 0; i < SLOTS; i++) {
		char *p = atomic_exchange(&slots[i], NULL);
		if (p) {
			free(p);
			f++;
		}
	}
	printf("mallocs %ld reallocs %ld frees %ld\n", atomic_load(&n_malloc),
	       atomic_load(&n_realloc), f);
	free(w);
	return 0;
}
