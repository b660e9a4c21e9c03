/*
 * procfs.h - reading /proc/PID/stat, which the session, the injector and the
 * control code all consult (liveness, start times, parents, the address-space
 * fingerprint); protocol.h's ht__parse_proc_stat() reads the fields the
 * recorder shares.
 */
#ifndef HT_BASE_PROCFS_H
#define HT_BASE_PROCFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Reads /proc/PID/stat (pid 0: /proc/self/stat) into buf, NUL-terminated,
 * at most len - 1 bytes. Returns the length, or -1 with errno set (ENOENT:
 * no such process) when it cannot be opened or read, or is empty (errno 0).
 */
ssize_t ht__proc_stat_read(int32_t pid, char *buf, size_t len);

#endif
