/*
 * dlopen_prog.c - loads libhtdso.so (next to this program) with dlopen, calls
 * its dso_alloc() 3 times, frees those blocks and unloads the library, for
 * tests/cli/: a module load and unload, and allocations from inside the
 * library and its constructor.
 */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <unistd.h>

#include "prog.h"

int main(void)
{
	char self[PATH_MAX], lib[PATH_MAX + 16];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	PROG_CHECK(n > 0);
	self[n] = 0;
	snprintf(lib, sizeof(lib), "%s/libhtdso.so", dirname(self));

	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen_prog: %s\n", dlerror());
		return 1;
	}
	void *(*dso_alloc)(void) = (void *(*)(void))dlsym(h, "dso_alloc");
	PROG_CHECK(dso_alloc);
	void *blocks[3];
	for (int i = 0; i < 3; i++)
		blocks[i] = dso_alloc();
	for (int i = 0; i < 3; i++)
		free(blocks[i]);
	PROG_CHECK(dlclose(h) == 0);
	return 0;
}
