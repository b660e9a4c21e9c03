/*
 * realloc_stall.c - a realloc whose thread stays inside the call for
 * longer than a second after the real call freed the old block, while
 * another thread's malloc is given that block (tests/cli/e2e.py,
 * realloc-stall). The delay comes from libhtstall.so (stall_lib.c), which
 * sits between the recorder and libc: as a thread starved of the CPU
 * (real-time programs, a loaded machine) or a slow allocator would.
 * Run with one arena and no tcache (GLIBC_TUNABLES), so the freed block is
 * the one the other thread gets. Usage: realloc_stall MS; prints
 * "OLD NEW GOT": the realloc's old and new blocks and the other thread's.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void stall_on_realloc(size_t size, void (*cb)(void *, void *));

#define BIG 300000

static sem_t ready, freed, taken;
static long stall_ms;
static void *got, *warm;

/* Inside the realloc, after the real call: the other thread allocates,
   then this one stays in the call for stall_ms. */
static void in_realloc(void *old, void *p)
{
	(void)old;
	(void)p;
	sem_post(&freed);
	while (sem_wait(&taken) != 0)
		;
	struct timespec d = {stall_ms / 1000, (stall_ms % 1000) * 1000000};
	while (nanosleep(&d, &d) != 0)
		;
}

static void *other(void *arg)
{
	(void)arg;
	/* The thread's first malloc makes its tcache's table (even with no
	   tcache): made now, it is not what takes the freed block. Kept, so
	   no free chunk is left to merge with the freed one. */
	warm = malloc(16);
	sem_post(&ready);
	while (sem_wait(&freed) != 0)
		;
	got = malloc(1000);
	sem_post(&taken);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	stall_ms = atol(argv[1]);
	sem_init(&ready, 0, 0);
	sem_init(&freed, 0, 0);
	sem_init(&taken, 0, 0);
	pthread_t th;
	if (pthread_create(&th, NULL, other, NULL) != 0)
		return 1;
	while (sem_wait(&ready) != 0)
		;
	char *p = malloc(1000);
	if (!p)
		return 1;
	p[0] = 1;
	stall_on_realloc(BIG, in_realloc);
	char *q = realloc(p, BIG);
	if (!q)
		return 1;
	pthread_join(th, NULL);
	printf("%#lx %#lx %#lx\n", (unsigned long)p, (unsigned long)q, (unsigned long)got);
	free(got);
	free(warm);
	free(q);
	return 0;
}
