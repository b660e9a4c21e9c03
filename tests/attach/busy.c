/*
 * busy.c - the busy allocator the attach tests trace: THREADS threads
 * allocate without pause in a pattern whose sizes encode the thread and the
 * iteration, so a trace shows whether any event between a thread's first and
 * last traced one is missing. Each thread publishes its iteration count in
 * COUNTERS_FILE and checks the contents of its own blocks. SIGTERM stops it;
 * it exits 0 when every check passed, 3 when one failed.
 *
 * Iteration i of thread k: p = malloc(LO), q = malloc(HI), every 1024th
 * iteration an mmap/munmap of 4096 * (k + 1) bytes, free(q), free(p), with
 *     LO = 64 + 8 * (i % 4096) + k           (64 .. 32831)
 *     HI = 40000 + 8 * (i / 4096 % 4096) + k (40000 .. 72767)
 *
 * Usage: busy COUNTERS_FILE [THREADS]   (at most 8 threads)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_THREADS 8

static _Atomic int stop;
static _Atomic int bad;
static _Atomic uint64_t *counters;

static void on_term(int sig)
{
	(void)sig;
	atomic_store(&stop, 1);
}

static void *worker(void *arg)
{
	unsigned k = (unsigned)(uintptr_t)arg;
	char name[16];
	snprintf(name, sizeof(name), "busy%u", k);
	pthread_setname_np(pthread_self(), name);
	for (uint64_t i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
		size_t lo = 64 + 8 * (i % 4096) + k, hi = 40000 + 8 * (i / 4096 % 4096) + k;
		uint64_t *p = malloc(lo), *q = malloc(hi);
		if (!p || !q) {
			atomic_store(&bad, 1);
			break;
		}
		p[0] = i;
		q[0] = ~i;
		p[lo / 8 - 1] = k;
		if (i % 1024 == 512) {
			size_t len = 4096 * (k + 1);
			char *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED) {
				atomic_store(&bad, 1);
				break;
			}
			m[len - 1] = 1;
			munmap(m, len);
		}
		if (p[0] != i || q[0] != ~i || p[lo / 8 - 1] != k)
			atomic_store(&bad, 1);
		free(q);
		free(p);
		atomic_store_explicit(&counters[k], i + 1, memory_order_release);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int n = argc > 2 ? atoi(argv[2]) : MAX_THREADS;
	if (n < 1 || n > MAX_THREADS)
		return 2;
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, 4096) < 0)
		return 2;
	counters = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (counters == MAP_FAILED)
		return 2;
	signal(SIGTERM, on_term);
	pthread_t t[MAX_THREADS];
	for (int k = 0; k < n; k++)
		if (pthread_create(&t[k], NULL, worker, (void *)(uintptr_t)k))
			return 2;
	for (int k = 0; k < n; k++)
		pthread_join(t[k], NULL);
	return atomic_load(&bad) ? 3 : 0;
}
