/*
 * exit_traced.c - a process that exits while heaptrail attaches to it or
 * detaches from it: a thread rereads the main thread's /proc status and
 * calls _exit(3) as soon as a tracer seizes it (TracerPid), which is where
 * `record -p` starts to borrow it. The main thread prints "ready" and
 * sleeps. The watcher spins (no sleep, no allocation) so that it sees the
 * seize within the injection on a loaded machine more often than not.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int status_fd;

static void *watch(void *arg)
{
	(void)arg;
	for (;;) {
		char buf[4096];
		ssize_t n = pread(status_fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			_exit(4);
		buf[n] = 0;
		const char *p = strstr(buf, "\nTracerPid:");
		if (p && strtol(p + 11, NULL, 10) != 0)
			_exit(3);
	}
	return NULL;
}

int main(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)getpid());
	status_fd = open(path, O_RDONLY | O_CLOEXEC);
	pthread_t t;
	if (status_fd < 0 || pthread_create(&t, NULL, watch, NULL))
		return 1;
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
