/*
 * snap_prog - known live blocks per stack at known moments, for the heap
 * snapshot tests (tests/cli/snapshot.py). "phases": prints the phase and
 * waits for a line on stdin between phases, so the test takes a snapshot at
 * each; "threads": four threads allocate, main frees some; "fork": parent
 * and child hold blocks of their own; "children": two children exit one
 * after the other, each holding blocks; "exec": holds blocks, then execs
 * itself as "execd", which holds others; "heaps": custom heaps
 * (include/heaptrail/heap.h) carved from malloc'd blocks, with frees, a
 * realloc, a failure, a heap destroyed with blocks and created again, and
 * threads; "heapfork": a pool's blocks in a parent and its fork child;
 * "xthreads": blocks of threads that exited, freed by others, and freed
 * while their thread waits, with 40 short threads after (docs/
 * session-protocol.md, "The threads' tables"); "owners": the address
 * tables' owner handed from thread to thread (src/preload/snapshot.c):
 * claimed, kept by a waiting thread, given up at its exit, asked for and
 * given up, with blocks freed from either table by other threads;
 * "levels": enough live blocks for the address table to grow level after
 * level, most of them freed later from the older levels; "loop N": N
 * malloc/free pairs.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heaptrail/heap.h"

static void *keep[1024];

void *site_a(size_t n)
{
	return malloc(n);
}
void *site_b(size_t n)
{
	return malloc(n);
}
void *site_c(size_t n)
{
	return calloc(1, n);
}
void *site_r(void *p, size_t n)
{
	return realloc(p, n);
}
void *site_t(size_t n)
{
	return malloc(n);
}

/* A bump allocator over a malloc'd block: its first block has the block's
   own address, which the process heap holds too. */
struct pool {
	char *mem;
	size_t used;
};

static void pool_new(struct pool *p, const char *name)
{
	p->mem = site_a(4096);
	p->used = 0;
	ht_heap_create(p, name);
}

static void *carve(struct pool *p, size_t n)
{
	size_t at = __atomic_fetch_add(&p->used, (n + 15) & ~(size_t)15, __ATOMIC_RELAXED);
	return at + n <= 4096 ? p->mem + at : NULL; /* threads carve one pool */
}

void *heap_x(struct pool *p, size_t n)
{
	void *r = carve(p, n);
	ht_heap_alloc(p, r, n);
	return r;
}
void *heap_y(struct pool *p, size_t n)
{
	void *r = carve(p, n);
	ht_heap_alloc(p, r, n);
	return r;
}
void *heap_r(struct pool *p, void *old, size_t n)
{
	void *r = carve(p, n);
	ht_heap_realloc(p, old, r, n);
	return r;
}

static struct pool pools[4];

static void *heap_thread(void *arg)
{
	struct pool *p = arg;
	for (int i = 0; i < 20; i++)
		heap_y(p, 24);
	return NULL;
}

static void wait_line(const char *phase)
{
	char buf[16];
	printf("%s\n", phase);
	fflush(stdout);
	if (!fgets(buf, sizeof(buf), stdin))
		exit(3);
}

static void *thread_main(void *arg)
{
	void **mine = arg;
	for (int i = 0; i < 50; i++)
		mine[i] = site_t(64);
	return NULL;
}

/* xthreads: b frees a's blocks (a exited), allocates, waits while main
   frees some of its blocks and a snapshot is taken, then exits. */
static pthread_mutex_t x_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t x_cond = PTHREAD_COND_INITIALIZER;
static int x_step;

static void x_wait(int step)
{
	pthread_mutex_lock(&x_lock);
	while (x_step < step)
		pthread_cond_wait(&x_cond, &x_lock);
	pthread_mutex_unlock(&x_lock);
}

static void x_go(int step)
{
	pthread_mutex_lock(&x_lock);
	x_step = step;
	pthread_cond_broadcast(&x_cond);
	pthread_mutex_unlock(&x_lock);
}

/* owners: o_one takes the owned table (no owner yet) after its patience
   in the shared table, frees blocks of both tables and waits, holding it:
   main asks for it in vain and goes on in the shared table, freeing
   o_one's blocks; o_one gives it up as it exits, and two threads then hand
   it to each other on asking, turn after turn (src/preload/snapshot.c). */
#define O_ONE 1000
#define O_MAIN 5000
#define O_ROUNDS 40
#define O_RUN 300 /* allocations a turn, more than a thread's patience */
static void *o_keep[O_ONE], *o_main[O_MAIN], *o_two[2][O_ROUNDS * O_RUN];
static int o_turn;

static void *o_one(void *arg)
{
	(void)arg;
	for (int i = 0; i < O_ONE; i++)
		o_keep[i] = site_b(200);
	for (int i = 0; i < O_ONE / 2; i++)
		free(o_keep[i]); /* the shared table's first, then the owned one's */
	for (int i = 0; i < 5; i++)
		free(keep[i]); /* main's, in the shared table */
	x_go(1);
	x_wait(2);
	return NULL;
}

/* Turns taken in order, so that each one takes the table over. */
static void *o_two_run(void *arg)
{
	int me = (int)(intptr_t)arg;
	void **mine = o_two[me];
	for (int r = 0; r < O_ROUNDS; r++) {
		pthread_mutex_lock(&x_lock);
		while (o_turn % 2 != me)
			pthread_cond_wait(&x_cond, &x_lock);
		pthread_mutex_unlock(&x_lock);
		for (int i = r * O_RUN; i < (r + 1) * O_RUN; i++) {
			mine[i] = site_t(32);
			if (i % 2 == 0)
				free(mine[i]);
		}
		pthread_mutex_lock(&x_lock);
		o_turn++;
		pthread_cond_broadcast(&x_cond);
		pthread_mutex_unlock(&x_lock);
	}
	return NULL;
}

static void *x_a(void *arg)
{
	(void)arg;
	for (int i = 0; i < 40; i++)
		keep[i] = site_a(100);
	return NULL;
}

static void *x_b(void *arg)
{
	(void)arg;
	for (int i = 0; i < 15; i++)
		free(keep[i]); /* a's, a gone */
	for (int i = 0; i < 20; i++)
		keep[100 + i] = site_b(200);
	x_go(1);
	x_wait(2); /* main frees 5 of these meanwhile */
	return NULL;
}

static void *x_short(void *arg)
{
	void **mine = arg;
	for (int i = 0; i < 3; i++)
		mine[i] = site_c(48);
	free(mine[1]);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "phases";
	setvbuf(stdout, NULL, _IONBF, 0); /* no stdio buffer among the blocks */
	if (!strcmp(mode, "phases")) {
		for (int i = 0; i < 10; i++)
			keep[i] = site_a(100);
		for (int i = 0; i < 20; i++)
			keep[10 + i] = site_b(1000);
		wait_line("1");
		for (int i = 0; i < 5; i++)
			free(keep[i]);
		for (int i = 0; i < 3; i++)
			keep[40 + i] = site_c(5000);
		keep[10] = site_r(keep[10], 3000);
		for (int i = 0; i < 1000; i++)
			free(site_a(7));
		wait_line("2");
		return 0;
	}
	if (!strcmp(mode, "threads")) {
		pthread_t t[4];
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, thread_main, keep + 50 * i);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		for (int i = 0; i < 200; i += 5)
			free(keep[i]); /* freed by another thread than the one that allocated */
		return 0;
	}
	if (!strcmp(mode, "fork")) {
		for (int i = 0; i < 3; i++)
			keep[i] = site_a(100);
		pid_t pid = fork();
		if (pid == 0) {
			free(keep[0]); /* the parent's block: not the child's to count */
			for (int i = 0; i < 7; i++)
				keep[10 + i] = site_c(300);
			exit(0);
		}
		waitpid(pid, NULL, 0);
		for (int i = 0; i < 2; i++)
			keep[20 + i] = site_b(50);
		return 0;
	}
	if (!strcmp(mode, "children")) { /* two children that exit at different times */
		for (int i = 0; i < 3; i++)
			keep[i] = site_a(100);
		pid_t first = fork();
		if (first == 0) {
			for (int i = 0; i < 4; i++)
				keep[10 + i] = site_b(50);
			free(keep[10]);
			exit(0);
		}
		waitpid(first, NULL, 0);
		pid_t second = fork();
		if (second == 0) {
			for (int i = 0; i < 7; i++)
				keep[20 + i] = site_c(300);
			usleep(100000); /* the parent allocates meanwhile */
			exit(0);
		}
		for (int i = 0; i < 2; i++)
			keep[30 + i] = site_b(1000);
		waitpid(second, NULL, 0);
		return 0;
	}
	if (!strcmp(mode, "exec")) { /* the image exec replaces holds blocks too */
		for (int i = 0; i < 3; i++)
			keep[i] = site_a(100);
		keep[3] = site_b(1000);
		free(keep[0]);
		execl("/proc/self/exe", argv[0], "execd", (char *)NULL);
		return 4;
	}
	if (!strcmp(mode, "execd")) {
		for (int i = 0; i < 7; i++)
			keep[i] = site_c(300);
		free(keep[1]);
		free(keep[2]);
		return 0;
	}
	if (!strcmp(mode, "heaps")) {
		struct pool *alpha = &pools[0], *beta = &pools[1], *gamma = &pools[2];
		pool_new(alpha, "alpha");
		pool_new(beta, "beta");
		pool_new(gamma, "gamma");
		for (int i = 0; i < 4; i++)
			keep[i] = heap_x(alpha, 100); /* the first at alpha's malloc'd block */
		for (int i = 0; i < 3; i++)
			keep[4 + i] = heap_y(alpha, 200);
		ht_heap_free(alpha, keep[1]);
		keep[4] = heap_r(alpha, keep[4], 500);
		ht_heap_alloc(alpha, NULL, 99999); /* a failure: nothing held */
		for (int i = 0; i < 2; i++)
			heap_x(beta, 50);
		ht_heap_destroy(beta); /* with its two blocks */
		ht_heap_create(beta, "beta again");
		beta->used = 0;
		heap_x(beta, 30);
		pthread_t t[2];
		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, heap_thread, gamma);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		for (int i = 0; i < 5; i++)
			keep[10 + i] = heap_x(gamma, 64);
		ht_heap_free(gamma, keep[10]);
		ht_heap_free(gamma, keep[11]);
		keep[20] = site_b(77);
		return 0;
	}
	if (!strcmp(mode, "heapfork")) { /* a fork child's own custom heap blocks */
		struct pool *alpha = &pools[0];
		pool_new(alpha, "alpha");
		for (int i = 0; i < 2; i++)
			keep[i] = heap_x(alpha, 100);
		pid_t pid = fork();
		if (pid == 0) {
			ht_heap_free(alpha, keep[0]); /* the parent's block: not the child's */
			for (int i = 0; i < 3; i++)
				keep[10 + i] = heap_x(alpha, 50);
			exit(0);
		}
		waitpid(pid, NULL, 0);
		heap_y(alpha, 20);
		return 0;
	}
	if (!strcmp(mode, "owners")) {
		pthread_t t[2];
		for (int i = 0; i < 10; i++)
			keep[i] = site_a(100);
		pthread_create(&t[0], NULL, o_one, NULL);
		x_wait(1); /* o_one owns the table and waits */
		for (int i = 0; i < O_MAIN; i++)
			o_main[i] = site_c(48);
		for (int i = O_ONE / 2; i < O_ONE * 3 / 4; i++)
			free(o_keep[i]); /* o_one's, it alive */
		x_go(2);
		pthread_join(t[0], NULL);
		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, o_two_run, (void *)(intptr_t)i);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		for (int i = 1; i < O_ROUNDS * O_RUN; i += 2)
			free(o_two[0][i]); /* the first one's odd blocks, from either table */
		return 0;
	}
	if (!strcmp(mode, "xthreads")) {
		pthread_t a, b;
		pthread_create(&a, NULL, x_a, NULL);
		pthread_join(a, NULL);
		pthread_create(&b, NULL, x_b, NULL);
		x_wait(1);
		for (int i = 100; i < 105; i++)
			free(keep[i]); /* b's, b alive */
		wait_line("1");
		x_go(2);
		pthread_join(b, NULL);
		for (int i = 0; i < 40; i++) { /* one after the other: rings are reused */
			pthread_t t;
			pthread_create(&t, NULL, x_short, keep + 200 + 3 * i);
			pthread_join(t, NULL);
		}
		for (int i = 0; i < 40; i += 4)
			free(keep[200 + 3 * i]); /* the short threads', all gone */
		wait_line("2");
		return 0;
	}
	if (!strcmp(mode, "levels")) {
		/* 12000 live blocks: the table's newest level gets crowded and a
		   new one is made, four times over (snapshot.c); then 9000 of them
		   are freed, from every level, while 3000 others are made in the
		   newest, and half of those freed again. */
		static void *lv[12000], *lw[3000];
		for (int i = 0; i < 12000; i++)
			lv[i] = site_a(16);
		for (int i = 0; i < 12000; i++) {
			if (i % 4)
				free(lv[i]);
			if (i % 4 == 1)
				lw[i / 4] = site_b(24);
		}
		for (int i = 0; i < 3000; i += 2)
			free(lw[i]);
		return 0;
	}
	if (!strcmp(mode, "wait")) { /* for attach: allocates once told to */
		wait_line("ready");
		for (int i = 0; i < 4; i++)
			keep[i] = site_b(250);
		wait_line("held");
		return 0;
	}
	long n = argc > 2 ? atol(argv[2]) : 1000;
	for (long i = 0; i < n; i++)
		free(site_a(32));
	return 0;
}
