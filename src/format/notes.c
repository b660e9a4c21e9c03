/*
 * notes.c - the exit notes of an unfinished trace (docs/session-protocol.md,
 * "A collector killed"): TRACE.lost holds one struct ht__exit_note per
 * process image that ended while its collector may have been gone. The
 * reader of a trace without a footer counts each process's heap and memory
 * events as it scans them and, at the end, gives each noted process what
 * the trace does not hold: its losses, the events after the trace's end,
 * and its exit status.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/protocol.h"
#include "format/codec.h"
#include "format/notes.h"

/* More notes than this is not a file the recorders wrote. */
#define NOTES_MAX_BYTES (64u << 20)

int ht__notes_load(struct ht__notes *n, const char *trace_path)
{
	memset(n, 0, sizeof(*n));
	size_t len = strlen(trace_path) + sizeof(HT_NOTE_SUFFIX);
	char *path = malloc(len);
	if (!path)
		return HT_ERR_NOMEM;
	snprintf(path, len, "%s%s", trace_path, HT_NOTE_SUFFIX);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	free(path);
	if (fd < 0)
		return 0;
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > NOTES_MAX_BYTES)
		goto out;
	n->present = true;
	size_t count = (size_t)st.st_size / sizeof(struct ht__exit_note);
	if (!count)
		goto out;
	n->v = malloc(count * sizeof(*n->v));
	if (!n->v) {
		rc = HT_ERR_NOMEM;
		goto out;
	}
	ssize_t got = pread(fd, n->v, count * sizeof(*n->v), 0);
	count = got > 0 ? (size_t)got / sizeof(*n->v) : 0;
	/* Only the notes of one session: the first one's. */
	for (size_t i = 0; i < count; i++)
		if (n->v[i].magic == HT_NOTE_MAGIC && n->v[i].pid > 0 &&
		    n->v[i].t0_ns == n->v[0].t0_ns)
			n->v[n->n++] = n->v[i];
out:
	close(fd);
	return rc;
}

int ht__notes_count(struct ht__notes *n, const struct ht_event *ev)
{
	if (!n->n || ev->type < HT_EV_ALLOC || ev->type > HT_EV_HEAP_DESTROY ||
	    (ev->flags & HT_EVF_UNSEEN))
		return 0;
	if (ev->process >= n->ncounts &&
	    ht__grow32_zero((void **)&n->counts, &n->ncounts, (size_t)ev->process + 1,
			    sizeof(*n->counts)) < 0)
		return HT_ERR_NOMEM;
	n->counts[ev->process]++;
	return 0;
}

/* The latest image of pid in the trace (exec and reused pids come later). */
static struct ht_process *image_of(struct ht__proctab *t, int32_t pid, uint32_t *index)
{
	for (uint32_t i = t->n; i-- > 0;)
		if (t->v[i] && t->v[i]->p.pid == pid) {
			*index = i;
			return &t->v[i]->p;
		}
	return NULL;
}

/*
 * A new entry for the process of note e, which the trace never shows (its
 * collector died before writing anything of it): its pid, no executable
 * name, started and ended at the trace's end. ht__notes_apply() gives it
 * the note's losses, events and exit status as it does a seen process's.
 * NULL when out of memory.
 */
static struct ht_process *unseen_process(struct ht__proctab *t, const struct ht__exit_note *e,
					 uint64_t end, uint32_t *index)
{
	struct ht_process p = {
	    .pid = e->pid, .parent = UINT32_MAX, .exe = "", .start_ts = end, .end_ts = end};
	*index = t->n;
	if (ht__proctab_set(t, *index, &p) < 0)
		return NULL;
	return &t->v[*index]->p;
}

void ht__notes_apply(struct ht__notes *n, struct ht__proctab *t, struct ht_trace_info *in,
		     struct ht__notes_result *res)
{
	memset(res, 0, sizeof(*res));
	uint64_t end = in->duration_ns;
	const uint32_t ended = HT_PROCF_EXITED | HT_PROCF_SIGNALED | HT_PROCF_EXECED;
	uint32_t open_images = 0, open_noted = 0;
	for (uint32_t i = 0; i < t->n; i++)
		open_images += t->v[i] && !(t->v[i]->p.flags & ended);
	for (size_t k = 0; k < n->n; k++) {
		const struct ht__exit_note *e = &n->v[k];
		uint32_t i;
		struct ht_process *p = image_of(t, e->pid, &i);
		bool unseen = !p;
		/* Every event of a process the trace never shows is missing. */
		if (unseen && !(p = unseen_process(t, e, end, &i)))
			continue;
		if (unseen) {
			res->unseen++;
		} else {
			res->noted++;
			open_noted += !(p->flags & ended);
		}
		uint64_t in_trace = !unseen && i < n->ncounts ? n->counts[i] : 0;
		uint64_t after = e->events > in_trace ? e->events - in_trace : 0;
		p->lost_lossy = e->n[HT_LOSS_LOSSY];
		p->lost_no_buffer = e->n[HT_LOSS_NO_BUFFER];
		p->lost_in_handler = e->n[HT_LOSS_IN_HANDLER];
		p->lost_from_ts = e->first_ns;
		in->lost_lossy += p->lost_lossy;
		in->lost_no_buffer += p->lost_no_buffer;
		in->lost_in_handler += p->lost_in_handler;
		in->events_lost += p->lost_lossy + p->lost_no_buffer + p->lost_in_handler;
		/* What it wrote that the trace does not hold came after the
		   trace's end; what it did not write, after its recorder stopped. */
		p->events_untraced = after + e->n[HT_LOSS_UNTRACED];
		p->untraced_from_ts = after ? end : e->untraced_ns;
		if (p->events_untraced) {
			res->processes++;
			res->events += p->events_untraced;
		}
		if (!(p->flags & ended) &&
		    (e->exit_kind == HT_EXIT_CODE || e->exit_kind == HT_EXIT_SIGNAL)) {
			p->flags |=
			    e->exit_kind == HT_EXIT_CODE ? HT_PROCF_EXITED : HT_PROCF_SIGNALED;
			if (e->exit_kind == HT_EXIT_CODE)
				p->exit_code = e->exit_value;
			else
				p->signal = e->exit_value;
			if (e->end_ns > p->end_ts)
				p->end_ts = e->end_ns;
		}
	}
	res->unknown = open_images > open_noted ? open_images - open_noted : 0;
}

void ht__notes_free(struct ht__notes *n)
{
	free(n->v);
	free(n->counts);
	memset(n, 0, sizeof(*n));
}
