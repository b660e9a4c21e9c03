/*
 * fuzz_analyze.c - libFuzzer target: the xperf-style option parser of
 * `heaptrail analyze` (cmd_analyze.c's parse_args and the query options of
 * query_opts.c) on any argument list. The input is the arguments separated by
 * NUL bytes. The two files are compiled into this one with die() and exit()
 * turned into a jump back here (and the other CLI files' calls of die(), such
 * as opt.c refusing an option where a value belongs, are linked to
 * __wrap_die with -Wl,--wrap=die), so a rejected option ends one input, not the
 * fuzzer; what a parse allocated is released either way. Seeds:
 * tests/fuzz/corpus/analyze.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* die() here and, through -Wl,--wrap=die, in the other CLI files. */
_Noreturn void __wrap_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void fuzz_exit(int status);

#define die __wrap_die
#define exit fuzz_exit
#include "cli/cmd_analyze.c"
#include "cli/query_opts.c"
#undef die
#undef exit

static jmp_buf back;

_Noreturn void __wrap_die(const char *fmt, ...)
{
	/* Format the message as die() would: a bad argument shows up here. */
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	longjmp(back, 1);
}

_Noreturn void fuzz_exit(int status)
{
	longjmp(back, 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* "analyze" then the NUL-separated arguments (the last one may lack its NUL). */
	char *buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = 0;
	char *argv[MAX_ARGS + 2] = {"analyze"};
	int argc = 1;
	for (size_t i = 0; i < size && argc <= MAX_ARGS; i += strlen(buf + i) + 1)
		argv[argc++] = buf + i;
	argv[argc] = NULL;

	static struct opts o;
	static struct ht__query q;
	memset(&o, 0, sizeof(o));
	ht__query_init(&q);
	if (setjmp(back) == 0)
		parse_args(argc, argv, &o, &q);
	ht__query_release(&q);
	free(buf);
	return 0;
}
