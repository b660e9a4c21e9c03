/*
 * raw_clone: a child made with syscall(SYS_clone, SIGCHLD, 0, ...), which
 * glibc does not know of (no atfork handlers), allocates 100 x 7001 bytes
 * and exits 3; the parent allocates 100 x 7002 bytes, waits and prints the
 * child's exit status. Then the same with syscall(SYS_fork) (7003, exit 4),
 * and with a clone system call made with inline assembly, which no hook
 * sees (7004, exit 5).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void churn(size_t size)
{
	for (int i = 0; i < 100; i++)
		free(malloc(size));
}

static int child_then_wait(long pid, size_t size, int code)
{
	if (pid < 0)
		return -1;
	if (pid == 0) {
		churn(size);
		exit(code);
	}
	churn(7002);
	int st;
	if (waitpid((pid_t)pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* clone(SIGCHLD) without libc: the child returns here with 0, like fork. */
static long asm_clone(void)
{
	register long r10 __asm__("r10") = 0;
	register long r8 __asm__("r8") = 0;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"((long)SYS_clone), "D"((long)SIGCHLD), "S"(0L), "d"(0L), "r"(r10),
			   "r"(r8)
			 : "rcx", "r11", "memory");
	return ret;
}

int main(void)
{
	int a = child_then_wait(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0), 7001, 3);
	int b = child_then_wait(syscall(SYS_fork), 7003, 4);
	int c = child_then_wait(asm_clone(), 7004, 5);
	printf("%d %d %d\n", a, b, c);
	return 0;
}
