/*
 * suspended.c - the CREATE_SUSPENDED recipe of StartHeapTrace (seed 001)
 * with include/heaptrail/control.h: start a child that waits before doing
 * anything, start a heap tracing session for its pid, then let it run, so
 * that the trace has every allocation of its work from the first one.
 *
 *     suspended [TRACE.htr]       (default: suspended.htr)
 *
 * On Linux the child "waits suspended" in read() on a pipe: a blocked
 * system call is a safe point for the recorder to be loaded (docs/attach.md).
 * The child's work: 100 blocks of 1000 + i bytes, of which it frees the
 * even ones, so the trace shows 100 allocations and 50 frees.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heaptrail/control.h"

static void child_work(int go_fd)
{
	char c;
	/* Suspended until the parent says go (or is gone). */
	if (read(go_fd, &c, 1) != 1)
		_exit(3);
	void *blocks[100];
	for (int i = 0; i < 100; i++)
		blocks[i] = malloc(1000 + (size_t)i);
	for (int i = 0; i < 100; i += 2)
		free(blocks[i]);
	_exit(blocks[1] ? 0 : 1);
}

int main(int argc, char **argv)
{
	int go[2];
	if (pipe(go) < 0) {
		perror("pipe");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		close(go[1]);
		child_work(go[0]);
	}
	close(go[0]);

	/* Start tracing the suspended child: stacks for allocations and frees. */
	struct ht_trace_properties props = HT_TRACE_PROPERTIES_INIT;
	snprintf(props.file, sizeof(props.file), "%s", argc > 1 ? argv[1] : "suspended.htr");
	props.flags = HT_TRACE_FORCE;
	enum ht_event_type stacks[] = {HT_EV_ALLOC, HT_EV_FREE};
	char name[32];
	snprintf(name, sizeof(name), "suspended-%d", (int)getpid());
	ht_trace_handle h;
	int rc = ht_start_heap_trace(&h, &props, name, &pid, 1, stacks, 2);
	if (rc < 0) {
		fprintf(stderr, "suspended: cannot start the heap trace: %s\n", ht_strerror(rc));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return 1;
	}

	/* Resume it and wait for it to finish its work. */
	if (write(go[1], "g", 1) != 1)
		perror("write");
	close(go[1]);
	int status;
	waitpid(pid, &status, 0);

	rc = ht_stop_heap_trace(h, NULL, &props);
	if (rc < 0) {
		fprintf(stderr, "suspended: cannot stop the heap trace: %s\n", ht_strerror(rc));
		return 1;
	}
	printf("child %d exited with %d\n", (int)pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	printf("trace: %s\nevents written: %llu\nevents lost: %llu\nbuffers lost: %llu\n",
	       props.file, (unsigned long long)props.events_written,
	       (unsigned long long)props.events_lost, (unsigned long long)props.buffers_lost);
	return 0;
}
