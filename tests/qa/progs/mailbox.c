/*
 * mailbox COUNT: a producer thread mallocs COUNT blocks and puts each in a
 * ring of 16 slots; a consumer thread takes each one out and frees it
 * right after the load that brought the pointer, with no lock and no wait
 * in between (it polls the next slot, never spins on it), so its free can
 * begin a few hundred nanoseconds after the malloc on another core, and
 * the free hook's time stamp may be read before the load completes (a
 * branch on the pointer predicted, not yet resolved). For the time order of
 * the trace (tests/qa/qa.py, mailbox): every free comes after its malloc.
 * A thread that found its slot not ready POLLS times in a row yields: at
 * real-time priority a thread polling without end kept the collector (or
 * another real-time program) off its core while the other thread waited.
 * Prints "mallocs N reallocs 0 frees N" and exits 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 16
#define POLLS 4096

static char *_Atomic ring[SLOTS];
static long count;

static void *produce(void *arg)
{
	(void)arg;
	for (long h = 0, polls = 0; h < count;) {
		if (atomic_load_explicit(&ring[h % SLOTS], memory_order_acquire)) {
			if (++polls % POLLS == 0)
				sched_yield();
			continue;
		}
		polls = 0;
		char *p = malloc(24 + (size_t)(h & 3) * 8);
		if (!p)
			abort();
		p[0] = 1;
		atomic_store_explicit(&ring[h % SLOTS], p, memory_order_release);
		h++;
	}
	return NULL;
}

static void *consume(void *arg)
{
	(void)arg;
	for (long t = 0, polls = 0; t < count;) {
		char *p = atomic_load_explicit(&ring[t % SLOTS], memory_order_acquire);
		if (p) {
			atomic_store_explicit(&ring[t % SLOTS], NULL, memory_order_relaxed);
			free(p);
			t++;
			polls = 0;
		} else if (++polls % POLLS == 0) {
			sched_yield();
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	count = atol(argv[1]);
	pthread_t a, b;
	pthread_create(&a, NULL, produce, NULL);
	pthread_create(&b, NULL, consume, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("mallocs %ld reallocs 0 frees %ld\n", count, count);
	return 0;
}
