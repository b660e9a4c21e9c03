// One program, built three times (HT_JE, HT_TC, HT_MI) against jemalloc,
// tcmalloc and mimalloc: the standard functions, C++ new and delete, and the
// allocator's own API, each a known number of times with distinct sizes that
// t_alloc_ext.sh asserts on. Every block is freed. "race N": the allocator's
// own realloc in snapshot mode (tests/cli/snapshot.py, ext_realloc).
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#if defined(HT_JE)
#include <jemalloc/jemalloc.h>
#elif defined(HT_TC)
#include <gperftools/tcmalloc.h>
#elif defined(HT_MI)
#include <mimalloc.h>
#endif

struct Obj {
	char b[40];
};
struct alignas(64) Aligned {
	char b[1024];
};

// Keeps the compiler from dropping an allocation it could see is unused.
__attribute__((noinline)) static void *use(void *p)
{
	asm volatile("" : : "r"(p) : "memory");
	return p;
}

__attribute__((noinline)) static int *make_array(void)
{
	return new int[1003]; // 4012 bytes
}

// The allocator's own malloc, realloc and free: in one arena without thread
// caches for jemalloc, so that a block one thread's realloc frees is the
// next one another thread's malloc of that size gets.
#if defined(HT_JE)
#define RACE_FLAGS (MALLOCX_ARENA(0) | MALLOCX_TCACHE_NONE)
#define own_malloc(n) mallocx(n, RACE_FLAGS)
#define own_realloc(p, n) rallocx(p, n, RACE_FLAGS)
#define own_free(p) dallocx(p, RACE_FLAGS)
#elif defined(HT_TC)
#define own_malloc(n) tc_malloc(n)
#define own_realloc(p, n) tc_realloc(p, n)
#define own_free(p) tc_free(p)
#elif defined(HT_MI)
#define own_malloc(n) mi_malloc(n)
#define own_realloc(p, n) mi_realloc(p, n)
#define own_free(p) mi_free(p)
#endif

static long race_n;

extern "C" __attribute__((noinline)) void *race_small(void)
{
	return use(own_malloc(100));
}
extern "C" __attribute__((noinline)) void *race_moved(void *p)
{
	return use(own_realloc(p, 40000)); // another size class: it moves
}
extern "C" __attribute__((noinline)) void *race_held(void)
{
	return use(own_malloc(100));
}

// Moves blocks: allocated small, reallocated large (freeing the small one),
// freed: nothing of it stays live.
static void *race_mover(void *)
{
	for (long i = 0; i < race_n; i++)
		own_free(race_moved(race_small()));
	return nullptr;
}

// Allocates blocks of the small size and holds them all: race_held's
// stack holds exactly race_n blocks of 100 bytes per thread at the end.
static void *race_holder(void *)
{
	for (long i = 0; i < race_n; i++)
		race_held();
	return nullptr;
}

static int race(long n)
{
	race_n = n;
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], nullptr, i % 2 ? race_holder : race_mover, nullptr);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], nullptr);
	puts("raced");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "race"))
		return race(atol(argv[2]));
	free(use(malloc(1001)));
	void *b = use(calloc(3, 111));
	b = realloc(b, 1002);
	free(b);
	int *arr = make_array();
	arr[0] = 1;
	delete[] arr;
	delete static_cast<Obj *>(use(new Obj));
	delete static_cast<Obj *>(use(new (std::nothrow) Obj));
	delete static_cast<Aligned *>(use(new Aligned));
	void *z = malloc(1005);
	z = realloc(z, 0); // glibc frees; these allocators may return a block
	free(z);
#if !defined(HT_MI) // Debian's mimalloc is built as C: its new aborts instead of throwing
	try {
		use(::operator new(static_cast<size_t>(1) << 62));
	} catch (const std::bad_alloc &) {
		puts("bad_alloc");
	}
#endif
#if defined(HT_JE)
	void *x = mallocx(2001, 0);
	x = rallocx(x, 2002, 0);
	size_t n = xallocx(x, 2003, 0, 0); // in place, within the size class
	printf("xallocx %zu\n", n);
	dallocx(x, 0);
	void *y = mallocx(2004, MALLOCX_ZERO);
	sdallocx(y, 2004, 0);
#elif defined(HT_TC)
	void *x = tc_malloc(2001);
	x = tc_realloc(x, 2002);
	tc_free(x);
	void *y = tc_calloc(2, 1001);
	tc_free_sized(y, 2002);
	tc_delete(use(tc_new(2003)));
	tc_deletearray_sized(use(tc_newarray(2004)), 2004);
	void *m = nullptr;
	if (tc_posix_memalign(&m, 64, 2005) == 0)
		tc_free(m);
#elif defined(HT_MI)
	void *x = mi_malloc(2001);
	x = mi_realloc(x, 2002);
	mi_free(x);
	void *y = mi_zalloc(2003);
	mi_free_size(y, 2003);
	char *s = mi_strdup("hello"); // 6 bytes
	mi_free(s);
	mi_free(use(mi_new_n(3, 1001)));
	void *e = mi_malloc(2005);
	if (mi_expand(e, 2000) == e)
		puts("expanded");
	mi_free(e);
	// Five blocks freed by destroying their heap.
	mi_heap_t *h = mi_heap_new();
	for (int i = 0; i < 5; i++)
		use(mi_heap_malloc(h, 2006));
	mi_heap_destroy(h);
#endif
	puts("done");
	return 0;
}
