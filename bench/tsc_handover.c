/*
 * tsc_handover.c - how early a plain rdtsc can read after the load that
 * took what another thread handed over: the bound (eps) the collector's
 * merge needs before allocations may be stamped with rdtsc instead of
 * rdtscp (docs/session-protocol.md, "Time order"). Two threads pinned to
 * two CPUs. The giver stamps a plain rdtsc and then stores a new sequence
 * number (as a free is stamped before the real free's stores); the taker
 * loads the word and stamps a plain rdtsc right after, without waiting for
 * the load (as a hook stamps after malloc's load of the block), and only
 * then tests what it loaded. Prints the taker's stamp minus the giver's
 * for each handover seen first by that load: a negative one is a stamp
 * that came out before the giver's, the inversion the merge must undo.
 * Then the TSC skew between the two CPUs: ping-pong, each side's rdtscp
 * after it saw the other's (skew = half the difference of the two
 * directions' minimum delays).
 * Usage: tsc_handover [HANDOVERS] [CPU_A CPU_B] [rdtscp] (default 200000,
 * 0 1; "rdtscp" stamps the taker's side with rdtscp instead, for contrast).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>

static _Atomic uint64_t word;  /* the giver's sequence number */
static _Atomic uint64_t taken; /* the last one the taker saw */
static uint64_t *given_at;     /* the giver's stamp of each number */
static int64_t *delta;	       /* taker's stamp minus giver's */
static long n_handovers;
static int cpu_a, cpu_b;
static int taker_waits; /* the taker stamps with rdtscp */

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (pthread_setaffinity_np(pthread_self(), sizeof s, &s) != 0)
		fprintf(stderr, "tsc_handover: cannot pin to cpu %d\n", cpu);
}

static void *giver(void *arg)
{
	(void)arg;
	pin(cpu_a);
	for (long i = 1; i <= n_handovers; i++) {
		while (atomic_load_explicit(&taken, memory_order_acquire) != (uint64_t)i - 1)
			_mm_pause();
		given_at[i] = __rdtsc();
		atomic_store_explicit(&word, (uint64_t)i, memory_order_release);
	}
	return NULL;
}

static void taker(void)
{
	pin(cpu_b);
	uint64_t last = 0;
	while (last < (uint64_t)n_handovers) {
		/* The stamp right after the load, before anything tests its value:
		   the branch is predicted "nothing new", so rdtsc runs while the
		   load of the line the giver just wrote is still in flight. */
		uint64_t v = atomic_load_explicit(&word, memory_order_relaxed);
		unsigned aux;
		uint64_t t = taker_waits ? __rdtscp(&aux) : __rdtsc();
		if (v != last) {
			delta[v] = (int64_t)(t - given_at[v]);
			last = v;
			atomic_store_explicit(&taken, v, memory_order_release);
		}
	}
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Side s (0 or 1) waits for its turn (pp_seq's parity), reads the other's
   stamp and stamps with rdtscp, which waits for those loads. */
static _Atomic uint64_t pp_seq, pp_stamp;
static int64_t ping_min[2] = {INT64_MAX, INT64_MAX}; /* delay into side s */
static const long ping_rounds = 100000;

static void pingpong(int s)
{
	unsigned aux;
	for (uint64_t r = (uint64_t)s; r < 2 * (uint64_t)ping_rounds; r += 2) {
		while (atomic_load_explicit(&pp_seq, memory_order_acquire) != r)
			_mm_pause();
		uint64_t other = atomic_load_explicit(&pp_stamp, memory_order_relaxed);
		uint64_t now = __rdtscp(&aux);
		int64_t d = (int64_t)(now - other);
		if (r > 0 && d < ping_min[s])
			ping_min[s] = d;
		atomic_store_explicit(&pp_stamp, now, memory_order_relaxed);
		atomic_store_explicit(&pp_seq, r + 1, memory_order_release);
	}
}

static void *pong(void *arg)
{
	(void)arg;
	pin(cpu_a);
	pingpong(1);
	return NULL;
}

int main(int argc, char **argv)
{
	n_handovers = argc > 1 ? atol(argv[1]) : 200000;
	cpu_a = argc > 3 ? atoi(argv[2]) : 0;
	cpu_b = argc > 3 ? atoi(argv[3]) : 1;
	taker_waits = argc > 4;
	given_at = calloc((size_t)n_handovers + 1, sizeof *given_at);
	delta = calloc((size_t)n_handovers + 1, sizeof *delta);
	if (!given_at || !delta)
		return 1;
	pthread_t th;
	pthread_create(&th, NULL, giver, NULL);
	taker();
	pthread_join(th, NULL);
	int64_t *d = delta + 1;
	qsort(d, (size_t)n_handovers, sizeof *d, cmp64);
	long neg = 0;
	for (long i = 0; i < n_handovers; i++)
		neg += d[i] < 0;
	printf("handovers %ld, taker's %s minus giver's (ticks): min %lld, "
	       "0.01%% %lld, 1%% %lld, median %lld, 99%% %lld; earlier than the giver's: %ld\n",
	       n_handovers, taker_waits ? "rdtscp" : "plain rdtsc", (long long)d[0],
	       (long long)d[n_handovers / 10000], (long long)d[n_handovers / 100],
	       (long long)d[n_handovers / 2], (long long)d[n_handovers * 99 / 100], neg);

	pthread_create(&th, NULL, pong, NULL);
	pin(cpu_b);
	pingpong(0);
	pthread_join(th, NULL);
	/* side 0 runs on cpu_b: min(b - a) = latency + skew, min(a - b) =
	   latency - skew, where skew is cpu_b's counter minus cpu_a's */
	printf("ping-pong rdtscp, min delay cpu %d -> %d: %lld ticks, %d -> %d: %lld ticks; "
	       "skew (cpu %d minus cpu %d) about %lld ticks\n",
	       cpu_a, cpu_b, (long long)ping_min[0], cpu_b, cpu_a, (long long)ping_min[1], cpu_b,
	       cpu_a, (long long)(ping_min[0] - ping_min[1]) / 2);
	return 0;
}
