/*
 * sink_writer.c - the sink that hands the session's output to a trace writer
 * (src/format/writer.h). Kept apart so that code using another sink (tests)
 * does not pull the writer in.
 */
#include "session/session.h"

#include <time.h>
#include <unistd.h>

static int w_module(void *ctx, uint32_t id, const char *path, const uint8_t *bid, uint32_t n)
{
	return ht__writer_module(ctx, id, path, bid, n);
}

static int w_frame(void *ctx, uint32_t id, uint32_t module, uint64_t rel)
{
	return ht__writer_frame(ctx, id, module, rel);
}

static int w_stack(void *ctx, uint32_t id, const uint32_t *frames, uint32_t n)
{
	return ht__writer_stack(ctx, id, frames, n);
}

static int w_event(void *ctx, const struct ht_event *ev, const struct ht_process *proc)
{
	return ht__writer_event(ctx, ev, proc);
}

static int w_symbols(void *ctx, uint32_t frame, const struct ht__symbol *syms, uint32_t n)
{
	return ht__writer_symbols(ctx, frame, syms, n);
}

static int w_flush(void *ctx)
{
	return ht__writer_flush(ctx);
}

static int w_loss(void *ctx, uint32_t process, const struct ht_process *loss)
{
	return ht__writer_process_loss(ctx, process, loss);
}

static int w_settle(void *ctx)
{
	return ht__writer_settle(ctx);
}

static int w_hand_over(void *ctx)
{
	return ht__writer_hand_over(ctx);
}

static bool w_prefetch(void *ctx, const uint64_t *addr, uint32_t n)
{
	return ht__writer_prefetch(ctx, addr, n);
}

static int w_heap_event(void *ctx, const struct ht__heap_event *ev)
{
	return ht__writer_heap_event(ctx, ev);
}

static int w_heap_plain(void *ctx, uint32_t process, int32_t pid, int32_t tid,
			const struct ht__heap_plain *ev, uint32_t n)
{
	return ht__writer_heap_plain(ctx, process, pid, tid, ev, n);
}

static const struct ht__sink writer_sink = {
    .module = w_module,
    .frame = w_frame,
    .stack = w_stack,
    .event = w_event,
    .symbols = w_symbols,
    .flush = w_flush,
    .loss = w_loss,
    .settle = w_settle,
    .prefetch = w_prefetch,
    .heap_event = w_heap_event,
    .heap_plain = w_heap_plain,
    .hand_over = w_hand_over,
};

const struct ht__sink *ht__sink_writer(void)
{
	return &writer_sink;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void ht__session_meta_fill(struct ht__session *s, struct ht__trace_meta *meta, char *host, size_t n)
{
	host[0] = 0;
	gethostname(host, n - 1);
	host[n - 1] = 0;
	uint64_t real_ns = clock_ns(CLOCK_REALTIME);
	uint64_t since_t0 = clock_ns(CLOCK_MONOTONIC) - ht__session_t0(s);
	meta->start_realtime_ns = real_ns - since_t0;
	meta->hostname = host;
}

int ht__session_open_trace(struct ht__session *s, struct ht__output *o, struct ht__trace_meta meta,
			   struct ht__writer **out)
{
	char host[256];
	ht__session_meta_fill(s, &meta, host, sizeof(host));
	int rc = ht__writer_open_fd(out, o->fd, &meta);
	if (rc < 0)
		return rc;
	o->fd = -1; /* the writer's */
	/* zstd beside the encoder: on 2 cores it runs while the program waits
	   for room or on the core the program leaves (docs/performance.md). */
	ht__writer_set_async(*out, true);
	/* The trace takes its name once its header is there (docs/outputs.md). */
	if ((rc = ht__output_publish(o, NULL, 0)) < 0) {
		ht__writer_abort(*out);
		*out = NULL;
		return rc;
	}
	ht__session_set_sink(s, ht__sink_writer(), *out);
	/* Exit notes next to a trace file: what a killed collector never reads.
	   Without them (a device, a directory we cannot write) the session
	   runs as before. */
	if (ht__output_is_file(o))
		ht__session_notes(s, o->path);
	return 0;
}
