/*
 * test_commit.c - the commit map with exact expectations: partial munmap
 * splits a range, mprotect to PROT_NONE decommits and back to writable
 * commits again, reserve-then-commit, mremap that moves and grows then shrinks
 * in place, MAP_FIXED replacement, brk, file and shared mappings, failed
 * calls, two processes at the same address, process exit, and finish order.
 */
#define _GNU_SOURCE 1
#include <sys/mman.h>

#include "analysis/commit.h"
#include "testutil.h"

#define P 0x1000ull
#define MAXC 32
static struct ht__commit got[MAXC];
static int ngot;

static void on_end(void *ctx, const struct ht__commit *c)
{
	(void)ctx;
	if (ngot < MAXC)
		got[ngot] = *c;
	ngot++;
}

static struct ht__commit_tracker *ct;

static void ev(uint8_t type, uint64_t ts, uint32_t process, uint64_t addr, uint64_t size,
	       uint32_t prot, uint32_t mflags)
{
	struct ht_event e = {0};
	e.type = type;
	e.ts = ts;
	e.process = process;
	e.pid = 50 + (int32_t)process;
	e.tid = 3;
	e.addr = addr;
	e.size = size;
	e.prot = prot;
	e.mflags = mflags;
	e.stack = (uint32_t)ts;
	e.func = type == HT_EV_MMAP	  ? HT_FN_MMAP
		 : type == HT_EV_MPROTECT ? HT_FN_MPROTECT
					  : HT_FN_MUNMAP;
	CHECK_EQ(ht__commit_event(ct, &e), 0);
}

static void remap(uint64_t ts, uint64_t old_addr, uint64_t old_size, uint64_t addr, uint64_t size)
{
	struct ht_event e = {0};
	e.type = HT_EV_MREMAP;
	e.func = HT_FN_MREMAP;
	e.ts = ts;
	e.pid = 50;
	e.old_addr = old_addr;
	e.old_size = old_size;
	e.addr = addr;
	e.size = size;
	e.stack = (uint32_t)ts;
	e.mflags = addr != old_addr ? MREMAP_MAYMOVE : 0;
	CHECK_EQ(ht__commit_event(ct, &e), 0);
}

static void expect(int i, uint32_t process, uint64_t addr, uint64_t size, uint64_t commit_ts,
		   uint64_t decommit_ts)
{
	if (i >= ngot) {
		fprintf(stderr, "commit lifetime %d missing (got %d)\n", i, ngot);
		check_failures++;
		return;
	}
	CHECK_EQ(got[i].process, process);
	CHECK_EQ(got[i].addr, addr);
	CHECK_EQ(got[i].size, size);
	CHECK_EQ(got[i].commit_ts, commit_ts);
	CHECK_EQ(got[i].decommit_ts, decommit_ts);
	CHECK_EQ(got[i].stack, commit_ts); /* the committing event's stack */
	if (check_failures)
		fprintf(stderr, "  at lifetime %d\n", i);
}

static uint64_t committed(void)
{
	return ht__commit_stats(ct)->committed_bytes;
}

int main(void)
{
	const uint64_t A = 0x10000, B = 0x100000, C = 0x200000;
	const uint32_t RW = PROT_READ | PROT_WRITE, ANON = MAP_PRIVATE | MAP_ANONYMOUS;
	ct = ht__commit_new(on_end, NULL);

	ev(HT_EV_MMAP, 1, 0, A, 3 * P, RW, ANON);
	CHECK_EQ(committed(), 3 * P);
	/* Partial munmap in the middle: the middle ends, two ranges stay. */
	ev(HT_EV_MUNMAP, 2, 0, A + P, P, 0, 0);
	CHECK_EQ(ngot, 1);
	expect(0, 0, A + P, P, 1, 2);
	CHECK_EQ(committed(), 2 * P);
	CHECK_EQ(ht__commit_stats(ct)->ranges, 2);
	/* mprotect to NONE decommits; back to writable is a new commit. */
	ev(HT_EV_MPROTECT, 3, 0, A, P, PROT_NONE, 0);
	expect(1, 0, A, P, 1, 3);
	CHECK_EQ(committed(), P);
	ev(HT_EV_MPROTECT, 4, 0, A, P, RW, 0);
	CHECK_EQ(committed(), 2 * P);
	/* Reserve, then commit the middle; read-only changes nothing. */
	ev(HT_EV_MMAP, 5, 0, B, 4 * P, PROT_NONE, ANON);
	CHECK_EQ(committed(), 2 * P);
	ev(HT_EV_MPROTECT, 6, 0, B + P, 2 * P - 100, RW, 0); /* length rounds up */
	CHECK_EQ(committed(), 4 * P);
	ev(HT_EV_MPROTECT, 6, 0, B, 4 * P, PROT_READ, 0);
	CHECK_EQ(committed(), 4 * P);
	CHECK_EQ(ngot, 2);
	/* mremap moves the right piece of A (committed at 1) and grows it. */
	remap(7, A + 2 * P, P, C, 3 * P);
	CHECK_EQ(committed(), 6 * P);
	CHECK_EQ(ngot, 2);
	/* Shrinking in place ends the grown part. */
	remap(8, C, 3 * P, C, P);
	CHECK_EQ(ngot, 3);
	expect(2, 0, C + P, 2 * P, 7, 8);
	CHECK_EQ(committed(), 4 * P);
	/* File and shared mappings never commit; failed calls change nothing. */
	ev(HT_EV_MMAP, 9, 0, 0x300000, 8 * P, RW, MAP_PRIVATE);
	ev(HT_EV_MMAP, 9, 0, 0x400000, 8 * P, RW, MAP_SHARED | MAP_ANONYMOUS);
	struct ht_event f = {.type = HT_EV_MMAP,
			     .ts = 9,
			     .size = 8 * P,
			     .prot = RW,
			     .mflags = ANON,
			     .flags = HT_EVF_FAILED};
	CHECK_EQ(ht__commit_event(ct, &f), 0);
	CHECK_EQ(committed(), 4 * P);
	/* MAP_FIXED over [B, B + 2P) ends the committed [B + P, B + 2P). */
	ev(HT_EV_MMAP, 10, 0, B, 2 * P, RW, ANON | MAP_FIXED);
	CHECK_EQ(ngot, 4);
	expect(3, 0, B + P, P, 6, 10);
	CHECK_EQ(committed(), 5 * P);
	/* brk growth commits whole pages past the old break's page. */
	struct ht_event b = {.type = HT_EV_BRK,
			     .func = HT_FN_SBRK,
			     .ts = 11,
			     .pid = 50,
			     .old_addr = 0x555010,
			     .addr = 0x557800,
			     .stack = 11};
	CHECK_EQ(ht__commit_event(ct, &b), 0);
	CHECK_EQ(committed(), 7 * P);
	CHECK_EQ(ht__commit_stats(ct)->peak_bytes, 7 * P);
	CHECK_EQ(ht__commit_stats(ct)->peak_ts, 11);
	/* Another process at the same address. */
	ev(HT_EV_MMAP, 13, 1, A, P, RW, ANON);
	CHECK_EQ(committed(), 8 * P);
	/* Its exit ends its committed range there (the trace pass says which image ends). */
	struct ht_event x = {.type = HT_EV_PROCESS_EXIT, .ts = 14, .process = 1, .pid = 51};
	CHECK_EQ(ht__commit_event(ct, &x), 0);
	CHECK_EQ(committed(), 8 * P); /* the event alone changes nothing */
	int before = ngot;
	CHECK_EQ(before, 4);
	ht__commit_end_process(ct, 1, 14);
	CHECK_EQ(committed(), 7 * P);
	CHECK_EQ(ngot, before + 1);
	expect(before, 1, A, P, 13, 14);
	CHECK_EQ(got[before].at_exit, 1);
	ht__commit_end_process(ct, 1, 15); /* once */
	CHECK_EQ(ngot, before + 1);
	/* mprotect to writable of a range never seen commits it. */
	ev(HT_EV_MPROTECT, 15, 2, 0x900000, 2 * P, RW, 0);
	CHECK_EQ(committed(), 9 * P);
	ev(HT_EV_MUNMAP, 16, 2, 0x900000, 2 * P, 0, 0);
	CHECK_EQ(ngot, 6);
	expect(5, 2, 0x900000, 2 * P, 15, 16);
	CHECK_EQ(committed(), 7 * P);

	const struct ht__commit_stats *st = ht__commit_stats(ct);
	CHECK_EQ(st->peak_bytes, 9 * P);
	CHECK_EQ(st->peak_ts, 15);
	CHECK_EQ(st->commits, 8);
	CHECK_EQ(st->commit_bytes, 15 * P);
	struct ht__commit_stats ps;
	ht__commit_process_stats(ct, 0, &ps);
	CHECK_EQ(ps.committed_bytes, 7 * P);
	CHECK_EQ(ps.peak_bytes, 7 * P);
	CHECK_EQ(ps.peak_ts, 11);
	CHECK_EQ(ps.commits, 6);
	ht__commit_process_stats(ct, 1, &ps);
	CHECK_EQ(ps.committed_bytes, P); /* at its exit */
	CHECK_EQ(ps.peak_ts, 13);
	ht__commit_process_stats(ct, 9, &ps);
	CHECK_EQ(ps.peak_bytes, 0);

	/* Still committed at the end, oldest first. */
	ht__commit_finish(ct);
	CHECK_EQ(ngot, 11);
	expect(6, 0, C, P, 1, HT_TS_NEVER); /* moved, still the commit of ts 1 */
	expect(7, 0, A, P, 4, HT_TS_NEVER);
	expect(8, 0, B + 2 * P, P, 6, HT_TS_NEVER);
	expect(9, 0, B, 2 * P, 10, HT_TS_NEVER);
	expect(10, 0, 0x556000, 2 * P, 11, HT_TS_NEVER);
	CHECK_EQ(got[10].func, HT_FN_SBRK);
	CHECK_EQ(got[10].at_exit, 0);
	uint64_t sum = 0;
	for (int i = 6; i < 11; i++)
		sum += got[i].size;
	CHECK_EQ(sum, 7 * P); /* process 0's: process 1's range ended at its exit */
	ht__commit_free(ct);

	/* Ranges found in /proc/PID/maps (HT_EVF_UNSEEN) and hooked calls. */
	ct = ht__commit_new(on_end, NULL);
	ngot = 0;
	const uint64_t D = 0x7000000, E = 0x8000000;
	struct ht_event u = {.type = HT_EV_MMAP,
			     .func = HT_FN_MAPS,
			     .flags = HT_EVF_UNSEEN,
			     .ts = 20,
			     .pid = 50,
			     .addr = D,
			     .size = 4 * P,
			     .prot = RW,
			     .mflags = ANON,
			     .stack = 20};
	CHECK_EQ(ht__commit_event(ct, &u), 0);
	CHECK_EQ(committed(), 4 * P);
	/* The hooked mmap of that range, stamped after the session read the map:
	   without MAP_FIXED it was this mapping, not a replacement of it. */
	ev(HT_EV_MMAP, 21, 0, D, 4 * P, RW, ANON);
	CHECK_EQ(ngot, 0);
	CHECK_EQ(committed(), 4 * P);
	CHECK_EQ(ht__commit_stats(ct)->commits, 1);
	CHECK_EQ(ht__commit_stats(ct)->commit_bytes, 4 * P);
	/* MAP_FIXED over a found range (glibc's own) does replace it. */
	u.ts = u.stack = 22;
	u.addr = E;
	u.size = 2 * P;
	CHECK_EQ(ht__commit_event(ct, &u), 0);
	ev(HT_EV_MMAP, 23, 0, E, 2 * P, RW, ANON | MAP_FIXED);
	CHECK_EQ(ngot, 1);
	expect(0, 0, E, 2 * P, 22, 23);
	CHECK_EQ(got[0].unseen, 1);
	ev(HT_EV_MUNMAP, 24, 0, D, 4 * P, 0, 0);
	CHECK_EQ(ngot, 2);
	expect(1, 0, D, 4 * P, 21, 24); /* the hooked call's time and stack */
	CHECK_EQ(got[1].unseen, 0);
	CHECK_EQ(committed(), 2 * P);
	CHECK_EQ(ht__commit_stats(ct)->commits, 3);
	CHECK_EQ(ht__commit_stats(ct)->commit_bytes, 8 * P);
	ht__commit_free(ct);
	return test_result("test_commit");
}
