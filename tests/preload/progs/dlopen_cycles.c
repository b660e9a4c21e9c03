/*
 * dlopen_cycles N PATH: N times dlopen(PATH), a call that allocates 8002
 * bytes in the library, free, dlclose. PATH may be relative
 * ("./libdso_ctor.so") or a bare name found through LD_LIBRARY_PATH.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	long n = atol(argv[1]);
	for (long i = 0; i < n; i++) {
		void *h = dlopen(argv[2], RTLD_NOW);
		if (!h) {
			fprintf(stderr, "%s\n", dlerror());
			return 10;
		}
		void *(*fn)(void) = (void *(*)(void))dlsym(h, "dso_alloc");
		if (!fn)
			return 11;
		free(fn());
		if (dlclose(h))
			return 12;
	}
	printf("%ld\n", n);
	return 0;
}
