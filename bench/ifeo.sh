#!/usr/bin/env bash
# What the IFEO loader hook (libheaptrail-ifeo.so) costs a program that is
# NOT enabled: start-up time of /bin/true and an allocation loop
# (bench/alloc_loop.c), each with and without the hook, and rewrites the
# "IFEO loader hook" section of docs/performance.md (between its markers).
# The hook is loaded with LD_PRELOAD, which the loader treats as it treats
# /etc/ld.so.preload (same search, same constructor), so the machine's
# /etc/ld.so.preload is never touched. Usage: bench/ifeo.sh [--runs N] [--no-doc]
# Uses $HT_BUILD_DIR (default build) for heaptrail, building it first.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=7
doc=1
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--no-doc) doc=0; shift ;;
	*) echo "usage: bench/ifeo.sh [--runs N] [--no-doc]" >&2; exit 2 ;;
	esac
done
build=${HT_BUILD_DIR:-build}
scripts/build.sh
hook=$(realpath "$build/lib/libheaptrail-ifeo.so")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -o "$tmp/alloc_loop" bench/alloc_loop.c -lpthread
# Start-up: a launcher spawns /bin/true in batches, alternating with and
# without the hook in its environment, and prints the median per start of
# each (a shell loop would add its own noise).
cat > "$tmp/spawn.c" <<'C'
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
extern char **environ;
static double cpu(void)
{
	struct rusage u;
	getrusage(RUSAGE_CHILDREN, &u);
	return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv)
{
	int batches = atoi(argv[2]), per = atoi(argv[3]);
	char pre[4200], pre_empty[4200];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", argv[1]);
	snprintf(pre_empty, sizeof(pre_empty), "LD_PRELOAD=%s", argv[4]);
	char *env_hook[] = { pre, NULL }, *env_none[] = { NULL }, *env_empty[] = { pre_empty, NULL };
	char **envs[3] = { env_none, env_hook, env_empty };
	const char *names[3] = { "none", "hook", "empty" };
	char *args[] = { "/bin/true", NULL };
	double *t[3], *c[3];
	for (int m = 0; m < 3; m++) {
		t[m] = calloc(batches, sizeof(double));
		c[m] = calloc(batches, sizeof(double));
	}
	for (int b = 0; b < batches; b++)
		for (int mode = 0; mode < 3; mode++) {
			double t0 = now(), c0 = cpu();
			for (int i = 0; i < per; i++) {
				pid_t pid;
				if (posix_spawn(&pid, "/bin/true", NULL, NULL, args, envs[mode]))
					return 1;
				waitpid(pid, NULL, 0);
			}
			t[mode][b] = (now() - t0) / per;
			c[mode][b] = (cpu() - c0) / per;
		}
	for (int mode = 0; mode < 3; mode++) {
		qsort(t[mode], batches, sizeof(double), cmp);
		qsort(c[mode], batches, sizeof(double), cmp);
		printf("start %s %.9f %.9f %.9f\n", names[mode], t[mode][batches / 2], t[mode][0],
		       t[mode][batches - 1]);
		printf("startcpu %s %.9f %.9f %.9f\n", names[mode], c[mode][batches / 2], c[mode][0],
		       c[mode][batches - 1]);
	}
	return 0;
}
C
gcc -O2 -o "$tmp/spawn" "$tmp/spawn.c"
# The price of any preloaded library, for comparison: one with nothing in it.
echo 'int ht_bench_empty;' > "$tmp/empty.c"
gcc -O2 -shared -fPIC -Wl,-z,noseparate-code -o "$tmp/libempty.so" "$tmp/empty.c"
iters=5000000
: > "$tmp/start"

: > "$tmp/res"
"$tmp/spawn" "$hook" $((runs * 6)) 200 "$tmp/libempty.so" >> "$tmp/start"
python3 - "$tmp/alloc_loop" "$hook" "$iters" "$runs" >> "$tmp/res" <<'PY'
import os, resource, subprocess, sys, time
prog, hook, iters, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime
for r in range(runs):
    # Alternate so that drift on a shared machine hits both alike.
    for mode in ("none", "hook"):
        env = dict(os.environ)
        if mode == "hook":
            env["LD_PRELOAD"] = hook
        t0, c0 = time.monotonic(), cpu()
        subprocess.run([prog, iters], env=env, stdout=subprocess.DEVNULL, check=True)
        print("alloc %s %.6f" % (mode, time.monotonic() - t0))
        print("alloccpu %s %.6f" % (mode, cpu() - c0))
PY

python3 - "$tmp/res" "$tmp/start" "$iters" "$runs" "$doc" <<'PY'
import os, platform, statistics, subprocess, sys
res, start, iters, runs, doc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
t = {}
for line in open(res):
    kind, mode, sec = line.split()
    t.setdefault((kind, mode), []).append(float(sec))
med = {k: statistics.median(v) for k, v in t.items()}
spread = {k: (min(v), max(v)) for k, v in t.items()}
for line in open(start):
    kind, mode, m, lo, hi = line.split()
    med[kind, mode] = float(m)
    spread[kind, mode] = (float(lo), float(hi))
batches = runs * 6
s_none = med["start", "none"] * 1e6
s_hook = med["start", "hook"] * 1e6
a_none = med["alloc", "none"]
a_hook = med["alloc", "hook"]
sc_none = med["startcpu", "none"] * 1e6
sc_hook = med["startcpu", "hook"] * 1e6
ac_none = med["alloccpu", "none"]
ac_hook = med["alloccpu", "hook"]
cpu = "unknown CPU"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
lines = [
    "Measured by `bench/ifeo.sh` (%s, %d cores, load average %.1f when it ran): a program that is"
    " **not** enabled, with the hook loaded and without. Start-up: median per start over %d"
    " alternating batches of 200 `posix_spawn` + `waitpid` of /bin/true; alloc_loop: median of %d"
    " alternating runs." % (cpu, os.cpu_count(), os.getloadavg()[0], batches, runs),
    "",
    "| what | without the hook | with the hook | difference |",
    "|---|---:|---:|---:|",
    "| start-up of /bin/true, wall time per start | %.0f us | %.0f us | %+.0f us (%+.1f%%) |" % (
        s_none, s_hook, s_hook - s_none, (s_hook / s_none - 1) * 100),
    "| start-up of /bin/true, CPU time of the program per start | %.0f us | %.0f us | %+.0f us |" % (
        sc_none, sc_hook, sc_hook - sc_none),
    "| the same with an empty preloaded library instead of the hook | %.0f us | %.0f us | %+.0f us |" % (
        sc_none, med["startcpu", "empty"] * 1e6, med["startcpu", "empty"] * 1e6 - sc_none),
    "| alloc_loop, %s malloc/free pairs, wall time | %.3f s | %.3f s | %+.1f%% |" % (
        iters, a_none, a_hook, (a_hook / a_none - 1) * 100),
    "| alloc_loop, CPU time | %.3f s | %.3f s | %+.1f%% |" % (
        ac_none, ac_hook, (ac_hook / ac_none - 1) * 100),
    "",
    "Spread (min..max): start-up %.0f..%.0f us without, %.0f..%.0f us with; alloc_loop %.3f..%.3f s"
    " without, %.3f..%.3f s with." % tuple(
        [x * 1e6 for x in spread["start", "none"]] + [x * 1e6 for x in spread["start", "hook"]] +
        list(spread["alloc", "none"]) + list(spread["alloc", "hook"])),
]
text = "\n".join(lines)
print(text)
if doc:
    path = "docs/performance.md"
    cur = open(path).read()
    begin, end = "<!-- ifeo-bench:begin -->", "<!-- ifeo-bench:end -->"
    head, rest = cur.split(begin, 1)
    _, tail = rest.split(end, 1)
    open(path, "w").write(head + begin + "\n" + text + "\n" + end + tail)
PY
