/*
 * 300 short threads, one after another, each allocating once: their rings
 * must be released and reused (the session has only a few). Then detached
 * threads at once, more than the rings: they wait their turn. Arguments:
 * how many detached threads (20) and how long each holds its ring between
 * its malloc and free, in ms (0): held longer, the last ones wait for many
 * others before them; how long each of the 300 holds it, in ms (0).
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static long hold_ms;

static void *run(void *arg)
{
	(void)arg;
	void *p = malloc(13001);
	if (hold_ms) {
		struct timespec ts = {hold_ms / 1000, hold_ms % 1000 * 1000000};
		nanosleep(&ts, NULL);
	}
	free(p);
	return NULL;
}

int main(int argc, char **argv)
{
	int detached = argc > 1 ? atoi(argv[1]) : 20;
	hold_ms = argc > 2 ? atol(argv[2]) : 0;
	long saved = hold_ms;
	hold_ms = argc > 3 ? atol(argv[3]) : 0;
	for (int i = 0; i < 300; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, run, NULL) || pthread_join(t, NULL))
			return 1;
	}
	hold_ms = saved;
	/* and some detached ones */
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	for (int i = 0; i < detached; i++) {
		pthread_t t;
		if (pthread_create(&t, &a, run, NULL))
			return 2;
	}
	pthread_exit(NULL);
}
