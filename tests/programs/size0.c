/*
 * size0: blocks of no bytes between blocks of 8 (a malloc(0) is a 32-byte
 * chunk, the bin of malloc(8)): A = malloc(8), Z = malloc(0), free A, free
 * Z, X = malloc(8), Y = malloc(8) (glibc gives X = Z and Y = A), then frees
 * X and Y, and prints "A Z X Y" in hex on stdout, without stdio's buffer.
 * A reader that put Z's free on the ring of the 8-byte blocks read Y as Z
 * (the trace format's size-0 ring, docs/trace-format.md "Addresses").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
	void *a = malloc(8), *z = malloc(0);
	free(a);
	free(z);
	void *x = malloc(8), *y = malloc(8);
	char line[128];
	int n = snprintf(line, sizeof(line), "%lx %lx %lx %lx\n", (unsigned long)a,
			 (unsigned long)z, (unsigned long)x, (unsigned long)y);
	free(x);
	free(y);
	return write(1, line, (size_t)n) == n ? 0 : 1;
}
