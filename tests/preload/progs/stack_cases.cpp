/*
 * Stacks for the stack cache test (t_stack_cache.sh), run with
 * HEAPTRAIL_STACK_VERIFY=1 so the recorder compares every stack it builds
 * from its cache or its own walk with libunwind's: recursion of varying
 * depth (and deeper than the recorder keeps), optimised code without frame
 * pointers and with alloca frames, rbp as a register holding new values
 * under frames that are reused, C++ exceptions unwinding through
 * allocating destructors, signal handlers on the thread's stack and on an
 * alternate one, a library loaded, unloaded and loaded again, and threads.
 * Every allocation is freed; sizes mark the cases.
 */
#include <alloca.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdexcept>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __clang__
/* clang has no per-function optimize attribute: its build tests these frames
   at the file's own level (gcc's, the default build's, is what the test is for). */
#define OPT __attribute__((noinline))
#else
#define OPT __attribute__((noinline, optimize("O2", "omit-frame-pointer")))
#endif

extern "C" {

__attribute__((noinline)) static void take(size_t n)
{
	free(malloc(n));
}

/* -O0, frame pointers: allocations at every level on the way back up. */
__attribute__((noinline)) static void rec_fp(int depth)
{
	if (depth > 0) {
		rec_fp(depth - 1);
		take(9001);
	} else {
		take(9002);
	}
}

/* -O2 without frame pointers, and the same through alloca frames (rbp). */
OPT static int rec_nofp(int depth, int salt)
{
	if (depth <= 0) {
		void *p = malloc(9011 + (salt & 1));
		free(p);
		return salt;
	}
	int r = rec_nofp(depth - 1, salt * 3 + 1);
	asm volatile("" ::: "memory");
	return r + 1;
}

OPT static int rec_alloca(int depth)
{
	char *buf = (char *)alloca(16 + (depth & 7) * 40);
	memset(buf, depth, 16);
	if (depth <= 0) {
		free(malloc(9021));
		return buf[0];
	}
	int r = rec_alloca(depth - 1);
	asm volatile("" ::"r"(buf) : "memory");
	return r + buf[1];
}

/* rbp as a register of its own, holding a new value at every call: the
   walk never reads it (the frames outside take their CFA from rsp or
   restore rbp first), so the cached frames are reused whatever it holds. */
OPT static long rbp_reg(long a)
{
#if defined(__x86_64__) && !defined(__clang__)
	register long v asm("rbp") = a * 7 + 1;
	asm volatile("" : "+r"(v));
#else
	long v = a * 7 + 1;
#endif
	free(malloc(9051));
	asm volatile("" : "+r"(v));
	return v;
}

/* ... and called from a frame whose CFA is its rbp (frame pointers). */
__attribute__((noinline)) static long rbp_reg_fp(int i)
{
	long s = 0;
	for (int j = 0; j < 4; j++)
		s += rbp_reg(i * 4 + j);
	return s;
}

/*
 * rbp passed through a frame that leaves it alone (rbp_pass) into one whose
 * CFA is its rbp (rbp_pad): rbp_pad pads its frame with alloca so that
 * rbp_pass always runs in the same slots while rbp_pad's own rbp, and the
 * caller above it, differ (rbp_small, rbp_big). rbp_big's locals are left
 * alone and still hold rbp_small's frame, and both are called from one
 * site: only rbp, compared in rbp_pass's frame, tells the stacks apart.
 */
static __thread char *rbp_floor; /* each thread's own: mix() runs on several */

OPT static void rbp_pass(void)
{
	free(malloc(9061));
}

__attribute__((noinline)) static void rbp_pad(void)
{
	char *fp = (char *)__builtin_frame_address(0);
	char *pad = (char *)alloca((size_t)(fp - rbp_floor));
	asm volatile("" ::"r"(pad) : "memory");
	rbp_pass();
}

__attribute__((noinline)) static void rbp_small(void)
{
	char a[32];
	asm volatile("" ::"r"(a) : "memory");
	rbp_pad();
}

__attribute__((noinline)) static void rbp_big(void)
{
	char a[512];
	asm volatile("" ::"r"(a) : "memory");
	rbp_pad();
}

__attribute__((noinline)) static void rbp_through(void)
{
	rbp_floor = (char *)__builtin_frame_address(0) - 8192;
	static void (*const callers[2])(void) = {rbp_small, rbp_big};
	for (int i = 0; i < 8; i++)
		callers[i & 1](); /* one call site: the same return address */
}
}

struct Noisy {
	int depth;
	~Noisy() { take(9031); }
};

__attribute__((noinline)) static void rec_throw(int depth)
{
	Noisy n{depth};
	if (depth == 0)
		throw std::runtime_error("bottom");
	rec_throw(depth - 1);
	take(9032); /* never reached */
}

static void on_signal(int sig)
{
	(void)sig;
	rec_fp(3); /* the test raises the signal outside malloc: safe here */
}

static void *back_into_program(int depth)
{
	rec_fp(depth);
	return malloc(9102);
}

static void dso_round(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/libstack_dso.so", dir);
	void *h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "stack_cases: %s\n", dlerror());
		exit(2);
	}
	auto chain = (void *(*)(int, void *(*)(int)))dlsym(h, "stack_dso_chain");
	for (int i = 0; i < 50; i++) {
		free(chain(i % 9, NULL));
		free(chain(i % 5, back_into_program));
	}
	dlclose(h);
}

static void mix(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		rec_fp(i % 40);
		rec_nofp(i % 37, i);
		rec_alloca(i % 23);
		rbp_reg_fp(i);
		rbp_through();
		if (i % 25 == 0)
			rec_fp(150); /* deeper than the 128 frames kept */
		if (i % 10 == 0) {
			try {
				rec_throw(i % 12);
			} catch (const std::exception &e) {
				take(9041);
			}
		}
	}
}

static void *thread_main(void *arg)
{
	mix((int)(long)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	mix(300);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	static char alt[1 << 16];
	stack_t ss;
	memset(&ss, 0, sizeof ss);
	ss.ss_sp = alt;
	ss.ss_size = sizeof alt;
	sigaltstack(&ss, NULL);
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR2, &sa, NULL);
	for (int i = 0; i < 20; i++) {
		raise(SIGUSR1);
		rec_fp(i % 7);
		raise(SIGUSR2);
		rec_nofp(i % 5, i);
	}

	dso_round(dir);
	dso_round(dir);

	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, thread_main, (void *)(long)(200 + i * 50));
	mix(100);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	return 0;
}
