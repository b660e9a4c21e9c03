/*
 * waiter.c - a program that spends its life blocked in read() on stdin, for
 * the attach tests. It keeps one block of 777 bytes; for each line it reads it
 * frees that block (the first one was allocated before any attach), makes
 * COUNT blocks of 12345 bytes and frees them, keeps a new block of 777 bytes,
 * and prints "kept ADDR N FN" (N lines handled so far, FN the address its
 * GOT gives for malloc right now). Exits 0 at end of file.
 * With MODULE, the first line also loads MODULE by that name (a bare name is
 * found through this program's RUNPATH) and has it make 3 blocks of 23456
 * bytes; it exits 4 when that fails. A line starting with 'f' also forks a
 * child that makes 10 blocks of 999 bytes ('F': the same through _Fork, which
 * runs no atfork handlers); the waiter exits 5 unless the child exits 0.
 *
 * Usage: waiter [COUNT [MODULE]]   (default 5)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Read through the GOT on every call: what the program's malloc is now. */
__attribute__((noinline)) static void *malloc_now(void)
{
	void *volatile fn = (void *)malloc;
	return fn;
}

int main(int argc, char **argv)
{
	int count = argc > 1 ? atoi(argv[1]) : 5;
	const char *module = argc > 2 ? argv[2] : NULL;
	setvbuf(stdout, NULL, _IONBF, 0);
	char *kept = malloc(777);
	printf("kept %p 0 %p\n", (void *)kept, malloc_now());
	char buf[256];
	int lines = 0, start = 1;
	for (;;) {
		/* read(2) itself, not stdio: the process sits in this system call. */
		ssize_t n = read(0, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (start && (buf[i] == 'f' || buf[i] == 'F')) {
				pid_t pid = buf[i] == 'f' ? fork() : _Fork();
				if (pid == 0) {
					for (int j = 0; j < 10; j++) {
						volatile char *p = malloc(999);
						p[0] = (char)j;
						free((void *)p);
					}
					_exit(0);
				}
				int st;
				if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
				    WEXITSTATUS(st))
					return 5;
			}
			start = buf[i] == '\n';
			if (buf[i] != '\n')
				continue;
			free(kept);
			for (int j = 0; j < count; j++) {
				volatile char *p = malloc(12345);
				p[0] = (char)j;
				free((void *)p);
			}
			kept = malloc(777);
			if (module) {
				void *h = dlopen(module, RTLD_NOW);
				int (*work)(int) =
				    h ? (int (*)(int))dlsym(h, "attachdyn_work") : NULL;
				if (!work || work(3) != 3) {
					printf("cannot use '%s': %s\n", module, dlerror());
					return 4;
				}
				module = NULL;
			}
			printf("kept %p %d %p\n", (void *)kept, ++lines, malloc_now());
		}
	}
	free(kept);
	return 0;
}
