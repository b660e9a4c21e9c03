/*
 * fork_inherit.c - a fork child that frees blocks its parent allocated
 * before the fork (docs/processes.md): the parent allocates N blocks of 100
 * bytes, forks, and frees its last P after the fork; the child frees the
 * first K, reallocates the next one, allocates M blocks of 200 bytes of its
 * own and frees one of them. Modes (argv[5]):
 *   exit   the child ends with _exit(0) (nothing else freed);
 *   exec   the child execs argv[6] (a program) instead;
 *   grand  the child forks a grandchild that frees the parent's next G = 3
 *          blocks and one of the child's own, then _exit(0)s;
 *   race   the parent frees every block at once after the fork while the
 *          child frees them too (each process its own copy): the child's
 *          frees are of its inherited blocks whatever the order.
 * The parent waits and returns 0; every count is the tests' expected value.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prog.h"

#define MAXN 4096

static void *blocks[MAXN];

NOINLINE static void parent_alloc(int n)
{
	for (int i = 0; i < n; i++)
		blocks[i] = malloc(100); /* @parent_alloc */
}

NOINLINE static void free_range(int from, int to)
{
	for (int i = from; i < to; i++)
		free(blocks[i]); /* @free_range */
}

NOINLINE static void child_alloc(void **own, int m)
{
	for (int i = 0; i < m; i++)
		own[i] = malloc(200); /* @child_alloc */
}

static void reap(pid_t pid)
{
	int st;
	PROG_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void child(int n, int k, int m, const char *mode, char **argv)
{
	static void *own[MAXN];
	if (!strcmp(mode, "race")) {
		free_range(0, n);
		_exit(0);
	}
	free_range(0, k);
	prog_sink(blocks[k] = realloc(blocks[k], 300)); /* @child_realloc */
	child_alloc(own, m);
	free(own[0]);
	if (!strcmp(mode, "exec")) {
		execv(argv[6], argv + 6);
		_exit(98);
	}
	if (!strcmp(mode, "grand")) {
		pid_t g = fork();
		PROG_CHECK(g >= 0);
		if (!g) {
			free_range(k + 1, k + 4);
			free(own[1]);
			_exit(0);
		}
		reap(g);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	PROG_CHECK(argc >= 6);
	int n = atoi(argv[1]), k = atoi(argv[2]), m = atoi(argv[3]), p = atoi(argv[4]);
	const char *mode = argv[5];
	PROG_CHECK(n <= MAXN && m <= MAXN && m >= 2 && k + 4 + p <= n);
	parent_alloc(n);
	pid_t pid = fork();
	PROG_CHECK(pid >= 0);
	if (!pid)
		child(n, k, m, mode, argv);
	if (!strcmp(mode, "race"))
		free_range(0, n);
	else
		free_range(n - p, n);
	reap(pid);
	return 0;
}
