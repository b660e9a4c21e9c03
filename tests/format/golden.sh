#!/bin/sh
# golden.sh - golden tests of 'heaptrail info' and 'heaptrail dump' on traces
# written by mktrace: text output compared byte for byte with golden/*.txt,
# JSON fields checked with python3, and the one-line errors of bad input.
# Usage: golden.sh HEAPTRAIL MKTRACE GOLDEN_DIR
# HT_UPDATE_GOLDEN=1 rewrites the golden files from the current output.
set -u
ht=$1 mk=$2 golden=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/htgolden.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 2
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

"$mk" demo demo.htr || { echo "mktrace demo failed" >&2; exit 1; }
"$mk" partial partial.htr || { echo "mktrace partial failed" >&2; exit 1; }

# Text output, exactly.
compare() { # name, command...
	name=$1; shift
	"$@" >"$name" 2>"$name.err"; rc=$?
	[ $rc -eq 0 ] || bad "$name: exit status $rc: $(cat "$name.err")"
	if [ "${HT_UPDATE_GOLDEN:-}" = 1 ]; then
		cp "$name" "$golden/$name"
	elif ! diff -u "$golden/$name" "$name" >&2; then
		bad "$name differs from golden/$name"
	fi
}
compare info.txt "$ht" info demo.htr
compare dump.txt "$ht" dump demo.htr
compare dump-stacks.txt "$ht" dump --stacks demo.htr
compare info-partial.txt "$ht" info partial.htr
compare dump-partial.txt "$ht" dump partial.htr
# Traces of older versions read the same: mktrace's demo as written by
# version 2 (frees count back in the chunk's list of all allocations) and by
# version 3 (six streams, none stored as planes, frees in ADDR), by version 5
# (every chunk decoded on its own, no chunk groups), by version 7 (no
# predicted stacks), by version 8 (definitions in OPS and MISC and again
# in a DEFS table), by version 9 (raw heap address codes in bytes, not
# in 16 bytes), by version 10 (a time delta per TIME varint), by
# version 11 (frees by distance back only), by version 12 (no END
# codes for new blocks) and by version 13 (raw frees from the last
# address only).
for v in 2 3 5 7 8 9 10 11 12 13; do
	"$ht" dump --stacks "$golden/demo-v$v.htr" >v$v.txt 2>v$v.err ||
		bad "dump of a version-$v trace: $(cat v$v.err)"
	if [ "${HT_UPDATE_GOLDEN:-}" != 1 ]; then
		cmp -s v$v.txt "$golden/dump-stacks.txt" ||
			bad "dump of demo-v$v.htr differs from golden/dump-stacks.txt"
		"$ht" info "$golden/demo-v$v.htr" | grep -q "(format $v, complete, symbols)" ||
			bad "info of demo-v$v.htr does not say format $v"
	fi
done
# Options after the file work too, and give the same output.
"$ht" dump demo.htr --stacks | cmp -s - dump-stacks.txt || bad "dump FILE --stacks differs"
grep -q "^heaptrail: warning: 'partial.htr': no footer" dump-partial.txt.err ||
	bad "dump of a partial trace warns: $(cat dump-partial.txt.err)"

# JSON: the documented fields with the values mktrace put in.
"$ht" info --format json demo.htr >info.json || bad "info --format json failed"
"$ht" info --format json partial.htr >info-partial.json || bad "info --format json partial failed"
"$ht" dump --format json --stacks demo.htr >dump.jsonl || bad "dump --format json failed"
"$ht" dump --format json demo.htr >dump-nostacks.jsonl || bad "dump --format json failed"
python3 - <<'PY' || fail=1
import json, sys
ok = True
def eq(got, want, what):
    global ok
    if got != want:
        print("FAIL: %s: got %r, want %r" % (what, got, want), file=sys.stderr)
        ok = False
i = json.load(open("info.json"))
eq(i["command"], ["demo", "--run", "two words"], "command")
eq(i["duration_ns"], 2100, "duration_ns")
eq(i["events_lost"], 5, "events_lost")
eq(i["complete"], True, "complete")
eq(i["truncated"], False, "truncated")
eq(i["hostname"], "buildhost", "hostname")
eq(i["event_count"], 22, "event_count")
ev = i["events"]
for k, v in {"alloc": 5, "realloc": 2, "free": 3, "mmap": 2, "munmap": 1, "mremap": 0,
             "mprotect": 1, "alloc_fail": 0, "process_start": 2, "process_exit": 2, "rss": 1}.items():
    eq(ev[k], v, "events." + k)
want_total = {"alloc_calls": 6, "alloc_bytes": 3560, "peak_bytes": 3060, "peak_time_ns": 1500,
              "leaked_bytes": 1060, "leaked_count": 3, "committed_peak_bytes": 2097152,
              "committed_peak_time_ns": 800, "committed_count": 2, "committed_bytes": 2162688,
              "free_calls": 3, "unknown_frees": 1}
for k, v in want_total.items():
    eq(i["totals"][k], v, "totals." + k)
eq(i["heap"]["peak_bytes"], 3060, "heap.peak_bytes")
eq(i["commit"]["peak_bytes"], 2097152, "commit.peak_bytes")
p = i["processes"]
eq(len(p), 2, "processes")
eq([(x["pid"], x["ppid"], x["exe"], x["exit_code"], x["signal"]) for x in p],
   [(100, 1, "/usr/bin/demo", 0, None), (101, 100, "/usr/bin/demo", 3, None)], "process list")
eq(p[0]["flags"], ["root", "exited"], "flags of the root")
eq(p[1]["argv"], ["demo", "--child"], "argv of the child")
for k, v in {"alloc_calls": 5, "alloc_bytes": 3550, "peak_bytes": 3050, "peak_time_ns": 1300,
             "leaked_bytes": 1050, "leaked_count": 2, "committed_peak_bytes": 2097152}.items():
    eq(p[0][k], v, "processes[0]." + k)
for k, v in {"alloc_calls": 1, "alloc_bytes": 10, "peak_bytes": 10, "leaked_count": 1,
             "committed_peak_bytes": 0}.items():
    eq(p[1][k], v, "processes[1]." + k)
ip = json.load(open("info-partial.json"))
eq(ip["complete"], False, "partial: complete")
eq(ip["truncated"], True, "partial: truncated")
eq(len(ip["warnings"]), 1, "partial: warnings")
eq(ip["duration_ns"], 2000, "partial: duration from the last event")
eq(ip["totals"]["peak_bytes"], 3060, "partial: peak")
eq(ip["command"], ["demo", "--run", "two words"], "partial: command from the early meta")
lines = [json.loads(l) for l in open("dump.jsonl")]
eq(len(lines), 22, "dump lines")
eq([l["type"] for l in lines[:4]], ["process_start", "module_load", "alloc", "alloc"], "dump types")
a = lines[2]
eq((a["ts"], a["pid"], a["tid"], a["func"], a["addr"], a["size"], a["heap"], a["stack"]),
   (100, 100, 100, "malloc", 0x1000, 100, 0, 1), "first alloc")
eq([(f["module"], f["function"], f["file"], f["line"], f["inlined"]) for f in a["frames"]],
   [("libc.so.6", "malloc", None, 0, False), ("demo", "helper(int)", "/src/demo.c", 7, True),
    ("demo", "main", "/src/demo.c", 21, False), ("demo", None, None, 0, False)], "frames")
eq(lines[2]["frames"][3]["rel"], 0x1200, "rel of an unsymbolized frame")
f = lines[8]
eq((f["type"], f["old_addr"], f["addr"], f.get("failed")), ("realloc", 0x3000, 0, True), "failed realloc")
eq(lines[13]["name"], 'worker "1"', "thread name")
eq((lines[17]["type"], lines[17]["exit_code"]), ("process_exit", 3), "child exit")
plain = [json.loads(l) for l in open("dump-nostacks.jsonl")]
eq(any("frames" in l for l in plain), False, "no frames without --stacks")
sys.exit(0 if ok else 1)
PY

# Bad input: one line on stderr, non-zero exit.
printf 'this is not a trace\n%.0s' $(seq 1 20) >text.htr
: >empty.htr
one_error() { # what, expected text, command...
	what=$1 want=$2; shift 2
	"$@" >out 2>err; rc=$?
	[ $rc -ne 0 ] || bad "$what: exit status 0"
	[ "$(wc -l <err)" -eq 1 ] || bad "$what: $(wc -l <err) lines on stderr: $(cat err)"
	grep -q "^heaptrail: error: .*$want" err || bad "$what: message $(cat err) lacks '$want'"
	[ ! -s out ] || bad "$what: output on stdout"
}
for cmd in info dump; do
	one_error "$cmd missing" "cannot open 'missing.htr'" "$ht" $cmd missing.htr
	one_error "$cmd text" "not a heaptrail trace" "$ht" $cmd text.htr
	one_error "$cmd empty" "not a heaptrail trace" "$ht" $cmd empty.htr
	one_error "$cmd no file" "no trace file given" "$ht" $cmd
	one_error "$cmd two files" "too many arguments" "$ht" $cmd demo.htr demo.htr
	one_error "$cmd bad option" "unknown option '--bogus'" "$ht" $cmd --bogus demo.htr
	one_error "$cmd bad format" "unknown format 'xml'" "$ht" $cmd --format xml demo.htr
	one_error "$cmd format without value" "needs a value" "$ht" $cmd demo.htr --format
	"$ht" $cmd --help >help.txt 2>&1 || bad "$cmd --help: exit status"
	grep -q "^usage: heaptrail $cmd FILE" help.txt || bad "$cmd --help: $(head -1 help.txt)"
done
exit $fail
