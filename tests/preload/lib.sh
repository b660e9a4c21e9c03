# Helpers of the recorder's shell tests: run a program under ringdump and
# assert on the records it printed. Sourced by tests/preload/t_*.sh.
set -u
: "${RINGDUMP:?}" "${RINGDUMP_LIB:?}" "${PROGS:?}"
export RINGDUMP_LIB
# The directory is named after this shell (pid and start time): a test that
# ctest's timeout killed (SIGKILL: no EXIT trap) left its own, removed here
# once its shell is gone.
start_of() { [ -r "/proc/$1/stat" ] && sed -E 's/.*\) //' "/proc/$1/stat" | cut -d' ' -f20; }
for d in "${TMPDIR:-/tmp}"/htpre.*.*.*; do
	[ -O "$d" ] || continue
	owner=${d##*/htpre.}
	pid=${owner%%.*}
	start=${owner#*.}
	start=${start%%.*}
	case $pid in '' | *[!0-9]*) continue ;; esac
	[ "$(start_of "$pid")" = "$start" ] || rm -rf "$d"
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/htpre.$$.$(start_of $$).XXXXXX")
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out.txt
fails=0

# record [ringdump options] -- CMD ARGS: records into $OUT, sets $RC.
record() {
	RC=0
	"$RINGDUMP" -o "$OUT" "$@" >"$TMP/stdout" 2>"$TMP/stderr" || RC=$?
	if ! head -1 "$OUT" | grep -q ' lost=0 rings_exhausted=0 .* bad=0$'; then
		echo "FAIL: ringdump header: $(head -1 "$OUT")"
		fails=$((fails + 1))
	fi
}

# count PATTERN: number of records matching the extended regex.
count() { grep -cE -- "$1" "$OUT" || true; }

# expect WHAT GOT WANT
expect() {
	if [ "$2" != "$3" ]; then
		echo "FAIL: $1: got '$2', want '$3'"
		fails=$((fails + 1))
	else
		echo "ok: $1 = $3"
	fi
}

# expect_that WHAT TEST...: the test command (a [ ... ]) holds; a failure
# shows it with its values, where "$([ ... ] && echo yes)" showed ''.
expect_that() {
	local what=$1
	shift
	if "$@"; then
		echo "ok: $what"
	else
		echo "FAIL: $what: $* is false"
		fails=$((fails + 1))
	fi
}

# expect_count PATTERN WANT
expect_count() { expect "count /$1/" "$(count "$1")" "$2"; }

# sum FIELD PATTERN: sum of FIELD=N over the records matching PATTERN.
sum() {
	grep -E -- "$2" "$OUT" | sed -nE "s/.* $1=([0-9]+).*/\1/p" | awk '{s += $1} END {print s + 0}'
}

finish() {
	if [ "$fails" -ne 0 ]; then
		echo "--- records ($OUT) ---"
		head -200 "$OUT"
		echo "--- stderr ---"
		cat "$TMP/stderr"
		exit 1
	fi
	exit 0
}

# record_any: like record, without asserting that nothing was lost.
record_any() {
	RC=0
	"$RINGDUMP" -o "$OUT" "$@" >"$TMP/stdout" 2>"$TMP/stderr" || RC=$?
}

# header FIELD: a number from ringdump's first line.
header() { head -1 "$OUT" | sed -nE "s/.* $1=([0-9]+).*/\1/p"; }

# field NAME: the value of NAME=... in each line of stdin (faster than sed on
# big outputs).
field() { awk -v k="$1=" '{ for (i = 1; i <= NF; i++) if (index($i, k) == 1) { print substr($i, length(k) + 1); break } }'; }

# verify_counts: the numbers of the recorder's 'stack cache verify:' line in
# the last record's stderr (HEAPTRAIL_STACK_VERIFY=1), printed, as $reused,
# $walked, $differ, $recent, $tree, $own and $room (empty when absent).
verify_counts() {
	local line
	line=$(grep 'stack cache verify:' "$TMP/stderr")
	echo "$line"
	reused=$(echo "$line" | sed -nE 's/.* ([0-9]+) reused.*/\1/p')
	walked=$(echo "$line" | sed -nE 's/.* ([0-9]+) walked.*/\1/p')
	differ=$(echo "$line" | sed -nE 's/.* ([0-9]+) differ.*/\1/p')
	recent=$(echo "$line" | sed -nE 's/.*\(([0-9]+) found among the recent stacks,.*/\1/p')
	tree=$(echo "$line" | sed -nE 's/.* ([0-9]+) in the stack tree\).*/\1/p')
	own=$(echo "$line" | sed -nE 's/.* ([0-9]+) of our frames at most.*/\1/p')
	room=$(echo "$line" | sed -nE 's/.* room for ([0-9]+)$/\1/p')
}
