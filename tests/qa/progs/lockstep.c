/*
 * lockstep ROUNDS: three threads made to meet in glibc's arena lock in one
 * order, for the merge's order of reallocs held back (tests/qa/qa.py,
 * handoff-64; docs/session-protocol.md, "Time order"). Needs one arena and
 * no tcache (the test's GLIBC_TUNABLES). Each round a fourth thread holds
 * the arena's lock (malloc_stats() writing to a full pipe), then, each one
 * blocked in the lock before the next begins:
 *   R1 realloc(A, BIG)  stamped first, moves A to a new mapping;
 *   R2 realloc(X, |A|)  stamped second, gets A once R1 freed it;
 *   free(B)             stamped third, unmaps B, which R1's mapping reuses.
 * So R1 ends after a free of its new block stamped after R2 began: written
 * at R2's stamp, R1 would make B before that free (s26's qa.handoff-64).
 * A round lines up when R1 got B and R2 got A; rounds that do not (the
 * kernel put the mapping elsewhere) are retried, up to 4 x ROUNDS.
 * Prints "mallocs M reallocs R frees F" (every call the rounds made); exits
 * 0 when ROUNDS rounds lined up, 1 otherwise (saying so on stderr).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BIG (4u << 20) /* above the mmap threshold set below: a mapping */
#define SMALL 48       /* a fastbin size: the last block freed is the next one taken */

enum { IDLE, GO, ENTERING, DONE };

struct worker {
	pthread_t th;
	atomic_int stage;
	atomic_int tid;
	int op; /* 0 malloc_stats, 1 realloc, 2 free */
	void *arg;
	size_t size;
	void *ret;
};

static atomic_int quit;

static void nap(long ns)
{
	struct timespec ts = {0, ns};
	nanosleep(&ts, NULL);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	atomic_store(&w->tid, (int)syscall(SYS_gettid));
	for (;;) {
		while (atomic_load(&w->stage) != GO) {
			if (atomic_load(&quit))
				return NULL;
			nap(20000);
		}
		atomic_store(&w->stage, ENTERING);
		if (w->op == 0)
			malloc_stats();
		else if (w->op == 1)
			w->ret = realloc(w->arg, w->size);
		else
			free(w->arg);
		atomic_store(&w->stage, DONE);
	}
}

/* Thread tid's state letter ('S' asleep: blocked in the lock or the pipe). */
static char state(int tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return '?';
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] ? p[2] : '?';
}

/* Starts w and waits until it sleeps inside its call (or finished it). */
static int enter(struct worker *w)
{
	atomic_store(&w->stage, GO);
	for (int i = 0; i < 200000; i++) {
		int st = atomic_load(&w->stage);
		if (st == DONE)
			return 0;
		if (st == ENTERING && state(atomic_load(&w->tid)) == 'S') {
			nap(200000); /* still asleep 0.2 ms later: blocked, not passing */
			if (state(atomic_load(&w->tid)) == 'S' &&
			    atomic_load(&w->stage) == ENTERING)
				return 1;
		}
		nap(20000);
	}
	return 0;
}

static void finish(struct worker *w)
{
	while (atomic_load(&w->stage) != DONE)
		nap(20000);
	atomic_store(&w->stage, IDLE);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	long rounds = atol(argv[1]), lined = 0, tries = 0;
	long n_malloc = 0, n_realloc = 0, n_free = 0;
	/* A fixed threshold: freeing a mapping would raise glibc's own. */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	struct worker w[4];
	memset(w, 0, sizeof(w));
	for (int i = 0; i < 4; i++) {
		w[i].op = i == 0 ? 0 : i == 3 ? 2 : 1;
		pthread_create(&w[i].th, NULL, work, &w[i]);
		while (!atomic_load(&w[i].tid))
			nap(20000);
	}
	/* Warm-up: every thread's first event, so none starts its recording
	   (rings, stacks) inside a round. */
	for (int i = 1; i < 4; i++) {
		w[i].op = 2;
		w[i].arg = malloc(SMALL);
		enter(&w[i]);
		finish(&w[i]);
		w[i].op = i == 3 ? 2 : 1;
	}
	int saved = dup(2);
	while (lined < rounds && tries < 4 * rounds) {
		tries++;
		char *a = malloc(SMALL), *ga = malloc(SMALL), *x = malloc(SMALL / 2),
		     *gx = malloc(SMALL / 2), *b = malloc(BIG);
		n_malloc += 5;
		if (!a || !ga || !x || !gx || !b)
			abort();
		int p[2];
		if (pipe2(p, O_NONBLOCK) < 0)
			abort();
		char junk[4096];
		memset(junk, '.', sizeof(junk));
		while (write(p[1], junk, sizeof(junk)) > 0)
			;
		while (write(p[1], junk, 1) > 0)
			;
		fcntl(p[1], F_SETFL, 0);
		dup2(p[1], 2);
		/* The gate: malloc_stats() holds the arena's lock while it writes. */
		int gate = enter(&w[0]);
		w[1].arg = a;
		w[1].size = BIG;
		w[2].arg = x;
		w[2].size = SMALL;
		w[3].arg = b;
		/* Each one started only once the one before sleeps in the lock;
		   a round that cannot line up starts the rest after the gate. */
		int r1 = gate && enter(&w[1]);
		int r2 = r1 && enter(&w[2]);
		if (r2)
			enter(&w[3]);
		while (atomic_load(&w[0].stage) != DONE) {
			while (read(p[0], junk, sizeof(junk)) > 0)
				;
			nap(20000);
		}
		dup2(saved, 2);
		close(p[0]);
		close(p[1]);
		atomic_store(&w[0].stage, IDLE);
		for (int i = 1; i < 4; i++)
			if (atomic_load(&w[i].stage) == IDLE)
				atomic_store(&w[i].stage, GO);
		for (int i = 1; i < 4; i++)
			finish(&w[i]);
		n_realloc += 2;
		n_free++;
		if (!w[1].ret || !w[2].ret)
			abort();
		if (r2 && w[1].ret == b && w[2].ret == a)
			lined++;
		free(w[1].ret);
		free(w[2].ret);
		free(ga);
		free(gx);
		n_free += 4;
	}
	atomic_store(&quit, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(w[i].th, NULL);
	close(saved);
	printf("mallocs %ld reallocs %ld frees %ld\n", n_malloc, n_realloc, n_free);
	if (lined < rounds) {
		fprintf(stderr, "lockstep: %ld of %ld rounds lined up (want %ld)\n", lined, tries,
			rounds);
		return 1;
	}
	return 0;
}
