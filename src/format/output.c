/*
 * output.c - opening an output file safely for every writer (output.h): a
 * device or FIFO is written in place, a regular file is replaced only when
 * asked and then by rename(2) of a sibling temporary file, never by unlink
 * and create, so a name is never without a whole file and a device node is
 * never turned into a regular file.
 */
#define _GNU_SOURCE /* renameat2 */
#include "format/output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errors.h"
#include "heaptrail/trace.h"

static int fail(int rc, char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(int rc, char *why, size_t whylen, const char *fmt, ...)
{
	if (why && whylen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static void release(struct ht__output *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	free(o->path);
	free(o->tmp);
	o->path = o->tmp = NULL;
}

/* A new file next to path (same directory, so rename is atomic): "DIR/.NAME.tmp.XXXXXXXX". */
static int create_sibling(struct ht__output *o, mode_t mode)
{
	const char *slash = strrchr(o->path, '/');
	size_t dirlen = slash ? (size_t)(slash - o->path + 1) : 0;
	const char *base = slash ? slash + 1 : o->path;
	size_t cap = strlen(o->path) + 32;
	if (!(o->tmp = malloc(cap)))
		return HT_ERR_NOMEM;
	for (int tries = 0; tries < 100; tries++) {
		uint32_t r;
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
			r = (uint32_t)getpid() * 2654435761u + (uint32_t)tries;
		snprintf(o->tmp, cap, "%.*s.%s.tmp.%08x", (int)dirlen, o->path, base, r);
		o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
		if (o->fd >= 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	int e = errno;
	free(o->tmp);
	o->tmp = NULL;
	errno = e;
	return ht__error_from_errno(e);
}

int ht__output_open(struct ht__output *o, const char *path, unsigned flags, mode_t mode, char *why,
		    size_t whylen)
{
	memset(o, 0, sizeof(*o));
	o->fd = -1;
	if (!path || !*path)
		return fail(HT_ERR_INVALID, why, whylen, "an empty output file name");
	struct stat st, lst;
	bool exists = stat(path, &st) == 0;
	if (!exists && errno != ENOENT)
		return fail(ht__error_from_errno(errno), why, whylen, "cannot write '%s': %s", path,
			    strerror(errno));
	if (!exists && lstat(path, &lst) == 0)
		return fail(HT_ERR_NOT_FOUND, why, whylen,
			    "'%s' is a symbolic link to a file that does not exist", path);
	/* A symbolic link to a file: the file is what gets replaced. */
	char real[PATH_MAX];
	o->path = strdup(exists && realpath(path, real) ? real : path);
	if (!o->path)
		return HT_ERR_NOMEM;
	int rc;
	if (exists && S_ISDIR(st.st_mode)) {
		rc = fail(HT_ERR_INVALID, why, whylen, "'%s' is a directory", path);
	} else if (exists && S_ISSOCK(st.st_mode)) {
		rc =
		    fail(HT_ERR_INVALID, why, whylen,
			 "'%s' is a socket: heaptrail writes to a regular file, a device or a FIFO",
			 path);
	} else if (exists && !S_ISREG(st.st_mode)) {
		/* Character or block device, FIFO: written where it is, never replaced. */
		o->in_place = o->published = true;
		o->fd = open(o->path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (o->fd >= 0)
			return 0;
		rc = fail(ht__error_from_errno(errno), why, whylen, "cannot write '%s': %s", path,
			  strerror(errno));
	} else if (exists && !(flags & HT__OUT_FORCE)) {
		rc = fail(HT_ERR_EXISTS, why, whylen, "'%s' exists; use --force to replace it",
			  path);
	} else {
		o->replace = exists;
		if ((rc = create_sibling(o, mode)) == 0)
			return 0;
		rc = fail(rc, why, whylen, "cannot create a file next to '%s': %s", path,
			  strerror(errno));
	}
	release(o);
	return rc;
}

FILE *ht__output_fdopen(struct ht__output *o)
{
	FILE *f = fdopen(o->fd, "w");
	if (f)
		o->fd = -1;
	return f;
}

bool ht__output_is_file(const struct ht__output *o)
{
	return !o->in_place;
}

int ht__output_publish(struct ht__output *o, char *why, size_t whylen)
{
	if (!o->tmp)
		return 0;
	int r;
	if (o->replace) {
		r = rename(o->tmp, o->path);
	} else {
		/* Not over a file that appeared since open: that needs --force. */
		r = renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_NOREPLACE);
		if (r < 0 && (errno == EINVAL || errno == ENOSYS) &&
		    (r = link(o->tmp, o->path)) == 0)
			unlink(o->tmp);
	}
	if (r < 0)
		return errno == EEXIST
			   ? fail(HT_ERR_EXISTS, why, whylen,
				  "'%s' was created meanwhile; use --force to replace it", o->path)
			   : fail(ht__error_from_errno(errno), why, whylen, "cannot write '%s': %s",
				  o->path, strerror(errno));
	free(o->tmp);
	o->tmp = NULL;
	o->published = true;
	return 0;
}

int ht__output_commit(struct ht__output *o, char *why, size_t whylen)
{
	int rc = 0;
	if (o->fd >= 0 && close(o->fd) < 0)
		rc = fail(ht__error_from_errno(errno), why, whylen, "cannot write '%s': %s",
			  o->path, strerror(errno));
	o->fd = -1;
	if (!rc)
		rc = ht__output_publish(o, why, whylen);
	if (o->tmp)
		unlink(o->tmp);
	release(o);
	return rc;
}

void ht__output_abort(struct ht__output *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (o->tmp)
		unlink(o->tmp);
	else if (o->published && !o->in_place && o->path)
		unlink(o->path);
	release(o);
}
