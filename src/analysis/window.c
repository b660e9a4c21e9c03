/*
 * window.c - classification of lifetimes against a time window and the
 * grouped tree of the table commands (see window.h for the rules).
 */
#define _GNU_SOURCE /* qsort_r */
#include "analysis/window.h"

#include <stdlib.h>
#include <string.h>

#include "analysis/match.h"
#include "heaptrail/trace.h"
#include "base/vec.h"

int ht__window_classify(const struct ht__window *w, uint64_t alloc_ts, uint64_t free_ts)
{
	/* free_ts == start counts as freed inside: the block is gone at the start's instant. */
	if (alloc_ts >= w->end || free_ts < w->start)
		return -1;
	bool alloc_inside = alloc_ts >= w->start;
	bool freed_inside = free_ts < w->end;
	if (alloc_inside)
		return freed_inside ? HT_AIFI : HT_AIFO;
	return freed_inside ? HT_AOFI : HT_AOFO;
}

const char *ht__wtype_name(int type)
{
	static const char *const names[] = {"AIFI", "AIFO", "AOFI", "AOFO"};
	if (type < 0 || type > HT_AOFO)
		return "?";
	return names[type];
}

bool ht__wtype_impacting(int type)
{
	return type != HT_AIFI;
}

const char *ht__wtype_impacting_name(int type)
{
	return ht__wtype_impacting(type) ? "Impacting" : "Transient";
}

static const char *const key_names[HT_WK__COUNT] = {
    "process", "handle", "type", "impacting-type", "stack", "frame", "image", "thread",
};

const char *ht__wkey_name(enum ht__wkey key)
{
	if ((unsigned)key >= HT_WK__COUNT)
		return "?";
	return key_names[key];
}

int ht__wkey_parse(const char *s)
{
	if (!s)
		return -1;
	for (int i = 0; i < HT_WK__COUNT; i++)
		if (!strcmp(s, key_names[i]))
			return i;
	if (!strcmp(s, "impacting"))
		return HT_WK_IMPACTING;
	return -1;
}

struct ht__wtree {
	struct ht__window w;
	enum ht__wkey keys[HT_WK_MAX_LEVELS];
	uint32_t nkeys;
	bool keep_rows;
	struct ht__wnode root;
};

struct ht__wtree *ht__wtree_new(const struct ht__window *w, const enum ht__wkey *keys,
				uint32_t nkeys, bool keep_rows)
{
	if (!w || w->start >= w->end || nkeys > HT_WK_MAX_LEVELS)
		return NULL;
	for (uint32_t i = 0; i < nkeys; i++)
		if ((unsigned)keys[i] >= HT_WK__COUNT)
			return NULL;
	struct ht__wtree *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->w = *w;
	if (nkeys)
		memcpy(t->keys, keys, nkeys * sizeof(keys[0]));
	t->nkeys = nkeys;
	t->keep_rows = keep_rows;
	return t;
}

#define mix64 ht__mix64

static uint64_t child_hash(const void *ctx, uint32_t id)
{
	const struct ht__wnode *n = ctx;
	return mix64(n->children[id]->value);
}

/* The child of n with this value, created when missing; NULL when out of memory. */
static struct ht__wnode *child_get(struct ht__wnode *n, enum ht__wkey key, uint64_t value)
{
	/* The child found last first: a level of one or two children (process,
	   handle, impacting type), and the blocks of one stack in a row (jq's
	   table heap: these lookups were a sixth of its samples). */
	if (n->last && n->last->value == value)
		return n->last;
	uint64_t h = mix64(value);
	for (uint32_t *slot = ht__hindex_find(&n->index, h); *slot;
	     slot = ht__hindex_next(&n->index, slot))
		if (n->children[*slot - 1]->value == value)
			return n->last = n->children[*slot - 1];
	if (ht__grow32((void **)&n->children, &n->cap, (size_t)n->nall + 1, sizeof(*n->children)) <
	    0)
		return NULL;
	struct ht__wnode *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->key = key;
	c->depth = n->depth + 1;
	c->value = value;
	n->children[n->nall] = c;
	if (ht__hindex_insert(&n->index, h, n->nall, child_hash, n) < 0) {
		free(c);
		return NULL;
	}
	n->nall++;
	n->nchildren = n->nall;
	return n->last = c;
}

static void node_count(struct ht__wnode *n, const struct ht__witem *it, int type)
{
	n->live++;
	if (type == HT_AIFI || type == HT_AIFO) {
		n->count += it->piece ? 0 : it->count;
		n->size += it->size;
	}
	if (type == HT_AIFO)
		n->impacting += (int64_t)it->size;
	else if (type == HT_AOFI)
		n->impacting -= (int64_t)it->size;
}

static int node_row(struct ht__wnode *n, const struct ht__witem *it, int type)
{
	if (ht__grow32((void **)&n->rows, &n->rows_cap, (size_t)n->nrows + 1, sizeof(*n->rows)) < 0)
		return HT_ERR_NOMEM;
	struct ht__wrow *r = &n->rows[n->nrows++];
	r->alloc_ts = it->alloc_ts;
	r->free_ts = it->free_ts;
	r->size = it->size;
	r->addr = it->addr;
	r->heap = it->heap;
	r->raw_stack = it->raw_stack;
	r->process = it->process;
	r->tid = it->tid;
	r->stack = it->stack;
	r->type = (uint8_t)type;
	r->unseen = it->unseen;
	return 0;
}

/*
 * Count the item in n and below it from level on. Frame and image levels are
 * multi-valued: the item joins one child per distinct key, as xperf's -frames
 * counts an allocation once under each frame of its stack.
 */
static int add_at(struct ht__wtree *t, struct ht__wnode *n, uint32_t level,
		  const struct ht__witem *it, int type)
{
	node_count(n, it, type);
	if (level == t->nkeys)
		return t->keep_rows ? node_row(n, it, type) : 0;
	enum ht__wkey key = t->keys[level];
	const uint64_t *many = NULL;
	uint32_t nmany = 0;
	uint64_t value = 0;
	switch (key) {
	case HT_WK_PROCESS:
		value = it->process;
		break;
	case HT_WK_HANDLE:
		value = it->heap;
		break;
	case HT_WK_TYPE:
		value = (uint64_t)type;
		break;
	case HT_WK_IMPACTING:
		value = ht__wtype_impacting(type);
		break;
	case HT_WK_STACK:
		value = it->stack;
		break;
	case HT_WK_THREAD:
		value = (uint64_t)it->process << 32 | (uint32_t)it->tid;
		break;
	case HT_WK_FRAME:
		many = it->frames;
		nmany = it->nframes;
		break;
	case HT_WK_IMAGE:
		many = it->images;
		nmany = it->nimages;
		break;
	default:
		return HT_ERR_INVALID;
	}
	if (key != HT_WK_FRAME && key != HT_WK_IMAGE) {
		struct ht__wnode *c = child_get(n, key, value);
		return c ? add_at(t, c, level + 1, it, type) : HT_ERR_NOMEM;
	}
	for (uint32_t i = 0; i < nmany; i++) {
		struct ht__wnode *c = child_get(n, key, many[i]);
		if (!c)
			return HT_ERR_NOMEM;
		int rc = add_at(t, c, level + 1, it, type);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int ht__wtree_add(struct ht__wtree *t, const struct ht__witem *it)
{
	int type = ht__window_classify(&t->w, it->alloc_ts, it->free_ts);
	if (type < 0)
		return 0;
	int rc = add_at(t, &t->root, 0, it, type);
	return rc < 0 ? rc : 1;
}

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
	return a < b ? 1 : a > b ? -1 : 0;
}

static int cmp_node(const void *pa, const void *pb, void *ctx)
{
	const struct ht__wnode *a = *(const struct ht__wnode *const *)pa;
	const struct ht__wnode *b = *(const struct ht__wnode *const *)pb;
	int c = 0;
	switch (*(const enum ht__wsort *)ctx) {
	case HT_WSORT_IMPACTING:
		c = a->impacting < b->impacting ? 1 : a->impacting > b->impacting ? -1 : 0;
		break;
	case HT_WSORT_SIZE:
		c = cmp_u64_desc(a->size, b->size);
		break;
	case HT_WSORT_COUNT:
		c = cmp_u64_desc(a->count, b->count);
		break;
	}
	if (!c)
		c = cmp_u64_desc(a->size, b->size);
	if (!c)
		c = cmp_u64_desc(a->count, b->count);
	if (!c)
		c = cmp_u64_desc(a->live, b->live);
	if (!c)
		c = a->value < b->value ? -1 : a->value > b->value;
	return c;
}

static int cmp_row(const void *pa, const void *pb)
{
	const struct ht__wrow *a = pa, *b = pb;
	if (a->alloc_ts != b->alloc_ts)
		return a->alloc_ts < b->alloc_ts ? -1 : 1;
	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return 0;
}

static void sort_node(struct ht__wnode *n, enum ht__wsort by, uint32_t top)
{
	/* The index refers to positions, which sorting changes; the tree is final now. */
	ht__hindex_release(&n->index);
	if (n->nall > 1)
		qsort_r(n->children, n->nall, sizeof(n->children[0]), cmp_node, &by);
	n->nchildren = top && top < n->nall ? top : n->nall;
	for (uint32_t i = 0; i < n->nall; i++)
		sort_node(n->children[i], by, top);
	if (n->nrows > 1)
		qsort(n->rows, n->nrows, sizeof(n->rows[0]), cmp_row);
}

void ht__wtree_sort(struct ht__wtree *t, enum ht__wsort by, uint32_t top)
{
	sort_node(&t->root, by, top);
}

const struct ht__wnode *ht__wtree_root(const struct ht__wtree *t)
{
	return &t->root;
}

static void node_release(struct ht__wnode *n)
{
	for (uint32_t i = 0; i < n->nall; i++) {
		node_release(n->children[i]);
		free(n->children[i]);
	}
	free(n->children);
	ht__hindex_release(&n->index);
	free(n->rows);
}

void ht__wtree_free(struct ht__wtree *t)
{
	if (!t)
		return;
	node_release(&t->root);
	free(t);
}

/* What one raw stack resolves to, computed on first use: its frame and
   image keys are one each (the frame and image levels group by the first
   frame kept), held here (two allocations a stack: clang++ 3.2 MB). */
struct wstack_entry {
	uint32_t canon;	  /* 0 until resolved (and for stacks without frames) */
	uint32_t nframes; /* 0 or 1, as nimages */
	uint64_t frame;	  /* frame text key */
	uint64_t image;	  /* module id */
	bool done;
};

/*
 * A canonical (culled) stack: the frame text keys that identify it, and the
 * logical frames (innermost first) of the first raw stack that had them.
 * Stacks are merged by text, as analyze merges them, so two calls from the
 * same function at different lines are one stack. The frames are the
 * reader's (its frame lists never move), and the keys are read through
 * frame_key[] (canon_key()) unless a frame has no place there: copies of
 * both were 8 bytes a frame (clang++'s table heap: 25 MB for 46 thousand
 * stacks of about 66 frames).
 */
struct wcanon {
	uint32_t *keys; /* NULL: frame_key[frames[i]] - 1 */
	const uint32_t *frames;
	uint32_t n;
	uint64_t hash; /* hash_frames() of the keys: the index grows without reading them */
};

/* A frame text and its length (the tables write each as often as a stack
   shows it: clang++'s `table heap`, 155 M instructions of strlen()). */
struct wname {
	char *text;
	size_t len;
};

struct ht__wstacks {
	const struct ht_reader *r;
	struct ht__frame_matcher *cull;
	struct wstack_entry *raw;
	uint32_t nraw;
	struct wcanon *canon; /* index = canonical id; 0 unused */
	uint32_t ncanon, canon_cap;
	struct ht__hindex canon_index; /* slots hold the canonical id (id - 1 + 1) */
	struct wname *names;	       /* frame texts, index = key */
	uint32_t nnames, names_cap;
	struct ht__hindex name_index; /* of names */
	uint32_t *frame_key;	      /* logical frame id -> text key + 1, 0 = not yet */
	uint32_t nframe_key;
};

int ht__wstacks_new(struct ht__wstacks **out, const struct ht_reader *r,
		    struct ht__frame_matcher *cull)
{
	struct ht__wstacks *s = calloc(1, sizeof(*s));
	if (!s)
		return HT_ERR_NOMEM;
	s->r = r;
	s->cull = cull;
	s->nraw = ht_reader_stack_count(r);
	s->nframe_key = ht_reader_frame_count(r);
	s->raw = calloc(s->nraw ? s->nraw : 1, sizeof(*s->raw));
	s->frame_key = calloc(s->nframe_key ? s->nframe_key : 1, sizeof(*s->frame_key));
	s->ncanon = 1;
	if (!s->raw || !s->frame_key) {
		ht__wstacks_free(s);
		return HT_ERR_NOMEM;
	}
	*out = s;
	return 0;
}

static uint64_t hash_frames(const uint32_t *f, uint32_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	for (uint32_t i = 0; i < n; i++)
		h = mix64(h ^ f[i]);
	return h;
}

/* Ids in the canonical index are canonical ids - 1 (id 0 is unused). */
static uint64_t canon_hash(const void *ctx, uint32_t id)
{
	return ((const struct ht__wstacks *)ctx)->canon[id + 1].hash;
}

/* Whether canonical stack c has the keys keys[0..n). */
static bool canon_is(const struct ht__wstacks *s, const struct wcanon *c, const uint32_t *keys,
		     uint32_t n)
{
	if (c->n != n)
		return false;
	if (c->keys)
		return !memcmp(c->keys, keys, n * sizeof(*keys));
	for (uint32_t i = 0; i < n; i++)
		if (s->frame_key[c->frames[i]] - 1 != keys[i])
			return false;
	return true;
}

static uint64_t name_hash(const void *ctx, uint32_t key)
{
	const struct ht__wstacks *s = ctx;
	return ht__hash_str(s->names[key].text);
}

/*
 * The canonical id of a culled stack with text keys keys[0..n) and logical
 * frames f[0..n) (interned by keys; the reader's), keyed when every frame's
 * key is in frame_key[]. Returns 0 when out of memory.
 */
static uint32_t canon_get(struct ht__wstacks *s, const uint32_t *keys, const uint32_t *f,
			  uint32_t n, bool keyed)
{
	uint64_t h = hash_frames(keys, n);
	for (uint32_t *slot = ht__hindex_find(&s->canon_index, h); *slot;
	     slot = ht__hindex_next(&s->canon_index, slot))
		if (canon_is(s, &s->canon[*slot], keys, n))
			return *slot;
	if (ht__grow32((void **)&s->canon, &s->canon_cap, (size_t)s->ncanon + 1,
		       sizeof(*s->canon)) < 0)
		return 0;
	/* The keys copied only when a frame's key is not in frame_key[] (a
	   frame past the reader's table: frame_key_get() keeps none). */
	uint32_t *copy = NULL;
	if (!keyed) {
		if (!(copy = malloc(n * sizeof(*copy))))
			return 0;
		memcpy(copy, keys, n * sizeof(*keys));
	}
	uint32_t id = s->ncanon;
	s->canon[id] = (struct wcanon){.keys = copy, .frames = f, .n = n, .hash = h};
	if (ht__hindex_insert(&s->canon_index, h, id - 1, canon_hash, s) < 0) {
		free(copy);
		return 0;
	}
	s->ncanon++;
	return id;
}

static uint32_t frame_key_intern(struct ht__wstacks *s, const char *buf);

/* The text key of a logical frame (interned "module!function"); UINT32_MAX when out of memory. */
static uint32_t frame_key_get(struct ht__wstacks *s, uint32_t frame)
{
	/* An unfinished trace grows its frame table while it is read. */
	if (frame >= s->nframe_key && frame < ht_reader_frame_count(s->r) &&
	    ht__grow32_zero((void **)&s->frame_key, &s->nframe_key, ht_reader_frame_count(s->r),
			    sizeof(*s->frame_key)) < 0)
		return UINT32_MAX;
	if (frame < s->nframe_key && s->frame_key[frame])
		return s->frame_key[frame] - 1;
	char small[512], *buf = small;
	int len = ht__frame_text(s->r, frame, true, small, sizeof(small));
	if (len >= (int)sizeof(small)) {
		/* Long demangled templates: the whole text, so different names stay different keys.
		 */
		buf = malloc((size_t)len + 1);
		if (!buf)
			return UINT32_MAX;
		ht__frame_text(s->r, frame, true, buf, (size_t)len + 1);
	}
	uint32_t key = frame_key_intern(s, buf);
	if (buf != small)
		free(buf);
	if (key != UINT32_MAX && frame < s->nframe_key)
		s->frame_key[frame] = key + 1;
	return key;
}

/* The key of a frame text, added when new; UINT32_MAX when out of memory. */
static uint32_t frame_key_intern(struct ht__wstacks *s, const char *buf)
{
	uint64_t h = ht__hash_str(buf);
	for (uint32_t *slot = ht__hindex_find(&s->name_index, h); *slot;
	     slot = ht__hindex_next(&s->name_index, slot))
		if (!strcmp(s->names[*slot - 1].text, buf))
			return *slot - 1;
	if (ht__grow32((void **)&s->names, &s->names_cap, (size_t)s->nnames + 1,
		       sizeof(*s->names)) < 0)
		return UINT32_MAX;
	size_t len = strlen(buf);
	char *copy = malloc(len + 1);
	if (!copy)
		return UINT32_MAX;
	memcpy(copy, buf, len + 1);
	uint32_t key = s->nnames;
	s->names[key] = (struct wname){copy, len};
	if (ht__hindex_insert(&s->name_index, h, key, name_hash, s) < 0) {
		free(copy);
		return UINT32_MAX;
	}
	s->nnames++;
	return key;
}

/*
 * The frame and image levels group by the topmost frame left after culling
 * and its module, as 'heaptrail analyze -frames/-images' does, so the two
 * commands agree and every level's groups add up to their parent.
 */
static int resolve(struct ht__wstacks *s, uint32_t raw, struct wstack_entry *e)
{
	const uint32_t *frames;
	uint32_t n = ht_reader_stack(s->r, raw, &frames);
	uint32_t first = s->cull && n ? ht__frame_matcher_cull(s->cull, frames, n) : 0;
	frames += first;
	n -= first;
	if (n) {
		uint32_t *keys = malloc(n * sizeof(*keys));
		if (!keys)
			return HT_ERR_NOMEM;
		bool keyed = true;
		for (uint32_t i = 0; i < n; i++) {
			keys[i] = frame_key_get(s, frames[i]);
			if (keys[i] == UINT32_MAX) {
				free(keys);
				return HT_ERR_NOMEM;
			}
			keyed &= frames[i] < s->nframe_key; /* frame_key_get() kept it */
		}
		e->canon = canon_get(s, keys, frames, n, keyed);
		uint32_t key = keys[0];
		free(keys);
		if (!e->canon)
			return HT_ERR_NOMEM;
		const struct ht_frame *f = ht_reader_frame(s->r, frames[0]);
		e->frame = key;
		e->image = f ? f->module : HT_MODULE_NONE;
		e->nframes = 1;
	}
	e->done = true;
	return 0;
}

int ht__wstacks_resolve(struct ht__wstacks *s, uint32_t raw, struct ht__witem *it)
{
	static struct wstack_entry none = {.done = true};
	/* An unfinished trace grows its stack table while it is read. */
	if (raw >= s->nraw && raw < ht_reader_stack_count(s->r)) {
		size_t cap = s->nraw;
		if (ht__grow_zero((void **)&s->raw, &cap, ht_reader_stack_count(s->r),
				  sizeof(*s->raw)) < 0)
			return HT_ERR_NOMEM;
		s->nraw = (uint32_t)cap;
	}
	struct wstack_entry *e = raw && raw < s->nraw ? &s->raw[raw] : &none;
	if (!e->done) {
		int rc = resolve(s, raw, e);
		if (rc < 0)
			return rc;
	}
	it->raw_stack = raw;
	it->stack = e->canon;
	it->frames = &e->frame;
	it->nframes = e->nframes;
	it->images = &e->image;
	it->nimages = e->nframes;
	return 0;
}

uint32_t ht__wstacks_frames(const struct ht__wstacks *s, uint32_t stack, const uint32_t **frames)
{
	if (!stack || stack >= s->ncanon) {
		*frames = NULL;
		return 0;
	}
	*frames = s->canon[stack].frames;
	return s->canon[stack].n;
}

const char *ht__wstacks_frame_name(const struct ht__wstacks *s, uint64_t key)
{
	return key < s->nnames ? s->names[key].text : "?";
}

const char *ht__wstacks_frame_text(const struct ht__wstacks *s, uint32_t frame)
{
	size_t len;
	return ht__wstacks_frame_text_len(s, frame, &len);
}

const char *ht__wstacks_frame_text_len(const struct ht__wstacks *s, uint32_t frame, size_t *len)
{
	if (frame < s->nframe_key && s->frame_key[frame]) {
		const struct wname *w = &s->names[s->frame_key[frame] - 1];
		*len = w->len;
		return w->text;
	}
	*len = 1;
	return "?";
}

const char *ht__wstacks_image_name(const struct ht__wstacks *s, uint64_t key)
{
	if (key >= ht_reader_module_count(s->r))
		return "?";
	const struct ht_module *m = ht_reader_module(s->r, (uint32_t)key);
	return m && m->name ? m->name : "?";
}

void ht__wstacks_free(struct ht__wstacks *s)
{
	if (!s)
		return;
	free(s->raw);
	for (uint32_t i = 1; i < s->ncanon; i++)
		free(s->canon[i].keys);
	free(s->canon);
	ht__hindex_release(&s->canon_index);
	for (uint32_t i = 0; i < s->nnames; i++)
		free(s->names[i].text);
	free(s->names);
	ht__hindex_release(&s->name_index);
	free(s->frame_key);
	free(s);
}
