/*
 * alarm_timer.h - the real-time timer of the signal tests' programs:
 * SIGALRM's handler (SA_RESTART and flags) and a period in microseconds
 * (0 stops it).
 */
#ifndef HT_TESTS_ALARM_TIMER_H
#define HT_TESTS_ALARM_TIMER_H

#include <signal.h>
#include <sys/time.h>

static inline void alarm_handler(void (*fn)(int), int flags)
{
	struct sigaction sa = {0};
	sa.sa_handler = fn;
	sa.sa_flags = SA_RESTART | flags;
	sigaction(SIGALRM, &sa, NULL);
}

static inline void alarm_every(long us)
{
	struct itimerval it = {{0, us}, {0, us}};
	setitimer(ITIMER_REAL, &it, NULL);
}

#endif
