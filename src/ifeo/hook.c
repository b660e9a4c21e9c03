/*
 * hook.c - libheaptrail-ifeo.so, the IFEO loader hook that /etc/ld.so.preload
 * names: one constructor that looks the program up in the IFEO registry and,
 * for an enabled program, starts libheaptrail.so in attach mode into the IFEO
 * session, or into an in-memory buffer until that session starts. See
 * docs/sessions.md.
 *
 * It defines no function a program calls (no malloc, no hooks), so a program
 * that is not enabled pays the constructor and one failed open(). It never
 * writes a file, and never acts in a setuid or setgid program (AT_SECURE).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/protocol.h"

#define REGISTRY "/etc/heaptrail/ifeo"

#include "ifeo/pending.h"

/* Whether the registry entry (its text) lets this program's path in: an
   entry without "path=" lines is for every program of that name. */
static int entry_matches(const char *text)
{
	if (!strstr(text, "path="))
		return 1;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = 0;
	for (const char *p = text; (p = strstr(p, "path=")); p += 5) {
		if (p != text && p[-1] != '\n')
			continue;
		const char *v = p + 5;
		size_t len = strcspn(v, "\n");
		if (len == (size_t)n && !memcmp(v, exe, len))
			return 1;
	}
	return 0;
}

/* Copies "a" "b" "c" into out (n bytes); 0 when it does not fit. */
static int join3(char *out, size_t n, const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
	if (la + lb + lc >= n)
		return 0;
	memcpy(out, a, la);
	memcpy(out + la, b, lb);
	memcpy(out + la + lb, c, lc + 1);
	return 1;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * A session file of ours that nobody else can open, whose collector ticked
 * within the last second: the link of a session daemon that was killed
 * would otherwise make the program wait for a collector that never comes.
 */
static int session_alive(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	struct ht__shm_header h;
	int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
		 !(st.st_mode & 077) && pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
		 h.magic == HT_SHM_MAGIC && atomic_load(&h.state) == HT_SESSION_RUNNING &&
		 mono_ns() - atomic_load(&h.heartbeat_ns) < 1000000000ull;
	close(fd);
	return ok;
}

/*
 * The running IFEO session of this user: "ifeo" in the first session
 * directory (as ht__session_default_dir orders them) that has one, a
 * regular file of ours that nobody else can open.
 */
static int find_session(char *out, size_t n)
{
	char uid[16], dir[4096];
	unsigned u = (unsigned)geteuid();
	int k = (int)sizeof(uid) - 1;
	uid[k] = 0;
	do
		uid[--k] = (char)('0' + u % 10);
	while ((u /= 10) && k > 0);
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	for (int i = 0; i < 4; i++) {
		int ok = 0;
		if (i == 0 && xdg && xdg[0] == '/')
			ok = join3(dir, sizeof(dir), xdg, "/heaptrail", "");
		else if (i == 1 && geteuid() == 0)
			ok = join3(dir, sizeof(dir), "/run/heaptrail", "", "");
		else if (i == 2)
			ok = join3(dir, sizeof(dir), "/tmp/heaptrail-", uid + k, "");
		else if (i == 3)
			ok = join3(dir, sizeof(dir), "/dev/shm/heaptrail-", uid + k, "");
		if (!ok || !join3(out, n, dir, "/ifeo", ""))
			continue;
		if (session_alive(out))
			return 1;
	}
	return 0;
}

/*
 * No session yet: a session file of our own in memory (a memfd, no file
 * system), lossy so that a full buffer drops and counts instead of
 * waiting for a collector that is not there. Its descriptor stays open
 * so that the session finds it in /proc/PID/fd when it starts; its path
 * for ht__attach_start goes to out.
 */
static int make_pending(char *out, size_t n, int *fd_out)
{
	int fd = memfd_create(HT__PENDING_NAME, MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t size = HT_SHM_HEADER_SIZE +
		      (size_t)HT__PENDING_RINGS * (HT_RING_HEADER_SIZE + HT__PENDING_RING);
	void *m = MAP_FAILED;
	if (ftruncate(fd, (off_t)size) == 0)
		m = mmap(NULL, HT_SHM_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		close(fd);
		return 0;
	}
	struct ht__shm_header *h = m;
	uint64_t now = mono_ns();
	h->magic = HT_SHM_MAGIC;
	h->version = HT_PROTO_VERSION;
	h->header_size = HT_SHM_HEADER_SIZE;
	h->ring_size = HT__PENDING_RING;
	h->ring_count = HT__PENDING_RINGS;
	h->flags = HT_SHM_LOSSY;
	h->stack_mask = HT_STK_DEFAULT;
	h->collector_pid = 0;
	h->root_pid = 0;
	h->t0_ns = now;
	atomic_store(&h->next_stack_id, 1);
	atomic_store(&h->heartbeat_ns, now);
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	join3((char *)m + HT__PENDING_TAG_OFFSET, HT__PENDING_TAG_MAX, "xdg=", xdg ? xdg : "", "");
	atomic_store_explicit(&h->state, HT_SESSION_RUNNING, memory_order_release);
	munmap(m, HT_SHM_HEADER_SIZE);
	int high = fcntl(fd, F_DUPFD_CLOEXEC, HT__PENDING_FD_MIN);
	if (high >= 0) {
		close(fd);
		fd = high;
	}
	*fd_out = fd;
	char num[16];
	int k = (int)sizeof(num) - 1;
	num[k] = 0;
	unsigned v = (unsigned)fd;
	do
		num[--k] = (char)('0' + v % 10);
	while ((v /= 10) && k > 0);
	return join3(out, n, "/proc/self/fd/", num + k, "");
}

__attribute__((constructor)) static void ifeo_init(void)
{
	/* Never in setuid/setgid programs; never twice (heaptrail record). */
	if (getauxval(AT_SECURE) || getenv(HT_ENV_SESSION))
		return;
	const char *fn = (const char *)getauxval(AT_EXECFN);
	if (!fn)
		return;
	const char *base = strrchr(fn, '/');
	base = base ? base + 1 : fn;
	/* HEAPTRAIL_ROOT moves the registry (tests); AT_SECURE programs never got here. */
	const char *root = getenv("HEAPTRAIL_ROOT");
	char path[4096];
	if (!*base || !join3(path, sizeof(path), root ? root : "", REGISTRY "/", base))
		return;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* not enabled: the only cost for most programs */
	char text[4096];
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n < 0)
		return;
	text[n] = 0;
	if (!entry_matches(text))
		return;

	char session[4096];
	int pending = -1;
	if (!find_session(session, sizeof(session)) &&
	    !make_pending(session, sizeof(session), &pending))
		return;
	Dl_info di;
	char lib[4096];
	void *h = NULL;
	if (dladdr((void *)ifeo_init, &di) && di.dli_fname) {
		const char *slash = strrchr(di.dli_fname, '/');
		size_t dl = slash ? (size_t)(slash - di.dli_fname) : 0;
		if (slash && dl + 32 < sizeof(lib)) {
			memcpy(lib, di.dli_fname, dl);
			memcpy(lib + dl, "/libheaptrail.so", sizeof("/libheaptrail.so"));
			h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
		}
	}
	int (*start)(const char *) = h ? (int (*)(const char *))dlsym(h, "ht__attach_start") : NULL;
	/* Not traced after all: the program keeps no descriptor of ours. */
	if ((!start || start(session) != 0) && pending >= 0)
		close(pending);
}
