# Every malloc-family hook: exact counts, sizes, functions and failures.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/malloc_family"
expect "exit status" "$RC" 0
expect_count '^alloc func=malloc .* size=10(0[1-9]|10)$' 10
expect "malloc bytes" "$(sum size '^alloc func=malloc .* size=10(0[1-9]|10)$')" 10055
expect_count '^alloc func=calloc .* size=333$' 5
expect_count '^alloc func=malloc .* size=2001$' 1
expect_count '^realloc func=realloc .* old=0x[1-9a-f][0-9a-f]* new=0x[1-9a-f][0-9a-f]* size=2002 failed=0$' 1
expect_count '^realloc func=realloc .* old=0x0 new=0x[1-9a-f][0-9a-f]* size=2003 failed=0$' 1
expect_count '^realloc func=realloc .* new=0x0 size=9223372036854775807 failed=1$' 1
expect_count '^realloc func=realloc .* old=0x[1-9a-f][0-9a-f]* new=0x0 size=0 failed=0$' 1
expect_count '^realloc func=reallocarray .* size=2107 failed=0$' 1
expect_count '^alloc_fail func=malloc .* addr=0x0 size=4611686018427387903$' 1
expect_count '^alloc func=posix_memalign .* size=3001$' 2
expect_count '^alloc func=aligned_alloc .* size=3008$' 1
expect_count '^alloc func=memalign .* size=3003$' 1
expect_count '^alloc func=valloc .* size=3004$' 1
expect_count '^alloc func=pvalloc .* size=3005$' 1
expect_count '^free func=free .* addr=0x0$' 0
# Every block the program allocated is freed exactly once, after its allocation.
expect "unmatched blocks" "$(awk '
	/^(alloc|realloc) / && / size=(10(0[1-9]|10)|333|2001|2002|2003|2107|300[1-8])( |$)/ {
		match($0, / (addr|new)=0x[0-9a-f]+/); a = substr($0, RSTART + 1, RLENGTH - 1); sub(/^[a-z]+=/, "", a); live[a] = 1; n++ }
	/^realloc / { match($0, / old=0x[0-9a-f]+/); o = substr($0, RSTART + 5, RLENGTH - 5); if (o in live) delete live[o] }
	/^free / { match($0, / addr=0x[0-9a-f]+/); a = substr($0, RSTART + 6, RLENGTH - 6); if (a in live) delete live[a] }
	END { c = 0; for (k in live) c++; print c " of " n }' "$OUT")" "0 of 25"
# Stacks: on by default for allocations, off for free.
expect_count '^alloc func=malloc .* stack=0 .*size=1001$' 0
expect_count '^free .* stack=[1-9]' 0
finish
