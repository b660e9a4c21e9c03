/*
 * Stacks for the stack cache test (t_stack_cache.sh), run with
 * HEAPTRAIL_STACK_VERIFY=1 so the recorder compares every stack it builds
 * from its cache or its own walk with libunwind's: recursion of varying
 * depth (and deeper than the recorder keeps), optimised code without frame
 * pointers and with alloca frames, rbp as a register holding new values
 * under frames that are reused, C++ exceptions unwinding through
 * allocating destructors, signal handlers on the thread's stack and on an
 * alternate one, a library loaded, unloaded and loaded again, and threads;
 * deep_stacks' shape (chains along random routes, which the thread's stack
 * tree finds), left by longjmp from the bottom, called back from the
 * library, and in threads that reuse a joined thread's stack; with
 * "cycle", 24 stacks in turn, found among a thread's recent stacks; with
 * "deep", 12 stacks deeper than the recorder keeps, in turn. Every
 * allocation is freed; sizes mark the cases.
 */
#include <alloca.h>
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
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

/*
 * deep_stacks' shape: four functions calling each other along one of 16
 * routes drawn at random, 10 to 29 deep, allocating at the bottom. Consecutive
 * stacks share only their outer frames, so the walk from the hook joins the
 * cached stack near the top and the thread's stack tree finds them. One in
 * eight leaves by longjmp from the bottom, over its frames: the next chain
 * runs where they were, their slots still holding the old values.
 */
static __thread jmp_buf *route_jump;

static int route_a(int depth, unsigned r);
static int route_b(int depth, unsigned r);
static int route_c(int depth, unsigned r);
static int route_d(int depth, unsigned r);

#define ROUTE(name)                                                                                \
	OPT static int name(int depth, unsigned r)                                                 \
	{                                                                                          \
		if (depth == 0) {                                                                  \
			free(malloc(9071 + (r & 1)));                                              \
			if ((r & 7) == 0)                                                          \
				longjmp(*route_jump, 1);                                           \
			return 1;                                                                  \
		}                                                                                  \
		static int (*const next[4])(int, unsigned) = {route_a, route_b, route_c, route_d}; \
		return next[((r & 15) >> (depth % 5)) & 3](depth - 1, r) + 1;                      \
	}
ROUTE(route_a)
ROUTE(route_b)
ROUTE(route_c)
ROUTE(route_d)

/* n chains (n allocations of 9071 or 9072 bytes) */
__attribute__((noinline)) static void routes(int n, unsigned seed)
{
	jmp_buf jb;
	jmp_buf *volatile outer = route_jump;
	route_jump = &jb;
	for (volatile int i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		unsigned r = seed >> 8;
		if (!setjmp(jb))
			route_a(10 + (int)(r >> 12) % 20, r);
	}
	route_jump = outer;
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

static void *back_routes(int depth)
{
	routes(4, (unsigned)depth * 977u);
	return malloc(9103);
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
		free(chain(i % 7, back_routes));
	}
	dlclose(h);
}

/*
 * 24 stacks in turn, each once a round: 3 depths of 8 callers of take() in
 * the same slots, so that the 8 of a depth share the hook's slot and the
 * return address there (one bucket of the recent stacks' index) and differ
 * one frame further out. More than 4 and fewer than the 32 recent stacks a
 * thread keeps: from the second round on, all found among them.
 */
#define VIA(n)                                                                                     \
	__attribute__((noinline)) static void via_##n(void)                                        \
	{                                                                                          \
		take(9061);                                                                        \
		asm volatile("" ::: "memory");                                                     \
	}
VIA(0)
VIA(1)
VIA(2)
VIA(3)
VIA(4)
VIA(5)
VIA(6)
VIA(7)
static void (*const vias[8])(void) = {via_0, via_1, via_2, via_3, via_4, via_5, via_6, via_7};

__attribute__((noinline)) static void ladder(int depth, int k)
{
	if (depth > 0)
		ladder(depth - 1, k);
	else
		vias[k]();
	asm volatile("" ::: "memory");
}

static void cycle(int rounds)
{
	for (int i = 0; i < rounds; i++)
		for (int d = 0; d < 3; d++)
			for (int k = 0; k < 8; k++)
				ladder(d, k);
}

/* Stacks deeper than the 128 frames kept, cut as libunwind cuts them: 12 in
   turn (three depths, four call sites at the bottom), the innermost frames
   optimised without frame pointers, the outer ones with them (rbp read). */
OPT static void cut_bottom(int depth, int site)
{
	if (depth > 0) {
		cut_bottom(depth - 1, site);
		asm volatile("" ::: "memory");
		return;
	}
	switch (site) {
	case 0:
		take(9081);
		break;
	case 1:
		take(9082);
		break;
	case 2:
		take(9083);
		break;
	default:
		take(9084);
	}
	asm volatile("" ::: "memory");
}

__attribute__((noinline)) static void cut_rec(int depth, int site)
{
	if (depth > 20)
		cut_rec(depth - 1, site);
	else
		cut_bottom(depth, site);
	asm volatile("" ::: "memory");
}

static void deep(int rounds)
{
	for (int i = 0; i < rounds; i++)
		for (int d = 0; d < 3; d++)
			for (int s = 0; s < 4; s++)
				cut_rec(140 + 5 * d, s);
}

static void mix(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		rec_fp(i % 40);
		rec_nofp(i % 37, i);
		rec_alloca(i % 23);
		rbp_reg_fp(i);
		rbp_through();
		routes(8, (unsigned)i);
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

/* A thread that reuses a joined thread's stack (glibc keeps it): the same
   slots, another thread's stack tree. */
static void *thread_routes(void *arg)
{
	routes(1000, (unsigned)(long)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	if (argc > 2 && strcmp(argv[2], "cycle") == 0) {
		cycle(100);
		return 0;
	}
	if (argc > 2 && strcmp(argv[2], "deep") == 0) {
		deep(100);
		return 0;
	}
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
	for (int i = 0; i < 3; i++) {
		pthread_create(&th[0], NULL, thread_routes, (void *)(long)(i + 1));
		pthread_join(th[0], NULL);
	}
	return 0;
}
