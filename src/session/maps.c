/*
 * Mappings no hook saw (docs/session-protocol.md): the anonymous private
 * writable ranges of a traced process, read from /proc/PID/maps when its RSS
 * changed, and the difference from the previous read queued as the session's
 * own FOUND / GONE records, attributed to glibc's heap or a thread's stack
 * where the map tells.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "session/internal.h"
#include "base/vec.h"

/* Not more often than this per process. */
#define MAPS_EVERY_NS 50000000ull
/* ... and not more often than this many times the last read took. */
#define MAPS_TIME_SHARE 20
/* glibc's arenas are reserved 64 MiB at a time, at 64 MiB boundaries. */
#define ARENA_ALIGN (64ull << 20)
/* Threads looked at for the owner of a new stack. */
#define MAX_TASKS 256
/* Reads a new stack waits for its owner through (its thread was running, so
   its stack pointer was unknown) before it is shown without one. */
#define STACK_TRIES 20
/* cur.v[].tid of a new stack whose owner was not found by this read. */
#define OWNER_UNKNOWN (-2)

struct mvec {
	struct ht__maprange *v;
	uint32_t n, cap;
};

static int push(struct mvec *m, const struct ht__maprange *r)
{
	/* Adjacent ranges of the same owner are one range. */
	if (m->n && m->v[m->n - 1].end == r->start && m->v[m->n - 1].func == r->func &&
	    m->v[m->n - 1].tid == r->tid) {
		m->v[m->n - 1].end = r->end;
		return 0;
	}
	if (ht__grow32((void **)&m->v, &m->cap, (size_t)m->n + 1, sizeof(*m->v)) < 0)
		return HT_ERR_NOMEM;
	m->v[m->n++] = *r;
	return 0;
}

/* The thread of pid whose stack pointer is in [lo, hi), or 0. */
static int32_t stack_owner(int32_t pid, uint64_t lo, uint64_t hi)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int32_t owner = 0;
	unsigned seen = 0;
	struct dirent *e;
	while (!owner && seen++ < MAX_TASKS && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char p[320], buf[512];
		snprintf(p, sizeof(p), "/proc/%d/task/%s/syscall", (int)pid, e->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		/* "nr arg1 .. arg6 sp pc" while blocked; "running" otherwise. */
		char *f[9];
		int k = 0;
		for (char *save, *tok = strtok_r(buf, " \n", &save); tok && k < 9;
		     tok = strtok_r(NULL, " \n", &save))
			f[k++] = tok;
		if (k < 9)
			continue;
		uint64_t sp = strtoull(f[7], NULL, 16);
		if (sp >= lo && sp < hi)
			owner = (int32_t)atoi(e->d_name);
	}
	closedir(d);
	return owner;
}

/* What a range at a 64 MiB boundary is: an arena when the rest of its 64 MiB
   follows reserved (rest) or it fills them, else a thread's stack when it
   follows a guard page, else unattributed. */
static void settle(struct ht__maprange *r, bool rest, bool after_guard)
{
	if (rest || r->end - r->start == ARENA_ALIGN) {
		r->func = HT_FN_MAPS_HEAP;
	} else if (after_guard) {
		r->func = HT_FN_MAPS_STACK; /* its thread: see ht__maps_check() */
		r->tid = -1;
	}
}

/* A hexadecimal or decimal number at *p, moving *p past it. */
static uint64_t num(const char **p, unsigned base)
{
	uint64_t v = 0;
	for (const char *c = *p;; c++) {
		unsigned d = (unsigned)(*c - '0');
		if (base == 16 && d > 9) {
			d = (unsigned)((*c | 0x20) - 'a');
			d = d < 6 ? d + 10 : 99;
		}
		if (d >= base) {
			*p = c;
			return v;
		}
		v = v * base + d;
	}
}

/*
 * One line of a map, "start-end perms offset dev inode   name": 0 when it
 * is not one. By hand: a process with thousands of libraries has tens of
 * thousands of lines, read every 50 ms, and sscanf was 13 % of the
 * collector's time there (docs/performance.md, "A dlopen with thousands of
 * modules loaded"). name points into line, '\n' cut.
 */
static int parse_line(char *line, uint64_t *lo, uint64_t *hi, char perms[8], unsigned long *ino,
		      const char **name)
{
	const char *p = line, *q;
	*lo = num(&p, 16);
	if (p == line || *p++ != '-')
		return 0;
	q = p;
	*hi = num(&p, 16);
	if (p == q || *p++ != ' ')
		return 0;
	int k = 0;
	while (*p && *p != ' ' && k < 7)
		perms[k++] = *p++;
	perms[k] = 0;
	if (*p++ != ' ')
		return 0;
	q = p;
	num(&p, 16); /* offset */
	if (p == q || *p++ != ' ')
		return 0;
	while (*p && *p != ' ') /* dev */
		p++;
	if (*p++ != ' ')
		return 0;
	q = p;
	*ino = (unsigned long)num(&p, 10);
	if (p == q)
		return 0;
	while (*p == ' ')
		p++;
	char *nl = strchr(p, '\n');
	if (nl)
		*nl = 0;
	*name = p;
	return 1;
}

/* Reads the anonymous private writable ranges of pid into out; -1 when the
   map cannot be read (the process is going), else 0 or HT_ERR_NOMEM. */
static int read_maps(int32_t pid, struct mvec *out)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char line[4096];
	uint64_t guard_end = 0; /* end of the previous line when it was a ---p guard */
	/* A range at a 64 MiB boundary is an arena only when the rest of its
	   64 MiB follows as a ---p reservation (or it fills them): decided at
	   the next line. Any mapping can start at such a boundary. */
	struct ht__maprange cand = {0};
	bool cand_stack = false;
	int rc = 0;
	while (!rc && fgets(line, sizeof(line), f)) {
		uint64_t lo, hi;
		char perms[8];
		const char *name;
		unsigned long ino;
		if (!parse_line(line, &lo, &hi, perms, &ino, &name))
			continue;
		int anon = ino == 0 && (!name[0] || !strcmp(name, "[heap]") ||
					!strcmp(name, "[stack]") || !strncmp(name, "[anon:", 6));
		if (lo >= HT_OWN_BASE && hi <= HT_OWN_END) { /* the recorder's own */
			guard_end = 0;
			continue;
		}
		if (cand.end) {
			bool rest = anon && !name[0] && !strcmp(perms, "---p") && lo == cand.end &&
				    hi == cand.start + ARENA_ALIGN;
			settle(&cand, rest, cand_stack);
			rc = push(out, &cand);
			cand.end = 0;
			if (rc)
				break;
		}
		uint64_t after_guard = guard_end == lo;
		guard_end = anon && !strcmp(perms, "---p") ? hi : 0;
		if (!anon || perms[1] != 'w' || perms[3] != 'p')
			continue;
		struct ht__maprange r = {.start = lo, .end = hi, .func = HT_FN_MAPS};
		if (!strcmp(name, "[heap]")) {
			r.func = HT_FN_MAPS_HEAP;
		} else if (!name[0] && lo % ARENA_ALIGN == 0) {
			/* An arena if the next line says so, else a stack after a
			   guard page, else unattributed. */
			cand = r;
			cand_stack = after_guard;
			continue;
		} else if (!strcmp(name, "[stack]")) {
			r.func = HT_FN_MAPS_STACK;
			r.tid = pid;
		} else if (after_guard && !name[0]) {
			r.func = HT_FN_MAPS_STACK; /* its thread: see ht__maps_check() */
			r.tid = -1;
		}
		rc = push(out, &r);
	}
	if (!rc && cand.end) {
		settle(&cand, false, cand_stack);
		rc = push(out, &cand);
	}
	fclose(f);
	return rc;
}

static int queue(struct ht__session *s, int32_t pid, uint8_t type, const struct ht__maprange *r,
		 uint64_t lo, uint64_t hi, uint64_t ts)
{
	struct ht__rec_self_map m = {
	    .h = {.type = type, .func = r->func, .len = sizeof(m), .ts = ts},
	    .pid = pid,
	    .tid = r->tid > 0 ? r->tid : 0,
	    .addr = lo,
	    .len = hi - lo,
	};
	return ht__self_record(s, &m.h);
}

/* Queues every part of a[] not in b[] (both sorted, disjoint) as type. */
static int diff(struct ht__session *s, int32_t pid, uint8_t type, const struct ht__maprange *a,
		uint32_t na, const struct ht__maprange *b, uint32_t nb, uint64_t ts)
{
	uint32_t j = 0;
	for (uint32_t i = 0; i < na; i++) {
		uint64_t at = a[i].start;
		while (j < nb && b[j].end <= at)
			j++;
		for (uint32_t k = j; k < nb && b[k].start < a[i].end && at < a[i].end; k++) {
			if (b[k].start > at) {
				int rc = queue(s, pid, type, &a[i], at, b[k].start, ts);
				if (rc < 0)
					return rc;
			}
			if (b[k].end > at)
				at = b[k].end;
		}
		if (at < a[i].end) {
			int rc = queue(s, pid, type, &a[i], at, a[i].end, ts);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int ht__maps_check(struct ht__session *s, struct ht__proc *p, uint64_t rss, uint64_t now)
{
	struct ht__maps *m = &p->maps;
	if (rss == m->rss || now < m->next_ns)
		return 0;
	struct mvec cur = {0};
	uint64_t t0 = thread_cpu_ns();
	int rc = read_maps(p->pid, &cur);
	if (rc) {
		free(cur.v);
		return rc < 0 && rc != -1 ? rc : 0;
	}
	m->rss = rss;
	/* A map of tens of thousands of lines (thousands of libraries) takes
	   milliseconds to make and read: then no more than a twentieth of the
	   time goes to it. The thread's CPU time (the kernel making the text
	   is in it), not the wall time: on a loaded machine a read of a small
	   map may wait 20 ms for a core, and reads 400 ms apart missed a
	   mapping that lived 300 ms (cli.unseen-maps). */
	uint64_t took = (thread_cpu_ns() - t0) * MAPS_TIME_SHARE;
	m->next_ns = now + (took > MAPS_EVERY_NS ? took : MAPS_EVERY_NS);
	/* A stack seen before keeps its owner; a new one is looked up. A range
	   seen before as something else keeps what it was: what made it look
	   like a stack is a PROT_NONE range come to end where it starts, like
	   the 128 MiB glibc's new_heap() reserves for a moment (cli.unseen-maps
	   saw a raw mapping gone and found again, waiting for an owner). */
	for (uint32_t i = 0, j = 0; i < cur.n; i++) {
		if (cur.v[i].tid != -1)
			continue;
		while (j < m->n && m->v[j].end <= cur.v[i].start)
			j++;
		if (j < m->n && m->v[j].start == cur.v[i].start && m->v[j].func == HT_FN_MAPS_STACK)
			cur.v[i].tid = m->v[j].tid;
		else if (j < m->n && m->v[j].start == cur.v[i].start &&
			 m->v[j].end == cur.v[i].end) {
			cur.v[i].func = m->v[j].func;
			cur.v[i].tid = m->v[j].tid;
		} else if (!(cur.v[i].tid = stack_owner(p->pid, cur.v[i].start, cur.v[i].end)))
			cur.v[i].tid = OWNER_UNKNOWN;
	}
	/* A thread just started is often running when its stack is first seen:
	   its stack waits for a later read (the next sample, whatever the RSS)
	   rather than be shown unowned for good, up to STACK_TRIES reads. */
	bool waiting = false;
	uint32_t k = 0;
	for (uint32_t i = 0; i < cur.n; i++) {
		if (cur.v[i].tid == OWNER_UNKNOWN) {
			if (m->stack_tries < STACK_TRIES) {
				waiting = true;
				continue;
			}
			cur.v[i].tid = 0;
		}
		cur.v[k++] = cur.v[i];
	}
	cur.n = k;
	m->stack_tries = waiting ? m->stack_tries + 1 : 0;
	if (waiting)
		m->rss = 0;
	rc = diff(s, p->pid, HT__REC_SELF_MAP_GONE, m->v, m->n, cur.v, cur.n, now);
	if (!rc)
		rc = diff(s, p->pid, HT__REC_SELF_MAP_FOUND, cur.v, cur.n, m->v, m->n, now);
	free(m->v);
	m->v = cur.v;
	m->n = cur.n;
	m->cap = cur.cap;
	return rc;
}

void ht__maps_free(struct ht__maps *m)
{
	free(m->v);
	*m = (struct ht__maps){0};
}
