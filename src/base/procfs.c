/*
 * procfs.c - procfs.h: one open-read-close of /proc/PID/stat.
 */
#include "base/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

ssize_t ht__proc_stat_read(int32_t pid, char *buf, size_t len)
{
	char path[64];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
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
