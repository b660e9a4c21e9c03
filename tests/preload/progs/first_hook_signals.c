/*
 * first_hook_signals MODE K: signals whose handler maps and unmaps 12 KiB
 * (two events, both async-signal-safe) land across the whole life of K
 * fresh threads (MODE threads) or K fresh fork children (MODE forks), one
 * after another, so they interrupt the recorder's set-up of each: its ring,
 * its unwinding stack and stack bounds, a child's instance, the exit. The
 * main thread (the parent) sends the next signal as soon as the last
 * handler ended, after a pause that varies from 0 to a few microseconds,
 * until the thread is joined (the child reaped). Each thread or child
 * makes two malloc/free pairs of 7001 bytes. Prints how many handlers ran:
 * each handler event is either recorded or counted as a re-entry.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAP_LEN (3 * 4096)

/* Shared with the children: how many handlers ran. */
static _Atomic long *handled;

static void on_signal(int sig)
{
	(void)sig;
	int e = errno;
	void *p = mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED)
		munmap(p, MAP_LEN);
	atomic_fetch_add(handled, 1);
	errno = e;
}

static void *work(void *arg)
{
	for (int i = 0; i < 2; i++) {
		void *p = malloc(7001);
		memset(p, 1, 7001);
		free(p);
	}
	return arg;
}

/* The thread or child being signalled. */
static pthread_t th;
static pid_t child;

static int gone(int threads)
{
	if (threads)
		return pthread_tryjoin_np(th, NULL) == 0;
	int st;
	pid_t r = waitpid(child, &st, WNOHANG);
	if (r == child && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
		exit(1);
	return r == child;
}

/* Signals the target until it is gone: one signal at a time (a pending one
   would be delivered again as each handler returns, and the target would
   never run), the next after a pause of 0..255 spins. */
static void signal_until_gone(int threads)
{
	static unsigned pause_n = 1;
	volatile unsigned x = 0;
	for (;;) {
		long h = atomic_load(handled);
		if (threads)
			pthread_kill(th, SIGUSR1);
		else
			kill(child, SIGUSR1);
		while (atomic_load(handled) == h)
			if (gone(threads))
				return;
		pause_n = pause_n * 1103515245u + 12345u;
		for (unsigned k = (pause_n >> 16) & 255; k > 0; k--)
			x += k;
	}
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int k = atoi(argv[2]), threads = !strcmp(argv[1], "threads");
	if (!threads && strcmp(argv[1], "forks"))
		return 2;
	handled = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (handled == MAP_FAILED)
		return 1;
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < k; i++) {
		if (threads) {
			if (pthread_create(&th, NULL, work, NULL) != 0)
				return 1;
		} else if ((child = fork()) == 0) {
			work(NULL);
			exit(0);
		} else if (child < 0) {
			return 1;
		}
		signal_until_gone(threads);
	}
	printf("%ld\n", atomic_load(handled));
	return 0;
}
