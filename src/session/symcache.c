/*
 * The per-user symbol cache of docs/symbol-cache.md: one file per module
 * build-id under $XDG_CACHE_HOME/heaptrail/symbols holding the symbols of
 * the frames recordings needed. Reading or writing it never fails a
 * recording: without it the symbols come from elfutils as before.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session/symcache.h"
#include "base/vec.h"

#define MAGIC "HTSYMC1"
#define HEAD 16
#define NONE 0xffffu

struct ht__symcache_ent {
	uint64_t rel;
	size_t off; /* of the record's u8 n */
};

static int ent_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct ht__symcache_ent *)a)->rel;
	uint64_t y = ((const struct ht__symcache_ent *)b)->rel;
	return x < y ? -1 : x > y;
}

/* mkdir -p with 0700 for each missing level below an existing one. */
static int make_dirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int rc = mkdir(path, 0700);
		*p = '/';
		if (rc != 0 && errno != EEXIST)
			return -1;
	}
	return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

static char *dir_path(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	char *d = NULL;
	if (xdg && *xdg == '/') {
		if (asprintf(&d, "%s/heaptrail/symbols", xdg) < 0)
			d = NULL;
	} else if (home && *home == '/') {
		if (asprintf(&d, "%s/.cache/heaptrail/symbols", home) < 0)
			d = NULL;
	}
	return d;
}

/* Is the separate debug file Debian's -dbgsym packages install there? */
static uint8_t debug_present(const char *hex)
{
	char p[160];
	struct stat st;
	snprintf(p, sizeof p, "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
	return stat(p, &st) == 0;
}

/* Walks the records: fills idx when given; returns their number or -1. */
static long parse(const uint8_t *b, size_t len, struct ht__symcache_ent *idx)
{
	size_t at = HEAD;
	long n = 0;
	while (at < len) {
		if (len - at < 9)
			return -1;
		uint64_t rel;
		memcpy(&rel, b + at, 8);
		size_t rec = at + 8;
		unsigned k = b[rec];
		at = rec + 1;
		for (unsigned i = 0; i < k; i++) {
			uint16_t fl, pl;
			if (len - at < 8)
				return -1;
			memcpy(&fl, b + at + 4, 2);
			memcpy(&pl, b + at + 6, 2);
			size_t f = fl == NONE ? 0 : (size_t)fl + 1,
			       q = pl == NONE ? 0 : (size_t)pl + 1;
			at += 8;
			if (len - at < f + q || (f && b[at + f - 1]) || (q && b[at + f + q - 1]))
				return -1; /* each string ends in its 0 byte */
			at += f + q;
		}
		if (idx)
			idx[n] = (struct ht__symcache_ent){rel, rec};
		n++;
	}
	return n;
}

void ht__symcache_open(struct ht__symcache *c, const uint8_t *build_id, int len)
{
	memset(c, 0, sizeof *c);
	if (len <= 0)
		return;
	char hex[2 * 32 + 1];
	for (int i = 0; i < len && i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", build_id[i]);
	char *dir = dir_path();
	if (!dir)
		return;
	if (asprintf(&c->path, "%s/%s", dir, hex) < 0)
		c->path = NULL;
	free(dir);
	if (!c->path)
		return;
	c->debug_present = debug_present(hex);

	int fd = open(c->path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && st.st_size >= HEAD && st.st_size < (1 << 30)) {
		c->buf = malloc((size_t)st.st_size);
		if (c->buf && read(fd, c->buf, (size_t)st.st_size) == st.st_size)
			c->len = (size_t)st.st_size;
	}
	close(fd);
	long n = c->len ? parse(c->buf, c->len, NULL) : -1;
	if (n < 0 || memcmp(c->buf, MAGIC, 8) != 0 || c->buf[8] != c->debug_present ||
	    !(c->idx = malloc(((size_t)n + 1) * sizeof *c->idx))) {
		/* Unreadable, damaged or stale: start over (rewritten at close). */
		free(c->buf);
		c->buf = NULL;
		c->len = 0;
		return;
	}
	parse(c->buf, c->len, c->idx);
	c->n = (size_t)n;
	qsort(c->idx, c->n, sizeof *c->idx, ent_cmp);
}

int ht__symcache_get(const struct ht__symcache *c, uint64_t rel, struct ht__symbol *out, int max)
{
	if (!c->n)
		return -1;
	struct ht__symcache_ent key = {rel, 0};
	const struct ht__symcache_ent *e = bsearch(&key, c->idx, c->n, sizeof key, ent_cmp);
	if (!e)
		return -1;
	const uint8_t *p = c->buf + e->off;
	int k = *p++;
	if (k > max)
		return -1;
	for (int i = 0; i < k; i++) {
		uint32_t line;
		uint16_t fl, pl;
		memcpy(&line, p, 4);
		memcpy(&fl, p + 4, 2);
		memcpy(&pl, p + 6, 2);
		p += 8;
		out[i].line = line;
		out[i].function = NULL;
		out[i].file = NULL;
		if (fl != NONE) {
			out[i].function = (const char *)p;
			p += fl + 1;
		}
		if (pl != NONE) {
			out[i].file = (const char *)p;
			p += pl + 1;
		}
	}
	return k;
}

static int add_bytes(struct ht__symcache *c, const void *b, size_t n)
{
	if (ht__grow((void **)&c->add, &c->add_cap, c->add_len + n, 1) < 0)
		return -1;
	memcpy(c->add + c->add_len, b, n);
	c->add_len += n;
	return 0;
}

void ht__symcache_put(struct ht__symcache *c, uint64_t rel, const struct ht__symbol *syms, int n)
{
	if (!c->path || n < 0 || n > 255)
		return;
	size_t mark = c->add_len;
	uint8_t k = (uint8_t)n;
	int bad = add_bytes(c, &rel, 8) || add_bytes(c, &k, 1);
	for (int i = 0; i < n && !bad; i++) {
		size_t fl = syms[i].function ? strlen(syms[i].function) : NONE;
		size_t pl = syms[i].file ? strlen(syms[i].file) : NONE;
		if ((fl != NONE && fl >= NONE) || (pl != NONE && pl >= NONE)) {
			bad = 1;
			break;
		}
		uint16_t f16 = (uint16_t)fl, p16 = (uint16_t)pl;
		bad = add_bytes(c, &syms[i].line, 4) || add_bytes(c, &f16, 2) ||
		      add_bytes(c, &p16, 2) ||
		      (fl != NONE && add_bytes(c, syms[i].function, fl + 1)) ||
		      (pl != NONE && add_bytes(c, syms[i].file, pl + 1));
	}
	if (bad)
		c->add_len = mark; /* too long or no memory: just not cached */
}

static void write_file(struct ht__symcache *c)
{
	char *dir = strdup(c->path);
	if (!dir)
		return;
	*strrchr(dir, '/') = 0;
	char *tmp = NULL;
	if (make_dirs(dir) != 0 || asprintf(&tmp, "%s/.tmp.XXXXXX", dir) < 0) {
		free(dir);
		return;
	}
	free(dir);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		free(tmp);
		return;
	}
	uint8_t head[HEAD] = {0};
	memcpy(head, MAGIC, 8);
	head[8] = c->debug_present;
	int ok = write(fd, head, HEAD) == HEAD;
	if (ok && c->len > HEAD)
		ok = write(fd, c->buf + HEAD, c->len - HEAD) == (ssize_t)(c->len - HEAD);
	if (ok)
		ok = write(fd, c->add, c->add_len) == (ssize_t)c->add_len;
	if (close(fd) != 0)
		ok = 0;
	if (!ok || rename(tmp, c->path) != 0)
		unlink(tmp);
	free(tmp);
}

void ht__symcache_close(struct ht__symcache *c)
{
	if (c->path && c->add_len)
		write_file(c);
	free(c->path);
	free(c->buf);
	free(c->idx);
	free(c->add);
	memset(c, 0, sizeof *c);
}
