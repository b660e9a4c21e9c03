/*
 * 300 short threads, one after another, each allocating once: their rings
 * must be released and reused (the session has only a few).
 */
#include <pthread.h>
#include <stdlib.h>

static void *run(void *arg)
{
	free(malloc(13001));
	return NULL;
}

int main(void)
{
	for (int i = 0; i < 300; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, run, NULL) || pthread_join(t, NULL))
			return 1;
	}
	/* and some detached ones */
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	for (int i = 0; i < 20; i++) {
		pthread_t t;
		if (pthread_create(&t, &a, run, NULL))
			return 2;
	}
	pthread_exit(NULL);
}
