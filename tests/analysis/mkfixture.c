/*
 * mkfixture.c - writes one of the analysis test traces (fixture.c) for the
 * end-to-end tests of 'heaptrail analyze': mkfixture PATH NAME.
 */
#include <stdio.h>

#include "fixture.h"
#include "heaptrail/trace.h"

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: mkfixture PATH basic|nosym|ties|many\n");
		return 2;
	}
	int rc = fixture_write(argv[1], argv[2]);
	if (rc < 0) {
		fprintf(stderr, "mkfixture: cannot write '%s': %s\n", argv[1], ht_strerror(rc));
		return 1;
	}
	return 0;
}
