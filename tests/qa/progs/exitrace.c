/* exitrace THREADS: main returns 3 while THREADS threads still allocate. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *spin(void *arg)
{
	(void)arg;
	for (;;)
		free(malloc(4242));
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	pthread_t t;
	for (int i = 0; i < n; i++)
		pthread_create(&t, NULL, spin, NULL);
	usleep(50000);
	printf("bye\n");
	return 3;
}
