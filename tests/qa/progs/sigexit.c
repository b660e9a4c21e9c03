/*
 * sigexit N [USEC]: N malloc/free pairs of 1234 bytes, then a signal whose
 * handler makes 10 mallocs of 4321 bytes and calls exit(42). With USEC, the
 * signal comes from a timer USEC microseconds later, in the middle of an
 * endless malloc/free loop of 999 bytes (anywhere, inside a hook too).
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/time.h>

static void *kept[10];

static void handler(int sig)
{
	(void)sig;
	for (int i = 0; i < 10; i++)
		kept[i] = malloc(4321);
	exit(42);
}

int main(int argc, char **argv)
{
	signal(SIGUSR1, handler);
	signal(SIGALRM, handler);
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	for (int i = 0; i < n; i++)
		free(malloc(1234));
	if (argc > 2) {
		struct itimerval it = {{0, 0}, {0, atoi(argv[2])}};
		setitimer(ITIMER_REAL, &it, NULL);
		for (;;)
			free(malloc(999));
	}
	raise(SIGUSR1);
	return 0;
}
