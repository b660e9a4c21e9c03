/*
 * heapnames.h - the names of the heaps a trace declares with heap.h's
 * ht_heap_create(), collected by a consumer of the one trace pass (pass.h),
 * and the one way every command and the report print a heap: "malloc" for
 * the process heap, the declared name for a custom heap, next to its handle.
 */
#ifndef HT_ANALYSIS_HEAPNAMES_H
#define HT_ANALYSIS_HEAPNAMES_H

#include <stddef.h>
#include <stdint.h>

struct ht__pass;

/* For ht__heap_name(): a handle's name in whichever process declared it. */
#define HT__ANY_PROCESS UINT32_MAX
struct ht__heap_names;

/* An empty list (HT_ERR_NOMEM when out of memory). */
int ht__heap_names_new(struct ht__heap_names **out);
void ht__heap_names_free(struct ht__heap_names *n);

/*
 * Collects the HEAP_CREATE events of pass p into n. A command whose window
 * ends at ts passes it (UINT64_MAX: the whole trace), so the name list does
 * not keep the pass reading past the window: a heap is created before its
 * first block. Returns the consumer's id or a negative error.
 */
int ht__heap_names_attach(struct ht__pass *p, struct ht__heap_names *n, uint64_t ts);

/*
 * The name of heap handle heap in process image process (an index into the
 * reader's process table): "malloc" for the process heap (handle 0), the
 * name given to ht_heap_create(), or NULL when none was declared. A handle
 * created twice keeps the last name. A fork child has the heaps its parent
 * had at the fork (not destroyed), under their names, unless it declares
 * the handle itself; an exec'd image starts without any. process HT__ANY_PROCESS takes the name
 * from any process (a group of a table that has no process above it). n may
 * be NULL (names of custom heaps
 * unknown).
 */
const char *ht__heap_name(const struct ht__heap_names *n, uint32_t process, uint64_t heap);

/* The heaps declared, in trace order: how many, and the i-th's name, process and handle. */
size_t ht__heap_names_count(const struct ht__heap_names *n);
const char *ht__heap_names_get(const struct ht__heap_names *n, size_t i, uint32_t *process,
			       uint64_t *heap);

/*
 * The heap as every table prints it, into buf: its handle, then its name
 * when known: "0x0 (malloc)", "0x55d0c0 (parser pool)", "0x55d0c0". Returns
 * buf.
 */
const char *ht__heap_label(const struct ht__heap_names *n, uint32_t process, uint64_t heap,
			   char *buf, size_t len);

#endif
