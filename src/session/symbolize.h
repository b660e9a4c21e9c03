/*
 * symbolize.h - turning physical frames (module + address) into
 * module!function file:line with inlines (symbolize.c, elfutils libdw): the
 * session calls it at its end; `heaptrail symbolize` calls it on a trace
 * recorded without symbols, with extra directories to look in.
 */
#ifndef HT_SESSION_SYMBOLIZE_H
#define HT_SESSION_SYMBOLIZE_H

#include <stdint.h>

#include "format/writer.h"

struct ht__frame_key {
	uint32_t module;
	uint64_t rel; /* ELF virtual address of the return address in the module */
};

struct ht__module_ent {
	char *path;
	uint8_t build_id[32];
	uint8_t build_id_len;
};

struct ht__symbolize_job {
	const struct ht__module_ent *mods;
	uint32_t nmods;
	const struct ht__frame_key *frames;
	uint32_t nframes;
	/*
	 * Directories searched before the module's recorded path and
	 * /usr/lib/debug, ':'-separated, or NULL: in each, the build-id's
	 * .build-id/xx/rest.debug and .build-id/xx/rest, then a file of the
	 * module's name (all only when the build-id matches).
	 */
	const char *symbol_path;
	/* Receives the symbols of each frame that has any; non-zero stops. */
	int (*symbols)(void *ctx, uint32_t frame, const struct ht__symbol *syms, uint32_t n);
	void *ctx;
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
	uint32_t symbolized; /* out: frames given at least a function name */
	/* out: why frames went unsymbolized though the cache lacked them (libdw
	   cannot be loaded: the message names the package), or NULL */
	const char *missing;
};

/* Resolves every frame of job. Returns 0 or the first error of symbols(). */
int ht__symbolize_frames(struct ht__symbolize_job *job);

/* NULL when libdw (opened on first use) is there, else why not, naming the
   package to install. */
const char *ht__symbolizer_missing(void);

#endif
