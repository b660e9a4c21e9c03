/*
 * recode.c - rewrites the events of a trace with this build's writer and
 * prints the sizes, so that encodings can be compared on the same events
 * (recording twice gives different timestamps). By hand, not in ctest:
 * recode IN.htr OUT.htr [TS_UNIT_NS [CHUNK_BYTES [GROUP_BYTES]]] (GROUP_BYTES 0:
 * every chunk on its own, as before format version 7)
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/writer.h"
#include "heaptrail/trace.h"

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 6) {
		fprintf(stderr,
			"usage: recode IN.htr OUT.htr [TS_UNIT_NS [CHUNK_BYTES [GROUP_BYTES]]]\n");
		return 2;
	}
	struct ht_reader *r;
	int rc = ht_reader_open(&r, argv[1]);
	if (rc < 0) {
		fprintf(stderr, "recode: cannot open '%s': %s\n", argv[1], ht_strerror(rc));
		return 1;
	}
	struct ht__trace_meta meta = {.ts_unit_ns = argc > 3 ? (uint32_t)atoi(argv[3]) : 0};
	struct ht__writer *w;
	unlink(argv[2]);
	if ((rc = ht__writer_open(&w, argv[2], &meta)) < 0) {
		fprintf(stderr, "recode: cannot create '%s': %s\n", argv[2], ht_strerror(rc));
		return 1;
	}
	if (argc > 4 && atol(argv[4]) &&
	    (rc = ht__writer_set_chunk_size(w, (uint32_t)atol(argv[4]))) < 0) {
		fprintf(stderr, "recode: chunk size '%s': %s\n", argv[4], ht_strerror(rc));
		return 1;
	}
	if (argc > 5)
		ht__writer_set_group_size(w, (uint32_t)atol(argv[5]));
	struct ht_event ev;
	long n = 0;
	while ((rc = ht_reader_next(r, &ev)) > 0) {
		const struct ht_process *p = NULL;
		if (ev.type == HT_EV_PROCESS_START || ev.type == HT_EV_PROCESS_EXEC)
			p = ht_reader_process(r, ev.process);
		if (ht__writer_event(w, &ev, p) < 0)
			return 1;
		n++;
	}
	if (ht__writer_finish(w, 0, 0, 0) < 0)
		return 1;
	struct stat a, b;
	stat(argv[1], &a);
	stat(argv[2], &b);
	printf("%ld events: in %lld bytes, events only out %lld bytes (%.3f bytes/event)\n", n,
	       (long long)a.st_size, (long long)b.st_size, (double)b.st_size / n);
	ht_reader_close(r);
	return 0;
}
