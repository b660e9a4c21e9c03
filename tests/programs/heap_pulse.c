/*
 * heap_pulse.c - a long-running target with custom heaps (include/heaptrail/
 * heap.h) for the attach tests: "early pool" is declared before main reads its
 * input (before any attach), "late pool" when told. Commands on stdin, one
 * byte each, each answered "ok T\n" (T: ht_heap_traced() then, 0 or 1):
 *   c  create "late pool"
 *   a  a pulse: 5 blocks of 100 bytes from the late pool, 2 of them freed, 1
 *      resized to 200 (a new slot); 2 blocks of 50 from the early pool, kept
 *   d  destroy the late pool (its blocks go with it)
 *   f  fork a child that makes a pulse of its own and exits; answered once
 *      it is reaped
 *   m  map 8 MiB with the raw mmap system call and malloc 4 MiB, touch both
 *      and keep them (memory no hook of a later attach sees being made)
 * So each pulse leaves 3 blocks (400 bytes) live in the late pool and 2
 * (100 bytes) in the early one. Its first line names the handles (the pools'
 * addresses): "early=HANDLE late=HANDLE" in decimal. At end of input it
 * exits 0.
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heaptrail/heap.h"
#include "prog.h"

#define SLOTS 4096

struct pool {
	char mem[SLOTS][8];
	unsigned next;
};

static struct pool early, late;

NOINLINE static void *pool_alloc(struct pool *p, size_t n)
{
	PROG_CHECK(p->next < SLOTS);
	void *r = p->mem[p->next++];
	ht_heap_alloc(p, r, n);
	return r;
}

NOINLINE static void *pool_realloc(struct pool *p, void *old, size_t n)
{
	PROG_CHECK(p->next < SLOTS);
	void *r = p->mem[p->next++];
	ht_heap_realloc(p, old, r, n);
	return r;
}

NOINLINE static void pool_free(struct pool *p, void *r)
{
	ht_heap_free(p, r);
}

NOINLINE static void pulse(void)
{
	void *b[5];
	for (int i = 0; i < 5; i++)
		b[i] = pool_alloc(&late, 100);
	pool_free(&late, b[1]);
	pool_free(&late, b[3]);
	prog_sink(pool_realloc(&late, b[4], 200));
	for (int i = 0; i < 2; i++)
		prog_sink(pool_alloc(&early, 50));
}

int main(void)
{
	ht_heap_create(&early, "early pool");
	printf("early=%lu late=%lu\n", (unsigned long)(uintptr_t)&early,
	       (unsigned long)(uintptr_t)&late);
	fflush(stdout);
	char c;
	while (read(0, &c, 1) == 1) {
		switch (c) {
		case 'c':
			late.next = 0;
			ht_heap_create(&late, "late pool");
			break;
		case 'a':
			pulse();
			break;
		case 'd':
			ht_heap_destroy(&late);
			break;
		case 'm': {
			char *m = (char *)syscall(SYS_mmap, NULL, 8 << 20, PROT_READ | PROT_WRITE,
						  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			char *b = malloc(4 << 20);
			PROG_CHECK(m != MAP_FAILED && b);
			memset(m, 1, 8 << 20);
			memset(b, 1, 4 << 20);
			prog_sink(b);
			break;
		}
		case 'f': {
			pid_t pid = fork();
			PROG_CHECK(pid >= 0);
			if (pid == 0) {
				pulse();
				_exit(0);
			}
			int st;
			PROG_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
				   !WEXITSTATUS(st));
			break;
		}
		default:
			continue;
		}
		char out[] = {'o', 'k', ' ', (char)('0' + !!ht_heap_traced()), '\n'};
		if (write(1, out, sizeof out) != sizeof out)
			return 1;
	}
	return 0;
}
