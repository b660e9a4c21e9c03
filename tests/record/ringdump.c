/*
 * ringdump: a minimal collector for protocol-level tests of libheaptrail.so.
 * It creates a session file, runs a command with the recorder preloaded,
 * drains every ring while it runs, and at the end prints every record in
 * time order, one per line, in a stable text form that tests grep and count.
 *
 *   ringdump [-r RINGS] [-s RING_SIZE] [-k STACK_MASK] [-l] [-n] [-t] [-o FILE]
 *            [-x MS] [-S MS] [-C CLOCK] [-V VERSION] [-p LIBHEAPTRAIL] -- CMD [ARGS]
 *
 * -l lossy, -n no-follow, -t print timestamps, -o write records to FILE
 * instead of stdout. -x MS plays a collector that dies: the session names a
 * stand-in process as its collector, and after MS milliseconds that process
 * is killed and ringdump stops its heartbeat and draining until the command
 * ends. -P MS:DUR plays a stopped collector: no heartbeat and no draining
 * from MS for DUR milliseconds, then it goes on. -S MS sets the
 * session to STOPPING after MS milliseconds (and keeps draining). -C and -V
 * write another clock (enum ht__clock; default HT_CLOCK_MONO, which this
 * collector prints as is) or protocol version into the header: a recorder
 * that does not know them stays dormant. The library defaults to
 * $RINGDUMP_LIB. Exits with the command's status (128 + signal when it was killed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heaptrail/trace.h"
#include "base/protocol.h"

struct rec {
	uint64_t ts, seq;
	int32_t pid, tid;
	uint32_t instance, ring;
	uint8_t *bytes;
};

static struct rec *recs;
static size_t nrecs, caprecs;
static uint64_t seq;
static struct ht__shm_header *hdr;
static char *rings;
static uint32_t ring_size, ring_count, stride;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (!p) {
		fprintf(stderr, "ringdump: out of memory\n");
		exit(99);
	}
	return p;
}

static struct ht__ring *ring_at(uint32_t i)
{
	return (struct ht__ring *)(rings + (size_t)i * stride);
}

static int bad_records;

/* Record bytes live in big chunks: one malloc per record is too slow to
   keep up with a busy writer. */
static uint8_t *chunk;
static size_t chunk_left;

static uint8_t *keep_bytes(const void *src, size_t n)
{
	if (n > chunk_left) {
		chunk_left = 1u << 20;
		chunk = xmalloc(chunk_left);
	}
	uint8_t *p = chunk;
	memcpy(p, src, n);
	chunk += n;
	chunk_left -= n;
	return p;
}

/* Moves every committed record of ring i into recs; frees a drained released ring. */
static void drain_ring(uint32_t i)
{
	struct ht__ring *r = ring_at(i);
	uint32_t state = atomic_load_explicit(&r->state, memory_order_acquire);
	if (state == HT_RING_FREE)
		return;
	uint64_t wp = atomic_load_explicit(&r->write_pos, memory_order_acquire);
	uint64_t rp = atomic_load_explicit(&r->read_pos, memory_order_relaxed);
	char *data = (char *)r + HT_RING_HEADER_SIZE;
	while (rp < wp) {
		uint32_t off = (uint32_t)rp & (ring_size - 1);
		struct ht__rec *h = (struct ht__rec *)(data + off);
		if (h->len < 16 || (h->len & 7) || off + h->len > ring_size) {
			fprintf(stderr, "ringdump: bad record in ring %u at %llu: type %u len %u\n",
				i, (unsigned long long)rp, h->type, h->len);
			bad_records++;
			rp = wp;
			break;
		}
		if (h->type != HT_REC_PAD) {
			if (nrecs == caprecs) {
				caprecs = caprecs ? caprecs * 2 : 65536;
				recs = realloc(recs, caprecs * sizeof *recs);
				if (!recs)
					exit(99);
			}
			struct rec *o = &recs[nrecs++];
			o->ts = h->ts;
			o->seq = seq++;
			o->pid = r->pid;
			o->tid = r->tid;
			o->instance = r->instance;
			o->ring = i;
			o->bytes = keep_bytes(h, h->len);
		}
		rp += h->len;
	}
	atomic_store_explicit(&r->read_pos, rp, memory_order_release);
	/* A ring stays OWNED when its process died (killed, exec of an
	   untraced image): free it once the owner is gone and it is drained. */
	int dead = state == HT_RING_OWNED && r->pid > 0 && kill(r->pid, 0) < 0 && errno == ESRCH;
	if ((state == HT_RING_RELEASED || dead) && atomic_load(&r->write_pos) == rp) {
		/* as the collector does: a free ring starts at position 0 */
		atomic_store_explicit(&r->busy, 0, memory_order_relaxed);
		atomic_store(&r->write_pos, 0);
		atomic_store(&r->read_pos, 0);
		r->pid = r->tid = 0;
		r->instance = 0;
		atomic_store_explicit(&r->state, HT_RING_FREE, memory_order_release);
	}
}

/* As the collector does: wake the recorder threads that wait for room. */
static void drain_all(void)
{
	atomic_store(&hdr->heartbeat_ns, now_ns());
	for (uint32_t i = 0; i < ring_count; i++)
		drain_ring(i);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&hdr->waiters)) {
		atomic_fetch_add(&hdr->drain_seq, 1);
		syscall(SYS_futex, &hdr->drain_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	}
}

static int by_time(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void print_str(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == 0)
			fputc(' ', f);
		else if (c <= ' ' || c >= 127 || c == '\\')
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

static const char *fname(unsigned func)
{
#define FUNC_NAME(id, value, name) [HT_FN_##id] = name,
	static const char *const n[HT_FN__COUNT] = {HT_FUNCS(FUNC_NAME)};
#undef FUNC_NAME
	func &= ~HT_RECF_FAILED;
	return func < HT_FN__COUNT && n[func] ? n[func] : "?";
}

static void print_rec(FILE *f, const struct rec *o, int with_ts)
{
	const struct ht__rec *h = (const struct ht__rec *)o->bytes;
	int failed = (h->func & HT_RECF_FAILED) != 0;
#define REC_NAME(id, value, name, min_len) [HT_REC_##id] = name,
	static const char *const names[] = {HT__REC_TYPES(REC_NAME)};
#undef REC_NAME
	const char *name =
	    h->type < sizeof names / sizeof *names && names[h->type] ? names[h->type] : "unknown";
	fprintf(f, "%s func=%s pid=%d tid=%d inst=%08x stack=%u", name, fname(h->func), o->pid,
		o->tid, o->instance, h->stack);
	if (with_ts)
		fprintf(f, " ts=%llu", (unsigned long long)(h->ts - hdr->t0_ns));
	switch (h->type) {
	case HT_REC_ALLOC:
	case HT_REC_ALLOC_FAIL: {
		const struct ht__rec_alloc *r = (const void *)h;
		fprintf(f, " addr=0x%llx size=%llu", (unsigned long long)r->addr,
			(unsigned long long)r->size);
		break;
	}
	case HT_REC_REALLOC: {
		const struct ht__rec_realloc *r = (const void *)h;
		fprintf(f, " old=0x%llx new=0x%llx size=%llu failed=%d",
			(unsigned long long)r->old_addr, (unsigned long long)r->new_addr,
			(unsigned long long)r->size, failed);
		break;
	}
	case HT_REC_FREE: {
		const struct ht__rec_free *r = (const void *)h;
		fprintf(f, " addr=0x%llx", (unsigned long long)r->addr);
		break;
	}
	case HT_REC_MMAP: {
		const struct ht__rec_mmap *r = (const void *)h;
		fprintf(f, " addr=0x%llx len=%llu prot=%u flags=0x%x fd=%d offset=%llu failed=%d",
			(unsigned long long)r->addr, (unsigned long long)r->len, r->prot, r->flags,
			r->fd, (unsigned long long)r->offset, failed);
		break;
	}
	case HT_REC_MUNMAP:
	case HT_REC_MPROTECT: {
		const struct ht__rec_range *r = (const void *)h;
		fprintf(f, " addr=0x%llx len=%llu prot=%u result=%d", (unsigned long long)r->addr,
			(unsigned long long)r->len, r->prot, r->result);
		break;
	}
	case HT_REC_MREMAP: {
		const struct ht__rec_mremap *r = (const void *)h;
		fprintf(f, " old=0x%llx old_len=%llu new=0x%llx new_len=%llu flags=%u failed=%d",
			(unsigned long long)r->old_addr, (unsigned long long)r->old_len,
			(unsigned long long)r->new_addr, (unsigned long long)r->new_len, r->flags,
			failed);
		break;
	}
	case HT_REC_BRK: {
		const struct ht__rec_brk *r = (const void *)h;
		fprintf(f, " old=0x%llx new=0x%llx delta=%lld failed=%d",
			(unsigned long long)r->old_brk, (unsigned long long)r->new_brk,
			(long long)(r->new_brk - r->old_brk), failed);
		break;
	}
	case HT_REC_HEAP_CREATE:
	case HT_REC_HEAP_DESTROY: {
		const struct ht__rec_heap *r = (const void *)h;
		fprintf(f, " handle=0x%llx", (unsigned long long)r->handle);
		if (h->type == HT_REC_HEAP_CREATE) {
			const char *n = (const char *)(r + 1);
			fprintf(f, " name=");
			print_str(f, n, strnlen(n, h->len - sizeof *r));
		}
		break;
	}
	case HT_REC_HEAP_ALLOC:
	case HT_REC_HEAP_REALLOC:
	case HT_REC_HEAP_FREE: {
		const struct ht__rec_heap_op *r = (const void *)h;
		fprintf(f, " handle=0x%llx addr=0x%llx size=%llu old=0x%llx failed=%d",
			(unsigned long long)r->handle, (unsigned long long)r->addr,
			(unsigned long long)r->size, (unsigned long long)r->old_addr, failed);
		break;
	}
	case HT_REC_PROCESS_START: {
		const struct ht__rec_process *r = (const void *)h;
		const char *p = (const char *)(r + 1);
		fprintf(f, " p.pid=%d ppid=%d flags=%s%s%s%s instance=%08x exe=", r->pid, r->ppid,
			r->flags & HT_PROC_ROOT ? "R" : "", r->flags & HT_PROC_FORK ? "F" : "",
			r->flags & HT_PROC_EXEC ? "E" : "", r->flags ? "" : "-", r->instance);
		print_str(f, p, r->exe_len);
		fprintf(f, " args=");
		/* arguments separated by spaces; a trailing NUL is dropped */
		uint32_t n = r->args_len;
		if (n && p[r->exe_len + n - 1] == 0)
			n--;
		print_str(f, p + r->exe_len, n);
		break;
	}
	case HT_REC_PROCESS_EXIT: {
		const struct ht__rec_exit *r = (const void *)h;
		fprintf(f, " p.pid=%d kind=%s value=%d", r->pid,
			r->kind == HT_EXIT_SIGNAL ? "signal" : "code", r->value);
		break;
	}
	case HT_REC_THREAD_START:
	case HT_REC_THREAD_NAME: {
		const struct ht__rec_thread *r = (const void *)h;
		fprintf(f, " t.tid=%d name=", r->tid);
		print_str(f, r->name, strnlen(r->name, sizeof r->name));
		break;
	}
	case HT_REC_MODULE_LOAD:
	case HT_REC_MODULE_UNLOAD: {
		const struct ht__rec_module *r = (const void *)h;
		fprintf(f, " index=%u", r->index);
		if (h->type == HT_REC_MODULE_LOAD) {
			fprintf(f, " bias=0x%llx start=0x%llx size=%llu build_id=",
				(unsigned long long)r->bias, (unsigned long long)r->start,
				(unsigned long long)r->size);
			for (int i = 0; i < r->build_id_len && i < 31; i++)
				fprintf(f, "%02x", r->build_id[i]);
			fprintf(f, " path=");
			print_str(f, (const char *)(r + 1), r->path_len);
		}
		break;
	}
	case HT_REC_STACK: {
		const struct ht__rec_stack *r = (const void *)h;
		const uint64_t *rel = (const uint64_t *)(r + 1);
		const uint32_t *mod = (const uint32_t *)(rel + r->nframes);
		fprintf(f, " nframes=%u frames=", r->nframes);
		for (uint32_t i = 0; i < r->nframes; i++) {
			if (mod[i] == HT_MODULE_UNKNOWN)
				fprintf(f, "%s?:0x%llx", i ? "," : "", (unsigned long long)rel[i]);
			else
				fprintf(f, "%s%u:0x%llx", i ? "," : "", mod[i],
					(unsigned long long)rel[i]);
		}
		break;
	}
	}
	fputc('\n', f);
}

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: ringdump [-r RINGS] [-s RING_SIZE] [-k STACK_MASK] [-l] [-n] [-t] [-o FILE] "
	    "[-x MS] [-P MS:DUR] [-S MS] [-C CLOCK] [-V VERSION] [-p LIB] -- CMD [ARGS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	uint32_t nrings = 16, rsize = 1u << 20, mask = HT_STK_DEFAULT, flags = 0;
	uint32_t clock = HT_CLOCK_MONO, version = HT_PROTO_VERSION;
	int with_ts = 0, opt;
	long hang_ms = -1, stop_ms = -1, pause_ms = -1, pause_dur = 0;
	const char *lib = getenv("RINGDUMP_LIB"), *out = NULL;
	while ((opt = getopt(argc, argv, "+r:s:k:lntp:o:x:P:S:C:V:")) != -1) {
		switch (opt) {
		case 'r':
			nrings = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 's':
			rsize = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'k':
			mask = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'l':
			flags |= HT_SHM_LOSSY;
			break;
		case 'n':
			flags |= HT_SHM_NO_FOLLOW;
			break;
		case 't':
			with_ts = 1;
			break;
		case 'p':
			lib = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'x':
			hang_ms = strtol(optarg, NULL, 0);
			break;
		case 'P': {
			char *end;
			pause_ms = strtol(optarg, &end, 0);
			pause_dur = *end == ':' ? strtol(end + 1, NULL, 0) : 0;
			break;
		}
		case 'S':
			stop_ms = strtol(optarg, NULL, 0);
			break;
		case 'C':
			clock = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'V':
			version = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		default:
			usage();
		}
	}
	if (optind >= argc || !lib || !nrings || rsize < 4096 || (rsize & (rsize - 1)))
		usage();

	const char *tmp = getenv("TMPDIR");
	char dir[4096], path[4200];
	snprintf(dir, sizeof dir, "%s/ringdump.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("ringdump: mkdtemp");
		return 99;
	}
	snprintf(path, sizeof path, "%s/session", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror("ringdump: open");
		return 99;
	}
	size_t size = HT_SHM_HEADER_SIZE + (size_t)nrings * (HT_RING_HEADER_SIZE + rsize);
	void *m = MAP_FAILED;
	if (ftruncate(fd, (off_t)size) == 0)
		m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		perror("ringdump: mmap");
		unlink(path);
		rmdir(dir);
		return 99;
	}
	hdr = m;
	hdr->magic = HT_SHM_MAGIC;
	hdr->version = version;
	hdr->clock = clock;
	hdr->header_size = HT_SHM_HEADER_SIZE;
	hdr->ring_size = rsize;
	hdr->ring_count = nrings;
	hdr->flags = flags;
	hdr->stack_mask = mask;
	hdr->collector_pid = getpid();
	pid_t stand_in = -1;
	if (hang_ms >= 0) {
		stand_in = fork();
		if (stand_in == 0) {
			for (;;)
				pause();
		}
		if (stand_in < 0) {
			perror("ringdump: fork");
			return 99;
		}
		hdr->collector_pid = stand_in;
	}
	hdr->t0_ns = now_ns();
	atomic_store(&hdr->next_stack_id, 1);
	atomic_store(&hdr->heartbeat_ns, now_ns());
	rings = (char *)m + HT_SHM_HEADER_SIZE;
	ring_size = rsize;
	ring_count = nrings;
	stride = HT_RING_HEADER_SIZE + rsize;
	atomic_store(&hdr->state, HT_SESSION_RUNNING);

	/* Orphaned descendants come to us, so we know when all have exited. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	pid_t root = fork();
	if (root < 0) {
		perror("ringdump: fork");
		return 99;
	}
	if (root == 0) {
		hdr->root_pid = getpid();
		setenv("LD_PRELOAD", lib, 1);
		setenv(HT_ENV_SESSION, path, 1);
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "ringdump: cannot run '%s': %s\n", argv[optind], strerror(errno));
		_exit(127);
	}
	int status = 0, have_root = 0;
	uint64_t start = now_ns(), killed_ns = 0, killed_hb = 0;
	for (;;) {
		uint64_t ms = (now_ns() - start) / 1000000;
		if (stop_ms >= 0 && ms >= (uint64_t)stop_ms)
			atomic_store(&hdr->state, HT_SESSION_STOPPING);
		if (hang_ms >= 0 && ms >= (uint64_t)hang_ms && stand_in > 0) {
			kill(stand_in, SIGKILL);
			waitpid(stand_in, NULL, 0);
			stand_in = 0;
			killed_ns = now_ns();
			/* the recorder's rule counts from the last heartbeat,
			   which a loaded machine may have left well before */
			killed_hb = atomic_load(&hdr->heartbeat_ns);
		}
		int paused = pause_ms >= 0 && ms >= (uint64_t)pause_ms &&
			     ms < (uint64_t)(pause_ms + pause_dur);
		if ((hang_ms < 0 || ms < (uint64_t)hang_ms) && !paused)
			drain_all();
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);
		if (p == root) {
			status = st;
			have_root = 1;
		}
		if (p < 0 && errno == ECHILD)
			break;
		if (p > 0)
			continue;
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
	atomic_store(&hdr->state, HT_SESSION_STOPPING);
	drain_all();
	/* Rings of dead processes stay OWNED: drain_all already took their records. */

	qsort(recs, nrecs, sizeof *recs, by_time);
	FILE *f = stdout;
	if (out && !(f = fopen(out, "w"))) {
		perror("ringdump: output");
		f = stdout;
	}
	uint64_t lost = 0;
	for (uint32_t i = 0; i < ring_count; i++)
		lost += atomic_load(&ring_at(i)->lost);
	fprintf(f,
		"# records=%zu lost=%llu rings_exhausted=%llu next_stack_id=%u reentered=%llu "
		"ring_reach=%u bad=%d\n",
		nrecs, (unsigned long long)lost,
		(unsigned long long)atomic_load(&hdr->rings_exhausted),
		atomic_load(&hdr->next_stack_id), (unsigned long long)atomic_load(&hdr->reentered),
		atomic_load(&hdr->ring_reach), bad_records);
	for (size_t i = 0; i < nrecs; i++)
		print_rec(f, &recs[i], with_ts);
	if (f != stdout)
		fclose(f);
	/* When each image's recorder stopped after the collector died (its first
	   untraced event, in the loss table): how long it took to notice, from
	   the death and from the last heartbeat before it. */
	for (uint32_t i = 0; killed_ns && i < HT_LOSS_SLOTS; i++) {
		struct ht__shm_loss *l = &ht__shm_losses(hdr)[i];
		uint64_t u = atomic_load(&l->untraced_ns);
		if (atomic_load(&l->pid) > 0 && u)
			fprintf(stderr,
				"ringdump: pid %d untraced from %lld ms after the collector died, "
				"%lld ms after its last heartbeat\n",
				(int)atomic_load(&l->pid),
				((long long)u - (long long)killed_ns) / 1000000,
				((long long)u - (long long)killed_hb) / 1000000);
	}
	munmap(m, size);
	unlink(path);
	rmdir(dir);
	if (!have_root)
		return 99;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}
