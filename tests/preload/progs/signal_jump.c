/*
 * signal_jump US N M: a timer every US microseconds whose handler, while the
 * program is inside mprotect (so inside the recorder's hook), jumps back to
 * the loop with siglongjmp, leaving the hook it interrupted; N such calls of
 * mprotect on a page (to what it is), then the timer off and M malloc/free
 * pairs of 7001 bytes, each of which must be recorded. Prints the calls that
 * returned and the jumps made.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>

static sigjmp_buf env;
static volatile sig_atomic_t in_call, jumps;
static char page[4096] __attribute__((aligned(4096)));

static void on_alarm(int sig)
{
	(void)sig;
	if (in_call) {
		in_call = 0;
		jumps++;
		siglongjmp(env, 1);
	}
}

static void call_once(void)
{
	in_call = 1;
	mprotect(page, sizeof page, PROT_READ | PROT_WRITE);
	in_call = 0;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	long us = atol(argv[1]), n = atol(argv[2]), m = atol(argv[3]);
	struct sigaction sa = {0};
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, us}, {0, us}};
	setitimer(ITIMER_REAL, &it, NULL);
	static volatile long i, done;
	sigsetjmp(env, 1);
	while (i < n) {
		i++;
		call_once();
		done++;
	}
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	for (long k = 0; k < m; k++)
		free(malloc(7001));
	printf("%ld %d\n", (long)done, (int)jumps);
	return 0;
}
