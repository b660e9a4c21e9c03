/*
 * signal_fork US K: a timer every US microseconds whose handler forks, K
 * times, while the program is inside a call of mprotect on a page (to what
 * it is), made in a loop: inside the recorder's hook nearly always. Each child makes 50
 * malloc/free pairs of 5003 bytes in the handler, returns from it (into the
 * hook the signal interrupted, when it did), makes 50 more in the loop and
 * exits. The parent reaps them and prints K.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alarm_timer.h"

static volatile sig_atomic_t forks, is_child, in_call;
static long k;
static char page[4096] __attribute__((aligned(4096)));

static void pairs(int n)
{
	for (int i = 0; i < n; i++)
		free(malloc(5003));
}

static void on_alarm(int sig)
{
	(void)sig;
	if (is_child || forks >= k || !in_call)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		is_child = 1;
		pairs(50);
		return;
	}
	if (pid > 0)
		forks++;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	long us = atol(argv[1]);
	k = atol(argv[2]);
	alarm_handler(on_alarm, 0);
	alarm_every(us);
	while (forks < k && !is_child) {
		in_call = 1;
		mprotect(page, sizeof page, PROT_READ | PROT_WRITE);
		in_call = 0;
	}
	if (is_child) {
		alarm_every(0);
		pairs(50);
		exit(0);
	}
	alarm_every(0);
	int bad = 0, st;
	for (long i = 0; i < k; i++)
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
	printf("%ld %d\n", k, bad);
	return 0;
}
