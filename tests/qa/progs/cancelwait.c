/*
 * cancelwait N: main asks to cancel a thread (deferred cancellation, the
 * default) before it starts; the thread then makes N malloc/free pairs of
 * 100 bytes and prints "finished N". malloc is not a cancellation point,
 * so the request acts only at the fflush after the loop, whose cleanup
 * must release the stdout lock; main prints "cancelled". Neither the
 * recorder's waits nor its unwinding may be a cancellation point, and the
 * forced unwinding must run the C library's cleanups.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static long n;
static atomic_int go;

static void *run(void *arg)
{
	(void)arg;
	while (!atomic_load(&go))
		;
	for (long i = 0; i < n; i++)
		free(malloc(100));
	printf("finished %ld\n", n);
	fflush(stdout);
	pthread_testcancel();
	return NULL;
}

int main(int argc, char **argv)
{
	n = argc > 1 ? atol(argv[1]) : 20000;
	pthread_t t;
	pthread_create(&t, NULL, run, NULL);
	pthread_cancel(t);
	atomic_store(&go, 1);
	void *r;
	pthread_join(t, &r);
	printf("%s\n", r == PTHREAD_CANCELED ? "cancelled" : "returned");
	return 0;
}
