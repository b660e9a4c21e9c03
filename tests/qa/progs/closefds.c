/*
 * closefds [all]: closes every descriptor from 3 (from 0 with "all", then
 * reopens 0-2 on /dev/null) with close_range, like daemons and sandboxes do
 * at start; then 500 malloc/free pairs of 3333 bytes, a fork whose child
 * makes 50 of 3334 bytes and execs "sh -c 'exit 9'". Exits with the
 * child's status + 1.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int all = argc > 1 && argv[1][0] == 'a';
	if (syscall(SYS_close_range, all ? 0u : 3u, ~0u, 0) != 0)
		return 100;
	if (all && (open("/dev/null", O_RDONLY) != 0 || open("/dev/null", O_WRONLY) != 1 ||
		    open("/dev/null", O_WRONLY) != 2))
		return 101;
	for (int i = 0; i < 500; i++)
		free(malloc(3333));
	pid_t p = fork();
	if (p == 0) {
		for (int i = 0; i < 50; i++)
			free(malloc(3334));
		execl("/bin/sh", "sh", "-c", "exit 9", (char *)0);
		_exit(127);
	}
	int st = 0;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) + 1 : 102;
}
