// signal_ext US N: built against tcmalloc, whose operator new and delete are
// its own (the recorder traces them as new/delete, hooks_alloc_ext.c). N
// new/delete pairs of 48 bytes while a timer every US microseconds runs a
// handler that makes one mprotect of two pages to what they are (an event
// safe anywhere). Prints how many handlers ran: each handler's event is
// recorded or, inside a hook, counted (reentered), never neither.
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>

#include <cstdio>
#include <cstdlib>

struct Obj {
	char b[48];
};

static volatile sig_atomic_t handled;
alignas(4096) static char pages[8192];

static void on_alarm(int)
{
	mprotect(pages, sizeof pages, PROT_READ | PROT_WRITE);
	handled = handled + 1;
}

// Keeps the compiler from dropping an allocation it could see is unused.
__attribute__((noinline)) static void *use(void *p)
{
	asm volatile("" : : "r"(p) : "memory");
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	long us = atol(argv[1]), n = atol(argv[2]);
	struct sigaction sa = {};
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, nullptr);
	struct itimerval it = {{0, us}, {0, us}};
	setitimer(ITIMER_REAL, &it, nullptr);
	for (long i = 0; i < n; i++)
		delete static_cast<Obj *>(use(new Obj));
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, nullptr);
	printf("%d\n", (int)handled);
	return 0;
}
