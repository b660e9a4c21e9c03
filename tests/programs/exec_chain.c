/*
 * exec_chain.c - one pid with two images and a child that never execs, for
 * the tests of the exports over several processes (tests/export/). Run
 * without arguments, in this order:
 *
 *   before_exec   6 blocks of 1000 bytes, frees 2 (4000 bytes in 4 blocks
 *                 held when the image is replaced)
 *   fork          the child (no exec) runs child_alloc: 3 blocks of 700,
 *                 frees 1, and ends with _exit(0) holding 1400 in 2 blocks
 *   exec          the parent waits for it, then execs itself with "after":
 *   after_exec    2 blocks of 5000 bytes, never freed; exits 0
 *
 * Change the tests with this comment.
 */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prog.h"

NOINLINE static void before_exec(void)
{
	void *b[6];
	for (int i = 0; i < 6; i++) {
		b[i] = malloc(1000);
		PROG_CHECK(b[i]);
	}
	free(b[1]);
	free(b[4]);
	prog_sink(b[0]);
}

NOINLINE static void child_alloc(void)
{
	void *b[3];
	for (int i = 0; i < 3; i++) {
		b[i] = malloc(700);
		PROG_CHECK(b[i]);
	}
	free(b[2]);
	prog_sink(b[0]);
}

NOINLINE static void after_exec(void)
{
	for (int i = 0; i < 2; i++)
		prog_sink(malloc(5000));
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "after")) {
		after_exec();
		return 0;
	}
	before_exec();
	pid_t pid = fork();
	PROG_CHECK(pid >= 0);
	if (pid == 0) {
		child_alloc();
		_exit(0);
	}
	int st;
	PROG_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char *again[] = {argv[0], "after", NULL};
	execv("/proc/self/exe", again);
	return 127;
}
