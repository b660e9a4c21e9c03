/*
 * lossy_pair N: forks; the child makes N malloc(200)/free pairs, waits
 * 100 ms and exits, the parent N malloc(100)/free pairs, then waits 300 ms
 * without reaping the child (so no process writes another's exit) and
 * exits. With small buffers in lossy mode both drop events, each in its own
 * count; the waits let the collector drain before each exit record, so the
 * session never has to make up an exit whose record was dropped.
 */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void churn(long n, size_t size)
{
	for (long i = 0; i < n; i++)
		free(malloc(size));
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		churn(n, 200);
		struct timespec ts = {0, 100000000};
		nanosleep(&ts, NULL);
		exit(0);
	}
	churn(n, 100);
	struct timespec ts = {0, 300000000};
	nanosleep(&ts, NULL);
	return 0;
}
