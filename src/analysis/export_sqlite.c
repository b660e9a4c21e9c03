/*
 * export_sqlite.c - the SQLite writer of export.h: a consumer of the trace
 * pass (pass.h) that inserts one row per heap block as the block ends, per
 * committed range piece, RSS sample and thread, then the tables of
 * processes, modules, frames and stacks, then the indexes. Everything is one
 * transaction on a database with no journal: the file is new (the caller
 * renames it into place), so there is nothing to roll back to.
 *
 * "realloc_from" links a block made by realloc to the row of the block it
 * replaced: the pass ends the old block (.life) before it shows the REALLOC
 * event (.event), so the old row id is noted at .life and filed under the new
 * block at .event, in a table that holds only live realloc'd blocks.
 */
#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/export.h"
#include "analysis/intern.h"
#include "analysis/pass.h"
#include "base/vec.h"

static const char schema[] =
    "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA page_size=65536;"
    "CREATE TABLE trace(key TEXT PRIMARY KEY, value);"
    "CREATE TABLE processes(process INTEGER PRIMARY KEY, pid INTEGER, ppid INTEGER,"
    " parent INTEGER, exe TEXT, argv TEXT, start_ns INTEGER, end_ns INTEGER,"
    " exit_code INTEGER, signal INTEGER, flags INTEGER);"
    "CREATE TABLE threads(process INTEGER, pid INTEGER, tid INTEGER, name TEXT,"
    " start_ns INTEGER, exit_ns INTEGER);"
    "CREATE TABLE modules(module INTEGER PRIMARY KEY, path TEXT, name TEXT, build_id TEXT);"
    "CREATE TABLE module_loads(process INTEGER, pid INTEGER, module INTEGER, start INTEGER,"
    " size INTEGER, bias INTEGER, load_ns INTEGER, unload_ns INTEGER);"
    "CREATE TABLE frames(frame INTEGER PRIMARY KEY, module INTEGER, rel INTEGER,"
    " function TEXT, file TEXT, line INTEGER, inlined INTEGER);"
    "CREATE TABLE stacks(stack_id INTEGER, depth INTEGER, frame INTEGER,"
    " PRIMARY KEY(stack_id, depth)) WITHOUT ROWID;"
    "CREATE TABLE allocations(id INTEGER PRIMARY KEY, process INTEGER, pid INTEGER,"
    " tid INTEGER, heap INTEGER, address INTEGER, size INTEGER, alloc_ns INTEGER,"
    " free_ns INTEGER, stack_id INTEGER, func TEXT, realloc_from INTEGER, at_exit INTEGER,"
    " count INTEGER);"
    "CREATE TABLE commits(process INTEGER, pid INTEGER, tid INTEGER, address INTEGER,"
    " size INTEGER, commit_ns INTEGER, decommit_ns INTEGER, stack_id INTEGER, func TEXT,"
    " at_exit INTEGER);"
    "CREATE TABLE rss(process INTEGER, pid INTEGER, ts_ns INTEGER, bytes INTEGER);"
    "BEGIN;";

static const char indexes[] = "CREATE INDEX allocations_alloc ON allocations(alloc_ns);"
			      "CREATE INDEX allocations_free ON allocations(free_ns);"
			      "CREATE INDEX allocations_stack ON allocations(stack_id);"
			      "CREATE INDEX commits_time ON commits(commit_ns);"
			      "CREATE INDEX rss_time ON rss(ts_ns);"
			      "CREATE INDEX threads_tid ON threads(tid);"
			      "COMMIT;";

enum { S_ALLOC, S_COMMIT, S_RSS, S_THREAD, S_THREAD_NAME, S_THREAD_EXIT, S_LOAD, S_UNLOAD, S_N };

static const char *const stmt_sql[S_N] = {
    "INSERT INTO allocations VALUES(NULL,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO commits VALUES(?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO rss VALUES(?,?,?,?)",
    "INSERT INTO threads VALUES(?,?,?,?,?,NULL)",
    "UPDATE threads SET name=?3 WHERE rowid=(SELECT max(rowid) FROM threads WHERE process=?1 "
    "AND tid=?2)",
    "UPDATE threads SET exit_ns=?3 WHERE rowid=(SELECT max(rowid) FROM threads WHERE "
    "process=?1 AND tid=?2)",
    "INSERT INTO module_loads VALUES(?,?,?,?,?,?,?,NULL)",
    "UPDATE module_loads SET unload_ns=?3 WHERE rowid=(SELECT max(rowid) FROM module_loads "
    "WHERE process=?1 AND module=?2 AND unload_ns IS NULL)",
};

/* A live block made by realloc and the row of the block it replaced. */
struct link {
	uint64_t heap, addr;
	int64_t from;
	uint32_t process;
};

struct sq {
	sqlite3 *db;
	sqlite3_stmt *st[S_N];
	const struct ht__query *q;
	struct ht_reader *r;
	/* Live realloc'd blocks, found through the index. A taken link's entry
	   waits for the next one in a free list (its from holds the next free
	   id + 1; free_links is the first, 0 when none). */
	HT_VEC(struct link) links;
	struct ht__hindex link_ix;
	uint32_t free_links;
	/* The row of the block the current realloc event ended. */
	int64_t pending_row;
	uint64_t pending_ts;
	uint32_t pending_process;
	bool pending;
	uint8_t *pwanted; /* per process index: 0 unknown, 1 yes, 2 no */
	size_t npwanted;
	int err;
	char *errmsg;
};

static int db_error(struct sq *s)
{
	if (!s->errmsg)
		s->errmsg = strdup(sqlite3_errmsg(s->db));
	return HT_ERR_IO;
}

static uint64_t link_hash(uint32_t process, uint64_t heap, uint64_t addr)
{
	return ht__mix64(addr ^ heap * 0x9e3779b97f4a7c15ull ^ process);
}

static uint64_t link_rehash(const void *ctx, uint32_t id)
{
	const struct link *l = &((const struct sq *)ctx)->links.v[id];
	return link_hash(l->process, l->heap, l->addr);
}

/* The index slot of the link of a block, or a slot holding 0. */
static uint32_t *link_find(const struct sq *s, uint32_t process, uint64_t heap, uint64_t addr)
{
	uint32_t *slot = ht__hindex_find(&s->link_ix, link_hash(process, heap, addr));
	for (; *slot; slot = ht__hindex_next(&s->link_ix, slot)) {
		const struct link *l = &s->links.v[*slot - 1];
		if (l->addr == addr && l->heap == heap && l->process == process)
			break;
	}
	return slot;
}

static int link_put(struct sq *s, uint32_t process, uint64_t heap, uint64_t addr, int64_t from)
{
	struct link now = {heap, addr, from, process};
	uint32_t *slot = link_find(s, process, heap, addr);
	if (*slot) {
		s->links.v[*slot - 1] = now;
		return 0;
	}
	uint32_t id;
	if (s->free_links) {
		id = s->free_links - 1;
		s->free_links = (uint32_t)s->links.v[id].from;
		s->links.v[id] = now;
	} else {
		id = (uint32_t)s->links.len;
		if (ht__vec_push(&s->links, now) < 0)
			return HT_ERR_NOMEM;
	}
	return ht__hindex_insert(&s->link_ix, link_hash(process, heap, addr), id, link_rehash, s);
}

/* The row a realloc'd block came from (0: none), forgetting it. */
static int64_t link_take(struct sq *s, uint32_t process, uint64_t heap, uint64_t addr)
{
	uint32_t *slot = link_find(s, process, heap, addr);
	if (!*slot)
		return 0;
	uint32_t id = *slot - 1;
	int64_t from = s->links.v[id].from;
	ht__hindex_remove(&s->link_ix, slot, link_rehash, s);
	s->links.v[id].from = s->free_links;
	s->free_links = id + 1;
	return from;
}

/* Whether process index p passes -pid. */
static bool wanted(struct sq *s, uint32_t p)
{
	if (!s->q->pid_count)
		return true;
	if (p >= s->npwanted) {
		size_t old = s->npwanted;
		if (ht__grow((void **)&s->pwanted, &s->npwanted, (size_t)p + 1, 1) < 0) {
			const struct ht_process *pr = ht_reader_process(s->r, p);
			return pr && ht__query_wants_pid(s->q, pr->pid);
		}
		memset(s->pwanted + old, 0, s->npwanted - old);
	}
	if (!s->pwanted[p]) {
		const struct ht_process *pr = ht_reader_process(s->r, p);
		s->pwanted[p] = pr && ht__query_wants_pid(s->q, pr->pid) ? 1 : 2;
	}
	return s->pwanted[p] == 1;
}

static bool in_range(const struct sq *s, uint64_t ts)
{
	return !s->q->has_range || (ts >= s->q->range_start && ts < s->q->range_end);
}

static int32_t pid_of(const struct sq *s, uint32_t process)
{
	const struct ht_process *p = ht_reader_process(s->r, process);
	return p ? p->pid : -1;
}

static void bind_ts(sqlite3_stmt *st, int i, uint64_t ts)
{
	if (ts == HT_TS_NEVER)
		sqlite3_bind_null(st, i);
	else
		sqlite3_bind_int64(st, i, (int64_t)ts);
}

static int step(struct sq *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : db_error(s);
}

static int on_life(void *ctx, struct ht__pass *p, const struct ht__life *l)
{
	(void)p;
	struct sq *s = ctx;
	int64_t from = l->from_realloc ? link_take(s, l->process, l->heap, l->addr) : 0;
	if (!wanted(s, l->process) || !in_range(s, l->alloc_ts))
		return 0;
	sqlite3_stmt *st = s->st[S_ALLOC];
	sqlite3_bind_int64(st, 1, l->process);
	sqlite3_bind_int64(st, 2, pid_of(s, l->process));
	sqlite3_bind_int64(st, 3, l->tid);
	sqlite3_bind_int64(st, 4, (int64_t)l->heap);
	sqlite3_bind_int64(st, 5, (int64_t)l->addr);
	sqlite3_bind_int64(st, 6, (int64_t)l->size);
	sqlite3_bind_int64(st, 7, (int64_t)l->alloc_ts);
	bind_ts(st, 8, l->free_ts);
	sqlite3_bind_int64(st, 9, l->stack);
	sqlite3_bind_text(st, 10, ht_func_name(l->func), -1, SQLITE_STATIC);
	if (from)
		sqlite3_bind_int64(st, 11, from);
	else
		sqlite3_bind_null(st, 11);
	sqlite3_bind_int64(st, 12, l->at_exit);
	sqlite3_bind_int64(st, 13, (int64_t)l->count);
	int rc = step(s, st);
	if (rc == 0 && l->freed_by_realloc) {
		s->pending = true;
		s->pending_row = sqlite3_last_insert_rowid(s->db);
		s->pending_ts = l->free_ts;
		s->pending_process = l->process;
	}
	return rc;
}

static int on_commit(void *ctx, struct ht__pass *p, const struct ht__commit *c)
{
	(void)p;
	struct sq *s = ctx;
	if (!wanted(s, c->process) || !in_range(s, c->commit_ts))
		return 0;
	sqlite3_stmt *st = s->st[S_COMMIT];
	sqlite3_bind_int64(st, 1, c->process);
	sqlite3_bind_int64(st, 2, pid_of(s, c->process));
	sqlite3_bind_int64(st, 3, c->tid);
	sqlite3_bind_int64(st, 4, (int64_t)c->addr);
	sqlite3_bind_int64(st, 5, (int64_t)c->size);
	sqlite3_bind_int64(st, 6, (int64_t)c->commit_ts);
	bind_ts(st, 7, c->decommit_ts);
	sqlite3_bind_int64(st, 8, c->stack);
	sqlite3_bind_text(st, 9, ht_func_name(c->func), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 10, c->at_exit);
	return step(s, st);
}

static int on_event(void *ctx, struct ht__pass *p, const struct ht_event *ev)
{
	(void)p;
	struct sq *s = ctx;
	if (ev->type == HT_EV_REALLOC) {
		/* File the replaced block's row under the new block. */
		bool mine =
		    s->pending && s->pending_ts == ev->ts && s->pending_process == ev->process;
		s->pending = false;
		if (mine && ev->addr && !(ev->flags & HT_EVF_FAILED))
			return link_put(s, ev->process, ev->heap, ev->addr, s->pending_row);
		return 0;
	}
	if (!wanted(s, ev->process) || !in_range(s, ev->ts))
		return 0;
	sqlite3_stmt *st;
	switch (ev->type) {
	case HT_EV_RSS:
		st = s->st[S_RSS];
		sqlite3_bind_int64(st, 1, ev->process);
		sqlite3_bind_int64(st, 2, ev->pid);
		sqlite3_bind_int64(st, 3, (int64_t)ev->ts);
		sqlite3_bind_int64(st, 4, (int64_t)ev->size);
		return step(s, st);
	case HT_EV_THREAD_START:
		st = s->st[S_THREAD];
		sqlite3_bind_int64(st, 1, ev->process);
		sqlite3_bind_int64(st, 2, ev->pid);
		sqlite3_bind_int64(st, 3, ev->tid);
		sqlite3_bind_text(st, 4, ev->name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 5, (int64_t)ev->ts);
		return step(s, st);
	case HT_EV_THREAD_NAME:
	case HT_EV_THREAD_EXIT:
		st = s->st[ev->type == HT_EV_THREAD_NAME ? S_THREAD_NAME : S_THREAD_EXIT];
		sqlite3_bind_int64(st, 1, ev->process);
		sqlite3_bind_int64(st, 2, ev->tid);
		if (ev->type == HT_EV_THREAD_NAME)
			sqlite3_bind_text(st, 3, ev->name, -1, SQLITE_TRANSIENT);
		else
			sqlite3_bind_int64(st, 3, (int64_t)ev->ts);
		return step(s, st);
	case HT_EV_MODULE_LOAD:
		st = s->st[S_LOAD];
		sqlite3_bind_int64(st, 1, ev->process);
		sqlite3_bind_int64(st, 2, ev->pid);
		sqlite3_bind_int64(st, 3, ev->module);
		sqlite3_bind_int64(st, 4, (int64_t)ev->addr);
		sqlite3_bind_int64(st, 5, (int64_t)ev->size);
		sqlite3_bind_int64(st, 6, (int64_t)ev->old_addr);
		sqlite3_bind_int64(st, 7, (int64_t)ev->ts);
		return step(s, st);
	case HT_EV_MODULE_UNLOAD:
		st = s->st[S_UNLOAD];
		sqlite3_bind_int64(st, 1, ev->process);
		sqlite3_bind_int64(st, 2, ev->module);
		sqlite3_bind_int64(st, 3, (int64_t)ev->ts);
		return step(s, st);
	default:
		return 0;
	}
}

/* Runs statements without results; SQLite's message is kept for the caller. */
static int exec(struct sq *s, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	if (!s->errmsg)
		s->errmsg = msg ? strdup(msg) : NULL;
	sqlite3_free(msg);
	return HT_ERR_IO;
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *t)
{
	if (t)
		sqlite3_bind_text(st, i, t, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

/* The tables the reader knows whole at the end: processes, modules, frames, stacks. */
static int write_tables(struct sq *s)
{
	sqlite3_stmt *st;
	int rc = 0;
	struct ht_reader *r = s->r;
	const struct ht_trace_info *info = ht_reader_info(r);
	if (sqlite3_prepare_v2(s->db, "INSERT INTO trace VALUES(?,?)", -1, &st, NULL) != SQLITE_OK)
		return db_error(s);
	struct {
		const char *k;
		int64_t v;
		const char *t;
	} kv[] = {
	    {"host", 0, info->hostname},
	    {"start_realtime_ns", (int64_t)info->start_realtime_ns, NULL},
	    {"duration_ns", (int64_t)info->duration_ns, NULL},
	    {"events_lost", (int64_t)info->events_lost, NULL},
	    {"ts_unit_ns", info->ts_unit_ns, NULL},
	    /* Not 0: allocations' size and count are estimates (docs/export.md). */
	    {"sample_rate", (int64_t)info->sample_rate, NULL},
	};
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]) && !rc; i++) {
		sqlite3_bind_text(st, 1, kv[i].k, -1, SQLITE_STATIC);
		if (!strcmp(kv[i].k, "host"))
			bind_text_or_null(st, 2, kv[i].t);
		else
			sqlite3_bind_int64(st, 2, kv[i].v);
		rc = step(s, st);
	}
	sqlite3_finalize(st);

	if (!rc && sqlite3_prepare_v2(s->db, "INSERT INTO processes VALUES(?,?,?,?,?,?,?,?,?,?,?)",
				      -1, &st, NULL) != SQLITE_OK)
		return db_error(s);
	for (uint32_t i = 0; i < ht_reader_process_count(r) && !rc; i++) {
		const struct ht_process *p = ht_reader_process(r, i);
		if (!wanted(s, i))
			continue;
		char *argv = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&argv, &len);
		for (uint32_t a = 0; m && a < p->argc; a++)
			fprintf(m, "%s%s", a ? " " : "", p->argv[a]);
		if (m)
			fclose(m);
		sqlite3_bind_int64(st, 1, i);
		sqlite3_bind_int64(st, 2, p->pid);
		sqlite3_bind_int64(st, 3, p->ppid);
		if (p->parent == UINT32_MAX)
			sqlite3_bind_null(st, 4);
		else
			sqlite3_bind_int64(st, 4, p->parent);
		bind_text_or_null(st, 5, p->exe);
		bind_text_or_null(st, 6, argv);
		sqlite3_bind_int64(st, 7, (int64_t)p->start_ts);
		sqlite3_bind_int64(st, 8, (int64_t)p->end_ts);
		if (p->flags & HT_PROCF_EXITED)
			sqlite3_bind_int64(st, 9, p->exit_code);
		else
			sqlite3_bind_null(st, 9);
		if (p->flags & HT_PROCF_SIGNALED)
			sqlite3_bind_int64(st, 10, p->signal);
		else
			sqlite3_bind_null(st, 10);
		sqlite3_bind_int64(st, 11, p->flags);
		rc = step(s, st);
		free(argv);
	}
	sqlite3_finalize(st);

	if (!rc && sqlite3_prepare_v2(s->db, "INSERT INTO modules VALUES(?,?,?,?)", -1, &st,
				      NULL) != SQLITE_OK)
		return db_error(s);
	for (uint32_t i = 0; i < ht_reader_module_count(r) && !rc; i++) {
		const struct ht_module *m = ht_reader_module(r, i);
		sqlite3_bind_int64(st, 1, i);
		bind_text_or_null(st, 2, m->path);
		bind_text_or_null(st, 3, m->name);
		bind_text_or_null(st, 4, m->build_id);
		rc = step(s, st);
	}
	sqlite3_finalize(st);

	if (!rc && sqlite3_prepare_v2(s->db, "INSERT INTO frames VALUES(?,?,?,?,?,?,?)", -1, &st,
				      NULL) != SQLITE_OK)
		return db_error(s);
	for (uint32_t i = 0; i < ht_reader_frame_count(r) && !rc; i++) {
		const struct ht_frame *f = ht_reader_frame(r, i);
		sqlite3_bind_int64(st, 1, i);
		if (f->module == HT_MODULE_NONE)
			sqlite3_bind_null(st, 2);
		else
			sqlite3_bind_int64(st, 2, f->module);
		sqlite3_bind_int64(st, 3, (int64_t)f->rel);
		bind_text_or_null(st, 4, f->function);
		bind_text_or_null(st, 5, f->file);
		sqlite3_bind_int64(st, 6, f->line);
		sqlite3_bind_int64(st, 7, f->inlined);
		rc = step(s, st);
	}
	sqlite3_finalize(st);

	if (!rc && sqlite3_prepare_v2(s->db, "INSERT INTO stacks VALUES(?,?,?)", -1, &st, NULL) !=
		       SQLITE_OK)
		return db_error(s);
	for (uint32_t id = 1; id < ht_reader_stack_count(r) && !rc; id++) {
		const uint32_t *frames;
		uint32_t n = ht_reader_stack(r, id, &frames);
		for (uint32_t d = 0; d < n && !rc; d++) {
			sqlite3_bind_int64(st, 1, id);
			sqlite3_bind_int64(st, 2, d);
			sqlite3_bind_int64(st, 3, frames[d]);
			rc = step(s, st);
		}
	}
	sqlite3_finalize(st);
	return rc;
}

static int on_end(void *ctx, struct ht__pass *p)
{
	(void)p;
	struct sq *s = ctx;
	int rc = write_tables(s);
	return rc ? rc : exec(s, indexes);
}

static const struct ht__consumer sqlite_consumer = {
    .name = "sqlite",
    .events = HT_PASS_EV(HT_EV_REALLOC) | HT_PASS_EV(HT_EV_RSS) | HT_PASS_EV(HT_EV_THREAD_START) |
	      HT_PASS_EV(HT_EV_THREAD_NAME) | HT_PASS_EV(HT_EV_THREAD_EXIT) |
	      HT_PASS_EV(HT_EV_MODULE_LOAD) | HT_PASS_EV(HT_EV_MODULE_UNLOAD),
    .event = on_event,
    .life = on_life,
    .commit = on_commit,
    .end = on_end,
};

int ht__export_sqlite(const char *path, struct ht_reader *r, const struct ht__query *q,
		      ht__export_progress_fn progress, void *pctx, char *why, size_t whylen)
{
	struct sq s;
	memset(&s, 0, sizeof(s));
	s.q = q;
	s.r = r;
	struct ht__pass *p = NULL;
	int rc;
	if (sqlite3_open(path, &s.db) != SQLITE_OK) {
		rc = db_error(&s);
		goto out;
	}
	if ((rc = exec(&s, schema)) < 0)
		goto out;
	for (int i = 0; i < S_N; i++) {
		if (sqlite3_prepare_v2(s.db, stmt_sql[i], -1, &s.st[i], NULL) != SQLITE_OK) {
			rc = db_error(&s);
			goto out;
		}
	}
	if ((rc = ht__pass_new(&p, r)) < 0)
		goto out;
	if ((rc = ht__pass_add(p, &sqlite_consumer, &s)) < 0)
		goto out;
	ht__pass_progress(p, progress, pctx);
	rc = ht__pass_run(p);
out:
	ht__pass_free(p);
	for (int i = 0; i < S_N; i++)
		sqlite3_finalize(s.st[i]);
	if (s.db && sqlite3_close(s.db) != SQLITE_OK && !rc)
		rc = db_error(&s);
	snprintf(why, whylen, "%s", s.errmsg ? s.errmsg : ht_strerror(rc));
	free(s.errmsg);
	ht__vec_release(&s.links);
	ht__hindex_release(&s.link_ix);
	free(s.pwanted);
	return rc;
}
