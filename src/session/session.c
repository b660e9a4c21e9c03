/*
 * session.c - the life of a session: the shared-memory file (where it lives,
 * its size, its header), the collector's own state, and tearing both down.
 * Draining is in drain.c, record translation in translate.c.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/procfs.h"
#include "session/internal.h"
#include "base/errors.h"

uint64_t ht__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

enum ht__pid_state ht__pid_state(pid_t pid)
{
	char buf[512];
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return HT__PID_GONE;
	if (ht__proc_stat_read(pid, buf, sizeof(buf)) < 0)
		return errno == ENOENT ? HT__PID_GONE : HT__PID_ALIVE;
	char state;
	uint64_t start;
	return ht__parse_proc_stat(buf, &state, &start) && (state == 'Z' || state == 'X')
		   ? HT__PID_ZOMBIE
		   : HT__PID_ALIVE;
}

int ht__zombie_signal(pid_t pid)
{
	char buf[1024];
	if (ht__proc_stat_read(pid, buf, sizeof(buf)) < 0)
		return 0;
	const char *p = ht__proc_stat_state(buf);
	if (!p || (*p != 'Z' && *p != 'X') || !(p = ht__proc_stat_skip(p, 52 - 3)))
		return 0;
	char *end;
	long status = strtol(p, &end, 10);
	if (end == p || status < 0)
		return 0;
	return WIFSIGNALED((int)status) ? WTERMSIG((int)status) : 0;
}

/* Our own start time, for recorders to tell us from a process that got our
   pid after we died (protocol.h, collector_start). 0 when unknown. */
static uint64_t self_start_time(void)
{
	char buf[1024];
	char state;
	uint64_t start = 0;
	if (ht__proc_stat_read(0, buf, sizeof(buf)) < 0)
		return 0;
	return ht__parse_proc_stat(buf, &state, &start) ? start : 0;
}

/*
 * Make dir (mode 0700) unless it exists. A directory we did not create must
 * be ours and closed to others: /tmp is shared, and a session file in a
 * directory someone else controls could be swapped under us.
 */
static int ensure_private_dir(const char *dir)
{
	struct stat st;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return ht__error_from_errno(errno);
	if (lstat(dir, &st) < 0)
		return ht__error_from_errno(errno);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
		return HT_ERR_PERM;
	return 0;
}

static bool on_tmpfs(const char *path)
{
	struct statfs fs;
	return statfs(path, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

/* The caller's directory as it is, or the default one, created if needed. */
static int session_dir(const struct ht__session_config *cfg, char *out, size_t n)
{
	if (cfg->dir) {
		int len = snprintf(out, n, "%s", cfg->dir);
		return len < 0 || (size_t)len >= n ? HT_ERR_INVALID : 0;
	}
	return ht__session_default_dir(out, n, true);
}

/*
 * The directory of session files (docs/session-protocol.md):
 * $XDG_RUNTIME_DIR/heaptrail, /run/heaptrail for root, else
 * /tmp/heaptrail-UID. The rings must live in memory: on a disk file system
 * every page the recorders write would also be written back to disk (and
 * read ahead on fault), which costs the collector more than the draining.
 * So the first of those whose parent is a tmpfs wins, then
 * /dev/shm/heaptrail-UID, and only when no tmpfs exists at all the first one.
 */
int ht__session_default_dir(char *out, size_t n, bool create)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	unsigned uid = (unsigned)geteuid();
	char cand[4][PATH_MAX], parent[4][PATH_MAX];
	int k = 0;
	if (xdg && *xdg == '/') {
		snprintf(cand[k], PATH_MAX, "%s/heaptrail", xdg);
		snprintf(parent[k++], PATH_MAX, "%s", xdg);
	}
	if (uid == 0) {
		snprintf(cand[k], PATH_MAX, "/run/heaptrail");
		snprintf(parent[k++], PATH_MAX, "/run");
	}
	snprintf(cand[k], PATH_MAX, "/tmp/heaptrail-%u", uid);
	snprintf(parent[k++], PATH_MAX, "/tmp");
	snprintf(cand[k], PATH_MAX, "/dev/shm/heaptrail-%u", uid);
	snprintf(parent[k++], PATH_MAX, "/dev/shm");
	int pick = 0;
	for (int i = 0; i < k; i++)
		if (on_tmpfs(parent[i])) {
			pick = i;
			break;
		}
	if (strlen(cand[pick]) >= n)
		return HT_ERR_INVALID;
	snprintf(out, n, "%s", cand[pick]);
	return create ? ensure_private_dir(out) : 0;
}

/*
 * Remove the files of unnamed sessions whose collector is gone (killed with
 * SIGKILL, say): nobody else would, and each holds the memory its rings used.
 */
static void remove_stale(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		int pid;
		char rest[16];
		if (sscanf(e->d_name, "session-%d-%15s", &pid, rest) != 2 || pid <= 0 ||
		    strlen(rest) != 6)
			continue;
		if (kill(pid, 0) < 0 && errno == ESRCH)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

int ht__shm_create(struct ht__session *s)
{
	char dir[PATH_MAX], path[PATH_MAX];
	int rc = session_dir(&s->cfg, dir, sizeof(dir));
	if (rc < 0)
		return rc;
	int fd;
	if (s->cfg.name) {
		if (strchr(s->cfg.name, '/') || !*s->cfg.name)
			return HT_ERR_INVALID;
		if (snprintf(path, sizeof(path), "%s/%s", dir, s->cfg.name) >= (int)sizeof(path))
			return HT_ERR_INVALID;
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	} else {
		remove_stale(dir);
		if (snprintf(path, sizeof(path), "%s/session-%d-XXXXXX", dir, (int)getpid()) >=
		    (int)sizeof(path))
			return HT_ERR_INVALID;
		fd = mkostemp(path, O_CLOEXEC); /* mode 0600 */
	}
	if (fd < 0)
		return ht__error_from_errno(errno);
	s->path = strdup(path);
	s->map_size = HT_SHM_HEADER_SIZE +
		      (size_t)s->ring_count * (HT_RING_HEADER_SIZE + (size_t)s->ring_size);
	/* Heap snapshot mode: the stacks' region after the rings (sparse too). */
	size_t snap_offset = (s->map_size + 4095) & ~(size_t)4095;
	size_t snap_heap_offset = snap_offset + (size_t)s->snap_cap * sizeof(struct ht__snap_stack);
	size_t snap_thr_offset =
	    (snap_heap_offset + (size_t)HT_SNAP_HEAP_CAP * sizeof(struct ht__snap_heap) + 63) &
	    ~(size_t)63;
	uint32_t snap_thr_bytes = ht__snap_thr_bytes(HT_SNAP_THR_SLOTS);
	if (s->cfg.flags & HT_SHM_SNAPSHOT)
		s->map_size = snap_thr_offset + (size_t)s->ring_count * snap_thr_bytes;
	if (!s->path) {
		rc = HT_ERR_NOMEM;
		goto unlink_file;
	}
	/* The file is sparse, but full rings would use it all: a memory file
	   system out of room kills the traced program with SIGBUS on its next
	   write, so refuse sizes the file system could not hold. */
	struct statfs fs;
	if (fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC &&
	    (uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize < s->map_size) {
		rc = HT_ERR_NOMEM;
		goto unlink_file;
	}
	/* Sparse: a ring costs memory only for the pages its writer touches. */
	if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)s->map_size) < 0) {
		rc = ht__error_from_errno(errno);
		goto unlink_file;
	}
	/* Recorders map this file for as long as their image lives: where
	   /proc/PID/maps no longer shows it, the image is gone (drain.c). */
	struct stat st;
	if (fstat(fd, &st) == 0) {
		s->shm_dev = (uint64_t)st.st_dev;
		s->shm_ino = (uint64_t)st.st_ino;
	}
	s->map = mmap(NULL, s->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		rc = ht__error_from_errno(errno);
		goto unlink_file;
	}
	close(fd);

	struct ht__shm_header *h = (struct ht__shm_header *)s->map;
	s->hdr = h;
	h->magic = HT_SHM_MAGIC;
	h->version = HT_PROTO_VERSION;
	h->header_size = HT_SHM_HEADER_SIZE;
	h->ring_size = s->ring_size;
	h->ring_count = s->ring_count;
	h->flags = s->cfg.flags;
	h->stack_mask = s->cfg.stack_mask;
	h->sample_rate = s->cfg.sample_rate;
	h->collector_pid = (int32_t)getpid();
	h->collector_start = self_start_time();
	h->root_pid = 0;
	if (s->cfg.flags & HT_SHM_SNAPSHOT) {
		h->snap_offset = snap_offset;
		h->snap_cap = s->snap_cap;
		h->snap_heap_offset = snap_heap_offset;
		h->snap_heap_cap = HT_SNAP_HEAP_CAP;
		h->snap_thr_offset = snap_thr_offset;
		h->snap_thr_slots = HT_SNAP_THR_SLOTS;
		h->snap_thr_bytes = snap_thr_bytes;
	}
	h->t0_ns = ht__now_ns();
	h->sample_seed = s->cfg.sample_seed;
	if (!(h->flags & HT_SHM_SEEDED))
		h->sample_seed ^= h->t0_ns * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32;
	atomic_store(&h->next_stack_id, 1);
	atomic_store(&h->heartbeat_ns, h->t0_ns);
	atomic_store(&h->ring_hint, 0);
	atomic_store(&h->rings_exhausted, 0);
	atomic_store(&h->room_waits, 0);
	atomic_store(&h->room_sleeps, 0);
	if ((rc = ht__clock_init(s)) < 0)
		return rc; /* the file goes with the session */
	/* Last, with release: a recorder that sees RUNNING sees the fields above. */
	atomic_store_explicit(&h->state, HT_SESSION_RUNNING, memory_order_release);
	return 0;

unlink_file:
	unlink(path);
	close(fd);
	free(s->path);
	s->path = NULL;
	return rc;
}

void ht__shm_destroy(struct ht__session *s)
{
	if (s->map)
		munmap(s->map, s->map_size);
	if (s->path)
		unlink(s->path);
	free(s->path);
	s->map = NULL;
	s->path = NULL;
}

int ht__session_create(struct ht__session **out, const struct ht__session_config *cfg)
{
	struct ht__session_config def = HT__SESSION_CONFIG_INIT;
	if (!cfg)
		cfg = &def;
	uint32_t size = cfg->ring_size ? cfg->ring_size : HT__RING_SIZE_DEFAULT;
	uint32_t count = cfg->ring_count ? cfg->ring_count : HT__RING_COUNT_DEFAULT;
	if (size < 4096 || (size & (size - 1)) || size > (1u << 30) || count > 65536 ||
	    (cfg->flags & ~(HT_SHM_LOSSY | HT_SHM_NO_FOLLOW | HT_SHM_SEEDED | HT_SHM_SNAPSHOT |
			    HT_SHM_CRASHES)) ||
	    (cfg->stack_mask & ~HT_STK_ALL) || cfg->snapshot_stacks > (1u << 27))
		return HT_ERR_INVALID;

	struct ht__session *s = calloc(1, sizeof(*s));
	if (!s)
		return HT_ERR_NOMEM;
	s->cfg = *cfg;
	s->ring_size = size;
	s->ring_count = count;
	s->snap_cap = cfg->snapshot_stacks ? cfg->snapshot_stacks : HT_SNAP_CAP_DEFAULT;
	s->slots = calloc(count + 1, sizeof(*s->slots));
	s->heap = calloc(count + 1, sizeof(*s->heap));
	if (!s->slots || !s->heap) {
		ht__session_destroy(s);
		return HT_ERR_NOMEM;
	}
	int rc = ht__shm_create(s);
	s->cfg.dir = s->cfg.name = NULL; /* the caller's strings: not kept */
	if (rc < 0) {
		ht__session_destroy(s);
		return rc;
	}
	s->next_tick_ns = s->hdr->t0_ns;
	s->flush_ns = s->hdr->t0_ns;
	s->snap_next_ns = s->hdr->t0_ns + cfg->snapshot_interval_ns;
	*out = s;
	return 0;
}

const char *ht__session_path(const struct ht__session *s)
{
	return s->path;
}

int ht__session_notes(struct ht__session *s, const char *trace_path)
{
	char abs[PATH_MAX], cwd[PATH_MAX];
	if (trace_path[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)))
			return ht__error_from_errno(errno);
		if (snprintf(abs, sizeof(abs), "%s/%s%s", cwd, trace_path, HT_NOTE_SUFFIX) >=
		    (int)sizeof(abs))
			return HT_ERR_INVALID;
	} else if (snprintf(abs, sizeof(abs), "%s%s", trace_path, HT_NOTE_SUFFIX) >=
		   (int)sizeof(abs)) {
		return HT_ERR_INVALID;
	}
	struct ht__shm_note *sn = ht__shm_note(s->hdr);
	if (strlen(abs) >= sizeof(sn->path))
		return HT_ERR_INVALID;
	/* A file left by an earlier recording (or anything else by that
	   name) goes: the notes' file is always a new one of ours. */
	if (unlink(abs) < 0 && errno != ENOENT)
		return ht__error_from_errno(errno);
	int fd = open(abs, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return ht__error_from_errno(errno);
	struct stat st;
	bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1;
	close(fd);
	if (!ok)
		return HT_ERR_INVALID;
	free(s->note_path);
	if (!(s->note_path = strdup(abs)))
		return HT_ERR_NOMEM;
	sn->uid = (uint32_t)st.st_uid;
	memcpy(sn->path, abs, strlen(abs) + 1);
	return 0;
}

void ht__session_notes_done(struct ht__session *s)
{
	if (!s || !s->note_path)
		return;
	ht__shm_note(s->hdr)->path[0] = 0;
	unlink(s->note_path);
	free(s->note_path);
	s->note_path = NULL;
}

struct ht__shm_header *ht__session_header(struct ht__session *s)
{
	return s->hdr;
}

uint64_t ht__session_t0(const struct ht__session *s)
{
	return s->hdr->t0_ns;
}

void ht__session_set_root(struct ht__session *s, pid_t pid)
{
	s->root_pid = pid;
	s->hdr->root_pid = (int32_t)pid;
}

void ht__session_set_sink(struct ht__session *s, const struct ht__sink *sink, void *ctx)
{
	s->sink = sink;
	s->sink_ctx = ctx;
}

void ht__session_stop(struct ht__session *s)
{
	s->stop = 1;
}

void ht__session_snapshot(struct ht__session *s)
{
	s->snap_asked = 1;
}

const struct ht__session_stats *ht__session_stats(const struct ht__session *s)
{
	return &s->stats;
}

void ht__session_destroy(struct ht__session *s)
{
	if (!s)
		return;
	/* A session that ends without a finished trace (it could not start
	   its program, attach, or write) leaves no notes' file behind. */
	ht__session_notes_done(s);
	ht__shm_destroy(s);
	if (s->slots)
		for (uint32_t i = 0; i <= s->ring_count; i++)
			free(s->slots[i].buf);
	free(s->slots);
	free(s->heap);
	ht__translate_free(s);
	ht__order_free(s);
	ht__snap_free(s);
	ht__clock_free(s);
	free(s);
}
