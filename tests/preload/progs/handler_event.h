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

#endif
