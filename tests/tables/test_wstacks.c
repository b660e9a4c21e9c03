/*
 * test_wstacks.c - the stacks as the tables see them (ht__wstacks) on a trace
 * built with the writer: culling with the default list, merging of stacks
 * whose culled frames have the same text, the frame and image keys of the
 * frame and image levels, stacks without frames, the canonical stacks'
 * frames read where the reader keeps them, and the frame texts' lengths.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/match.h"
#include "analysis/window.h"
#include "check.h"
#include "traces.h"

/* Stacks 1..6 of traces.h, plus 7: malloc <- leaky <- main called from another line. */
static int write_trace(const char *path)
{
	struct ht__writer *w;
	int rc = tr_begin(&w, path);
	if (rc < 0)
		return rc;
	ht__writer_frame(w, 6, 0, 0x3010);
	static const uint32_t s7[] = {0, 1, 6};
	ht__writer_stack(w, 7, s7, 3);
	tr_ev(w, HT_EV_ALLOC, 1000, 0x1000, 100, 7);
	struct ht__symbol sym = {"main", NULL, 0};
	ht__writer_symbols(w, 6, &sym, 1);
	return tr_end(w, 2000);
}

static void test_resolve(const struct ht_reader *r, struct ht__frame_matcher *cull)
{
	struct ht__wstacks *s;
	CHECK_EQ(ht__wstacks_new(&s, r, cull), 0);
	struct ht__witem a = {0}, b = {0}, c = {0}, none = {0}, big = {0};
	CHECK_EQ(ht__wstacks_resolve(s, 1, &a), 0);
	CHECK_EQ(ht__wstacks_resolve(s, 7, &b), 0);
	CHECK_EQ(ht__wstacks_resolve(s, 2, &c), 0);
	CHECK_EQ(ht__wstacks_resolve(s, 0, &none), 0);
	CHECK_EQ(ht__wstacks_resolve(s, 99, &big), 0);
	/* Stacks 1 and 7 differ only in main's return address: one stack. */
	CHECK(a.stack != 0);
	CHECK_EQ(a.stack, b.stack);
	CHECK(a.stack != c.stack);
	CHECK_EQ(a.raw_stack, 1);
	CHECK_EQ(b.raw_stack, 7);
	CHECK_EQ(none.stack, 0);
	CHECK_EQ(none.nframes, 0);
	CHECK_EQ(big.stack, 0);
	const uint32_t *f, *rf;
	uint32_t n = ht__wstacks_frames(s, a.stack, &f);
	/* The frames are the reader's of the first raw stack (after the
	   cull), not a copy. */
	uint32_t rn = ht_reader_stack(r, 1, &rf);
	CHECK(rn >= n);
	CHECK(f == rf + (rn - n));
	if (cull) {
		CHECK_EQ(n, 2);
		CHECK_STR(ht__wstacks_frame_text(s, f[0]), "app!leaky");
		CHECK_STR(ht__wstacks_frame_text(s, f[1]), "app!main");
		CHECK_EQ(a.nframes, 1);
		CHECK_STR(ht__wstacks_frame_name(s, a.frames[0]), "app!leaky");
		CHECK_STR(ht__wstacks_image_name(s, a.images[0]), "app");
	} else {
		CHECK_EQ(n, 3);
		CHECK_STR(ht__wstacks_frame_text(s, f[0]), "libc.so.6!malloc");
		CHECK_STR(ht__wstacks_frame_name(s, a.frames[0]), "libc.so.6!malloc");
		CHECK_STR(ht__wstacks_image_name(s, a.images[0]), "libc.so.6");
		/* Both stacks start at malloc: the same frame key and image. */
		CHECK_EQ(a.frames[0], c.frames[0]);
		CHECK_EQ(a.images[0], c.images[0]);
	}
	/* The texts' lengths, kept beside them (table heap's frame lines). */
	size_t len;
	const char *text = ht__wstacks_frame_text_len(s, f[0], &len);
	CHECK_STR(text, ht__wstacks_frame_text(s, f[0]));
	CHECK_EQ(len, strlen(text));
	CHECK_STR(ht__wstacks_frame_text_len(s, 12345, &len), "?");
	CHECK_EQ(len, 1);
	CHECK_EQ(ht__wstacks_frames(s, 0, &f), 0);
	CHECK_STR(ht__wstacks_frame_name(s, 12345), "?");
	CHECK_STR(ht__wstacks_image_name(s, HT_MODULE_NONE), "?");
	ht__wstacks_free(s);
}

int main(void)
{
	char dir[] = "/tmp/ht-wstacks-XXXXXX", path[64];
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/t.htr", dir);
	CHECK_EQ(write_trace(path), 0);
	struct ht_reader *r;
	CHECK_EQ(ht_reader_open(&r, path), 0);
	if (r) {
		test_resolve(r, NULL);
		struct ht__match_list cull = HT_MATCH_LIST_INIT;
		ht__match_list_add_defaults(&cull);
		struct ht__frame_matcher *m;
		CHECK_EQ(ht__frame_matcher_new(&m, &cull, r), 0);
		test_resolve(r, m);
		ht__frame_matcher_free(m);
		ht__match_list_release(&cull);
		ht_reader_close(r);
	}
	unlink(path);
	rmdir(dir);
	CHECK_DONE();
}
