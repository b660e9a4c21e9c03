# vfork children share the parent's memory and thread state until they exec
# or exit: one that calls _exit speaks neither for itself nor for its parent
# (the parent's wait reports it), one that execs is an instance of its own.
# The parent's events before and after are all recorded, in its own ring.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/vfork_kids"
expect "exit status" "$RC" 0
expect "children's exit codes" "$(cat "$TMP/stdout")" "3 4"
expect_count '^alloc func=malloc .* size=5008$' 20
expect_count '^alloc func=malloc .* size=5007$' 10
expect_count '^process_start ' 2
# Exits: the _exit child's and the exec'd child's from the parent's wait,
# the exec'd child's own, the parent's own.
expect_count '^process_exit .* kind=code value=3$' 1
expect "the exec'd child's exits (its own, its parent's wait)" \
	"$(grep -cE '^process_exit .* kind=code value=4$' "$OUT")" 2
expect_count '^process_exit .* kind=code value=0$' 1
finish
