/*
 * A fork child starts while every ring is taken (main and a sleeping thread
 * hold the session's two): its PROCESS_START must still come, written when
 * it finally gets a ring, before its later allocation.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void *holder(void *arg)
{
	free(malloc(15001)); /* takes the second ring */
	sleep(3);
	return NULL;
}

int main(void)
{
	pthread_t t;
	free(malloc(15000));
	pthread_create(&t, NULL, holder, NULL);
	usleep(200000);
	pid_t c = fork();
	if (c == 0) {
		free(malloc(15002)); /* no ring for 2 s: dropped */
		sleep(3);
		free(malloc(15003)); /* the holder is gone: a ring again */
		exit(0);
	}
	pthread_join(t, NULL);
	int st;
	waitpid(c, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}
