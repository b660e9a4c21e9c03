// exit_order.cpp - a program whose memory is all freed by its exit: static
// objects whose destructors free (2 blocks of 2000, a string of 5000), and
// the exit handlers of libhtexit.so (exit_lib.c), registered before the
// recorder's. exit_order N HOW leaks N blocks of 333 bytes in main and
// ends HOW: return (7), exit (3), _exit (5), exit_group (9, by syscall from
// a thread), thread-exit (11, exit() from a thread), fork (a child that
// _exits 6 and one that exits 4, then return 7), exec (this program again
// with N return), attach (prints "ready", waits for a line on stdin while
// `record -p` attaches, then allocates 5 blocks of 777 that an exit handler
// registered before the attach frees, and returns 7). Every event of a
// process must come before its end.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prog.h"

extern "C" int exit_lib_blocks(void);

struct Holder {
	char *p;
	Holder() : p(static_cast<char *>(malloc(2000))) {}
	~Holder() { free(p); }
};
static Holder h1, h2;
static std::string s(5000, 'x');

static void *kept[5];

static void free_kept(void)
{
	for (void *p : kept)
		free(p);
}

static void *end_in_thread(void *how)
{
	if (!strcmp(static_cast<const char *>(how), "exit_group"))
		syscall(SYS_exit_group, 9);
	exit(11);
}

int main(int argc, char **argv)
{
	PROG_CHECK(argc == 3 && exit_lib_blocks() == 40);
	int leak = atoi(argv[1]);
	const char *how = argv[2];
	PROG_CHECK(atexit(free_kept) == 0);
	if (!strcmp(how, "attach")) {
		printf("ready\n");
		fflush(stdout);
		char line[16];
		PROG_CHECK(fgets(line, sizeof line, stdin));
		for (void *&p : kept)
			p = malloc(777);
	}
	for (int i = 0; i < leak; i++)
		prog_sink(malloc(333));
	if (!strcmp(how, "exit"))
		exit(3);
	if (!strcmp(how, "_exit"))
		_exit(5);
	if (!strcmp(how, "exit_group") || !strcmp(how, "thread-exit")) {
		pthread_t t;
		PROG_CHECK(pthread_create(&t, NULL, end_in_thread, const_cast<char *>(how)) == 0);
		pthread_join(t, NULL);
		return 99;
	}
	if (!strcmp(how, "fork")) {
		for (int code : {6, 4}) {
			pid_t pid = fork();
			PROG_CHECK(pid >= 0);
			if (pid == 0) {
				free(malloc(444));
				if (code == 6)
					_exit(code);
				exit(code);
			}
			int st = 0;
			PROG_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
				   WEXITSTATUS(st) == code);
		}
	}
	if (!strcmp(how, "exec")) {
		execl("/proc/self/exe", argv[0], argv[1], "return", (char *)NULL);
		return 98;
	}
	return 7;
}
