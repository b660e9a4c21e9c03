/*
 * rec_fork.c - a process tree for the record tests. The root makes 5 x 2001
 * bytes, forks a child that makes 7 x 2002 and exits 4, waits for it, makes
 * 1 x 2003 and exits 0. The child first forks a grandchild that outlives it
 * (an orphan the session must still collect): it waits 200 ms, makes 3 x
 * 2004 and exits 5.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *volatile keep;

static void blocks(int n, size_t size)
{
	for (int i = 0; i < n; i++)
		keep = malloc(size);
}

int main(void)
{
	blocks(5, 2001);
	pid_t child = fork();
	if (child == 0) {
		if (fork() == 0) {
			struct timespec ts = {0, 200000000};
			nanosleep(&ts, NULL);
			blocks(3, 2004);
			exit(5);
		}
		blocks(7, 2002);
		exit(4);
	}
	int status;
	waitpid(child, &status, 0);
	blocks(1, 2003);
	return WIFEXITED(status) && WEXITSTATUS(status) == 4 ? 0 : 1;
}
