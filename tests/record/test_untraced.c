/*
 * test_untraced.c - a session that stops while its program runs on: the
 * program (rec_untraced, preloaded with the real recorder) makes 1000
 * malloc/free pairs recorded, then, after the session is STOPPING, 700
 * more; the trace has the first 2000 events, nothing lost, and its
 * process says it went untraced at or after the stop with exactly the 1400
 * events it made since (docs/session-protocol.md, "Loss by process"); `info`
 * says so in words.
 *
 * Usage: test_untraced LIBHEAPTRAIL REC_UNTRACED HEAPTRAIL
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/protocol.h"
#include "format/writer.h"
#include "heaptrail/trace.h"
#include "session/session.h"

#include "check.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Ticks the session until the child wrote byte want on fd. */
static int wait_byte(struct ht__session *s, int fd, char want)
{
	uint64_t end = mono_ns() + 30000000000ull;
	while (mono_ns() < end) {
		char c;
		ssize_t n = read(fd, &c, 1);
		if (n == 1)
			return c == want;
		if (s && ht__session_tick(s) < 0)
			return 0;
		usleep(2000);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: test_untraced LIBHEAPTRAIL REC_UNTRACED HEAPTRAIL\n");
		return 2;
	}
	char tmp[] = "/tmp/ht-untraced-XXXXXX";
	if (!mkdtemp(tmp))
		return 2;
	struct ht__session_config cfg = HT__SESSION_CONFIG_INIT;
	cfg.dir = tmp;
	cfg.stack_mask = 0;
	cfg.reap_children = false;
	cfg.sample_rss = false;
	cfg.sample_maps = false;
	struct ht__session *s;
	CHECK_EQ(ht__session_create(&s, &cfg), 0);
	int to_child[2], from_child[2];
	if (pipe(to_child) < 0 || pipe2(from_child, O_NONBLOCK) < 0)
		return 2;
	pid_t pid = fork();
	if (pid == 0) {
		char r[16], w[16];
		snprintf(r, sizeof r, "%d", to_child[0]);
		snprintf(w, sizeof w, "%d", from_child[1]);
		int fl = fcntl(from_child[1], F_GETFL);
		fcntl(from_child[1], F_SETFL, fl & ~O_NONBLOCK);
		close(to_child[1]);
		close(from_child[0]);
		setenv(HT_ENV_SESSION, ht__session_path(s), 1);
		setenv("LD_PRELOAD", argv[1], 1);
		execl(argv[2], argv[2], r, w, (char *)NULL);
		_exit(127);
	}
	close(to_child[0]);
	close(from_child[1]);
	ht__session_set_root(s, pid);

	char trace[128];
	snprintf(trace, sizeof trace, "%s/u.htr", tmp);
	int fd = open(trace, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	struct ht__trace_meta meta = {.stack_mask = 0, .ts_unit_ns = 1};
	struct ht__writer *w = NULL;
	CHECK(fd >= 0 && ht__writer_open_fd(&w, fd, &meta) == 0);
	ht__session_set_sink(s, ht__sink_writer(), w);

	CHECK(wait_byte(s, from_child[0], 'r'));
	/* What ht__session_finish() does first: recorders stop recording. */
	uint64_t stop_ts = mono_ns() - ht__session_t0(s);
	atomic_store(&ht__session_header(s)->state, HT_SESSION_STOPPING);
	CHECK_EQ(write(to_child[1], "g", 1), 1);
	CHECK(wait_byte(NULL, from_child[0], 'd'));
	CHECK_EQ(ht__session_finish(s, false, NULL, NULL), 0);
	const struct ht__session_stats *st = ht__session_stats(s);
	ht__writer_set_losses(w, st->lost_lossy, st->lost_no_buffer, st->lost_in_handler);
	CHECK_EQ(ht__writer_finish(w, st->duration_ns, st->lost, 0), 0);
	close(to_child[1]);
	int status = 0;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ht__session_destroy(s);

	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, trace), 0);
	if (r) {
		struct ht_event ev;
		uint64_t allocs = 0, frees = 0, last_ts = 0;
		while (ht_reader_next(r, &ev) > 0) {
			allocs += ev.type == HT_EV_ALLOC && ev.size == 321;
			frees += ev.type == HT_EV_FREE;
			last_ts = ev.ts;
		}
		CHECK_EQ(allocs, 1000);
		CHECK_EQ(frees, 1000);
		CHECK_EQ(ht_reader_info(r)->events_lost, 0);
		CHECK_EQ(ht_reader_process_count(r), 1);
		const struct ht_process *p = ht_reader_process(r, 0);
		CHECK(p != NULL);
		if (p) {
			CHECK_EQ(p->events_untraced, 1400);
			CHECK(p->untraced_from_ts >= stop_ts);
			CHECK(p->untraced_from_ts >= last_ts);
			CHECK_EQ(p->lost_lossy + p->lost_no_buffer + p->lost_in_handler, 0);
			CHECK_EQ(p->lost_from_ts, 0);
		}
		ht_reader_close(r);
	}

	char cmd[512], line[512];
	snprintf(cmd, sizeof cmd, "%s info %s", argv[3], trace);
	FILE *f = popen(cmd, "r");
	int said = 0;
	while (f && fgets(line, sizeof line, f))
		said += strstr(line, "untraced from ") &&
			strstr(line, "1400 events after that") != NULL;
	CHECK(f && pclose(f) == 0);
	CHECK_EQ(said, 1);
	unlink(trace);
	rmdir(tmp);
	if (check_failures)
		fprintf(stderr, "test_untraced: %d checks failed\n", check_failures);
	return check_failures ? 1 : 0;
}
