/*
 * fuzz_cull.c - libFuzzer target: `analyze -cullLists FILE` (and
 * -requireFrames FILE) parsing, ht__match_list_add_file() on any bytes, then
 * the list matching a few frames. Seeds: tests/fuzz/corpus/cull.
 */
#include "memfile.h"

#include "analysis/match.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ht__match_list l = HT_MATCH_LIST_INIT;
	if (ht__match_list_add_file(&l, memfile(data, size)) == 0) {
		static const struct ht__match_frame frames[] = {
		    {"libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "malloc", 0x10},
		    {"app", "/bin/app", "std::vector<int>::push_back(int const&)", 0x1234},
		    {NULL, NULL, NULL, 0},
		    {"libfoo.so", "/opt/libfoo.so", NULL, 0xdead},
		};
		for (size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++)
			(void)ht__match_frame(&l, &frames[i]);
	}
	ht__match_list_release(&l);
	return 0;
}
