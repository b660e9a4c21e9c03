/*
 * vfork_kids: vfork children, which share the parent's memory and thread
 * state until they exec or exit: one that calls _exit(3), one that execs
 * this program with "child" (which makes 10 malloc/free pairs of 5007
 * bytes and exits 4). Around them the parent makes 10 pairs of 5008 bytes
 * before and after. Prints the children's exit codes.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void pairs(size_t size)
{
	for (int i = 0; i < 10; i++)
		free(malloc(size));
}

static int reap(pid_t pid)
{
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child")) {
		pairs(5007);
		return 4;
	}
	pairs(5008);
	pid_t a = vfork();
	if (a == 0)
		_exit(3);
	int ra = reap(a);
	pid_t b = vfork();
	if (b == 0) {
		execl("/proc/self/exe", argv[0], "child", (char *)NULL);
		_exit(127);
	}
	int rb = reap(b);
	pairs(5008);
	printf("%d %d\n", ra, rb);
	return 0;
}
