/*
 * spawn_tree.c - a process tree for tests/cli/: the root allocates 3 blocks of
 * 1111 bytes, forks a child that allocates 7 blocks of 2222 and exits 3, then
 * starts child_prog through posix_spawn (5 blocks, exit 5) and through fork +
 * execv (4 blocks, exit 4), reaps all three and exits 0. child_prog is found
 * next to this program.
 */
#include <libgen.h>
#include <limits.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prog.h"

extern char **environ;

NOINLINE static void root_alloc(void)
{
	for (int i = 0; i < 3; i++)
		prog_sink(malloc(1111)); /* @root_alloc */
}

NOINLINE static void fork_child_alloc(void)
{
	for (int i = 0; i < 7; i++)
		prog_sink(malloc(2222)); /* @fork_child_alloc */
}

static int wait_status(pid_t pid)
{
	int st;
	PROG_CHECK(waitpid(pid, &st, 0) == pid);
	PROG_CHECK(WIFEXITED(st));
	return WEXITSTATUS(st);
}

int main(int argc, char **argv)
{
	/* child_prog sits in the same folder as this program. */
	char self[PATH_MAX], child[PATH_MAX + 16];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	PROG_CHECK(n > 0);
	self[n] = 0;
	snprintf(child, sizeof(child), "%s/child_prog", dirname(self));

	root_alloc();

	pid_t pid = fork();
	PROG_CHECK(pid >= 0);
	if (pid == 0) {
		fork_child_alloc();
		exit(3);
	}
	PROG_CHECK(wait_status(pid) == 3);

	char *spawn_argv[] = {child, "5", NULL};
	PROG_CHECK(posix_spawn(&pid, child, NULL, NULL, spawn_argv, environ) == 0);
	PROG_CHECK(wait_status(pid) == 5);

	pid = fork();
	PROG_CHECK(pid >= 0);
	if (pid == 0) {
		char *exec_argv[] = {child, "4", NULL};
		execv(child, exec_argv);
		_exit(127);
	}
	PROG_CHECK(wait_status(pid) == 4);
	return 0;
}
