/*
 * signal_timer US N: a real-time timer every US microseconds whose handler
 * mallocs and frees 6001 bytes, while the program makes N malloc/free pairs
 * of 6002 bytes with a little work between. Prints how many handlers ran.
 * With stacks, a handler allocation unwound through the signal frame into
 * the interrupted code took longer than 10 us: the program never ended.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

static volatile sig_atomic_t handled;

static void on_alarm(int sig)
{
	(void)sig;
	free(malloc(6001));
	handled++;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	long us = atol(argv[1]), n = atol(argv[2]);
	struct sigaction sa = {0};
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, us}, {0, us}};
	setitimer(ITIMER_REAL, &it, NULL);
	volatile unsigned x = 0;
	for (long i = 0; i < n; i++) {
		free(malloc(6002));
		for (int k = 0; k < 200; k++)
			x += (unsigned)k;
	}
	(void)x; /* the loop is the work; clang would call x unused */
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	printf("%d\n", (int)handled);
	return 0;
}
