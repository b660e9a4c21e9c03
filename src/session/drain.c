/*
 * drain.c - the collector's loop: every tick it empties the rings into
 * per-ring queues, merges them in time order below the watermark
 * (docs/session-protocol.md, "Time order"), reaps children, samples RSS,
 * notices dead processes and gives their rings back.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ifeo/pending.h"
#include "base/procfs.h"
#include "session/internal.h"
#include "session/live.h"

/* Pauses to wait for a busy writer to commit; after them the watermark stops
   at the writer's last record instead (a few microseconds). */
#define BUSY_SPINS 2000
/* A process gone without any exit report is declared killed this much later,
   which leaves its traced parent time to report what wait() told it. */
#define GONE_GRACE_NS 50000000ull
/* How long a writer may stay busy without progress before the merge stops
   waiting for it: STUCK_NS when its thread is stopped (SIGSTOP, a
   debugger), STUCK_MAX_NS when it is not (stuck_writer_stopped()). */
#define STUCK_NS 1000000000ull
#define STUCK_MAX_NS 10000000000ull
/* Processes looked at in /proc per tick (RSS, death). */
#define PROC_CHECKS_PER_TICK 64
/* Dead-owner checks of idle rings: every this many ticks. */
#define DEAD_CHECK_TICKS 5
/* How often a live process's memory map is looked at for the session file,
   and how long the file must stay missing before its image counts as
   replaced: a traced image maps it as its recorder starts, which follows
   the exec by the dynamic loader's work. */
#define IMAGE_CHECK_NS 100000000ull
/* How long the end waits for a child that maps the session but wrote no
   PROCESS_START yet (unborn_child()). */
#define UNBORN_WAIT_NS 10000000000ull
/* Bytes of records one tick merges at most (about a millisecond of the
   writer's work) before it drains the rings again: a tick that merged a
   whole full ring (or eight) at once left every writer waiting for room
   the whole time (docs/performance.md, "Does the program wait for the
   collector?"). */
#define MERGE_BUDGET (128u << 10)
/* In a lossy session (the partial drain below is for lossless ones), a
   ring is drained while its slot holds fewer records than this many ring
   sizes, and, if its slot holds a quarter of a ring or more, while
   all the slots together hold fewer: past it the collector is behind, and
   its writer drops what does not fit (counted) instead of the slots
   growing without bound. A slot left so is merged down to its last record's
   stamp (the merge stops there), below a quarter of a ring: a ring whose
   slot holds less is always drained, or the merge could stop for good at
   a slot it cannot empty (all slots left, each down to records stamped
   at the lowest last stamp). With a bound per slot alone, 8 threads kept
   8 times as much waiting (62 MB of peak RSS against 37 MB before the
   merge budget), merged so long after it was copied that it had left the
   cache (docs/performance.md, "The address map with many live blocks"). */
#define SLOT_RINGS 2
/* In a lossless session a drain copies a ring's records into its slot only
   up to its share of half a ring among the rings that hold records, whole
   records; the rest stays in the ring (docs/session-protocol.md, "The
   partial drain"). Slots of a ring size or more (1-3 MiB a busy thread)
   were memory touched for the first time (3 300 of the collector's 3 826
   page faults with 8 threads) and, with one thread, slid 88 MB of records
   in a 4 M-event run (docs/performance.md, "The collector's drain and
   merge, session 25"). A share of at least this: a record of any length
   fits a slot that holds nothing. */
#define SLOT_MIN 65536u

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Room for len more bytes at sl's tail; 0 or HT_ERR_NOMEM. */
static int slot_room(struct ht__slot *sl, uint32_t len)
{
	if (sl->tail + len <= sl->cap)
		return 0;
	if (sl->head) { /* slide what is pending to the front before growing */
		memmove(sl->buf, sl->buf + sl->head, sl->tail - sl->head);
		sl->tail -= sl->head;
		sl->head = 0;
	}
	size_t need = (size_t)sl->tail + len;
	if (need > sl->cap &&
	    ht__grow32((void **)&sl->buf, &sl->cap, need < 65536 ? 65536 : need, 1) < 0)
		return HT_ERR_NOMEM;
	return 0;
}

static int slot_append(struct ht__slot *sl, const void *rec, uint32_t len)
{
	int rc = slot_room(sl, len);
	if (rc < 0)
		return rc;
	memcpy(sl->buf + sl->tail, rec, len);
	sl->tail += len;
	return 0;
}

/*
 * Check the records in the n bytes at p (a piece of a ring that does not
 * wrap) and append them to the slot, pads left out, in one walk: each
 * record is copied a word at a time and, if the ring stamps in TSC ticks,
 * its ticks converted to CLOCK_MONOTONIC ns on the session's one line
 * (clock.c) in the copy. A thread that moved to another core may read a
 * tick a little below its previous one: its ring stays in order
 * (docs/session-protocol.md, "The clock"). Before, the records between two
 * pads went in one memcpy and a second walk of the copy converted them:
 * the copy out of the ring and the walks were a fifth of the collector's
 * main thread (docs/performance.md, "The collector's merge, session 23").
 * at_end: the piece ends at the ring's end, where fewer bytes than a
 * record header are padding. At most *limit bytes are appended (whole
 * records; *limit is lowered by what was), and *took says how many bytes
 * of the piece were taken: the rest starts with the record that did not
 * fit (the partial drain). Returns 0, 1 after a record that cannot be
 * (counted; the rest of the ring is skipped), or a negative error.
 */
static int take_records(struct ht__session *s, struct ht__slot *sl, const uint8_t *p, uint32_t n,
			bool at_end, uint32_t *limit, uint32_t *took)
{
	/* Pads are left out: n bytes at most (*limit if less), and 32 of slack
	   for the last record's fixed-size copy. */
	int rc = slot_room(sl, (n < *limit ? n : *limit) + 32);
	if (rc < 0)
		return rc;
	const struct ht__tsc *c = &s->tsc;
	const bool tsc = sl->clock == HT_CLOCK_TSC;
	/* The TSC's first slope is taken when the first ticks are converted
	   (ht__clock_ready). */
	if (tsc && c->pending && n >= sizeof(struct ht__rec) && (rc = ht__clock_ready(s)) < 0)
		return rc;
	const uint8_t *q = p, *end = p + n;
	uint8_t *dst = sl->buf + sl->tail, *const dst0 = dst;
	const uint32_t allowed = *limit;
	uint64_t records = 0, last = sl->last_ts;
	/* The clock segment of the last tick converted, [lo, hi): the ticks
	   that fall on it (nearly all) are converted here, without a call. */
	uint64_t lo = 0, hi = 0, base = 0, mult = 0;
	int bad = 0;
	bool full = false;
	while (q < end) {
		size_t room = (size_t)(end - q);
		if (room < sizeof(struct ht__rec) && at_end)
			break; /* too short for a record header: padding by definition */
		const struct ht__rec *in = (const struct ht__rec *)q;
		uint32_t len = room < sizeof(struct ht__rec) ? 0 : in->len;
		if (len < sizeof(struct ht__rec) || (len & 7) || len > room) {
			s->stats.corrupt++; /* a record that cannot be: skip what is left */
			bad = 1;
			break;
		}
		if (in->type == HT_REC_PAD) {
			q += len;
			continue;
		}
		if ((size_t)(dst - dst0) + len > allowed) {
			full = true; /* the rest stays in the ring for the next pass */
			break;
		}
		q += len;
		records++;
		struct ht__rec *rec = (struct ht__rec *)dst;
		if (len <= 32 && (size_t)(end - (const uint8_t *)in) >= 32) {
			/* An allocation (32 bytes) or a free (24): 32 bytes in two
			   fixed moves, past the record into the slot's slack. */
			memcpy(dst, in, 32);
		} else {
			for (uint32_t i = 0; i < len; i += 8)
				memcpy(dst + i, (const uint8_t *)in + i, 8);
		}
		dst += len;
		if (!tsc) {
			last = rec->ts;
			continue;
		}
		uint64_t t = rec->ts, ns = 0;
		if (t - lo < hi - lo) {
			ns = base + (uint64_t)(((unsigned __int128)(t - lo) * mult) >> 32);
		} else if (c->on) {
			ns = ht__tsc_to_ns(c, t, &sl->tsc_seg);
			uint32_t k = sl->tsc_seg;
			if (k < c->nseg && c->seg[k].tick <= t) {
				lo = c->seg[k].tick;
				hi = k + 1 < c->nseg ? c->seg[k + 1].tick : UINT64_MAX;
				base = c->seg[k].ns;
				mult = c->seg[k].mult;
			}
		} else {
			s->stats.corrupt++; /* ticks in a session without a TSC line */
		}
		if (ns < last)
			ns = last;
		rec->ts = last = ns;
		/* A realloc stamped before its call says when it returned too. */
		if (rec->type == HT_REC_REALLOC && len >= sizeof(struct ht__rec_realloc)) {
			struct ht__rec_realloc *r = (struct ht__rec_realloc *)rec;
			if (r->end) {
				uint64_t e = c->on ? ht__tsc_to_ns(c, r->end, &sl->tsc_seg) : 0;
				r->end = e < ns ? ns : e;
				lo = hi = 0; /* the hint may have moved */
			}
		}
	}
	*limit = allowed - (uint32_t)(dst - dst0);
	sl->tail = (uint32_t)(dst - sl->buf);
	sl->last_ts = last;
	s->stats.records += records;
	/* The bytes of the piece taken: up to the record that did not fit,
	   else all of it (a padded end, or skipped as corrupt). */
	*took = full ? (uint32_t)(q - p) : n;
	return bad;
}

static inline const struct ht__rec *slot_head(const struct ht__slot *sl)
{
	return (const struct ht__rec *)(sl->buf + sl->head);
}

int ht__self_record(struct ht__session *s, const struct ht__rec *rec)
{
	struct ht__slot *sl = &s->slots[s->ring_count];
	int rc = slot_append(sl, rec, rec->len);
	if (!rc)
		sl->last_ts = rec->ts;
	return rc;
}

/* True when pid is gone or a zombie: it will never write again. */
static bool pid_dead(int32_t pid, bool *gone)
{
	*gone = false;
	if (pid <= 0)
		return false; /* a ring just claimed: its owner has not written its pid yet */
	enum ht__pid_state st = ht__pid_state(pid);
	*gone = st == HT__PID_GONE;
	return st != HT__PID_ALIVE;
}

/* Resident bytes of pid from /proc/PID/statm; -1 when it cannot be read. */
static int64_t read_rss(int32_t pid)
{
	char p[64], buf[256];
	snprintf(p, sizeof(p), "/proc/%d/statm", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	unsigned long long size, res;
	if (sscanf(buf, "%llu %llu", &size, &res) != 2)
		return -1;
	return (int64_t)(res * (unsigned long long)sysconf(_SC_PAGESIZE));
}

/*
 * Does pid run an image that writes to this session? Its recorder maps the
 * session file for the image's whole life (the buffer of a program started
 * before its IFEO session is a memfd the relay copies from), and exec drops
 * every mapping. Returns 1 when the file (or such a buffer) is mapped, 0
 * when the map lists other mappings only, -1 when it cannot tell (no such
 * process, no access, an exiting process whose map is empty).
 */
static int image_maps_session(const struct ht__session *s, int32_t pid)
{
	static const char pending[] = "/memfd:" HT__PENDING_NAME;
	char p[64], buf[16384];
	snprintf(p, sizeof(p), "/proc/%d/maps", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t have = 0;
	bool lines = false;
	int found = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = 0;
		char *line = buf, *nl;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			*nl = 0;
			lines = true;
			/* start-end perms offset major:minor inode path */
			unsigned maj, min;
			unsigned long long ino;
			if (sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &ino) == 3 &&
			    ino == s->shm_ino && makedev(maj, min) == s->shm_dev)
				found = 1;
			else if (strstr(line, pending))
				found = 1;
			line = nl + 1;
			if (found)
				break;
		}
		if (found)
			break;
		have -= (size_t)(line - buf);
		if (have == sizeof(buf) - 1)
			have = 0; /* a line longer than the buffer: no mapping of ours */
		memmove(buf, line, have);
	}
	close(fd);
	return found ? 1 : lines ? 0 : -1;
}

/*
 * A fingerprint of pid's address space (procfs.h): it comes out elsewhere
 * after exec (randomized, or moved by other arguments, environment or
 * binary), and /proc/PID/stat costs a fraction of /proc/PID/maps. 0 when
 * unknown.
 */
static uint64_t mm_fingerprint(int32_t pid)
{
	char buf[1024];
	return ht__proc_stat_read(pid, buf, sizeof(buf)) < 0 ? 0 : ht__proc_stat_fingerprint(buf);
}

/* Queue a PROCESS_EXIT of the session's own making. */
static int self_exit(struct ht__session *s, int32_t pid, uint32_t kind, int32_t value, uint64_t now)
{
	struct ht__rec_exit e = {.h = {.type = HT_REC_PROCESS_EXIT, .len = sizeof(e), .ts = now},
				 .pid = pid,
				 .kind = kind,
				 .value = value};
	return ht__self_record(s, &e.h);
}

/*
 * Reap every child that ended: the launched program and, as a subreaper, the
 * orphans handed to us. Their exits join the merge like any record; the
 * first exit report of a process wins, and its own recorder's exit code
 * waits for its death (translate.c, on_exit_rec), so a status of wait()
 * says how it ended.
 */
static int reap_children(struct ht__session *s, uint64_t now)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		int rc = 0;
		if (pid == s->root_pid) {
			s->stats.root_exited = true;
			s->stats.root_status = status;
		}
		/* Reaped: its rings can go back now, not when /proc is next read. */
		struct ht__proc *p = ht__proc_by_pid(s, pid);
		if (p && !p->replaced) {
			p->dead = true;
			if (!p->gone_ns)
				p->gone_ns = now;
		} else if (!p) {
			/* Not merged yet: its image, when this tick's merge makes it,
			   is dead already, and the session ends without another
			   tick to find that out in /proc. */
			uint32_t k = s->nreaped_early++ % 8;
			s->reaped_early[k].pid = pid;
			s->reaped_early[k].ns = now;
		}
		if (WIFEXITED(status))
			rc = self_exit(s, pid, HT_EXIT_CODE, WEXITSTATUS(status), now);
		else if (WIFSIGNALED(status))
			rc = self_exit(s, pid, HT_EXIT_SIGNAL, WTERMSIG(status), now);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * Has the traced image p been replaced by exec of a program that is not
 * traced (a cleared environment, a setuid program)? Such a program writes
 * no exit report for the image we know and may run for long, so the
 * session would wait for it. Looked at every IMAGE_CHECK_NS: the session
 * file missing from the pid's memory map on two looks that far apart means
 * the image is gone (a traced new image would have mapped it by then).
 * Returns true when p counts as replaced from now on.
 *
 * Not for the launched program, which the session waits for anyway and
 * whose exit status it reaps (the trace gives that status to its last
 * traced image), nor for attached processes, which unmap the file when
 * they are detached and run on.
 */
static bool image_replaced(struct ht__session *s, struct ht__proc *p, uint64_t now)
{
	if (p->pid == s->root_pid || (p->flags & HT_PROCF_ATTACHED) || now < p->image_check_ns)
		return false;
	p->image_check_ns = now + IMAGE_CHECK_NS;
	/* The same address space as when the file was last seen mapped: the
	   same image, without reading the whole map. */
	uint64_t fp = mm_fingerprint(p->pid);
	if (fp && fp == p->mm_fp)
		return false;
	int m = image_maps_session(s, p->pid);
	if (m != 0) {
		if (m > 0) {
			p->unmapped_ns = 0;
			/* Unchanged around the look at the map: it is this image's. */
			p->mm_fp = fp && mm_fingerprint(p->pid) == fp ? fp : 0;
		}
		return false;
	}
	if (!p->unmapped_ns) {
		p->unmapped_ns = now;
		return false;
	}
	return now - p->unmapped_ns >= IMAGE_CHECK_NS;
}

/*
 * Take the crashes recorders reported (HT_SHM_CRASHES) into their processes:
 * one that dies with nobody to wait for it gets that signal as its end.
 * A report of a process not known yet stays until its records are merged.
 */
static void take_crashes(struct ht__session *s)
{
	for (uint32_t i = 0; i < HT_CRASH_SLOTS; i++) {
		struct ht__shm_crash *c = &s->hdr->crash[i];
		int32_t pid = atomic_load_explicit(&c->pid, memory_order_acquire);
		if (pid <= 0)
			continue;
		struct ht__proc *p = ht__proc_by_pid(s, pid);
		if (!p)
			continue;
		if (p->instance == c->instance)
			p->crash_sig = c->sig;
		atomic_store_explicit(&c->pid, 0, memory_order_release);
	}
	s->stats.crashes_unreported = atomic_load(&s->hdr->crashes_unreported);
}

/*
 * The end of dead p that its own report, held (translate.c, on_exit_rec),
 * tells: every record of it is stamped before now. A zombie killed after
 * its report (by exit's flush of stdio, or a kill during it) ended by
 * that signal.
 */
static int held_exit(struct ht__session *s, struct ht__proc *p, bool gone, uint64_t now)
{
	if (!p->exit_held || p->exited || p->gone_ns == UINT64_MAX)
		return 0;
	p->gone_ns = UINT64_MAX; /* once, and no "killed" after it */
	int sig = gone ? 0 : ht__zombie_signal(p->pid);
	return sig ? self_exit(s, p->pid, HT_EXIT_SIGNAL, sig, now)
		   : self_exit(s, p->pid, HT_EXIT_CODE, p->held_value, now);
}

/* p, alive until now, is found dead (gone: not even a zombie). */
static int found_dead(struct ht__session *s, struct ht__proc *p, bool gone, uint64_t now)
{
	p->dead = true;
	if (gone)
		p->gone_ns = now;
	return held_exit(s, p, gone, now);
}

/*
 * Look at the live traced processes: sample their RSS, and notice when one
 * died (its rings can then be drained to the end and freed) or exec'd into
 * an untraced program. At most budget of them per call, taking turns, so
 * that a session with thousands of processes does not spend its ticks in
 * /proc. A process gone without an exit report gets one after a grace
 * period: killed, no number.
 */
static int check_procs(struct ht__session *s, uint64_t now, uint32_t budget)
{
	uint32_t n = s->nprocs, examined = 0;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = (s->proc_cursor + k) % n;
		struct ht__proc *p = s->procs[i];
		if (p->replaced)
			continue;
		bool look = !p->dead || (!p->gone_ns && !p->exited);
		if (look && examined < budget) {
			examined++;
			s->proc_cursor = (i + 1) % n;
			bool gone;
			if (!p->dead && image_replaced(s, p, now)) {
				/* Its rings can go back, and nobody waits for it; the
				   exit record (PROCESS_EXIT marked as an exec) says how
				   it ended. The instance tells it from a later image. */
				p->dead = p->replaced = true;
				int rc = self_exit(s, p->pid, HT__EXIT_UNTRACED_EXEC,
						   (int32_t)p->instance, now);
				if (rc < 0)
					return rc;
			} else if (!p->dead) {
				int64_t rss = read_rss(p->pid);
				if (rss <= 0 && pid_dead(p->pid, &gone)) {
					int rc = found_dead(s, p, gone, now);
					if (rc < 0)
						return rc;
				} else if (rss > 0 && s->cfg.sample_rss && !p->exited &&
					   (uint64_t)rss != p->rss) {
					struct ht__rec_self_rss r = {.h = {.type = HT__REC_SELF_RSS,
									   .len = sizeof(r),
									   .ts = now},
								     .pid = p->pid,
								     .rss = (uint64_t)rss};
					p->rss = (uint64_t)rss;
					int rc = ht__self_record(s, &r.h);
					if (rc < 0)
						return rc;
				}
				/* With each RSS sample, what changed in its map. Not
				   after its PROCESS_EXIT is written (a process between
				   its exit handlers' end and its death): the trace ends
				   it there. */
				if (rss > 0 && s->cfg.sample_rss && s->cfg.sample_maps &&
				    !p->exited) {
					int rc = ht__maps_check(s, p, (uint64_t)rss, now);
					if (rc < 0)
						return rc;
				}
			} else {
				pid_dead(p->pid, &gone);
				if (gone)
					p->gone_ns = now;
				/* Its report merged after it was found dead. */
				int rc = held_exit(s, p, gone, now);
				if (rc < 0)
					return rc;
			}
		}
		if (p->gone_ns && !p->exited && now - p->gone_ns > GONE_GRACE_NS &&
		    p->gone_ns != UINT64_MAX) {
			p->gone_ns = UINT64_MAX; /* queue it once */
			int rc = self_exit(s, p->pid, HT_EXIT_SIGNAL, p->crash_sig, now);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/*
 * At the end: the processes the last merge made known (procs from known
 * on). Their start was stamped too late for the merge before check_procs
 * (a process attached and dead within a millisecond, or one held back by a
 * busy ring), so nobody looked whether they died: one that did ends in the
 * trace (ht__translate_finish), with the crash it reported
 * (sessions.ring-crash: no window without its end).
 */
static int look_at_new_procs(struct ht__session *s, uint32_t known, uint64_t now)
{
	for (uint32_t i = known; i < s->nprocs; i++) {
		struct ht__proc *p = s->procs[i];
		bool gone;
		if (p->dead || p->replaced || read_rss(p->pid) > 0 || !pid_dead(p->pid, &gone))
			continue;
		int rc = found_dead(s, p, gone, now);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Is the process owning ring i dead (so that nothing more will come)? */
static bool ring_owner_dead(struct ht__session *s, uint32_t i)
{
	struct ht__slot *sl = &s->slots[i];
	int32_t pid = sl->bound ? sl->pid : ht__ring_at(s, i)->pid;
	struct ht__proc *p = ht__proc_by_pid(s, pid);
	if (p && (!sl->bound || p->instance == sl->instance))
		return p->dead;
	/* An image we do not know (or an older image of the pid): ask the system,
	   and treat an older image whose pid now runs another image as gone. */
	bool gone;
	if (pid_dead(pid, &gone))
		return true;
	return p && sl->bound && p->instance != sl->instance;
}

/*
 * Whether the writer of slot sl, busy at the same place for over STUCK_NS,
 * is taken as stopped, so the merge goes on without it. A thread stopped
 * by a signal or a tracer ('T', 't') is; so are a zombie and one whose
 * state cannot be read (gone, another pid namespace). One that is running,
 * waiting for the CPU or sleeping is inside a call the record spans (a
 * realloc or munmap is begun before the real call: docs/session-protocol.md,
 * "Time order") or starved of the CPU by real-time programs: it is waited
 * for up to STUCK_MAX_NS, since going on would write another thread's
 * allocation of the block its realloc freed before that realloc
 * (cli.realloc-stall).
 */
static bool stuck_writer_stopped(const struct ht__session *s, const struct ht__slot *sl)
{
	if (s->now_ns - sl->stuck_ns > STUCK_MAX_NS)
		return true;
	char st = ht__proc_task_state(sl->pid, sl->tid);
	return st == 'T' || st == 't' || st == 'Z' || st == 'X' || st == 0;
}

/*
 * Copy what is committed in ring i into its slot and give the space back
 * to the writer: everything, or while capped in a lossless session up to
 * part_bytes pending in the slot (the partial drain). *wm is lowered to
 * the last timestamp of a ring whose writer stays busy (the record it is
 * writing may be stamped that early) or that keeps records not taken.
 */
static int drain_ring(struct ht__session *s, uint32_t i, uint64_t *wm, bool owner_dead, bool capped,
		      uint32_t part_bytes, uint64_t *pending)
{
	struct ht__ring *r = ht__ring_at(s, i);
	struct ht__slot *sl = &s->slots[i];
	const uint32_t size = s->ring_size, mask = size - 1;
	const uint8_t *data = ht__ring_data(s, i);

	/* busy before write_pos: a writer idle now stamps its next record later
	   than our watermark (taken before the scan). */
	bool stuck = atomic_load(&r->busy) != 0;
	for (int n = 0; stuck && n < BUSY_SPINS; n++) {
		cpu_relax();
		stuck = atomic_load(&r->busy) != 0;
	}
	uint64_t w = atomic_load_explicit(&r->write_pos, memory_order_acquire);
	uint64_t pos = atomic_load_explicit(&r->read_pos, memory_order_relaxed), start = pos;
	uint32_t held = sl->tail - sl->head;
	const bool part = capped && !(s->cfg.flags & HT_SHM_LOSSY);
	/* The bytes this drain may append: a slot whose records all share its
	   last stamp (the merge can take none of them) takes a part more. */
	const bool same = held && slot_head(sl)->ts == sl->last_ts;
	uint32_t limit = !part		     ? UINT32_MAX
			 : same		     ? part_bytes
			 : held < part_bytes ? part_bytes - held
					     : 0;
	/* A slot without room at its tail slides what it holds to its front:
	   while that is more than a quarter of its share, it takes only what
	   fits, and slides once the merge has brought it below (with one
	   thread the slides were half the collector's memmove, where the merge
	   had taken only a tick's budget since the last pass). */
	if (part && !same && sl->head && held > part_bytes / 4) {
		uint32_t room = sl->cap > sl->tail + 32 ? sl->cap - sl->tail - 32 : 0;
		if (limit > room)
			limit = room;
	}
	if (capped && !part && sl->bound &&
	    (held >= SLOT_RINGS * size || (held >= size / 4 && *pending >= SLOT_RINGS * size))) {
		/* Behind on this ring: what it holds is stamped after the slot's
		   last record, so the merge stops there, and the next tick comes
		   as soon as it has merged (its writer may wait for room). */
		if (sl->last_ts < *wm)
			*wm = sl->last_ts;
		s->behind = true;
		return 0;
	}
	if (w != pos && !sl->bound) {
		/* Read after the acquire: the owner wrote these before committing. */
		sl->pid = r->pid;
		sl->tid = r->tid;
		sl->instance = r->instance;
		sl->clock = r->clock;
		sl->proc = 0;
		sl->bound = true;
	}
	if (w - pos > size || w < pos) {
		s->stats.corrupt++;
		pos = w;
	}
	/* At most two pieces: up to the ring's end, then from its start. */
	while (pos < w) {
		uint32_t off = (uint32_t)(pos & mask), took;
		uint32_t piece = w - pos < size - off ? (uint32_t)(w - pos) : size - off;
		int rc = take_records(s, sl, data + off, piece, off + piece == size, &limit, &took);
		if (rc < 0)
			return rc;
		if (rc > 0) {
			pos = w;
			break;
		}
		pos += took;
		if (took < piece)
			break;
	}
	atomic_store_explicit(&r->read_pos, pos, memory_order_release);
	*pending += (sl->tail - sl->head) - held;
	/* The next tick comes before it fills: what its writer wrote since the
	   last drain, taken or not. */
	uint64_t wrote = w - (sl->seen_w > w || sl->seen_w < start ? start : sl->seen_w);
	sl->seen_w = w;
	if (wrote > s->drained_max)
		s->drained_max = wrote;
	if (w - start > size / 2 && w - pos <= size / 2)
		s->room_made = true; /* its writer may wait for room */
	if (pos < w) {
		/* Left in the ring: stamped at or after the slot's last record. */
		s->behind = true;
		if (sl->last_ts < *wm)
			*wm = sl->last_ts;
	}
	/* A writer busy at the same place for a second may be stopped
	   (SIGSTOP, a debugger): waiting for it would hold every other ring's
	   events back in memory, so the merge goes on without it. */
	if (!stuck || w != sl->stuck_pos || !sl->stuck_ns) {
		sl->stuck_pos = w;
		sl->stuck_ns = stuck ? s->now_ns : 0;
	}
	bool stopped = stuck && s->now_ns - sl->stuck_ns > STUCK_NS && stuck_writer_stopped(s, sl);
	if (stuck && !owner_dead && !stopped && sl->last_ts < *wm)
		*wm = sl->last_ts;
	return 0;
}

/* Give ring i back to the recorders; its slot is empty. */
static void free_ring(struct ht__session *s, uint32_t i)
{
	struct ht__ring *r = ht__ring_at(s, i);
	struct ht__slot *sl = &s->slots[i];
	s->lost_freed += atomic_load(&r->lost);
	atomic_store(&r->lost, 0);
	atomic_store(&r->busy, 0);
	atomic_store(&r->write_pos, 0);
	atomic_store(&r->read_pos, 0);
	r->pid = r->tid = 0;
	r->instance = 0;
	sl->bound = false;
	sl->proc = 0;
	sl->stuck_ns = 0;
	sl->thread_dead = false;
	sl->clock = HT_CLOCK_MONO;
	sl->head = sl->tail = 0;
	sl->last_ts = 0;
	sl->seen_w = 0;
	atomic_store_explicit(&r->state, HT_RING_FREE, memory_order_release);
}

static inline bool heap_less(const struct ht__session *s, uint32_t a, uint32_t b)
{
	uint64_t ta = slot_head(&s->slots[a])->ts, tb = slot_head(&s->slots[b])->ts;
	return ta < tb || (ta == tb && a < b);
}

static void heap_down(struct ht__session *s, uint32_t n, uint32_t i)
{
	uint32_t *h = s->heap;
	for (;;) {
		uint32_t l = 2 * i + 1, m = i;
		if (l < n && heap_less(s, h[l], h[m]))
			m = l;
		if (l + 1 < n && heap_less(s, h[l + 1], h[m]))
			m = l + 1;
		if (m == i)
			return;
		uint32_t t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* Bytes of records (about 9) the merge hands to ht__translate_span() at
   most: within reach of the look ahead's hints, which a run of thousands of
   records (one ring) would leave far behind. The hints go once per span:
   at 1024 bytes, 36 prefetches at once into jq's map of a million blocks
   made them twice as costly as in batches of about 9 (docs/performance.md,
   "The collector's merge, session 24"). */
#define SPAN_BYTES 256u

/*
 * How far the merge looks ahead in a slot's records: the addresses of the
 * allocations and frees coming within this many bytes (about 16 records)
 * of the span being translated are handed to the sink's prefetch, so that
 * the writer's address map is in the cache when their events come. With 8
 * threads of alloc_loop the map holds 32768 live blocks, 2 MiB that missed
 * the cache on every event (docs/performance.md, "The address map with
 * many live blocks"). Kept per slot: a thread's records come in runs when
 * several threads are merged, and its next run is hinted already. Only
 * while the sink says hints pay (asked once per merge: the writer's map
 * is large). Done once per span, before it is translated, not per record:
 * with 8 threads the per-record look cost 25 instructions an event
 * (docs/performance.md, "The collector's merge, session 24").
 */
#define LOOK_AHEAD 512u

_Static_assert(offsetof(struct ht__rec_alloc, addr) == offsetof(struct ht__rec_free, addr),
	       "the look ahead reads the address of either record at one place");

/* Hints the records of sl from span on (sl->hinted bytes of them were
   hinted already) to LOOK_AHEAD bytes past to, each record once, in order;
   sl->hinted then counts from to. */
static void look_ahead(struct ht__session *s, struct ht__slot *sl, uint32_t span, uint32_t to)
{
	uint64_t addr[(SPAN_BYTES + LOOK_AHEAD) / sizeof(struct ht__rec) + 2];
	uint32_t n = 0, h = span + sl->hinted, end = to + LOOK_AHEAD;
	if (h >= to + LOOK_AHEAD / 2) {
		/* Far enough ahead still: the hints go in batches even when the
		   merge takes one record at a time (a realloc held back: on jq a
		   call per record cost its collector 9 % of its time). */
		sl->hinted = h - to;
		return;
	}
	if (end > sl->tail)
		end = sl->tail;
	while (h < end && n < sizeof(addr) / sizeof(addr[0])) {
		const struct ht__rec *r = (const struct ht__rec *)(sl->buf + h);
		if ((r->type == HT_REC_ALLOC || r->type == HT_REC_FREE) &&
		    r->len >= sizeof(struct ht__rec_free))
			addr[n++] = ((const struct ht__rec_free *)r)->addr;
		h += r->len;
	}
	sl->hinted = h > to ? h - to : 0;
	if (n)
		s->sink->prefetch(s->sink_ctx, addr, n);
}

/* Translate the records of sl from span to its head, their addresses
   and the next LOOK_AHEAD bytes' hinted first (hint). */
static inline int span_out(struct ht__session *s, struct ht__slot *sl, uint32_t span, bool hint)
{
	if (hint)
		look_ahead(s, sl, span, sl->head);
	else
		sl->hinted = 0;
	return span < sl->head ? ht__translate_span(s, sl, sl->buf + span, sl->buf + sl->head) : 0;
}

/*
 * Write the queued records stamped below wm, in time order: a k-way merge
 * of the slots (each already in order) through a binary heap. It stops
 * once budget bytes of records are written (the rest waits for the next
 * call): returns 1 then, 0 when every record below wm is written, or a
 * negative error.
 */
static int merge(struct ht__session *s, uint64_t wm, uint64_t budget)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i <= s->ring_count; i++) {
		struct ht__slot *sl = &s->slots[i];
		if (sl->head < sl->tail && slot_head(sl)->ts < wm)
			s->heap[n++] = i;
	}
	for (uint32_t i = n / 2; i-- > 0;)
		heap_down(s, n, i);
	bool hint = s->sink && s->sink->prefetch && s->sink->prefetch(s->sink_ctx, NULL, 0);
	while (n) {
		/* The slot on top keeps the lead for a run of records, until one
		   of them comes after the head of the next slot (the smaller of
		   the top's children): the heap is touched once per run, and a
		   thread's records come in runs (one slot alone: one run). */
		uint32_t top = s->heap[0], next = UINT32_MAX;
		if (n > 1)
			next =
			    n > 2 && heap_less(s, s->heap[2], s->heap[1]) ? s->heap[2] : s->heap[1];
		uint64_t next_ts = next == UINT32_MAX ? UINT64_MAX : slot_head(&s->slots[next])->ts;
		uint64_t limit = next_ts < wm ? next_ts : wm;
		struct ht__slot *sl = &s->slots[top];
		/* span: the run's records not translated yet, from there to the
		   head; they go to ht__translate_span() together. */
		uint32_t from = sl->head, span = from;
		for (;;) {
			const struct ht__rec *rec = slot_head(sl);
			s->merged++;
			if (s->nheld || rec->type == HT_REC_REALLOC) {
				/* What ht__order_rec() does with any other record
				   while nothing is held (nearly always): translate
				   it, here with the rest of the span. */
				int rc = span_out(s, sl, span, hint);
				sl->hinted = sl->hinted > rec->len ? sl->hinted - rec->len : 0;
				sl->head += rec->len;
				span = sl->head;
				if (rc < 0 || (rc = ht__order_rec(s, sl, rec)) < 0)
					return rc;
			} else if ((sl->head += rec->len) - span >= SPAN_BYTES) {
				int rc = span_out(s, sl, span, hint);
				if (rc < 0)
					return rc;
				span = sl->head;
			}
			if (sl->head == sl->tail) {
				s->heap[0] = s->heap[--n];
				break;
			}
			uint64_t ts = slot_head(sl)->ts;
			/* ties go to the lower slot index, as in heap_less() */
			if ((ts < limit || (ts == next_ts && ts < wm && top < next)) &&
			    sl->head - from < budget)
				continue;
			if (ts >= wm)
				s->heap[0] = s->heap[--n];
			break;
		}
		if (span < sl->head) {
			int rc = span_out(s, sl, span, hint);
			if (rc < 0)
				return rc;
		}
		budget -= sl->head - from < budget ? sl->head - from : budget;
		heap_down(s, n, 0);
		if (!budget && n) {
			/* Held reallocs due before the next record go now, as that
			   record would have let them; the rest waits with it. */
			uint64_t next_rec = slot_head(&s->slots[s->heap[0]])->ts;
			wm = next_rec;
			break;
		}
	}
	for (uint32_t i = 0; i <= s->ring_count; i++) {
		struct ht__slot *sl = &s->slots[i];
		if (sl->head == sl->tail)
			sl->head = sl->tail = 0;
	}
	int rc = ht__order_flush(s, wm);
	return rc < 0 ? rc : n > 0;
}

/*
 * Is the thread owning idle ring i gone while its process lives on? A thread
 * normally releases its ring when it exits, but one that still made a call
 * after its release (glibc frees a thread's stack after the key destructors
 * ran) takes a ring it never gives back.
 */
static bool owner_thread_gone(struct ht__session *s, uint32_t i)
{
	struct ht__ring *r = ht__ring_at(s, i);
	int32_t pid = r->pid, tid = r->tid;
	if (pid <= 0 || tid <= 0 || atomic_load(&r->busy) ||
	    atomic_load(&r->write_pos) != atomic_load(&r->read_pos))
		return false;
	return syscall(SYS_tgkill, pid, tid, 0) < 0 && errno == ESRCH;
}

/*
 * One pass over the rings: drain, then give back the rings that are done
 * (released, or owned by a dead process) once nothing of theirs is pending.
 * Returns the number of rings still in use, or a negative error.
 */
static int drain_all(struct ht__session *s, uint64_t *wm, bool check_dead, bool final)
{
	int in_use = 0;
	uint64_t pending = 0; /* bytes of records the slots hold */
	uint32_t reached = ht__rings_reached(s->hdr, s->ring_count), busy = 0;
	for (uint32_t i = 0; i < reached; i++) {
		const struct ht__slot *sl = &s->slots[i];
		const struct ht__ring *r = ht__ring_at(s, i);
		pending += sl->tail - sl->head;
		busy += sl->tail != sl->head ||
			atomic_load_explicit(&r->write_pos, memory_order_relaxed) !=
			    atomic_load_explicit(&r->read_pos, memory_order_relaxed);
	}
	/* The partial drain's share of each ring that has records: half a
	   ring among them (SLOT_MIN at least). */
	uint32_t part_bytes = s->ring_size / 2 / (busy ? busy : 1);
	if (part_bytes < SLOT_MIN)
		part_bytes = SLOT_MIN;
	for (uint32_t i = 0; i < reached; i++) {
		struct ht__ring *r = ht__ring_at(s, i);
		uint32_t st = atomic_load_explicit(&r->state, memory_order_acquire);
		if (st == HT_RING_FREE)
			continue;
		struct ht__slot *sl = &s->slots[i];
		bool dead = final || st == HT_RING_RELEASED ||
			    ((check_dead || sl->bound) && ring_owner_dead(s, i));
		if (!dead && (check_dead || s->rings_scarce) && !sl->thread_dead &&
		    owner_thread_gone(s, i))
			sl->thread_dead = true;
		dead = dead || sl->thread_dead;
		int rc = drain_ring(s, i, wm, dead, !final && !s->finishing, part_bytes, &pending);
		if (rc < 0)
			return rc;
		in_use++;
		if (st == HT_RING_OWNED && !dead)
			continue;
		/* A released ring is done once drained; an owned one only when its
		   process is dead. Re-check the state: the owner may release it now. */
		if (st == HT_RING_RELEASED || dead) {
			uint64_t w = atomic_load_explicit(&r->write_pos, memory_order_acquire);
			if (w == atomic_load(&r->read_pos) && sl->head == sl->tail && !final) {
				free_ring(s, i);
				s->room_made = true; /* a thread may wait for a ring */
				in_use--;
			}
		}
	}
	/* Threads may be waiting for a ring: look again soon, and check for
	   rings of dead threads every time until there are rings to spare. */
	s->rings_scarce = (uint32_t)in_use + s->ring_count / 8 + 1 > s->ring_count;
	if (s->rings_scarce)
		s->hurry = true;
	return in_use;
}

static bool all_dead(const struct ht__session *s)
{
	for (uint32_t i = 0; i < s->nprocs; i++)
		if (!s->procs[i]->dead && !s->procs[i]->replaced)
			return false;
	return true;
}

/*
 * Is a child of ours an instance the session does not know yet? A fork child
 * is known once its recorder wrote its PROCESS_START, which one the
 * scheduler has not run yet did not, while its parent (the root too) may
 * have ended and been reaped (qa: record.e2e lost rec_fork's grandchild on a
 * loaded machine). As the subreaper, every orphan is our child: one that
 * maps the session file is traced, so the session waits for it to be known,
 * up to UNBORN_WAIT_NS. Not with --no-follow, whose children map it dormant.
 */
static bool unborn_child(struct ht__session *s, uint64_t now)
{
	if (!s->cfg.reap_children || (s->cfg.flags & HT_SHM_NO_FOLLOW))
		return false;
	if (!s->unborn_since_ns)
		s->unborn_since_ns = now;
	if (now - s->unborn_since_ns > UNBORN_WAIT_NS)
		return false;
	bool found = false;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	while (!found && d && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char path[320];
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
		FILE *f = fopen(path, "re");
		int pid;
		while (!found && f && fscanf(f, "%d", &pid) == 1) {
			struct ht__proc *p = ht__proc_by_pid(s, pid);
			found = (!p || p->dead) && image_maps_session(s, pid) == 1;
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	if (!found)
		s->unborn_since_ns = 0;
	return found;
}

/*
 * Between ticks what the sink holds is a whole prefix of the trace (merged
 * in time order, definitions first): have it written about once a second,
 * so a collector killed without warning loses at most that much.
 */
static int flush_sink(struct ht__session *s, uint64_t now)
{
	if (!s->sink || !s->sink->flush || now - s->flush_ns < HT__FLUSH_NS ||
	    s->stats.events == s->flushed_events)
		return 0;
	s->flush_ns = now;
	s->flushed_events = s->stats.events;
	int rc = s->sink->flush(s->sink_ctx);
	if (rc < 0 && !s->sink_err)
		s->sink_err = rc;
	return rc;
}

/*
 * Recorder threads wait asleep on drain_seq for room or a ring (lossless
 * mode): after a drain, bump it and wake them all, each looks at its own
 * ring. The fence orders our read_pos stores before the load of waiters,
 * against a waiter that counts itself before it looks at read_pos. While
 * anyone waits, tick again soon.
 */
static void wake_waiters(struct ht__session *s)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load(&s->hdr->waiters))
		return;
	s->hurry = true;
	atomic_fetch_add(&s->hdr->drain_seq, 1);
	syscall(SYS_futex, &s->hdr->drain_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int tick(struct ht__session *s);

/*
 * How long until the next tick: before the ring that filled fastest since
 * the last drain is half full at that rate (a program that fills its ring
 * in 7 ms, as jq does, waited for room at every 10 ms tick), between
 * HT__TICK_NS / 20 and HT__TICK_NS; a tenth of HT__TICK_NS while a writer
 * waits or rings are scarce.
 */
static uint64_t tick_period(struct ht__session *s, uint64_t now)
{
	/* The rate: the fastest ring's since the last drain when higher than
	   before, else coming down to it over about 20 ms (a ring whose writer
	   has just woken from a wait gives a few bytes in a short time). */
	if (s->drain_ns && now > s->drain_ns) {
		double dt = (double)(now - s->drain_ns);
		double cur = (double)s->drained_max / dt;
		s->fill_rate = cur >= s->fill_rate
				   ? cur
				   : s->fill_rate + (cur - s->fill_rate) * dt / (dt + 2e7);
	}
	uint64_t p = HT__TICK_NS;
	if (s->fill_rate > 0 && (double)(s->ring_size / 2) / s->fill_rate < (double)p)
		p = (uint64_t)((double)(s->ring_size / 2) / s->fill_rate);
	if (s->hurry && p > HT__TICK_NS / 10)
		p = HT__TICK_NS / 10;
	return p < HT__TICK_NS / 20 ? HT__TICK_NS / 20 : p;
}

int ht__session_tick(struct ht__session *s)
{
	int rc = tick(s);
	/* The trace cannot take more (disk full, say): let the programs run on
	   untraced rather than wait for a collector that stopped collecting. */
	if (rc < 0)
		atomic_store_explicit(&s->hdr->state, HT_SESSION_STOPPING, memory_order_release);
	return rc;
}

static int tick(struct ht__session *s)
{
	if (s->sink_err)
		return s->sink_err;
	uint64_t now = ht__now_ns();
	atomic_store(&s->hdr->heartbeat_ns, now);
	s->now_ns = now;

	int rc;
	/* A tick that only goes on with a merge its budget cut (below) drains
	   and merges; the looks at processes keep the pace of full ticks. */
	bool full = now >= s->full_tick_ns;
	if (full) {
		s->tick++;
		s->full_tick_ns = now + HT__TICK_NS / 10;
		if ((rc = ht__clock_tick(s, now)) < 0)
			return rc;
	}
	if (s->cfg.reap_children && (rc = reap_children(s, now)) < 0)
		return rc;
	if (full && (s->cfg.flags & HT_SHM_CRASHES))
		take_crashes(s);
	if (full && (rc = check_procs(s, now, PROC_CHECKS_PER_TICK)) < 0)
		return rc;
	uint64_t wm = now > 1000000 ? now - 1000000 : 0;
	s->hurry = s->behind = s->room_made = false;
	s->drained_max = 0;
	int in_use = drain_all(s, &wm, full && s->tick % DEAD_CHECK_TICKS == 0, false);
	/* Waiters wake at full ticks, and when a ring that was more than half
	   full got its room back or a ring came free: the ticks between, which
	   a merge cut by its budget makes back to back, woke every sleeping
	   writer each time (8 threads: the program's CPU went to futex wakes of
	   threads whose rings were still full). */
	if (full || s->room_made)
		wake_waiters(s);
	s->next_tick_ns = now + tick_period(s, now);
	s->drain_ns = now;
	if (in_use < 0)
		return in_use;
	if ((rc = ht__snap_tick(s, now, false)) < 0)
		return rc;
	uint64_t merged = s->merged;
	if ((rc = merge(s, wm, MERGE_BUDGET)) < 0)
		return rc;
	if (rc == 0 && wm > s->merged_to)
		s->merged_to = wm;
	/* More to merge: drain again first, then go on. A ring left full
	   (behind) is drained as soon as the merge made its buffer room; not
	   while a writer stopped in the middle of a record holds the merge
	   back (STUCK_NS): that would spin. */
	if (rc > 0 || (s->behind && s->merged != merged))
		s->next_tick_ns = now;
	if ((rc = ht__losses_reclaim(s)) < 0)
		return rc;
	if ((rc = flush_sink(s, now)) < 0)
		return rc;
	/* About to sleep: what the sink took is written first (its chunk may be
	   compressing on the writer's thread), so an idle collector killed
	   loses nothing it had taken. */
	if (s->sink && s->sink->settle && s->next_tick_ns > ht__now_ns() &&
	    (rc = s->sink->settle(s->sink_ctx)) < 0) {
		s->sink_err = rc;
		return rc;
	}
	if (s->stop)
		return 1;
	bool root_done =
	    s->root_pid > 0 ? s->stats.root_exited : s->cfg.end_when_gone && s->nprocs > 0;
	if (root_done && all_dead(s)) {
		if (in_use == 0 && !unborn_child(s, now))
			return 1;
		/* The last rings are given back once merged, at the next tick:
		   soon, not a whole tick after the program ended. */
		if (in_use)
			s->next_tick_ns = now + HT__TICK_NS / 10;
	}
	return 0;
}

bool ht__session_merged_past(const struct ht__session *s, uint64_t t)
{
	return s->merged_to >= t;
}

unsigned ht__session_sleep_us(const struct ht__session *s)
{
	uint64_t now = ht__now_ns();
	if (now >= s->next_tick_ns)
		return 0;
	uint64_t d = (s->next_tick_ns - now) / 1000;
	return d > HT__TICK_NS / 1000 ? HT__TICK_NS / 1000 : (unsigned)d;
}

void ht__session_stop_recording(struct ht__session *s)
{
	atomic_store_explicit(&s->hdr->state, HT_SESSION_STOPPING, memory_order_release);
	wake_waiters(s); /* they see STOPPING and pass through */
}

int ht__session_finish(struct ht__session *s, bool symbolize, ht__progress_fn progress, void *ctx)
{
	if (s->sink_err)
		return s->sink_err;
	s->finishing = true;
	atomic_store_explicit(&s->hdr->state, HT_SESSION_STOPPING, memory_order_release);
	wake_waiters(s); /* they see STOPPING and pass through */
	uint64_t now = ht__now_ns();
	atomic_store(&s->hdr->heartbeat_ns, now);
	s->now_ns = now;
	int rc;
	if (s->cfg.reap_children && (rc = reap_children(s, now)) < 0)
		return rc;
	if (s->cfg.flags & HT_SHM_CRASHES)
		take_crashes(s);
	/* What the rings hold up to a tick's margin first, as a tick would
	   merge it: a process no tick has seen yet (a recording shorter than
	   the ticks it got, as a loaded machine gives) is then known to the
	   look below, which reads its RSS and its map (memory mapped before
	   an attach) like every other's. */
	uint64_t wm0 = now > 1000000 ? now - 1000000 : 0;
	if ((rc = drain_all(s, &wm0, false, false)) < 0)
		return rc;
	if ((rc = merge(s, wm0, UINT64_MAX)) < 0)
		return rc;
	if ((rc = check_procs(s, now, UINT32_MAX)) < 0)
		return rc;
	/* Everything committed is in the rings now but for a writer caught in
	   the middle of a record; drain_ring waits for those a little. */
	uint64_t wm = UINT64_MAX;
	uint32_t known = s->nprocs;
	if ((rc = drain_all(s, &wm, true, true)) < 0)
		return rc;
	if ((rc = merge(s, UINT64_MAX, UINT64_MAX)) < 0)
		return rc;
	if ((rc = look_at_new_procs(s, known, now)) < 0)
		return rc;
	if (s->cfg.flags & HT_SHM_CRASHES)
		take_crashes(s); /* of processes the last merge made known */
	if ((rc = ht__translate_finish(s)) < 0)
		return rc;
	/* After every exit is known: the exit snapshots, then the last one;
	   merged in turn. */
	if ((rc = ht__snap_tick(s, ht__now_ns(), true)) < 0)
		return rc;
	if ((rc = merge(s, UINT64_MAX, UINT64_MAX)) < 0)
		return rc;
	s->merged_to = UINT64_MAX;
	s->stats.lost = ht__session_lost_now(s);
	s->stats.lost_no_buffer = atomic_load(&s->hdr->rings_exhausted);
	s->stats.lost_in_handler = atomic_load(&s->hdr->reentered);
	s->stats.lost_lossy = s->stats.lost - s->stats.lost_no_buffer - s->stats.lost_in_handler;
	s->stats.room_waits = atomic_load(&s->hdr->room_waits);
	s->stats.room_sleeps = atomic_load(&s->hdr->room_sleeps);
	uint64_t end = ht__now_ns() - s->hdr->t0_ns;
	s->stats.duration_ns = end > s->last_ts ? end : s->last_ts;
	/* The last events chunk compresses (on the writer's thread) while the
	   frames are symbolized: clang++'s last chunk took 10 ms that came
	   after the symbols' 3.5 ms from the symbol cache. */
	if (symbolize && s->sink && s->sink->hand_over &&
	    (rc = s->sink->hand_over(s->sink_ctx)) < 0) {
		if (!s->sink_err)
			s->sink_err = rc;
		return rc;
	}
	if (symbolize && (rc = ht__symbolize(s, progress, ctx)) < 0)
		return rc;
	if ((rc = ht__translate_losses(s)) < 0)
		return rc;
	return s->sink_err;
}
