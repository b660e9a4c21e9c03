/*
 * ctl.h - what the control library offers the heaptrail command beyond the
 * public API of include/heaptrail/control.h: limits, name checking and the
 * detail of the last error. Everything else of the library is internal.h's,
 * private to src/control/.
 */
#ifndef HT_CONTROL_CTL_H
#define HT_CONTROL_CTL_H

#include <stdbool.h>

/* Most processes a session attaches to by pid. */
#define HT__CTL_MAX_PIDS 256

/* The name is valid: [A-Za-z0-9._-]{1,63}, not starting with '.'. */
bool ht__ctl_name_ok(const char *name);

/*
 * The detail of the last error of a control call in this thread (what the
 * daemon said: "no process 123", "cannot attach to process 5: ..."), or "".
 * For the CLI's messages; the API's contract is the error code.
 */
const char *ht__ctl_why(void);

/*
 * Remove what the daemon of session NAME left when it died without ending
 * (SIGKILL, a crash): NAME.ctl, NAME.shm and NAME.lock in the session
 * directory, when nobody holds NAME.lock. With NAME NULL, every such
 * session of the directory. Returns how many sessions it removed (0 when
 * they run or do not exist); the directory is put in dir when not NULL.
 */
int ht__ctl_remove_dead(const char *name, char *dir, unsigned long n);

#endif
