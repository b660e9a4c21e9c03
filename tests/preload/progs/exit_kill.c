/* 1000 allocations, then _exit(3), _Exit(6) or SIGKILL, by argv[1]. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	for (int i = 0; i < 1000; i++)
		malloc(10001);
	if (argc > 1 && !strcmp(argv[1], "kill"))
		kill(getpid(), SIGKILL);
	if (argc > 1 && !strcmp(argv[1], "Exit"))
		_Exit(6);
	_exit(3);
}
