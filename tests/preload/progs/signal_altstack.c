/*
 * signal_altstack US N: signal_timer's handler (handler_event.h) on an
 * alternate signal stack (SA_ONSTACK), in a thread whose stack lies below
 * that alternate stack (mapped first), so that a handler's event nested in
 * a hook runs above the hook's frame: a timer every US microseconds while
 * the thread makes N malloc/free pairs of 6002 bytes. Prints how many
 * handlers ran and how many of them made an mprotect.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>

#include "alarm_timer.h"
#include "handler_event.h"

#define ALT_SIZE (64 * 1024)

static void *alt;
static long n;
static int above; /* the alternate stack lies above the thread's */

static void *work(void *arg)
{
	(void)arg;
	above = (char *)alt > (char *)&arg;
	stack_t ss = {.ss_sp = alt, .ss_size = ALT_SIZE};
	if (sigaltstack(&ss, NULL) != 0)
		return (void *)1;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	heap_pairs(n);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	long us = atol(argv[1]);
	n = atol(argv[2]);
	alt = mmap(NULL, ALT_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (alt == MAP_FAILED)
		return 1;
	/* Only the thread takes the timer's signal. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	alarm_handler(on_alarm_event, SA_ONSTACK);
	pthread_t th;
	if (pthread_create(&th, NULL, work, NULL) != 0)
		return 1;
	alarm_every(us);
	void *ret;
	pthread_join(th, &ret);
	alarm_every(0);
	printf("%d %d\n", (int)handled, (int)protects);
	printf("%s\n", above ? "above" : "below");
	return ret != NULL;
}
