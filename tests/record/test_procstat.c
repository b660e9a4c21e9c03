/*
 * test_procstat.c - the fields the session reads from /proc/PID/stat
 * (protocol.h's field walk, procfs.h's parent and address-space
 * fingerprint) on command names that hold spaces, parentheses, a line break
 * and digits: made-up texts, and a real child that renamed itself so.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/procfs.h"
#include "base/protocol.h"

#include "check.h"

/* A stat line of pid 4242 named comm: field N is vals[N] (0 when unset),
   field 3 the state letter. */
static void stat_text(char *out, size_t n, const char *comm, char state,
		      const unsigned long long *vals)
{
	int off = snprintf(out, n, "4242 (%s) %c", comm, state);
	for (int f = 4; f <= 52; f++)
		off += snprintf(out + off, n - (size_t)off, " %llu", vals[f]);
	snprintf(out + off, n - (size_t)off, "\n");
}

static const char *const odd[] = {
    "bash", "a b", "x) (y", ") R 1 2 3 (", "two\nlines", "((", "))", "",
};
#define NODD (sizeof(odd) / sizeof(odd[0]))

static void test_texts(void)
{
	unsigned long long vals[53] = {0};
	vals[4] = 777;	      /* ppid */
	vals[22] = 123456789; /* start time */
	for (int f = 26; f <= 28; f++)
		vals[f] = 0x400000ull + (unsigned long long)f * 4096;
	for (int f = 45; f <= 51; f++)
		vals[f] = 0x7ffd0000ull + (unsigned long long)f * 64;
	char buf[1024];
	stat_text(buf, sizeof(buf), "bash", 'S', vals);
	uint64_t want = ht__proc_stat_fingerprint(buf);
	CHECK(want != 0);
	for (size_t i = 0; i < NODD; i++) {
		stat_text(buf, sizeof(buf), odd[i], 'S', vals);
		const char *p = ht__proc_stat_state(buf);
		CHECK(p && *p == 'S');
		char state = 0;
		uint64_t start = 0;
		CHECK_EQ(ht__parse_proc_stat(buf, &state, &start), 1);
		CHECK_EQ(state, 'S');
		CHECK_U64(start, 123456789);
		CHECK_EQ(ht__proc_stat_ppid(buf), 777);
		CHECK_U64(ht__proc_stat_fingerprint(buf), want);
		p = p ? ht__proc_stat_skip(p, 52 - 3) : NULL;
		CHECK(p && strcmp(p, "0\n") == 0);
		CHECK(p && !ht__proc_stat_skip(p, 1));
	}

	/* The fingerprint reads fields 26-28 and 45-51 and nothing else. */
	for (int f = 4; f <= 52; f++) {
		unsigned long long keep = vals[f];
		vals[f] += 8192;
		stat_text(buf, sizeof(buf), ") Z 1 (", 'S', vals);
		int in = (f >= 26 && f <= 28) || (f >= 45 && f <= 51);
		if ((ht__proc_stat_fingerprint(buf) != want) != in) {
			fprintf(stderr, "field %d: fingerprint %s\n", f,
				in ? "unchanged" : "changed");
			check_failures++;
		}
		vals[f] = keep;
	}
	unsigned long long zeros[53] = {0};
	zeros[4] = 9;
	stat_text(buf, sizeof(buf), "hidden", 'R', zeros);
	CHECK_U64(ht__proc_stat_fingerprint(buf), 0); /* not readable: unknown */

	/* Texts that do not parse. */
	const char *bad[] = {"", "4242 bash S 1", "4242 (bash)", "4242 (bash) ", "4242 (bash)S 1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char state;
		uint64_t start;
		CHECK(!ht__proc_stat_state(bad[i]));
		CHECK_EQ(ht__parse_proc_stat(bad[i], &state, &start), 0);
		CHECK_EQ(ht__proc_stat_ppid(bad[i]), 0);
		CHECK_U64(ht__proc_stat_fingerprint(bad[i]), 0);
	}
	/* Cut short before field 22 (a buffer too small): no start time. */
	char state;
	uint64_t start;
	CHECK_EQ(ht__parse_proc_stat("1 (a) b) R 5 6 7", &state, &start), 0);
	CHECK_EQ(ht__proc_stat_ppid("1 (a) b) R 5 6 7"), 5);
}

/* A forked child keeps its parent's address space, so its fingerprint;
   renamed, its own stat still gives its parent and state. */
static void test_real(void)
{
	char buf[1024];
	CHECK(ht__proc_stat_read(0, buf, sizeof(buf)) > 0);
	uint64_t mine = ht__proc_stat_fingerprint(buf);
	pid_t parent = getpid();
	for (size_t i = 0; i < NODD; i++) {
		int fd[2];
		CHECK(pipe(fd) == 0);
		pid_t pid = fork();
		if (pid == 0) {
			close(fd[0]);
			prctl(PR_SET_NAME, odd[i]);
			char b[1024];
			int ok = ht__proc_stat_read(0, b, sizeof(b)) > 0 &&
				 ht__proc_stat_ppid(b) == parent &&
				 ht__proc_stat_fingerprint(b) == mine && ht__proc_stat_state(b) &&
				 *ht__proc_stat_state(b) == 'R';
			char name[32] = "";
			prctl(PR_GET_NAME, name);
			ok = ok && strcmp(name, odd[i]) == 0 && strstr(b, name);
			(void)!write(fd[1], ok ? "1" : "0", 1);
			_exit(0);
		}
		close(fd[1]);
		char r = 0;
		CHECK_EQ(read(fd[0], &r, 1), 1);
		close(fd[0]);
		if (r != '1') {
			fprintf(stderr, "child named %s: its stat did not parse\n", odd[i]);
			check_failures++;
		}
		/* Its parent, from outside, while it is a zombie. */
		usleep(1000);
		char b[1024];
		for (int tries = 0; tries < 20000; tries++) {
			CHECK(ht__proc_stat_read(pid, b, sizeof(b)) > 0);
			const char *p = ht__proc_stat_state(b);
			if (p && *p == 'Z')
				break;
			usleep(1000);
		}
		CHECK_EQ(ht__proc_stat_ppid(b), parent);
		CHECK(ht__proc_stat_state(b) && *ht__proc_stat_state(b) == 'Z');
		waitpid(pid, NULL, 0);
	}
}

int main(void)
{
	test_texts();
	test_real();
	CHECK_DONE();
}
