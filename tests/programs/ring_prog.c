/*
 * ring_prog.c - a program for the flight recorder's tests (tests/cli/e2e.py,
 * ring-* cases): blocks made before the window, one live across it and one
 * freed in it, a mapping live across it, and churn that pushes them out of
 * a small ring. Usage: ring_prog CHURN PHASES [abort|child-abort]. It prints
 * "a=ADDR b=ADDR m=ADDR", then for each phase P churns CHURN malloc/free
 * pairs of 48 + P bytes, prints "phase P" and waits for a line on stdin.
 * Then it frees b, allocates c (3333 bytes, printed "c=ADDR") and exits 0;
 * with abort it aborts instead, with child-abort a child it forks
 * allocates 4444 bytes and aborts first.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void churn(int n, size_t size)
{
	for (int i = 0; i < n; i++) {
		volatile char *p = malloc(size);
		p[0] = 1;
		free((void *)p);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int n = atoi(argv[1]), phases = atoi(argv[2]);
	const char *mode = argc > 3 ? argv[3] : "";
	char *a = malloc(1111), *b = malloc(2222);
	char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!a || !b || m == MAP_FAILED)
		return 1;
	memset(m, 1, 1 << 20);
	printf("a=%p b=%p m=%p\n", (void *)a, (void *)b, (void *)m);
	fflush(stdout);
	char line[64];
	if (phases == 0)
		churn(n, 48);
	for (int p = 1; p <= phases; p++) {
		churn(n, 48 + (size_t)p);
		printf("phase %d\n", p);
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	free(b);
	char *c = malloc(3333);
	printf("c=%p\n", (void *)c);
	fflush(stdout);
	if (!strcmp(mode, "child-abort")) {
		pid_t pid = fork();
		if (pid == 0) {
			volatile char *d = malloc(4444);
			d[0] = 1;
			abort();
		}
		int st;
		waitpid(pid, &st, 0);
		printf("child=%d\n", (int)pid);
		fflush(stdout);
	}
	if (!strcmp(mode, "abort"))
		abort();
	return 0;
}
