/*
 * envexec clear|nosession|nopreload|keep: 100 malloc/free pairs of 5555
 * bytes, then changes the environment (clearenv, or unsets one of the two
 * variables heaptrail sets, or nothing) and execs a shell that prints "Hi"
 * and exits 11. The new image runs untraced (or traced, with keep).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	for (int i = 0; i < 100; i++)
		free(malloc(5555));
	const char *how = argc > 1 ? argv[1] : "clear";
	if (!strcmp(how, "clear"))
		clearenv();
	else if (!strcmp(how, "nosession"))
		unsetenv("HEAPTRAIL_SESSION");
	else if (!strcmp(how, "nopreload"))
		unsetenv("LD_PRELOAD");
	execl("/bin/sh", "sh", "-c", "x=$(echo hi | tr h H); echo $x; exit 11", (char *)0);
	return 127;
}
