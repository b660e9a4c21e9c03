/*
 * worker.c - a process for the session tests to trace: every 5 ms it
 * allocates and frees one block of BASE + phase bytes, where phase starts at
 * 0 and grows by one on each SIGUSR1; each new phase is announced on stdout
 * ("phase N"), so a test can tell which allocations came after a change.
 * With "wait" as second argument it first blocks in read() on stdin until a
 * byte arrives (started "suspended"). Its first allocation is a marker of
 * 100000 + BASE bytes. Exits on SIGTERM (status 0) after printing
 * "allocs N", the number of BASE + phase allocations it made. With
 * "threads" as second argument, three more threads do the same loop (the
 * count is of all four). With "segv" or "abort" as second argument, SIGUSR2
 * makes it allocate 7777 bytes and then crash that way. A third argument is
 * the pause between two allocations of a thread in microseconds (5000). On
 * SIGWINCH it prints "count N", the allocations of all its threads so far:
 * a test waits for allocations by that count, not by sleeping (a loaded
 * machine can hold the worker off the CPU for most of a second). With "burst", after
 * "ready" it makes 40000 malloc(13) at once (never freed), prints "burst"
 * and waits for a byte on stdin before its loop: more than a buffer holds
 * before its session.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t phase, done, crash, asked;
static long pause_ns = 5000000; /* between two allocations of a thread */
static size_t base;
static _Atomic unsigned long count;

/* The loop of every thread: one call site, so all threads share its stack. */
static void *loop(void *arg)
{
	(void)arg;
	while (!done) {
		volatile char *p = malloc(base + (size_t)phase);
		if (p)
			p[0] = 1;
		count++;
		free((void *)p);
		struct timespec ts = {0, pause_ns};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
	phase++;
}

static void on_usr2(int sig)
{
	(void)sig;
	crash = 1;
}

static void on_winch(int sig)
{
	(void)sig;
	asked = 1;
}

static void on_term(int sig)
{
	(void)sig;
	done = 1;
}

int main(int argc, char **argv)
{
	base = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
	if (argc > 3)
		pause_ns = strtol(argv[3], NULL, 10) * 1000;
	struct sigaction sa = {.sa_handler = on_usr1};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_usr2;
	sigaction(SIGUSR2, &sa, NULL);
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	free(malloc(100000 + base));
	if (argc > 2 && !strcmp(argv[2], "wait")) {
		char c;
		if (read(0, &c, 1) != 1)
			return 3;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	if (argc > 2 && !strcmp(argv[2], "burst")) {
		for (int i = 0; i < 40000; i++) {
			volatile char *p = malloc(13);
			if (p)
				p[0] = 1;
		}
		printf("burst\n");
		fflush(stdout);
		char c;
		if (read(0, &c, 1) != 1)
			return 3;
	}
	pthread_t th[3];
	int nth = argc > 2 && !strcmp(argv[2], "threads") ? 3 : 0;
	/* SIGTERM and SIGUSR1 go to the main thread, which prints and joins. */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGWINCH);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	for (int i = 0; i < nth; i++)
		pthread_create(&th[i], NULL, loop, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	int shown = 0;
	while (!done) {
		int ph = phase;
		if (crash) {
			volatile char *q = malloc(7777);
			q[0] = 1;
			if (!strcmp(argv[2], "abort"))
				abort();
			int *volatile bad = (int *)(uintptr_t)16;
			*bad = 1; /* SIGSEGV */
		}
		if (ph != shown) {
			printf("phase %d\n", ph);
			fflush(stdout);
			shown = ph;
		}
		if (asked) {
			asked = 0;
			printf("count %lu\n", (unsigned long)count);
			fflush(stdout);
		}
		volatile char *p = malloc(base + (size_t)ph);
		if (p)
			p[0] = 1;
		count++;
		free((void *)p);
		struct timespec ts = {0, pause_ns};
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	printf("allocs %lu\n", (unsigned long)count);
	return 0;
}
