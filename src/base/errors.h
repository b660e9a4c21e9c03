/*
 * errors.h - turning a system error (errno) into heaptrail's enum ht_error,
 * one mapping for every module that does I/O: the trace reader and writer,
 * the session and the control library.
 */
#ifndef HT_BASE_ERRORS_H
#define HT_BASE_ERRORS_H

/* EEXIST: HT_ERR_EXISTS; EACCES, EPERM, EROFS: HT_ERR_PERM; ENOENT, ENOTDIR,
   ECONNREFUSED (a socket nobody listens on): HT_ERR_NOT_FOUND; ENOMEM:
   HT_ERR_NOMEM; ENOSPC, EDQUOT: HT_ERR_NOSPACE; anything else: HT_ERR_IO. */
int ht__error_from_errno(int errnum);

#endif
