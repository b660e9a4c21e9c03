/*
 * limits: a program that takes resources from under the recorder. It
 * closes every descriptor above 2, lowers RLIMIT_NOFILE to 3 (the recorder
 * opens /proc files in a fork child's start) and forks a child that makes
 * 100 malloc/free pairs of 5005 bytes; then lowers RLIMIT_AS to 2 MiB above
 * what it maps (the recorder's unwinding stack of a new thread cannot be
 * mapped) and starts a thread with a 64 KiB stack that makes 100 pairs of
 * 5006 bytes. Prints "ok" when every step worked as natively.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void pairs(size_t size)
{
	for (int i = 0; i < 100; i++)
		free(malloc(size));
}

static void *work(void *arg)
{
	(void)arg;
	pairs(5006);
	return NULL;
}

int main(void)
{
	syscall(SYS_close_range, 3u, ~0u, 0u);
	struct rlimit old, nofile;
	if (getrlimit(RLIMIT_NOFILE, &old) != 0)
		return 1;
	nofile = (struct rlimit){3, old.rlim_max};
	if (setrlimit(RLIMIT_NOFILE, &nofile) != 0)
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		pairs(5005);
		_exit(0);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 2;
	if (setrlimit(RLIMIT_NOFILE, &old) != 0)
		return 1;
	long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	if (pages <= 0)
		return 3;
	struct rlimit as = {(rlim_t)pages * 4096 + (2 << 20), RLIM_INFINITY};
	if (setrlimit(RLIMIT_AS, &as) != 0)
		return 4;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 * 1024);
	pthread_t th;
	if (pthread_create(&th, &a, work, NULL) != 0)
		return 5;
	pthread_join(th, NULL);
	printf("ok\n");
	return 0;
}
