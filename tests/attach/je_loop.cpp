// The program tests/attach/t_alloc_ext.sh attaches to: jemalloc's own API and
// C++ new[] (jemalloc's operator) in a loop until SIGTERM, one iteration every
// 20 ms, and a weak reference to tcmalloc (not loaded) that must stay null
// after the recorder redirects the program's GOT entries. Exits 0 when it did.
#include <jemalloc/jemalloc.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

extern "C" void *tc_malloc(size_t) __attribute__((weak));

static volatile sig_atomic_t stop;

int main()
{
	signal(SIGTERM, [](int) { stop = 1; });
	puts("ready");
	fflush(stdout);
	int weak_ok = 1, n = 0;
	while (!stop) {
		void *p = mallocx(3001, 0);
		p = rallocx(p, 3002, 0);
		dallocx(p, 0);
		char *a = new char[3003];
		a[0] = 1;
		delete[] a;
		free(malloc(3004));
		weak_ok &= tc_malloc == nullptr;
		n++;
		usleep(20000);
	}
	printf("%s %d\n", weak_ok ? "weak ok" : "weak broken", n > 0);
	return !weak_ok;
}
