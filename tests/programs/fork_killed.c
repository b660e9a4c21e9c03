/*
 * fork_killed N [orphans]: forks N children and kills each with SIGKILL
 * right after fork, all on one CPU, so that most are killed before they
 * ever run (a child that runs exits 0 at once), then waits for each.
 * Prints how many died of SIGKILL and how many exited 0. With "orphans" it
 * waits for none and exits: the children's reaper is the session's.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	int orphans = argc > 2 && !strcmp(argv[2], "orphans");
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
	sched_setaffinity(0, sizeof one, &one); /* the children inherit it */
	int killed = 0, exited = 0;
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0)
			_exit(0);
		kill(pid, SIGKILL);
		if (orphans)
			continue;
		int st;
		if (waitpid(pid, &st, 0) != pid)
			return 1;
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
			killed++;
		else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			exited++;
	}
	printf("%d %d\n", killed, exited);
	return 0;
}
