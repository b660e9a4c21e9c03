# Allocating signal handlers interrupting hooks: no crash, every loop event
# recorded, handler events recorded unless they interrupted a hook.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/signal_alloc"
expect "exit status" "$RC" 0
expect_count '^alloc func=malloc .* size=6002$' 200000
handled=$(cat "$TMP/stdout")
got=$(count '^alloc func=malloc .* size=6001$')
echo "handlers: $handled, recorded: $got"
expect "some handlers ran" "$([ "$handled" -gt 0 ] && echo yes)" yes
expect "some handler allocs recorded" "$([ "$got" -gt 0 ] && echo yes)" yes
expect "handler allocs <= handlers" "$([ "$got" -le "$handled" ] && echo yes)" yes
expect "handler allocs == handler frees" "$(awk '
	/size=6001$/ { match($0, / addr=0x[0-9a-f]+/); live[substr($0, RSTART, RLENGTH)] = 1; n++ }
	/^free / { match($0, / addr=0x[0-9a-f]+/); a = substr($0, RSTART, RLENGTH); if (a in live) { f++; delete live[a] } }
	END { print (n == f) ? "yes" : n " vs " f }' "$OUT")" yes
finish
