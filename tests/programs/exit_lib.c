/*
 * exit_lib.c - libhtexit.so, a library exit_order links against (DT_NEEDED):
 * its constructor runs before the recorder's and registers 40 exit handlers
 * with on_exit (not tied to the library, so they run from the list of exit
 * handlers itself, after every handler registered later), each freeing a
 * block of 1111 bytes. 40 handlers are more than glibc's first static block
 * of 32 holds, so glibc also allocates a block of handlers and frees it
 * while it runs them.
 */
#include <stdlib.h>

#define EXIT_LIB_BLOCKS 40

static void drop(int status, void *p)
{
	(void)status;
	free(p);
}

__attribute__((constructor)) static void exit_lib_init(void)
{
	for (int i = 0; i < EXIT_LIB_BLOCKS; i++) {
		void *p = malloc(1111);
		if (!p || on_exit(drop, p) != 0)
			abort();
	}
}

/* Called by exit_order so that the link keeps the library. */
__attribute__((visibility("default"))) int exit_lib_blocks(void)
{
	return EXIT_LIB_BLOCKS;
}
