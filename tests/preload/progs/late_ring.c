/*
 * A fork child starts while every ring is taken (main and a thread hold the
 * session's two): its PROCESS_START must still come, written when it
 * finally gets a ring, before its later allocation. Pipes order the steps
 * instead of sleeps (a loaded machine stretched the old 3 s sleeps' margin
 * of 0.4 s away): the holder takes its ring before the fork and lets it go
 * once the child's first allocation gave up; the child allocates again 2 s
 * after the holder ended, time for the collector to free that ring (a
 * thread that gave up tries once per event, without waiting).
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int held[2], gave_up[2], ended[2];

static void *holder(void *arg)
{
	char c;
	free(malloc(15001)); /* takes the second ring */
	if (write(held[1], "h", 1) != 1 || read(gave_up[0], &c, 1) != 1)
		exit(97);
	return arg;
}

int main(void)
{
	pthread_t t;
	char c;
	if (pipe(held) || pipe(gave_up) || pipe(ended))
		return 98;
	free(malloc(15000));
	if (pthread_create(&t, NULL, holder, NULL) || read(held[0], &c, 1) != 1)
		return 98;
	pid_t pid = fork();
	if (pid == 0) {
		free(malloc(15002)); /* no ring: waits, then dropped */
		if (write(gave_up[1], "g", 1) != 1 || read(ended[0], &c, 1) != 1)
			_exit(96);
		sleep(2);
		free(malloc(15003)); /* the holder is gone: a ring again */
		exit(0);
	}
	pthread_join(t, NULL);
	if (write(ended[1], "e", 1) != 1)
		return 98;
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}
