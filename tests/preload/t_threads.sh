# Four threads allocating at once: exact totals, one ring and tid per thread,
# THREAD_START/NAME/EXIT for each.
. "$(dirname "$0")/lib.sh"
record -r 8 -s 65536 -- "$PROGS/threads"
expect "exit status" "$RC" 0
for i in 0 1 2 3; do
	expect_count "^alloc func=malloc .* size=500$i$" 20000
	expect "threads allocating $((5000 + i))" \
		"$(grep -E "^alloc .* size=500$i$" "$OUT" | field tid | sort -u | wc -l)" 1
	expect_count "^thread_name .* name=worker$i$" 1
done
# every 500x block is freed, by the thread that allocated it, before reuse
expect "frees of worker blocks" "$(awk '
	/^alloc .* size=500[0-3]$/ { match($0, / addr=0x[0-9a-f]+/); live[substr($0, RSTART, RLENGTH)] = 1 }
	/^free / { match($0, / addr=0x[0-9a-f]+/); a = substr($0, RSTART, RLENGTH); if (a in live) { n++; delete live[a] } }
	END { print n + 0 }' "$OUT")" 80000
expect "worker tids" "$(grep -E '^alloc .* size=500[0-3]$' "$OUT" | field tid | sort -u | wc -l)" 4
# main renamed worker 0: the record is in main's ring, naming worker 0's tid
w0=$(grep -E '^alloc .* size=5000$' "$OUT" | head -1 | field tid)
main=$(sed -nE 's/^process_start .* p.pid=([0-9]+) .*/\1/p' "$OUT")
expect_count "^thread_name .* tid=$main .* t.tid=$w0 name=renamed0$" 1
# the four workers share one call stack: one id, defined once
ids=$(grep -E '^alloc .* size=500[0-3]$' "$OUT" | field stack | sort -u)
expect "worker stack ids" "$(echo "$ids" | wc -w)" 1
expect_count "^stack .* stack=$ids " 1
expect_count "^thread_start " 5
expect_count "^thread_exit " 4
finish
