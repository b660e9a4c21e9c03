/*
 * A profiling timer interrupts a malloc/free loop many times a second; the
 * handler allocates too. Interrupts that land inside a hook pass through
 * untraced; nothing may crash or deadlock. Prints how many handlers ran.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

static volatile sig_atomic_t handled;

static void on_prof(int sig)
{
	void *p = malloc(6001);
	free(p);
	handled++;
}

int main(void)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_prof;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	struct itimerval it = {{0, 200}, {0, 200}};
	setitimer(ITIMER_PROF, &it, NULL);
	/* Work between the calls, so most signals land outside a hook. */
	volatile unsigned x = 0;
	for (int i = 0; i < 200000; i++) {
		void *p = malloc(6002);
		free(p);
		for (int k = 0; k < 2000; k++)
			x += (unsigned)k;
	}
	(void)x; /* the loop is the work; clang would call x unused */
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_PROF, &off, NULL);
	printf("%d\n", (int)handled);
	return 0;
}
