/*
 * bump_crashes FILE N - adds N to the crashes_unreported count of the session
 * whose shared memory is FILE, as N recorders that found its crash table full
 * would (src/preload/crash.c): a full table cannot be made on demand, this
 * makes the count exact for the sessions test that reads it back.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/protocol.h"

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: bump_crashes FILE N\n");
		return 2;
	}
	int fd = open(argv[1], O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	struct ht__shm_header *h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (h == MAP_FAILED || h->magic != HT_SHM_MAGIC) {
		fprintf(stderr, "%s: not a session's shared memory\n", argv[1]);
		return 1;
	}
	atomic_fetch_add(&h->crashes_unreported, strtoull(argv[2], NULL, 10));
	return 0;
}
