# An instance that starts while no ring is free: its events wait for one,
# are then counted in rings_exhausted, and its PROCESS_START comes as soon as
# one of its threads gets a ring, before that thread's events.
. "$(dirname "$0")/lib.sh"
record_any -r 2 -- "$PROGS/late_ring"
expect "exit status" "$RC" 0
expect_that "some events found no ring" [ "$(header rings_exhausted)" -gt 0 ]
child=$(grep -E '^alloc .* size=15003$' "$OUT" | field pid)
expect "child allocation after the wait" "$(echo "$child" | wc -w)" 1
expect_count '^alloc .* size=15002$' 0
expect_count "^process_start .* p.pid=$child .* flags=F " 1
expect "order in the child's ring" "$(grep -E "^[a-z_]+ .* pid=$child " "$OUT" | awk '{print $1}' | head -3 | tr '\n' ' ')" "process_start thread_start module_load "
finish
