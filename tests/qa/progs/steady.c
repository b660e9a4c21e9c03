/*
 * steady N SECONDS FILE: N malloc/free pairs of 4242 bytes spread evenly
 * over SECONDS, writing how many it made so far to FILE every few
 * milliseconds (a fixed-width number, rewritten in place), so that a test
 * knows what the program had done at any moment. Prints "steady N".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void report(int fd, long n)
{
	char line[32];
	int len = snprintf(line, sizeof(line), "%20ld\n", n);
	if (pwrite(fd, line, (size_t)len, 0) != len)
		exit(2);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	long n = atol(argv[1]);
	double secs = atof(argv[2]);
	int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || n <= 0 || secs <= 0)
		return 2;
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long made = 0;
	report(fd, 0);
	while (made < n) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		double el = (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
		/* Catch up with the schedule, then report and sleep a little. */
		long due = el >= secs ? n : (long)((double)n * el / secs);
		for (; made < due; made++) {
			char *p = malloc(4242);
			p[0] = 1;
			free(p);
		}
		report(fd, made);
		struct timespec d = {0, 2000000};
		nanosleep(&d, NULL);
	}
	report(fd, made);
	printf("steady %ld\n", made);
	return 0;
}
