# Without jemalloc, a weak reference to mallocx finds the recorder's hook: it
# works through the standard functions, which record the events.
. "$(dirname "$0")/lib.sh"
expect "native" "$("$PROGS/weak_mallocx")" "no jemalloc API"
record -- "$PROGS/weak_mallocx"
expect "exit status" "$RC" 0
expect "output" "$(cat "$TMP/stdout")" "jemalloc API works"
expect_count '^alloc func=malloc .* size=5001$' 1
expect_count '^realloc func=realloc .* size=5002 failed=0$' 1
expect_count '^alloc func=posix_memalign .* size=5003$' 1
expect_count '^alloc func=posix_memalign .* size=5004$' 1
expect_count '^(alloc|realloc|free) func=(mallocx|rallocx|xallocx|dallocx|sdallocx) ' 0
expect_count '^free func=free ' 3
finish
