/*
 * many_keys.c - a target for attach tests that has made 40 pthread keys
 * before the recorder comes, so the recorder's own key is past the first
 * 32 and pthread_setspecific of it allocates. Prints "ready"; for each byte
 * 'a' on stdin, 4 threads make 100 malloc(555)/free pairs each, then it
 * answers "ok\n"; for 'm' the same, each thread's first call being mmap
 * (its first stack is taken inside a mapping hook); at end of input it
 * exits 0.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define KEYS 40
#define THREADS 4

static void *worker(void *arg)
{
	if (arg) {
		void *m =
		    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m != MAP_FAILED)
			munmap(m, 4096);
	}
	for (int i = 0; i < 100; i++) {
		char *volatile p = malloc(555);
		if (p)
			p[0] = (char)i;
		free(p);
	}
	return NULL;
}

int main(void)
{
	pthread_key_t keys[KEYS];
	for (int i = 0; i < KEYS; i++)
		if (pthread_key_create(&keys[i], NULL))
			return 1;
	if (write(1, "ready\n", 6) != 6)
		return 1;
	char c;
	while (read(0, &c, 1) == 1) {
		if (c != 'a' && c != 'm')
			continue;
		pthread_t t[THREADS];
		for (int i = 0; i < THREADS; i++)
			if (pthread_create(&t[i], NULL, worker, c == 'm' ? &c : NULL))
				return 1;
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
		if (write(1, "ok\n", 3) != 3)
			return 1;
	}
	return 0;
}
