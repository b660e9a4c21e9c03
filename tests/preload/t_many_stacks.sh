# 65536 distinct stacks: each gets exactly one STACK record and id, across
# the growth of the recorder's stack table; the ids are session-wide.
. "$(dirname "$0")/lib.sh"
record -s 16777216 -- "$PROGS/many_stacks"
expect "exit status" "$RC" 0
expect_count '^alloc func=malloc .* size=14001$' 65536
expect_count '^alloc func=malloc .* stack=0 .* size=14001$' 0
expect "distinct stack ids of the leaf" \
	"$(grep -E '^alloc .* size=14001$' "$OUT" | field stack | sort -u | wc -l)" 65536
expect "stack records defined once" "$(grep -E '^stack ' "$OUT" | field stack | sort | uniq -d | wc -l)" 0
expect "distinct frame lists" "$(grep -E '^stack .* nframes=2[0-9] ' "$OUT" | field frames | sort -u | wc -l)" 65536
finish
