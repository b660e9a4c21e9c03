/*
 * altstack SIZE: a SIGUSR1 handler on an alternate signal stack of SIZE
 * bytes (8192, SIGSTKSZ of old, is what crash handlers often use) mallocs
 * and frees 777 bytes, three times (the first capture of a stack is the
 * deepest); then a thread with the smallest stack pthreads allows does the
 * same with 555 bytes. Prints what it did; exits 0.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile int got;

static void handler(int sig)
{
	(void)sig;
	void *p = malloc(777);
	got += p != NULL;
	free(p);
}

static void *small_thread(void *arg)
{
	(void)arg;
	void *p = malloc(555);
	free(p);
	return p ? (void *)1 : NULL;
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? (size_t)atol(argv[1]) : 8192;
	stack_t ss = {.ss_sp = malloc(size), .ss_size = size};
	if (!ss.ss_sp || sigaltstack(&ss, NULL) != 0)
		return 100;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < 3; i++)
		raise(SIGUSR1);
	printf("handler %d\n", got);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, PTHREAD_STACK_MIN);
	pthread_t t;
	void *r = NULL;
	if (pthread_create(&t, &at, small_thread, NULL) != 0)
		return 101;
	pthread_join(t, &r);
	printf("thread %d\n", r != NULL);
	return 0;
}
