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

/*
 * The state letter (field 3) of thread tid of process pid, from
 * /proc/PID/task/TID/stat: 'R', 'S', 'D', 'T' (stopped by a signal), 't'
 * (stopped by a tracer), ...; 0 when it cannot be read (gone, or a pid of
 * another namespace).
 */
char ht__proc_task_state(int32_t pid, int32_t tid);

/* The parent's pid (field 4) in the text of /proc/PID/stat; 0 when it
   cannot be parsed. */
int32_t ht__proc_stat_ppid(const char *buf);

/*
 * A fingerprint of the address space from the text of /proc/PID/stat: a
 * hash of where its code, stack, data, break, arguments and environment
 * start and end (fields 26-28 and 45-51). They are fixed for the life of an
 * image and come out elsewhere after exec. 0 when unknown (the kernel shows
 * zeros to whoever may not read them).
 */
uint64_t ht__proc_stat_fingerprint(const char *buf);

#endif
