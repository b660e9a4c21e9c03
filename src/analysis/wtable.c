/*
 * wtable.c - WPA's Heap Allocations and Commit Lifetimes tables of a window
 * (window.h) as a consumer of the trace pass: each heap block or committed
 * range the pass ends is filtered (pids, -requireFrames), resolved to its
 * culled stack and added to the tree. The report counts the same way.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/commit.h"
#include "analysis/match.h"
#include "analysis/pass.h"
#include "analysis/query.h"
#include "analysis/window.h"

struct ht_wfeed {
	struct ht_wtree *tree;
	struct ht_wstacks *stacks;
	struct ht_frame_matcher *require;
	const struct ht_query *q;
	struct ht_reader *r;
	struct ht_window w;
	struct ht_commit_seen seen; /* pieces of one commit count once */
};

static bool wanted(const struct ht_wfeed *f, uint32_t process)
{
	if (!f->q || !f->q->pid_count)
		return true;
	const struct ht_process *p = ht_reader_process(f->r, process);
	return p && ht_query_wants_pid(f->q, p->pid);
}

/* One heap block or committed range; those outside the window are dropped. */
static int add(struct ht_wfeed *f, uint32_t process, uint64_t heap, int32_t tid, uint32_t stack,
	       uint64_t addr, uint64_t size, uint64_t alloc_ts, uint64_t free_ts,
	       const struct ht_commit *c)
{
	if (!wanted(f, process) || ht_window_classify(&f->w, alloc_ts, free_ts) < 0)
		return 0;
	int piece = c ? ht_commit_seen(&f->seen, c) : 0;
	if (piece < 0)
		return piece;
	if (f->require) {
		const uint32_t *frames;
		uint32_t n = ht_reader_stack(f->r, stack, &frames);
		if (!ht_frame_matcher_any(f->require, frames, n))
			return 0;
	}
	struct ht_witem it = {0};
	int rc = ht_wstacks_resolve(f->stacks, stack, &it);
	if (rc < 0)
		return rc;
	it.alloc_ts = alloc_ts;
	it.free_ts = free_ts;
	it.size = size;
	it.addr = addr;
	it.heap = heap;
	it.process = process;
	it.tid = tid;
	it.piece = piece;
	rc = ht_wtree_add(f->tree, &it);
	return rc < 0 ? rc : 0;
}

static int on_life(void *ctx, struct ht_pass *p, const struct ht_life *l)
{
	(void)p;
	return add(ctx, l->process, l->heap, l->tid, l->stack, l->addr, l->size, l->alloc_ts,
		   l->free_ts, NULL);
}

static int on_commit(void *ctx, struct ht_pass *p, const struct ht_commit *c)
{
	(void)p;
	return add(ctx, c->process, 0, c->tid, c->stack, c->addr, c->size, c->commit_ts,
		   c->decommit_ts, c);
}

static const struct ht_consumer heap_consumer = {.name = "heap table", .life = on_life};
static const struct ht_consumer commit_consumer = {.name = "commit table", .commit = on_commit};

int ht_wtable_attach(struct ht_pass *p, bool commit, struct ht_wtree *tree,
		     const struct ht_window *w, struct ht_wstacks *stacks,
		     struct ht_frame_matcher *require, const struct ht_query *q, bool stop_at_end,
		     struct ht_wfeed **out)
{
	struct ht_wfeed *f = calloc(1, sizeof(*f));
	if (!f)
		return HT_ERR_NOMEM;
	*f = (struct ht_wfeed){tree, stacks, require, q, ht_pass_reader(p), *w, {0}};
	int id = ht_pass_add(p, commit ? &commit_consumer : &heap_consumer, f);
	if (id < 0) {
		free(f);
		return id;
	}
	/*
	 * Whatever happens after the window cannot change a block's type (a
	 * later free is "outstanding at the end" either way).
	 */
	if (stop_at_end)
		ht_pass_stop_at(p, id, w->end);
	*out = f;
	return 0;
}

void ht_wfeed_free(struct ht_wfeed *f)
{
	if (!f)
		return;
	ht_commit_seen_release(&f->seen);
	free(f);
}
