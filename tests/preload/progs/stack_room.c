/*
 * Allocations by every allocating function of the malloc family at the
 * bottom of recursions 110 to 169 deep, around and beyond the 128 frames a
 * stack keeps (t_stack_room.sh, run with HEAPTRAIL_STACK_VERIFY=1): where a
 * libunwind walk that begins with more of the recorder's own frames than it
 * leaves room for loses program frames. realloc's record is written by a
 * function of its own (ht__rec_realloc), one frame of ours more than
 * malloc's under the walk: that is where CPython's deepest walks ran out of
 * room in session 25. Every depth is reached from two call sites in turn,
 * so consecutive stacks differ and each capture walks. Sizes mark the
 * functions; every block is freed.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 4
#define DEPTHS 60 /* 110 .. 169 */

static void bottom(int kind)
{
	void *p = NULL;
	switch (kind) {
	case 0:
		p = malloc(7001);
		break;
	case 1:
		p = calloc(1, 7002);
		break;
	case 2:
		p = malloc(16);
		p = realloc(p, 7003);
		break;
	case 3:
		p = realloc(NULL, 7004);
		break;
	case 4:
		p = malloc(16);
		p = reallocarray(p, 5, 1401); /* 7005 */
		break;
	case 5:
		if (posix_memalign(&p, 64, 7006) != 0)
			p = NULL;
		break;
	case 6:
		p = aligned_alloc(64, 7040);
		break;
	case 7:
		p = memalign(64, 7008);
		break;
	}
	if (p)
		memset(p, 1, 16);
	free(p);
}

#define KINDS 8

static void down_a(int depth, int kind);

static void down_b(int depth, int kind)
{
	if (depth > 0)
		down_a(depth - 1, kind);
	else
		bottom(kind);
}

static void down_a(int depth, int kind)
{
	if (depth > 0)
		down_b(depth - 1, kind);
	else
		bottom(kind);
}

int main(void)
{
	for (int r = 0; r < ROUNDS; r++)
		for (int d = 0; d < DEPTHS; d++)
			for (int k = 0; k < KINDS; k++) {
				if ((d + r) & 1)
					down_a(110 + d, k);
				else
					down_b(110 + d, k);
			}
	return 0;
}
