# Allocating signal handlers on an alternate signal stack (SA_ONSTACK) that
# lies above the thread's stack: a handler's event nested in a hook runs
# above the hook's frame, on another stack, and must be told from a guard
# left stale (init.c, guard_stale): counted, never recorded into the
# hook's open record. Every handler event recorded or counted, exactly.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/signal_altstack" 20 20000
expect "exit status" "$RC" 0
{ read -r handled protects; read -r where; } <"$TMP/stdout"
expect "the alternate stack lies above the thread's" "$where" above
got=$(count '^alloc func=malloc .* size=6001$')
prot=$(count '^mprotect func=mprotect .* len=4096 prot=3 ')
re=$(header reentered)
echo "handlers $handled ($protects mprotect), recorded $got malloc and $prot mprotect, counted as re-entries $re"
expect_that "some handlers ran" [ "${handled:-0}" -gt 0 ]
expect_that "some handler events inside a hook" [ "$re" -gt 0 ]
expect "handler events recorded or counted" "$((2 * got + prot + re))" \
	"$((2 * (handled - protects) + protects))"
expect_count '^alloc func=malloc .* size=6002$' 20000
finish
