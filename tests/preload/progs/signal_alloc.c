/*
 * A profiling timer interrupts a malloc/free loop many times a second; the
 * handler allocates too. Interrupts that land inside a hook pass through
 * untraced; nothing may crash or deadlock. Prints how many handlers ran.
 * glibc's malloc is not reentrant: while the loop is inside malloc or free,
 * the handler makes one mprotect instead (signal_timer.c). Prints that
 * count too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>

#include "handler_event.h"

static void on_prof(int sig)
{
	(void)sig;
	handler_event();
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
		in_heap = 1;
		void *p = malloc(6002);
		free(p);
		in_heap = 0;
		for (int k = 0; k < 2000; k++)
			x += (unsigned)k;
	}
	(void)x; /* the loop is the work; clang would call x unused */
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_PROF, &off, NULL);
	printf("%d %d\n", (int)handled, (int)protects);
	return 0;
}
