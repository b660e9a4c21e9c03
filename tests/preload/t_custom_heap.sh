# include/heaptrail/heap.h: HEAP_* records with the pool's handle; without the
# recorder the same program runs and sees itself untraced.
. "$(dirname "$0")/lib.sh"
record -k 0xff -- "$PROGS/custom_heap"
expect "exit status" "$RC" 0
expect "traced" "$(cat "$TMP/stdout")" 1
h=$(sed -nE 's/^heap_create .* handle=(0x[0-9a-f]+) name=toy\\x20pool$/\1/p' "$OUT")
expect "created" "$(echo "$h" | wc -w)" 1
expect_count "^heap_alloc func=heap_api .* stack=[1-9][0-9]* handle=$h .* size=(100|200|300) old=0x0 failed=0$" 3
expect_count "^heap_alloc func=heap_api .* handle=$h addr=0x0 size=99999 old=0x0 failed=1$" 1
expect_count "^heap_realloc func=heap_api .* handle=$h .* size=600 old=0x[0-9a-f]+ failed=0$" 1
expect_count "^heap_free func=heap_api .* stack=[1-9][0-9]* handle=$h .* size=0 " 2
expect_count "^heap_destroy func=heap_api .* stack=[1-9][0-9]* handle=$h$" 1
expect "untraced run" "$("$PROGS/custom_heap")" 0
finish
