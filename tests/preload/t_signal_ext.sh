# A signal handler's event that interrupts a hook of an allocator's own
# entry points (tcmalloc's operator new and delete) is counted as a
# re-entry, as in the malloc family's hooks; one from the allocator itself
# (its operator new calling into its malloc) is its work, not an event
# (src/preload/README.md, "Limits that remain").
. "$(dirname "$0")/lib.sh"
if [ ! -x "$PROGS/signal_ext" ]; then
	echo "FAIL: $PROGS/signal_ext was not built: install tcmalloc (scripts/deps.sh test)"
	exit 1
fi
record -- "$PROGS/signal_ext" 20 300000
expect "exit status" "$RC" 0
handled=$(cat "$TMP/stdout")
rec=$(count '^mprotect func=mprotect .* len=8192 prot=3 ')
re=$(header reentered)
echo "handlers $handled: recorded $rec, counted as re-entries $re"
expect_that "some handlers ran" [ "${handled:-0}" -gt 0 ]
expect_that "some handler events inside a hook" [ "$re" -gt 0 ]
expect "handler events recorded or counted" "$((rec + re))" "$handled"
expect_count '^alloc func=new .* size=48$' 300000
finish
