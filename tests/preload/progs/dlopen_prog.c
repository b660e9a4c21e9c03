/* dlopen of a library that allocates in its constructor, a call, dlclose. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int load_use_unload(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/libdso_ctor.so", dir);
	void *h = dlopen(path, RTLD_NOW);
	if (!h)
		return 10;
	void *(*fn)(void) = (void *(*)(void))dlsym(h, "dso_alloc");
	if (!fn)
		return 11;
	void *p = fn();
	free(p);
	if (dlclose(h))
		return 12;
	return 0;
}

int main(int argc, char **argv)
{
	/* The same call site before and after the unload. */
	for (int i = 0; i < 2; i++) {
		void *p = malloc(8003);
		free(p);
		if (i == 0) {
			int rc = load_use_unload(argc > 1 ? argv[1] : ".");
			if (rc)
				return rc;
		}
	}
	return 0;
}
