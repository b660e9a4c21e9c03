# record -p on a program using jemalloc's API and operators: the GOT entries
# of those names are redirected too (each event once, under its own name),
# and a weak reference to an allocator that is not loaded stays null.
# Usage: t_alloc_ext.sh HEAPTRAIL PROGRAM
set -u
ht=$1 prog=$2
if [ ! -x "$prog" ]; then
	echo "FAIL: $prog was not built: install libjemalloc-dev (scripts/deps.sh test)"
	exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/htatt.XXXXXX")
"$prog" >"$tmp/out" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do grep -q ready "$tmp/out" && break; sleep 0.05; done
rc=0
"$ht" record -p $pid --duration 1s -o "$tmp/t.htr" 2>"$tmp/err" || rc=$?
if [ $rc -ne 0 ] && grep -qi "ptrace\|permission" "$tmp/err"; then
	echo "skip: $(cat "$tmp/err")"
	exit 77
fi
kill -TERM $pid
wait $pid
prc=$?
fails=0
check() { if [ "$2" != "$3" ]; then echo "FAIL: $1: got '$2', want '$3'"; fails=$((fails + 1)); else echo "ok: $1 = $3"; fi; }
check "record status" $rc 0
check "program status" $prc 0
check "program output" "$(tail -1 "$tmp/out")" "weak ok 1"
"$ht" dump "$tmp/t.htr" >"$tmp/dump"
n() { grep -cE -- "$1" "$tmp/dump" || true; }
m=$(n ' alloc mallocx .* size=3001 ')
check "mallocx traced" "$([ "$m" -ge 10 ] && echo yes)" yes
# An iteration cut by the start or the end of the trace is off by one.
for what in ' realloc rallocx .* size=3002 ' ' free dallocx ' ' alloc new\[\] .* size=3003 ' \
	' free delete\[\] ' ' alloc malloc .* size=3004 '; do
	d=$(($(n "$what") - m))
	check "count of /$what/ near mallocx's" "$([ $d -ge -1 ] && [ $d -le 1 ] && echo yes)" yes
done
check "new[] not also malloc" "$(n ' alloc malloc .* size=3003 ')" 0
rm -rf "$tmp"
[ $fails -eq 0 ]
