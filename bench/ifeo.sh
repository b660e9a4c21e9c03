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
starts=2000
iters=5000000

# Seconds (wall) of a command, with the hook preloaded or not.
timed() {
	local pre=$1; shift
	local t0 t1
	t0=$(date +%s.%N)
	if [ -n "$pre" ]; then LD_PRELOAD=$pre "$@"; else "$@"; fi
	t1=$(date +%s.%N)
	echo "$t0 $t1" | awk '{printf "%.6f\n", $2 - $1}'
}
start_loop() {
	local i
	for ((i = 0; i < starts; i++)); do /bin/true; done
}
export -f start_loop
export starts

: > "$tmp/res"
for ((r = 0; r < runs; r++)); do
	# Alternate so that drift on a shared machine hits both alike.
	echo "start none $(timed "" bash -c start_loop)" >> "$tmp/res"
	echo "start hook $(LD_PRELOAD=$hook timed "" bash -c start_loop)" >> "$tmp/res"
	echo "alloc none $(timed "" "$tmp/alloc_loop" $iters)" >> "$tmp/res"
	echo "alloc hook $(timed "$hook" "$tmp/alloc_loop" $iters)" >> "$tmp/res"
done

python3 - "$tmp/res" "$starts" "$iters" "$runs" "$doc" <<'PY'
import os, platform, statistics, subprocess, sys
res, starts, iters, runs, doc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
t = {}
for line in open(res):
    kind, mode, sec = line.split()
    t.setdefault((kind, mode), []).append(float(sec))
med = {k: statistics.median(v) for k, v in t.items()}
spread = {k: (min(v), max(v)) for k, v in t.items()}
s_none = med["start", "none"] / starts * 1e6
s_hook = med["start", "hook"] / starts * 1e6
a_none = med["alloc", "none"]
a_hook = med["alloc", "hook"]
cpu = "unknown CPU"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
lines = [
    "Measured by `bench/ifeo.sh` (median of %d alternating runs; %s, %d cores, load average %.1f"
    " when it ran): a program that is **not** enabled, with the hook loaded and without." % (
        runs, cpu, os.cpu_count(), os.getloadavg()[0]),
    "",
    "| what | without the hook | with the hook | difference |",
    "|---|---:|---:|---:|",
    "| start-up of /bin/true (fork + exec + exit, per start) | %.0f us | %.0f us | %+.0f us (%+.1f%%) |" % (
        s_none, s_hook, s_hook - s_none, (s_hook / s_none - 1) * 100),
    "| alloc_loop, %d malloc/free pairs | %.3f s | %.3f s | %+.1f%% |" % (
        iters, a_none, a_hook, (a_hook / a_none - 1) * 100),
    "",
    "Spread (min..max): start-up %.0f..%.0f us without, %.0f..%.0f us with; alloc_loop %.3f..%.3f s"
    " without, %.3f..%.3f s with." % tuple(
        [x / starts * 1e6 for x in spread["start", "none"]] + [x / starts * 1e6 for x in spread["start", "hook"]] +
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
