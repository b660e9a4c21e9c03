# Fail open, only when the session is really over: a collector whose
# process died and a STOPPING session both make the recorder pass through;
# the program ends.
. "$(dirname "$0")/lib.sh"
t0=$(date +%s%N)
record_any -x 300 -r 4 -s 4096 -- "$PROGS/flood" 1 300000
t1=$(date +%s%N)
expect "dead collector: exit status" "$RC" 0
expect "dead collector: program finished" "$(cat "$TMP/stdout")" 300000
got=$(count '^alloc func=malloc .* size=12001$')
echo "dead collector: $got of 300000 recorded"
expect_that "dead collector: recorded some" [ "$got" -gt 0 ]
expect_that "dead collector: stopped recording" [ "$got" -lt 300000 ]
# Death is noticed once the heartbeat is 250 ms old: well before the old
# two-second rule, and not from the heartbeat alone. Measured up to the
# recorder's first untraced event, not the program's end: a loaded machine
# stretched the rest of the run past any bound (qa).
ms=$(((t1 - t0) / 1000000))
echo "dead collector: the program took $ms ms"
expect_that "dead collector: ran past the death at 300 ms" [ "$ms" -ge 300 ]
# The rule counts from the last heartbeat, which a loaded machine may have
# written well before the death (199 ms after the death once at a load of
# 20): at least 250 ms after it, and within 1.5 s of the death.
line=$(sed -nE 's/^ringdump: pid [0-9]+ untraced from (-?[0-9]+) ms after the collector died, (-?[0-9]+) ms after its last heartbeat$/\1 \2/p' "$TMP/stderr")
gave=${line% *}
beat=${line#* }
echo "dead collector: untraced from $gave ms after the death, $beat ms after the last heartbeat"
expect_that "dead collector: ringdump says when it gave up" [ -n "$line" ]
expect_that "dead collector: gave up after the death" [ "${gave:-x}" -ge 0 ]
expect_that "dead collector: gave up within 1.5 s of the death" [ "${gave:-x}" -le 1500 ]
expect_that "dead collector: not before 250 ms without a heartbeat" [ "${beat:-x}" -ge 249 ]

record -S 300 -- "$PROGS/flood" 1 20000 50000
expect "stopping: exit status" "$RC" 0
got=$(count '^alloc func=malloc .* size=12001$')
echo "stopping: $got of 20000 recorded"
expect_that "stopping: recorded some" [ "$got" -gt 0 ]
expect_that "stopping: not all" [ "$got" -lt 20000 ]
finish
