/*
 * lossy_children.c - many short-lived processes that each lose events: for
 * each of N children (argv[1], default 100), one after the other, the child
 * makes exactly 4000 malloc(24) calls without a free and kills itself with
 * SIGKILL (no exit record it could lose); the parent waits for it, then
 * sleeps 30 ms so the collector sees it gone before the next one. Recorded
 * --lossy with 4 KiB buffers, each child's allocations in the trace plus its
 * own lost count are exactly 4000 (tests/cli/rel.py, loss-slots).
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PER_CHILD 4000

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			for (int k = 0; k < PER_CHILD; k++) {
				char *volatile p = malloc(24);
				if (p)
					p[0] = (char)k;
			}
			/* Ended by SIGKILL: no exit record of its own that a full
			   buffer could drop, so only allocations are ever lost. */
			raise(SIGKILL);
			_exit(1);
		}
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
			return 1;
		struct timespec ts = {0, 30000000};
		nanosleep(&ts, NULL);
	}
	return 0;
}
