/*
 * rec_untraced RFD WFD: makes 1000 malloc(321)/free pairs, writes 'r' to
 * WFD, waits for a byte on RFD, makes 700 more pairs, writes 'd' and waits
 * for RFD to close, then exits 0. test_untraced.c stops the session in
 * between, so the second 1400 events are the ones its recorder does not
 * record. Raw reads and writes: nothing but the pairs allocates.
 */
#include <stdlib.h>
#include <unistd.h>

static void churn(int n)
{
	for (int i = 0; i < n; i++)
		free(malloc(321));
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int rfd = atoi(argv[1]), wfd = atoi(argv[2]);
	char c;
	churn(1000);
	if (write(wfd, "r", 1) != 1 || read(rfd, &c, 1) != 1)
		return 3;
	churn(700);
	if (write(wfd, "d", 1) != 1)
		return 4;
	while (read(rfd, &c, 1) > 0)
		;
	return 0;
}
