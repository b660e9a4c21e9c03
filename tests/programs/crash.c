/*
 * crash.c - ends badly after known allocations, for tests/cli/: every event
 * before the end must be in the trace. Mode (argv[1]):
 *   abort    6 blocks of 6006, then abort()               -> SIGABRT
 *   kill     9 blocks of 9009, then SIGKILL to itself     -> SIGKILL
 *   segv     5 blocks of 5005, then a write through NULL  -> SIGSEGV
 *   _exit    4 blocks of 4004, then _exit(7)              -> status 7
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "prog.h"

NOINLINE static void before_crash(int n, size_t size)
{
	for (int i = 0; i < n; i++)
		prog_sink(malloc(size)); /* @before_crash */
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "abort";
	if (!strcmp(mode, "abort")) {
		before_crash(6, 6006);
		abort();
	} else if (!strcmp(mode, "kill")) {
		before_crash(9, 9009);
		kill(getpid(), SIGKILL);
	} else if (!strcmp(mode, "segv")) {
		before_crash(5, 5005);
		*(volatile int *)prog_sink_slot = 0; /* keeps the store */
		*(volatile int *)NULL = 1;
	} else if (!strcmp(mode, "_exit")) {
		before_crash(4, 4004);
		_exit(7);
	}
	fprintf(stderr, "crash: unknown mode '%s'\n", mode);
	return 2;
}
