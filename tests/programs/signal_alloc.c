/*
 * signal_alloc.c - allocation inside a signal handler, for tests/cli/: main
 * allocates 1 block of 700, then raises SIGUSR1 three times; the handler
 * (on_signal -> handler_alloc) allocates 1 block of 5555 each time and frees it.
 * Raised synchronously, so calling malloc there is safe for this test.
 */
#include <signal.h>
#include <string.h>

#include "prog.h"

static volatile sig_atomic_t handled;

NOINLINE static void handler_alloc(void)
{
	void *p = malloc(5555); /* @handler_alloc */
	prog_sink(p);
	free(p);
}

static void on_signal(int sig)
{
	handler_alloc();
	handled++;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	PROG_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	void *p = malloc(700);
	prog_sink(p);
	for (int i = 0; i < 3; i++)
		raise(SIGUSR1);
	PROG_CHECK(handled == 3);
	free(p);
	return 0;
}
