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

struct ht__wfeed {
	struct ht__wtree *tree;
	struct ht__wstacks *stacks;
	struct ht__frame_matcher *require;
	const struct ht__query *q;
	struct ht_reader *r;
	struct ht__window w;
	struct ht__commit_seen seen; /* pieces of one commit count once */
};

static bool wanted(const struct ht__wfeed *f, uint32_t process)
{
	if (!f->q || !f->q->pid_count)
		return true;
	const struct ht_process *p = ht_reader_process(f->r, process);
	return p && ht__query_wants_pid(f->q, p->pid);
}

/* One heap block or committed range; those outside the window are dropped. */
static int add(uint64_t count, struct ht__wfeed *f, uint32_t process, uint64_t heap, int32_t tid,
	       uint32_t stack, uint64_t addr, uint64_t size, uint64_t alloc_ts, uint64_t free_ts,
	       const struct ht__commit *c)
{
	if (!wanted(f, process) || ht__window_classify(&f->w, alloc_ts, free_ts) < 0)
		return 0;
	int piece = c ? ht__commit_seen(&f->seen, c) : 0;
	if (piece < 0)
		return piece;
	if (f->require) {
		const uint32_t *frames;
		uint32_t n = ht_reader_stack(f->r, stack, &frames);
		if (!ht__frame_matcher_any(f->require, frames, n))
			return 0;
	}
	struct ht__witem it = {0};
	int rc = ht__wstacks_resolve(f->stacks, stack, &it);
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
	it.unseen = c && c->unseen;
	it.count = count;
	rc = ht__wtree_add(f->tree, &it);
	return rc < 0 ? rc : 0;
}

static int on_life(void *ctx, struct ht__pass *p, const struct ht__life *l)
{
	(void)p;
	return add(l->count, ctx, l->process, l->heap, l->tid, l->stack, l->addr, l->size,
		   l->alloc_ts, l->free_ts, NULL);
}

static int on_commit(void *ctx, struct ht__pass *p, const struct ht__commit *c)
{
	(void)p;
	return add(1, ctx, c->process, 0, c->tid, c->stack, c->addr, c->size, c->commit_ts,
		   c->decommit_ts, c);
}

static const struct ht__consumer heap_consumer = {.name = "heap table", .life = on_life};
static const struct ht__consumer commit_consumer = {.name = "commit table", .commit = on_commit};

int ht__wtable_attach(struct ht__pass *p, bool commit, struct ht__wtree *tree,
		      const struct ht__window *w, struct ht__wstacks *stacks,
		      struct ht__frame_matcher *require, const struct ht__query *q,
		      bool stop_at_end, struct ht__wfeed **out)
{
	struct ht__wfeed *f = calloc(1, sizeof(*f));
	if (!f)
		return HT_ERR_NOMEM;
	*f = (struct ht__wfeed){tree, stacks, require, q, ht__pass_reader(p), *w, {0}};
	int id = ht__pass_add(p, commit ? &commit_consumer : &heap_consumer, f);
	if (id < 0) {
		free(f);
		return id;
	}
	/*
	 * Whatever happens after the window cannot change a block's type (a
	 * later free is "outstanding at the end" either way).
	 */
	if (stop_at_end)
		ht__pass_stop_at(p, id, w->end);
	*out = f;
	return 0;
}

void ht__wfeed_free(struct ht__wfeed *f)
{
	if (!f)
		return;
	ht__commit_seen_release(&f->seen);
	free(f);
}
