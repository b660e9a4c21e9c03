/*
 * signal_timer US N: a real-time timer every US microseconds whose handler
 * allocates and frees 6001 bytes, while the program makes N malloc/free
 * pairs of 6002 bytes with a little work between. Prints how many handlers
 * ran, and how many of them made an mprotect instead (below). With stacks,
 * a handler allocation unwound through the signal frame into the
 * interrupted code took longer than 10 us: the program never ended.
 *
 * glibc's malloc is not reentrant: a handler's malloc that interrupts the
 * program inside malloc or free corrupts the heap (natively too: SIGSEGV in
 * _int_malloc; far more often traced, where a handler is slower than the
 * timer's period and the next one lands a few instructions after the last).
 * So while the program is inside malloc or free (and so inside the
 * recorder's hooks), the handler makes one mprotect of a page to what it
 * is instead, an event that is safe anywhere.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>

#include "alarm_timer.h"
#include "handler_event.h"

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	long us = atol(argv[1]), n = atol(argv[2]);
	alarm_handler(on_alarm_event, 0);
	alarm_every(us);
	heap_pairs(n);
	alarm_every(0);
	printf("%d %d\n", (int)handled, (int)protects);
	return 0;
}
