# A child of a raw clone or fork system call (no atfork handlers ran), made
# through syscall() or with inline assembly (no hook runs), is a process of
# its own: PROCESS_START with its pid, its allocations under its
# pid in its own rings, its exit status; none in its parent's name.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/raw_clone"
expect "exit status" "$RC" 0
expect "output" "$(cat "$TMP/stdout")" "3 4 5"
expect_count '^process_start ' 4
parent=$(grep -m1 '^process_start ' "$OUT" | sed -nE 's/.* pid=([0-9]+) .*/\1/p')
for c in "7001 3" "7003 4" "7004 5"; do
	set -- $c
	expect_count "^alloc func=malloc .* size=$1\$" 100
	pids=$(grep -E "^alloc func=malloc .* size=$1\$" "$OUT" | sed -nE 's/.* pid=([0-9]+) .*/\1/p' | sort -u)
	expect "allocations of size $1 in one process" "$(echo "$pids" | wc -l)" 1
	expect_that "that process is not the parent" [ "$pids" != "$parent" ]
	expect "it started as a fork child of the parent" \
		"$(grep -cE "^process_start .* p.pid=$pids ppid=$parent flags=F " "$OUT")" 1
	expect "its exit status" "$(grep -cE "^process_exit .* p\.pid=$pids kind=code value=$2" "$OUT")" 2
done
expect_count "^alloc func=malloc .* size=7002\$" 300
finish
