/*
 * malloc_family.c - calls every function of the malloc family a known number
 * of times with known sizes, through known stacks, for tests/cli/. The lines
 * marked "@name" are found by the tests to check file:line of stack frames.
 *
 *   malloc         10 x 1000 (main -> alloc_level1 -> alloc_level2 -> alloc_level3),
 *                  1 x 64 (do_realloc_cases), 3 x 4242 leaked (do_leak)
 *   malloc failed  1 (do_failed_malloc)
 *   calloc         5 x (7, 100)
 *   realloc        realloc(NULL,100), 100->200->400->800, realloc(p,0), 1 failed
 *   reallocarray   2 x (NULL, 3, 300)
 *   posix_memalign 3 x (64, 512)   aligned_alloc 3 x (128, 1024)
 *   memalign       2 x (256, 2048) valloc 2 x 3000   pvalloc 1 x 5000
 *   free           29; outstanding at exit: the 3 leaked blocks (12726 bytes)
 */
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include "prog.h"

static volatile size_t huge_size = (size_t)1 << 62;

NOINLINE void *alloc_level3(size_t n)
{
	return malloc(n); /* @alloc_level3 */
}

NOINLINE void *alloc_level2(size_t n)
{
	return alloc_level3(n);
}

NOINLINE void *alloc_level1(size_t n)
{
	return alloc_level2(n);
}

NOINLINE static void do_calloc(void)
{
	for (int i = 0; i < 5; i++) {
		void *p = calloc(7, 100); /* @do_calloc */
		PROG_CHECK(p);
		free(p);
	}
}

NOINLINE static void do_realloc_cases(void)
{
	void *p = realloc(NULL, 100); /* @realloc_null */
	PROG_CHECK(p);
	p = realloc(p, 200);
	PROG_CHECK(p);
	p = realloc(p, 400);
	PROG_CHECK(p);
	p = realloc(p, 800);
	PROG_CHECK(p);
	p = realloc(p, 0); /* glibc frees and returns NULL */
	PROG_CHECK(p == NULL);

	void *q = malloc(64);
	PROG_CHECK(q);
	void *r = realloc(q, huge_size); /* @realloc_failed */
	PROG_CHECK(r == NULL);
	free(q);
}

NOINLINE static void do_reallocarray(void)
{
	for (int i = 0; i < 2; i++) {
		void *p = reallocarray(NULL, 3, 300);
		PROG_CHECK(p);
		free(p);
	}
}

NOINLINE static void do_aligned(void)
{
	for (int i = 0; i < 3; i++) {
		void *p = NULL;
		PROG_CHECK(posix_memalign(&p, 64, 512) == 0);
		PROG_CHECK(((uintptr_t)p & 63) == 0);
		free(p);
	}
	for (int i = 0; i < 3; i++) {
		void *p = aligned_alloc(128, 1024);
		PROG_CHECK(p && ((uintptr_t)p & 127) == 0);
		free(p);
	}
	for (int i = 0; i < 2; i++) {
		void *p = memalign(256, 2048);
		PROG_CHECK(p && ((uintptr_t)p & 255) == 0);
		free(p);
	}
	for (int i = 0; i < 2; i++) {
		void *p = valloc(3000);
		PROG_CHECK(p);
		free(p);
	}
	void *p = pvalloc(5000);
	PROG_CHECK(p);
	free(p);
}

NOINLINE static void do_failed_malloc(void)
{
	void *p = malloc(huge_size); /* @failed_malloc */
	PROG_CHECK(p == NULL);
}

NOINLINE static void do_leak(void)
{
	for (int i = 0; i < 3; i++)
		prog_sink(malloc(4242)); /* @do_leak */
}

int main(void)
{
	void *blocks[10];
	for (int i = 0; i < 10; i++) {
		blocks[i] = alloc_level1(1000);
		PROG_CHECK(blocks[i]);
	}
	do_calloc();
	do_realloc_cases();
	do_reallocarray();
	do_aligned();
	do_failed_malloc();
	do_leak();
	for (int i = 0; i < 10; i++)
		free(blocks[i]);
	return 0;
}
