/*
 * handler_event.h - what the signal handlers of signal_alloc and
 * signal_timer do: a malloc(6001)/free pair or, while the program is inside
 * malloc or free (in_heap: glibc's malloc is not reentrant), one mprotect
 * of a page to what it is, an event that is safe anywhere. Counts both.
 */
#ifndef HT_TESTS_HANDLER_EVENT_H
#define HT_TESTS_HANDLER_EVENT_H

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>

static volatile sig_atomic_t handled, in_heap, protects;
static char page[4096] __attribute__((aligned(4096)));

static void handler_event(void)
{
	int e = errno;
	if (in_heap) {
		mprotect(page, sizeof page, PROT_READ | PROT_WRITE);
		protects++;
	} else {
		free(malloc(6001));
	}
	handled++;
	errno = e;
}

/* A SIGALRM handler making one handler_event(). */
static inline void on_alarm_event(int sig)
{
	(void)sig;
	handler_event();
}

/* The program's work: n malloc(6002)/free pairs marked in_heap for the
   handler, with a little work between. */
static inline void heap_pairs(long n)
{
	volatile unsigned x = 0;
	for (long i = 0; i < n; i++) {
		in_heap = 1;
		free(malloc(6002));
		in_heap = 0;
		for (int k = 0; k < 200; k++)
			x += (unsigned)k;
	}
	(void)x; /* the loop is the work; clang would call x unused */
}

#endif
