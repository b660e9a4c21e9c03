/*
 * nopie.c - a program built without PIE that takes the address of malloc, so
 * malloc's canonical address is a PLT entry in this program that jumps
 * through its own GOT entry (the one the attach redirects). Speaks the
 * waiter's protocol: for each line on stdin it makes 4 blocks of 4321 bytes,
 * frees them and prints "kept ADDR N"; it exits 0 at end of file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void *(*const table_malloc)(size_t) = malloc;

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("kept %p 0\n", (void *)table_malloc);
	char buf[256];
	int lines = 0;
	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] != '\n')
				continue;
			void *last = NULL;
			for (int j = 0; j < 4; j++) {
				volatile char *p = table_malloc(4321);
				p[0] = (char)j;
				last = (void *)p;
				free(last);
			}
			printf("kept %p %d\n", last, ++lines);
		}
	}
	return 0;
}
