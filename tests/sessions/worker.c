/*
 * worker.c - a process for the session tests to trace: every 5 ms it
 * allocates and frees one block of BASE + phase bytes, where phase starts at
 * 0 and grows by one on each SIGUSR1; each new phase is announced on stdout
 * ("phase N"), so a test can tell which allocations came after a change.
 * With "wait" as second argument it first blocks in read() on stdin until a
 * byte arrives (started "suspended"). Its first allocation is a marker of
 * 100000 + BASE bytes. Exits on SIGTERM (status 0) after printing
 * "allocs N", the number of BASE + phase allocations it made.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t phase, done;

static void on_usr1(int sig)
{
	(void)sig;
	phase++;
}

static void on_term(int sig)
{
	(void)sig;
	done = 1;
}

int main(int argc, char **argv)
{
	size_t base = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
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
	int shown = 0;
	unsigned long count = 0;
	while (!done) {
		int ph = phase;
		if (ph != shown) {
			printf("phase %d\n", ph);
			fflush(stdout);
			shown = ph;
		}
		volatile char *p = malloc(base + (size_t)ph);
		if (p)
			p[0] = 1;
		count++;
		free((void *)p);
		struct timespec ts = { 0, 5000000 };
		nanosleep(&ts, NULL);
	}
	printf("allocs %lu\n", count);
	return 0;
}
