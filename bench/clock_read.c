/*
 * clock_read.c - what one timestamp costs the recorder: N reads of
 * CLOCK_MONOTONIC through the vDSO (the recorder's clock where the TSC is
 * not invariant, or with --clock monotonic), N rdtscp (the TSC clock: raw
 * ticks the collector converts), and, for comparison, plain rdtsc and rdtscp
 * followed by the conversion a recorder would do if it converted ticks to ns
 * itself (a sequence-numbered multiplier/shift/offset read from shared
 * memory). Prints ns per read of each, timed in thread CPU time, so that
 * other load on the machine does not count.
 * Usage: clock_read [N] (default 20000000).
 */
#include <stdatomic.h>
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

/* A published conversion, as a recorder converting ticks itself would read it. */
static struct {
	_Atomic uint32_t seq;
	uint64_t tsc, ns;
	uint32_t mult, shift;
} conv = {0, 0, 0, 1u << 24, 24};

static inline uint64_t converted(uint64_t tick)
{
	uint32_t s;
	uint64_t ns;
	do {
		s = atomic_load_explicit(&conv.seq, memory_order_acquire);
		ns = conv.ns +
		     (uint64_t)(((unsigned __int128)(tick - conv.tsc) * conv.mult) >> conv.shift);
	} while (s & 1 || atomic_load_explicit(&conv.seq, memory_order_acquire) != s);
	return ns;
}

static void report(const char *what, uint64_t t0, uint64_t t1, long n)
{
	printf("%s: %.1f ns per read\n", what, (double)(t1 - t0) / (double)n);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000000;
	uint64_t sink = 0, t0 = cpu_ns();
	for (long i = 0; i < n; i++)
		sink += now_ns();
	report("clock_gettime(CLOCK_MONOTONIC)", t0, cpu_ns(), n);
#if defined(__x86_64__)
	unsigned aux;
	t0 = cpu_ns();
	for (long i = 0; i < n; i++)
		sink += __builtin_ia32_rdtscp(&aux);
	report("rdtscp (the recorder's TSC clock)", t0, cpu_ns(), n);
	t0 = cpu_ns();
	for (long i = 0; i < n; i++)
		sink += __builtin_ia32_rdtsc();
	report("rdtsc (unordered)", t0, cpu_ns(), n);
	t0 = cpu_ns();
	for (long i = 0; i < n; i++)
		sink += converted(__builtin_ia32_rdtscp(&aux));
	report("rdtscp + converting to ns in the recorder", t0, cpu_ns(), n);
#endif
	return sink == 42;
}
