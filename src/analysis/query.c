/*
 * query.c - the query every analysis front end fills in, and the rules that
 * decide whether a heap block counts and is outstanding (see query.h).
 */
#include "analysis/query.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/vec.h"

void ht__query_init(struct ht__query *q)
{
	memset(q, 0, sizeof(*q));
	q->life_max = UINT64_MAX;
	q->size_max = UINT64_MAX;
	ht__match_list_init(&q->cull);
	ht__match_list_init(&q->require);
	q->default_cull = true;
	q->group = HT_GROUP_HANDLE;
	q->sort = HT_SORT_SO;
	q->symbols = -1;
}

void ht__query_release(struct ht__query *q)
{
	free(q->pids);
	ht__match_list_release(&q->cull);
	ht__match_list_release(&q->require);
	q->pids = NULL;
	q->pid_count = q->pid_alloc = 0;
}

int ht__query_add_pid(struct ht__query *q, int32_t pid)
{
	if (ht__query_wants_pid(q, pid) && q->pid_count)
		return 0;
	if (ht__grow((void **)&q->pids, &q->pid_alloc, q->pid_count + 1, sizeof(*q->pids)) < 0)
		return HT_ERR_NOMEM;
	q->pids[q->pid_count++] = pid;
	return 0;
}

bool ht__query_wants_pid(const struct ht__query *q, int32_t pid)
{
	if (!q->pid_count)
		return true;
	for (size_t i = 0; i < q->pid_count; i++)
		if (q->pids[i] == pid)
			return true;
	return false;
}

int ht__query_prepare(struct ht__query *q)
{
	if (q->has_range && (q->range_end <= q->range_start || q->has_at))
		return HT_ERR_INVALID;
	if (q->life_max <= q->life_min || q->size_max <= q->size_min)
		return HT_ERR_INVALID;
	if (q->default_cull && !q->defaults_added) {
		int rc = ht__match_list_add_defaults(&q->cull);
		if (rc < 0)
			return rc;
		q->defaults_added = true;
	}
	return 0;
}

#define SORT_NAME(id, key, title, field) key,
static const char *const sort_names[HT__SORT_COUNT] = {HT__SORT_KEYS(SORT_NAME)};
#undef SORT_NAME
#define SORT_TITLE(id, key, title, field) title,
static const char *const sort_titles[HT__SORT_COUNT] = {HT__SORT_KEYS(SORT_TITLE)};
#undef SORT_TITLE

int ht__sort_parse(const char *s, enum ht__sort *out)
{
	for (unsigned i = 0; s && i < HT__SORT_COUNT; i++) {
		if (!strcasecmp(s, sort_names[i])) {
			*out = (enum ht__sort)i;
			return 0;
		}
	}
	return HT_ERR_INVALID;
}

const char *ht__sort_name(enum ht__sort s)
{
	return (unsigned)s < HT__SORT_COUNT ? sort_names[s] : "?";
}

const char *ht__sort_title(enum ht__sort s)
{
	return (unsigned)s < HT__SORT_COUNT ? sort_titles[s] : "?";
}

bool ht__query_accepts(const struct ht__query *q, const struct ht__life *life, uint64_t trace_end,
		       bool *outstanding)
{
	uint64_t end = trace_end;
	if (q->has_range) {
		if (life->alloc_ts < q->range_start || life->alloc_ts >= q->range_end)
			return false;
		if (q->range_end < end)
			end = q->range_end;
	}
	if (q->has_at) {
		if (life->alloc_ts > q->at_ts || life->free_ts <= q->at_ts)
			return false;
		if (q->at_ts < end)
			end = q->at_ts;
	}
	if (q->temporary_only && !life->temporary)
		return false;
	if (life->block_size < q->size_min || life->block_size >= q->size_max)
		return false;
	bool freed = life->free_ts != HT_TS_NEVER &&
		     (!q->has_range || life->free_ts < q->range_end) && !q->has_at;
	if (q->life_min || q->life_max != UINT64_MAX) {
		uint64_t stop = freed ? life->free_ts : end;
		uint64_t lifetime = stop > life->alloc_ts ? stop - life->alloc_ts : 0;
		if (lifetime < q->life_min || lifetime >= q->life_max)
			return false;
	}
	*outstanding = !freed;
	return true;
}
