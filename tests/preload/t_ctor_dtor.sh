# Allocations in a constructor before main and in atexit/destructors after it.
# The recorder's on_exit is registered before main, so it runs after the
# program's atexit handlers and destructors: PROCESS_EXIT comes last.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/ctor_dtor"
expect "exit status" "$RC" 4
for size in 9001 9002 9003 9004; do
	expect_count "^alloc func=malloc .* stack=[1-9][0-9]* .* size=$size$" 1
done
expect "order" "$(grep -oE 'size=900[1-4]$|^process_exit.*' "$OUT" | sed -E 's/^process_exit.*/exit/; s/size=//' | tr '\n' ' ')" "9001 9004 9002 9003 exit "
expect_count '^process_exit .* kind=code value=4$' 1
finish
