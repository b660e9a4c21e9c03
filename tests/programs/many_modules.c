/*
 * many_modules DIR N: dlopens DIR/mm_0.so .. DIR/mm_{N-1}.so (copies of
 * libhtmm.so under N names, all kept loaded) and has the library number i
 * allocate one block of 70000 + i bytes from its own code, so a trace shows
 * whether every allocation is attributed to the module it came from.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int n = atoi(argv[2]);
	char path[4096];
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/mm_%d.so", argv[1], i);
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		void *(*mm_alloc)(size_t) = h ? (void *(*)(size_t))dlsym(h, "mm_alloc") : NULL;
		if (!mm_alloc) {
			fprintf(stderr, "many_modules: %s: %s\n", path, dlerror());
			return 1;
		}
		free(mm_alloc(70000 + (size_t)i));
	}
	printf("%d\n", n);
	return 0;
}
