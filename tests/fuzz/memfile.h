/*
 * memfile.h - the fuzz targets' way to hand bytes to an API that opens a path:
 * one memfd per process, rewritten for every input, named /proc/self/fd/N.
 */
#ifndef HT_TESTS_FUZZ_MEMFILE_H
#define HT_TESTS_FUZZ_MEMFILE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* The path of a file holding exactly data[0..size). */
static const char *memfile(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("heaptrail-fuzz", 0);
		if (fd < 0) {
			perror("memfd_create");
			abort();
		}
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) < 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
		perror("memfd write");
		abort();
	}
	return path;
}

#endif
