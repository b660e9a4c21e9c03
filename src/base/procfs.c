/*
 * procfs.c - procfs.h: one open-read-close of /proc/PID/stat (or of one
 * thread's), and the fields the session reads from it, found by
 * protocol.h's field walk.
 */
#include "base/procfs.h"
#include "base/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* One read of path into buf (len - 1 bytes at most, terminated). */
static ssize_t stat_read(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	if (n <= 0) {
		errno = n < 0 ? e : 0;
		return -1;
	}
	buf[n] = 0;
	return n;
}

ssize_t ht__proc_stat_read(int32_t pid, char *buf, size_t len)
{
	char path[64];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	return stat_read(path, buf, len);
}

char ht__proc_task_state(int32_t pid, int32_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	if (stat_read(path, buf, sizeof(buf)) < 0)
		return 0;
	const char *p = ht__proc_stat_state(buf);
	return p ? *p : 0;
}

int32_t ht__proc_stat_ppid(const char *buf)
{
	const char *p = ht__proc_stat_state(buf);
	if (!p || !(p = ht__proc_stat_skip(p, 4 - 3)))
		return 0;
	return (int32_t)strtol(p, NULL, 10);
}

uint64_t ht__proc_stat_fingerprint(const char *buf)
{
	uint64_t h = 0, any = 0;
	const char *p = ht__proc_stat_state(buf);
	for (int field = 3; p && field <= 51; field++, p = ht__proc_stat_skip(p, 1))
		if ((field >= 26 && field <= 28) || field >= 45) {
			unsigned long long v = strtoull(p, NULL, 10);
			h = (h ^ v) * 0x100000001b3ull;
			any |= v;
		}
	return any ? (h ? h : 1) : 0;
}
