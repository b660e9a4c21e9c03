/*
 * Memory no hook sees: an 8 MiB mapping made with the raw mmap system call
 * and touched (its anonymous RSS printed while it is mapped), a thread that
 * mallocs (glibc makes it an arena), runs 200 ms and waits in read(), then the raw
 * munmap. Prints "rss_anon BYTES" and "thread TID"; the pauses let the
 * session read /proc/PID/maps in each state.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAP_BYTES (8u << 20)

static int pipefd[2];
static volatile pid_t thread_tid;

static void *worker(void *arg)
{
	(void)arg;
	thread_tid = (pid_t)syscall(SYS_gettid);
	void *p = malloc(1000); /* a thread's first malloc makes an arena */
	/* Running, not blocked, for 200 ms: the session's reads of the map
	   meanwhile cannot see its stack pointer, and its new stack must wait
	   for a read that can (qa: it was reported unowned for good). */
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000l + (t.tv_nsec - t0.tv_nsec) < 200000000l);
	char c;
	if (read(pipefd[0], &c, 1) != 1)
		c = 0;
	free(p);
	return NULL;
}

static long rss_anon(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

/* A 64 MiB boundary with room for the mapping: glibc's arenas start at one,
   so the collector must tell them apart by what follows, not by the address. */
static void *arena_boundary(void)
{
	const uintptr_t align = 64ul << 20;
	char *r = (char *)syscall(SYS_mmap, NULL, 2 * align, PROT_NONE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return NULL;
	syscall(SYS_munmap, r, 2 * align);
	return (void *)(((uintptr_t)r + align - 1) & ~(align - 1));
}

/*
 * "guard": the raw mapping at a 64 MiB boundary, then for 600 ms what glibc's
 * new_heap() makes for a moment, a PROT_NONE reservation of 128 MiB that
 * ends where the mapping starts (a guard page before it, to the session's
 * eye), while RSS grows so that the session reads the map; then the
 * reservation goes, and 300 ms later the mapping. It must be found once and
 * gone once (qa: it was gone and found again, taken for a thread's stack).
 */
static int guard_case(void)
{
	const uintptr_t align = 64ul << 20;
	char *r = (char *)syscall(SYS_mmap, NULL, 4 * align, PROT_NONE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return 1;
	syscall(SYS_munmap, r, 4 * align);
	char *at = (char *)((((uintptr_t)r + align - 1) & ~(align - 1)) + 2 * align);
	char *m = (char *)syscall(SYS_mmap, at, MAP_BYTES, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (m != at)
		return 1;
	memset(m, 1, MAP_BYTES);
	printf("map %p\n", (void *)m);
	fflush(stdout);
	usleep(300000);
	char *g = (char *)syscall(SYS_mmap, at - 2 * align, 2 * align, PROT_NONE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
				  -1, 0);
	if (g != at - 2 * align)
		return 1;
	char *grow[30];
	for (int i = 0; i < 30; i++) {
		grow[i] = (char *)syscall(SYS_mmap, NULL, 1u << 20, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (grow[i] == MAP_FAILED)
			return 1;
		memset(grow[i], 1, 1u << 20);
		usleep(20000);
	}
	syscall(SYS_munmap, g, 2 * align);
	for (int i = 0; i < 30; i++)
		syscall(SYS_munmap, grow[i], 1u << 20);
	usleep(300000);
	syscall(SYS_munmap, m, MAP_BYTES);
	usleep(300000);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "guard"))
		return guard_case();
	char *m = (char *)syscall(SYS_mmap, arena_boundary(), MAP_BYTES, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	memset(m, 1, MAP_BYTES);
	printf("map %p\n", (void *)m);
	printf("rss_anon %ld\n", rss_anon());
	fflush(stdout);
	usleep(300000);
	if (pipe(pipefd))
		return 1;
	pthread_t t;
	pthread_create(&t, NULL, worker, NULL);
	while (!thread_tid)
		usleep(1000);
	usleep(300000);
	printf("thread %d\n", (int)thread_tid);
	syscall(SYS_munmap, m, MAP_BYTES);
	usleep(300000);
	if (write(pipefd[1], "x", 1) != 1)
		return 1;
	pthread_join(t, NULL);
	return 0;
}
