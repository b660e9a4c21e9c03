/*
 * fuzz_reader.c - libFuzzer target: the trace reader on any bytes. Opens the
 * input as a trace and reads everything a front end would (events, their
 * processes and stacks, frames, modules); the reader must return errors,
 * never crash, leak or read out of bounds. Seeds: tests/fuzz/corpus/reader.
 */
#include "memfile.h"

#include "heaptrail/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void touch_stack(struct ht_reader *r, uint32_t stack)
{
	const uint32_t *frames;
	uint32_t n = ht_reader_stack(r, stack, &frames);
	for (uint32_t i = 0; i < n; i++) {
		const struct ht_frame *f = ht_reader_frame(r, frames[i]);
		if (f)
			(void)ht_reader_module(r, f->module);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ht_reader *r;
	if (ht_reader_open(&r, memfile(data, size)) < 0)
		return 0;
	(void)ht_reader_info(r);
	struct ht_event ev;
	/* Twice: rewinding must give a reader that works the same. */
	for (int pass = 0; pass < 2; pass++) {
		int rc;
		unsigned n = 0;
		while ((rc = ht_reader_next(r, &ev)) > 0 && n++ < 100000) {
			(void)ht_reader_process(r, ev.process);
			if (ev.stack)
				touch_stack(r, ev.stack);
		}
		(void)ht_reader_warning(r);
		if (ht_reader_rewind(r) < 0)
			break;
	}
	ht_reader_close(r);
	return 0;
}
