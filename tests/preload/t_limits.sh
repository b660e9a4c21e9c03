# A program that takes resources from under the recorder: no descriptor
# left (RLIMIT_NOFILE 3) when a fork child starts, and an address-space
# limit (RLIMIT_AS) that leaves a new thread's unwinding stack unmapped.
# It runs as natively and every event is recorded, with its stack; the
# child's PROCESS_START carries its arguments all the same.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/limits"
expect "exit status" "$RC" 0
expect "output" "$(cat "$TMP/stdout")" ok
expect_count '^alloc func=malloc .* size=5005$' 100
expect_count '^alloc func=malloc .* size=5006$' 100
expect "the fork child's arguments" \
	"$(grep -cE '^process_start .* flags=F .* args=.*/limits$' "$OUT")" 1
# Stacks are captured on the thread's own stack when its unwinding stack
# cannot be mapped: the allocations in the thread have one.
expect "the thread's allocations with a stack" \
	"$(grep -E '^alloc func=malloc .* size=5006$' "$OUT" | grep -vc ' stack=0 ')" 100
finish
