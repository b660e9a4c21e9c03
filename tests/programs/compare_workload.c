/*
 * compare_workload.c - a deterministic heap workload that uses only malloc,
 * calloc, realloc and free (what heaptrack intercepts too), so that tests/cli/
 * can compare heaptrail's counts and peak with heaptrack's for the same run.
 * Peak: 1000 live blocks of 1..4096 bytes (sizes from a fixed LCG) plus 10
 * blocks grown by realloc to 64 KiB; everything is freed before exit.
 */
#include <stdint.h>
#include <stdlib.h>

#include "prog.h"

#define LIVE 1000
#define BIG 10

static uint32_t lcg_state = 12345;

static uint32_t lcg_next(void)
{
	lcg_state = lcg_state * 1103515245u + 12345u;
	return lcg_state >> 8;
}

int main(void)
{
	static void *live[LIVE];
	static void *big[BIG];
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < LIVE; i++) {
			size_t n = 1 + lcg_next() % 4096;
			live[i] = (i % 4 == 0) ? calloc(1, n) : malloc(n);
			PROG_CHECK(live[i]);
		}
		for (int i = 0; i < BIG; i++) {
			big[i] = malloc(1024);
			for (size_t n = 2048; n <= 65536; n *= 2)
				big[i] = realloc(big[i], n);
			PROG_CHECK(big[i]);
		}
		for (int i = 0; i < BIG; i++)
			free(big[i]);
		for (int i = 0; i < LIVE; i++)
			free(live[i]);
	}
	return 0;
}
