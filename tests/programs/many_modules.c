/*
 * many_modules DIR N [THREADS]: dlopens DIR/mm_0.so .. DIR/mm_{N-1}.so
 * (copies of libhtmm.so under N names, all kept loaded) and has the library
 * number i allocate one block of 70000 + i bytes from its own code, so a
 * trace shows whether every allocation is attributed to the module it came
 * from. With THREADS, that many threads share the libraries out (i modulo
 * THREADS) and load them at once, and each closes every third of its
 * libraries after its allocation: module refreshes that race each other,
 * and unloads between loads.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static const char *dir;
static int n, nthreads;

static int one(int i, int close_it)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/mm_%d.so", dir, i);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	void *(*mm_alloc)(size_t) = h ? (void *(*)(size_t))dlsym(h, "mm_alloc") : NULL;
	if (!mm_alloc) {
		fprintf(stderr, "many_modules: %s: %s\n", path, dlerror());
		return 1;
	}
	free(mm_alloc(70000 + (size_t)i));
	if (close_it && dlclose(h)) {
		fprintf(stderr, "many_modules: dlclose %s: %s\n", path, dlerror());
		return 1;
	}
	return 0;
}

static void *worker(void *arg)
{
	int t = (int)(long)arg, bad = 0;
	for (int i = t; i < n && !bad; i += nthreads)
		bad = one(i, i % 3 == 2);
	return bad ? (void *)1 : NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 4)
		return 2;
	dir = argv[1];
	n = atoi(argv[2]);
	nthreads = argc == 4 ? atoi(argv[3]) : 0;
	if (nthreads <= 0) {
		for (int i = 0; i < n; i++)
			if (one(i, 0))
				return 1;
	} else {
		pthread_t th[64];
		if (nthreads > 64)
			return 2;
		for (int t = 0; t < nthreads; t++)
			if (pthread_create(&th[t], NULL, worker, (void *)(long)t))
				return 1;
		int bad = 0;
		for (int t = 0; t < nthreads; t++) {
			void *r;
			pthread_join(th[t], &r);
			bad |= r != NULL;
		}
		if (bad)
			return 1;
	}
	printf("%d\n", n);
	return 0;
}
