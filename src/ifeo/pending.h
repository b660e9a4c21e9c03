/*
 * pending.h - the in-memory buffer of a program that starts before its
 * IFEO session: what the loader hook (hook.c) makes and the session's relay
 * (src/control/relay.c) looks for. The buffer is a session file
 * (src/base/protocol.h) in a memfd; the rest of its header page says
 * which session the program was looking for.
 */
#ifndef HT_IFEO_PENDING_H
#define HT_IFEO_PENDING_H

#define HT__PENDING_NAME                                                                           \
	"heaptrail-pending" /* memfd name: /memfd:heaptrail-pending in /proc/PID/fd */
#define HT__PENDING_RINGS 32u
#define HT__PENDING_RING (1u << 19)
#define HT__PENDING_FD_MIN 900 /* the descriptor is kept at or above this */

/*
 * At this offset of the header page: "xdg=" and the program's
 * XDG_RUNTIME_DIR (empty when unset), NUL-terminated. A session adopts only
 * buffers of programs that would have found it, i.e. that look in the same
 * session directory.
 */
/* Between the header and the exit note's path (protocol.h: the loss table
   at 2048 is the recorder's, as in any session file). */
#define HT__PENDING_TAG_OFFSET 640u
#define HT__PENDING_TAG_MAX 384u

#endif
