# _exit, _Exit and SIGKILL mid-run: every event before them is in the rings.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/exit_kill" _exit
expect "_exit status" "$RC" 3
expect_count '^alloc func=malloc .* size=10001$' 1000
expect_count '^process_exit .* kind=code value=3$' 1
record -- "$PROGS/exit_kill" Exit
expect "_Exit status" "$RC" 6
expect_count '^alloc func=malloc .* size=10001$' 1000
expect_count '^process_exit .* kind=code value=6$' 1
record -- "$PROGS/exit_kill" kill
expect "killed status" "$RC" 137
expect_count '^alloc func=malloc .* size=10001$' 1000
expect_count '^process_exit ' 0
finish
