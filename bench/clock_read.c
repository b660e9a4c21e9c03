/*
 * clock_read.c - what one timestamp costs the recorder: N reads of
 * CLOCK_MONOTONIC through the vDSO (what ht__clock() does per event) and,
 * for comparison, N rdtsc instructions; prints ns per read of each.
 * Timed in thread CPU time, so that other load on the machine does not count.
 * Usage: clock_read [N] (default 20000000).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000000;
	uint64_t sink = 0, t0 = cpu_ns();
	for (long i = 0; i < n; i++)
		sink += now_ns();
	uint64_t t1 = cpu_ns();
#if defined(__x86_64__)
	for (long i = 0; i < n; i++)
		sink += __builtin_ia32_rdtsc();
#endif
	uint64_t t2 = cpu_ns();
	printf("clock_gettime(CLOCK_MONOTONIC): %.1f ns per read\n", (double)(t1 - t0) / n);
	printf("rdtsc: %.1f ns per read\n", (double)(t2 - t1) / n);
	return sink == 42;
}
