# Fail open: a hung collector (no heartbeat for 2 s while a ring is full) and
# a STOPPING session both make the recorder pass through; the program ends.
. "$(dirname "$0")/lib.sh"
t0=$(date +%s)
record_any -x 200 -r 4 -s 4096 -- "$PROGS/flood" 1 300000
t1=$(date +%s)
expect "hung collector: exit status" "$RC" 0
expect "hung collector: program finished" "$(cat "$TMP/stdout")" 300000
got=$(count '^alloc func=malloc .* size=12001$')
expect "hung collector: stopped recording" "$([ "$got" -lt 300000 ] && echo yes)" yes
expect "hung collector: gave up within 2-15 s" "$([ $((t1 - t0)) -ge 2 ] && [ $((t1 - t0)) -le 15 ] && echo yes)" yes

record -S 300 -- "$PROGS/flood" 1 20000 50000
expect "stopping: exit status" "$RC" 0
got=$(count '^alloc func=malloc .* size=12001$')
echo "stopping: $got of 20000 recorded"
expect "stopping: recorded some, not all" "$([ "$got" -gt 0 ] && [ "$got" -lt 20000 ] && echo yes)" yes
finish
