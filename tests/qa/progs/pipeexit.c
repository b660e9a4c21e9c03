/*
 * pipeexit N [late|self]: N children in turn, each with its stdout on a pipe
 * that nobody can read: exit(0) runs every exit handler (the recorder's
 * reports 0), then flushes stdout, and SIGPIPE kills the child. The parent
 * prints each child's status; with "late" it waits for each 300 ms after
 * the fork (the child a zombie until then). With "self", the program then
 * does the same to itself.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* stdout on a pipe without a reader: fully buffered, flushed by exit. */
static void unread_stdout(void)
{
	int fds[2];
	if (pipe(fds) < 0)
		exit(1);
	close(fds[0]);
	dup2(fds[1], 1);
	close(fds[1]);
	signal(SIGPIPE, SIG_DFL);
	free(malloc(100));
	printf("never read\n");
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	int late = argc > 2 && !strcmp(argv[2], "late");
	for (int i = 0; i < n; i++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			unread_stdout();
			exit(0);
		}
		if (late)
			usleep(300000);
		int st;
		if (waitpid(pid, &st, 0) != pid)
			return 1;
		if (WIFSIGNALED(st))
			printf("child %d: signal %d\n", i, WTERMSIG(st));
		else
			printf("child %d: exit %d\n", i, WEXITSTATUS(st));
	}
	if (argc > 2 && !strcmp(argv[2], "self")) {
		fflush(stdout);
		unread_stdout();
	}
	return 0;
}
