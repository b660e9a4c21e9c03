# A signal handler that leaves the hook it interrupted with siglongjmp: the
# thread's guard, left set, is found stale at its next event and the thread
# records again (src/preload/README.md, "Limits that remain"). Every event
# after the jumps is recorded; each mprotect that returned is recorded or,
# when the handler jumped out of its hook after the call, counted.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/signal_jump" 20 20000 1000
expect "exit status" "$RC" 0
read -r done jumps <"$TMP/stdout"
rec=$(count '^mprotect func=mprotect .* len=4096 prot=3 ')
re=$(header reentered)
echo "mprotect: $done returned, $jumps jumps out of a hook; $rec recorded, $re counted"
expect_that "some jumps out of a hook" [ "$jumps" -gt 0 ]
# Today's main recorded none of these: every event after the first jump
# was counted as a handler's.
expect_count '^alloc func=malloc .* size=7001$' 1000
expect_count '^free func=free ' 1000
expect_that "mprotect recorded or counted: at least those that returned" \
	[ $((rec + re)) -ge "$done" ]
expect_that "mprotect recorded or counted: at most those begun" \
	[ $((rec + re)) -le $((done + jumps)) ]
finish
