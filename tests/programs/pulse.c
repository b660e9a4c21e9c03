/*
 * pulse.c - a long-running target for the re-attach tests: for each byte 'a'
 * on stdin it makes exactly 100 malloc(777)/free pairs and answers "ok\n" on
 * stdout; at end of input it exits 0. A trace attached to it counts exactly
 * 100 allocations of 777 bytes per pulse, whatever was attached before.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void pulse(void)
{
	for (int i = 0; i < 100; i++) {
		char *volatile p = malloc(777);
		if (p)
			p[0] = (char)i;
		free(p);
	}
}

int main(void)
{
	char c;
	while (read(0, &c, 1) == 1) {
		if (c != 'a')
			continue;
		pulse();
		if (write(1, "ok\n", 3) != 3)
			return 1;
	}
	return 0;
}
