# A signal handler that forks while it interrupts a hook: the child returns
# into the rest of that hook, which must neither write into the parent's
# ring nor leave holes in its own (src/preload/README.md, "Limits that
# remain"). Each child's 100 malloc/free pairs (50 in the handler, 50 after
# it) are recorded or counted: none lost silently, no ring with a hole.
. "$(dirname "$0")/lib.sh"
k=100
# A ring per child: a child's ring comes free only once the collector has
# drained it after the child's end, which a loaded machine delays past the
# next children's start (16 rings: up to 1,787 events counted in
# rings_exhausted, their children's PROCESS_START too).
record -r 128 -- "$PROGS/signal_fork" 100 $k
expect "exit status" "$RC" 0
expect "children that exited 0" "$(cat "$TMP/stdout")" "$k 0"
expect_count '^process_start ' $((k + 1))
allocs=$(count '^alloc func=malloc .* size=5003$')
frees=$(count '^free func=free ')
re=$(header reentered)
echo "children's events: $allocs malloc and $frees free recorded, $re counted"
expect "children's mallocs recorded == frees recorded" "$allocs" "$frees"
# Each event of a child is recorded or counted; the rest of an interrupted
# hook in a child (at most one per child) is counted too.
expect_that "recorded or counted: at least the children's" \
	[ $((allocs + frees + re)) -ge $((200 * k)) ]
expect_that "recorded or counted: at most one more per child" \
	[ $((allocs + frees + re)) -le $((201 * k)) ]
finish
