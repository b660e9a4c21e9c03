/*
 * Process life under the recorder: a fork child (exit code 7, reaped with
 * waitpid), a clone child without CLONE_VM (exit code 9, reaped with wait4),
 * a _Fork child (_exit code 8, reaped with waitid), then an exec of this program in the same pid
 * ("exec" mode) that exits 5.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile void *keep;

static int clone_child(void *arg)
{
	keep = malloc(7004);
	free((void *)keep);
	return 9;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "exec")) {
		keep = malloc(7003);
		return 5;
	}
	keep = malloc(7001);
	pid_t c = fork();
	if (c == 0) {
		keep = malloc(7002);
		exit(7);
	}
	int st;
	if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
		return 20;

	static char stack[64 * 1024] __attribute__((aligned(16)));
	pid_t k = clone(clone_child, stack + sizeof stack, SIGCHLD, NULL);
	if (k < 0 || wait4(k, &st, 0, NULL) != k || !WIFEXITED(st) || WEXITSTATUS(st) != 9)
		return 21;

	/* _Fork runs no atfork handlers; reaped with waitid */
	pid_t f = _Fork();
	if (f == 0) {
		keep = malloc(7005);
		_exit(8);
	}
	siginfo_t si;
	if (f < 0 || waitid(P_PID, (id_t)f, &si, WEXITED) || si.si_code != CLD_EXITED ||
	    si.si_status != 8)
		return 23;

	execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
	return 22;
}
