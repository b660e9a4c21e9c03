/*
 * 65536 distinct call stacks: a recursion of depth 16 that goes through one
 * of two call sites at each level, by the bits of i, then mallocs. Makes the
 * recorder's stack table grow past its first size.
 */
#include <stdlib.h>

static void *leaf(void)
{
	return malloc(14001);
}

static void *walk(unsigned bits, int depth)
{
	void *p;
	if (depth == 0)
		return leaf();
	if (bits & 1)
		p = walk(bits >> 1, depth - 1);
	else
		p = walk(bits >> 1, depth - 1);
	return p;
}

int main(void)
{
	for (unsigned i = 0; i < 65536; i++)
		free(walk(i, 16));
	return 0;
}
