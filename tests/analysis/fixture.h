/*
 * fixture.h - test-only traces with known modules, frames, symbols, stacks,
 * processes and allocations, written with the format's writer. The unit tests
 * and the 'heaptrail analyze' end-to-end tests read the same traces, so the
 * numbers in both are worked out once, in fixture.c.
 */
#ifndef HT_TESTS_ANALYSIS_FIXTURE_H
#define HT_TESTS_ANALYSIS_FIXTURE_H

/*
 * Write fixture name at path (which must not exist): "basic", "nosym" (the
 * same without symbols), "ties", "inline", "many" (10005 distinct stacks) or "nostack" (no stacks
 * at all). Returns 0 or a negative enum ht_error (HT_ERR_INVALID for an unknown name).
 */
int fixture_write(const char *path, const char *name);

#endif
