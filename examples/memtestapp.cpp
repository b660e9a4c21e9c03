/*
 * memtestapp.cpp - the Linux counterpart of MemoryTestApp.exe from the WPA
 * memory exercise: a steady 10 MB committed mapping, 10 MB more halfway, ten
 * transient 10 MB spikes (main -> Operation1 -> ManipulateTemporaryBuffer) and
 * a steady leak of 40-byte C++ objects (main -> InnerLoopOperation).
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <sys/mman.h>

/*
 * The timeline is a fixed number of ticks spread evenly over the run, so the
 * counts do not depend on --seconds: one leaked object per tick, the second
 * steady mapping at the middle tick, and a spike in the middle of each tenth
 * of the run. Tests derive their expected values from these constants.
 */
enum {
	TICKS = 1200, /* leaked 40-byte objects over the whole run */
	SPIKES = 10,  /* transient buffers */
	OBJECT_SIZE = 40,
};
static const size_t MB = 1024 * 1024;
static const size_t STEADY_SIZE = 10 * MB;
static const size_t SPIKE_SIZE = 10 * MB;
static const double DEFAULT_SECONDS = 30.0;
static const double SPIKE_FRACTION = 0.1 / 30.0; /* 100 ms of a 30 s run */

/* Exactly 40 bytes so that 'new LeakedObject' asks operator new for 40. */
struct LeakedObject {
	LeakedObject *next;
	char payload[OBJECT_SIZE - sizeof(LeakedObject *)];
};
static_assert(sizeof(LeakedObject) == OBJECT_SIZE, "object size");

/* Keeps the leaked objects reachable from a global so the compiler cannot drop them. */
static LeakedObject *volatile g_objects;
static unsigned long g_leaked;
static size_t g_committed, g_peak;

static void usage(FILE *out)
{
	fprintf(out,
		"usage: memtestapp [--seconds S]\n"
		"\n"
		"Allocates like MemoryTestApp.exe of the WPA memory exercise, over S seconds\n"
		"(default 30): 10 MB committed by main at start and 10 MB more halfway,\n"
		"ten transient 10 MB buffers (Operation1 -> ManipulateTemporaryBuffer),\n"
		"and %d objects of %d bytes leaked with new (InnerLoopOperation).\n",
		TICKS, OBJECT_SIZE);
}

static void note_commit(long delta)
{
	g_committed += delta;
	if (g_committed > g_peak)
		g_peak = g_committed;
}

/* Writes every page so the mapping is really committed, not just reserved. */
__attribute__((noinline)) static void touch(char *p, size_t len)
{
	for (size_t i = 0; i < len; i += 4096)
		p[i] = (char)i;
}

static void sleep_ns(long long ns)
{
	if (ns <= 0)
		return;
	struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void sleep_until(const struct timespec *deadline)
{
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, deadline, nullptr) == EINTR)
		;
}

/* The transient buffer: mapped, used for a while, unmapped. */
__attribute__((noinline)) void ManipulateTemporaryBuffer(long long hold_ns)
{
	void *p =
	    mmap(nullptr, SPIKE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("memtestapp: mmap");
		exit(1);
	}
	note_commit((long)SPIKE_SIZE);
	touch(static_cast<char *>(p), SPIKE_SIZE);
	sleep_ns(hold_ns);
	munmap(p, SPIKE_SIZE);
	note_commit(-(long)SPIKE_SIZE);
}

__attribute__((noinline)) void Operation1(long long hold_ns)
{
	ManipulateTemporaryBuffer(hold_ns);
}

/* The leak: one object per call, never deleted. */
__attribute__((noinline)) void InnerLoopOperation()
{
	LeakedObject *o = new LeakedObject;
	memset(o->payload, 0x5a, sizeof(o->payload));
	o->next = g_objects;
	g_objects = o;
	g_leaked++;
}

int main(int argc, char **argv)
{
	double seconds = DEFAULT_SECONDS;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			char *end;
			seconds = strtod(argv[++i], &end);
			if (*end || !(seconds > 0) || seconds > 86400) {
				fprintf(stderr, "memtestapp: invalid --seconds '%s'\n", argv[i]);
				return 2;
			}
		} else {
			fprintf(stderr, "memtestapp: unknown argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}

	long long run_ns = (long long)(seconds * 1e9);
	long long tick_ns = run_ns / TICKS;
	long long hold_ns = (long long)(seconds * SPIKE_FRACTION * 1e9);
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);

	/* The steady state: committed by main itself at the start. */
	char *steady1 = static_cast<char *>(
	    mmap(nullptr, STEADY_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	if (steady1 == MAP_FAILED) {
		perror("memtestapp: mmap");
		return 1;
	}
	note_commit((long)STEADY_SIZE);
	touch(steady1, STEADY_SIZE);
	char *steady2 = nullptr;

	for (int tick = 0; tick < TICKS; tick++) {
		/* Absolute deadlines: a spike's hold does not shift the rest of the run. */
		long long at = tick * tick_ns;
		struct timespec deadline = start;
		deadline.tv_sec += (time_t)(at / 1000000000);
		deadline.tv_nsec += (long)(at % 1000000000);
		if (deadline.tv_nsec >= 1000000000) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000;
		}
		sleep_until(&deadline);

		InnerLoopOperation();
		if (tick == TICKS / 2) {
			/* The steady state grows halfway through: main again, directly. */
			steady2 =
			    static_cast<char *>(mmap(nullptr, STEADY_SIZE, PROT_READ | PROT_WRITE,
						     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
			if (steady2 == MAP_FAILED) {
				perror("memtestapp: mmap");
				return 1;
			}
			note_commit((long)STEADY_SIZE);
			touch(steady2, STEADY_SIZE);
		}
		if (tick % (TICKS / SPIKES) == TICKS / SPIKES / 2)
			Operation1(hold_ns);
	}

	munmap(steady2, STEADY_SIZE);
	munmap(steady1, STEADY_SIZE);
	note_commit(-2 * (long)STEADY_SIZE);

	struct timespec end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	double took = (double)(end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9;
	printf(
	    "memtestapp: %.1f s, %lu objects of %d bytes leaked, %d transient buffers of %zu MB, "
	    "peak committed %zu MB\n",
	    took, g_leaked, OBJECT_SIZE, SPIKES, SPIKE_SIZE / MB, g_peak / MB);
	return 0;
}
