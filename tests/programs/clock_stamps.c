/*
 * clock_stamps.c - a program whose allocations say when and in what order
 * they happened, for the tests of the recorder's clock (tests/cli/clock.py,
 * docs/session-protocol.md "The clock"). With -w it first waits for a byte
 * on stdin (time to attach). Then, in order:
 *   threads: 4 threads, each makes 2000 allocations of sizes 10000*(k+1)+i
 *            (thread k, i = 0..1999), freed at once: each thread's sizes
 *            must come in order in the trace;
 *   pingpong: a fork child and its parent take turns through two pipes, 50
 *            rounds: the parent allocates 3000+2r, then the child 3001+2r:
 *            the trace must show 3000, 3001, 3002, ... in that order;
 *   stamps:  20 windows 50 ms apart; in each, 20 times: malloc(100000+n),
 *            then clock_gettime(CLOCK_MONOTONIC) written to the side file
 *            OUT as "n ns" (n counts from 0), then free.
 * Usage: clock_stamps [-w] OUT
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "prog.h"

#define THREADS 4
#define PER_THREAD 2000
#define ROUNDS 50
#define WINDOWS 20
#define PER_WINDOW 20

static void *thread_main(void *arg)
{
	uintptr_t k = (uintptr_t)arg;
	for (int i = 0; i < PER_THREAD; i++) {
		void *p = malloc(10000 * (k + 1) + (size_t)i);
		PROG_CHECK(p);
		prog_sink(p);
		free(p);
	}
	return NULL;
}

static void threads(void)
{
	pthread_t t[THREADS];
	for (uintptr_t k = 0; k < THREADS; k++)
		PROG_CHECK(pthread_create(&t[k], NULL, thread_main, (void *)k) == 0);
	for (int k = 0; k < THREADS; k++)
		PROG_CHECK(pthread_join(t[k], NULL) == 0);
}

static void turn(int in, int out, size_t size)
{
	char c;
	if (in >= 0)
		PROG_CHECK(read(in, &c, 1) == 1);
	void *p = malloc(size);
	PROG_CHECK(p);
	prog_sink(p);
	free(p);
	PROG_CHECK(write(out, "x", 1) == 1);
}

static void pingpong(void)
{
	int down[2], up[2];
	PROG_CHECK(pipe(down) == 0 && pipe(up) == 0);
	pid_t pid = fork();
	PROG_CHECK(pid >= 0);
	if (pid == 0) {
		for (int r = 0; r < ROUNDS; r++)
			turn(down[0], up[1], 3001 + 2 * (size_t)r);
		_exit(0);
	}
	for (int r = 0; r < ROUNDS; r++)
		turn(r ? up[0] : -1, down[1], 3000 + 2 * (size_t)r);
	char c;
	PROG_CHECK(read(up[0], &c, 1) == 1);
	int st;
	PROG_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void stamps(const char *path)
{
	FILE *f = fopen(path, "w");
	PROG_CHECK(f);
	static uint64_t ns[WINDOWS * PER_WINDOW];
	int n = 0;
	for (int w = 0; w < WINDOWS; w++) {
		for (int i = 0; i < PER_WINDOW; i++, n++) {
			void *p = malloc(100000 + (size_t)n);
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ns[n] = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
			PROG_CHECK(p);
			prog_sink(p);
			free(p);
		}
		struct timespec d = {0, 50000000};
		nanosleep(&d, NULL);
	}
	for (int i = 0; i < n; i++)
		fprintf(f, "%d %llu\n", i, (unsigned long long)ns[i]);
	PROG_CHECK(fclose(f) == 0);
}

int main(int argc, char **argv)
{
	int a = 1;
	if (argc > a && !strcmp(argv[a], "-w")) {
		char c;
		PROG_CHECK(read(0, &c, 1) == 1);
		a++;
	}
	PROG_CHECK(argc == a + 1);
	threads();
	pingpong();
	stamps(argv[a]);
	return 0;
}
