/*
 * cmd_snapshot.c - `heaptrail snapshot [NAME]`: asks a session recording in
 * heap snapshot mode (record --snapshot, start --snapshot) to take a
 * snapshot now, through the snap_request counter of its shared file
 * (docs/session-protocol.md, "Heap snapshots"), and waits until it is taken.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/protocol.h"
#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"
#include "session/session.h"

static const char usage_text[] =
    "usage: heaptrail snapshot [NAME]\n"
    "\n"
    "Take a heap snapshot now in session NAME (started with 'heaptrail start NAME\n"
    "--snapshot'), or, without NAME, in the one 'heaptrail record --snapshot'\n"
    "running (SIGUSR2 to that heaptrail does the same). The snapshot goes into the\n"
    "trace; 'heaptrail info' lists them, and analyze, table, diff, export and report\n"
    "take --snapshot N.\n"
    "\n"
    "  -h, --help          show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail snapshot web\n"
    "  heaptrail snapshot && heaptrail snapshot\n";

/* The header of the session file at path, mapped; NULL when it is not a
   live snapshot-mode session (why says so). */
static struct ht__shm_header *map_session(const char *path, char *why, size_t n)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, n, "%s", strerror(errno));
		return NULL;
	}
	void *m = mmap(NULL, HT_SHM_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		snprintf(why, n, "%s", strerror(errno));
		return NULL;
	}
	struct ht__shm_header *h = m;
	const char *bad = NULL;
	if (h->magic != HT_SHM_MAGIC || h->version != HT_PROTO_VERSION)
		bad = "not a session of this heaptrail version";
	else if (!(h->flags & HT_SHM_SNAPSHOT))
		bad = "it was not started in heap snapshot mode (--snapshot)";
	else if (atomic_load(&h->state) != HT_SESSION_RUNNING || h->collector_pid <= 0 ||
		 ht__pid_exited(h->collector_pid))
		bad = "it is not running";
	if (bad) {
		snprintf(why, n, "%s", bad);
		munmap(m, HT_SHM_HEADER_SIZE);
		return NULL;
	}
	return h;
}

/* The one running `record --snapshot` session in dir, into path. */
static int find_record_session(const char *dir, char *path, size_t n)
{
	DIR *d = opendir(dir);
	int found = 0;
	if (!d)
		return 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (strncmp(e->d_name, "session-", 8))
			continue;
		char p[4400], why[256];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		struct ht__shm_header *h = map_session(p, why, sizeof(why));
		if (!h)
			continue;
		if (!found++)
			snprintf(path, n, "%s", p);
		else
			error_msg(
			    "several sessions record in snapshot mode: also %s (collector pid "
			    "%d); send SIGUSR2 to the heaptrail you mean",
			    p, (int)h->collector_pid);
		munmap(h, HT_SHM_HEADER_SIZE);
	}
	closedir(d);
	return found;
}

int cmd_snapshot(int argc, char **argv)
{
	static const struct cli_opt opts[] = {{NULL, 0, 0}};
	struct cli_parser p;
	cli_init(&p, "snapshot", usage_text, opts, argc, argv, false);
	while (cli_next(&p) != -1)
		;
	char **names;
	int nnames = cli_operands(&p, 0, 1, "session name", &names);
	char dir[4096], path[4400], why[256];
	if (ht__session_default_dir(dir, sizeof(dir) - 100, false) < 0)
		die("no session directory: nothing records");
	if (nnames) {
		snprintf(path, sizeof(path), "%s/%s.shm", dir, names[0]);
	} else {
		int found = find_record_session(dir, path, sizeof(path));
		if (!found)
			die("no 'heaptrail record --snapshot' is running; name a session started "
			    "with 'heaptrail start NAME --snapshot'");
		if (found > 1)
			return 1;
	}
	struct ht__shm_header *h = map_session(path, why, sizeof(why));
	if (!h) {
		if (nnames)
			die("cannot take a snapshot in session '%s': %s", names[0], why);
		die("cannot take a snapshot: %s", why);
	}
	uint32_t want = atomic_fetch_add(&h->snap_request, 1) + 1;
	/* The collector looks every tick (10 ms); give it 10 s under load. */
	for (int i = 0; i < 10000; i++) {
		if ((int32_t)(atomic_load(&h->snap_served) - want) >= 0) {
			uint32_t n = atomic_load(&h->snap_last);
			fprintf(stderr, "heaptrail: snapshot %u taken\n", n);
			printf("%u\n", n);
			return 0;
		}
		if (atomic_load(&h->state) != HT_SESSION_RUNNING)
			break;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	die("the session did not take the snapshot (it ended, or its collector is stuck); "
	    "'heaptrail sessions' shows what runs");
}
