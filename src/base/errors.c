/*
 * errors.c - the one errno-to-enum ht_error mapping (errors.h), shared by the
 * trace reader and writer, the session and the control library.
 */
#include "base/errors.h"

#include <errno.h>

#include "heaptrail/trace.h"

int ht__error_from_errno(int errnum)
{
	switch (errnum) {
	case EEXIST:
		return HT_ERR_EXISTS;
	case EACCES:
	case EPERM:
	case EROFS:
		return HT_ERR_PERM;
	case ENOENT:
	case ENOTDIR:
	case ECONNREFUSED:
		return HT_ERR_NOT_FOUND;
	case ENOMEM:
		return HT_ERR_NOMEM;
	case ENOSPC:
	case EDQUOT:
		return HT_ERR_NOSPACE;
	default:
		return HT_ERR_IO;
	}
}
