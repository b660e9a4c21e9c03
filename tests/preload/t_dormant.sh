# Fail open: with no session, a missing or a foreign session file, the
# preloaded recorder stays dormant and the program runs as usual.
. "$(dirname "$0")/lib.sh"
run() { LD_PRELOAD="$RINGDUMP_LIB" "$@" "$PROGS/malloc_family" >/dev/null 2>&1; echo $?; }
expect "no HEAPTRAIL_SESSION" "$(env -u HEAPTRAIL_SESSION bash -c 'LD_PRELOAD="$0" "$1"; echo $?' "$RINGDUMP_LIB" "$PROGS/malloc_family" 2>&1)" 0
expect "missing session file" "$(HEAPTRAIL_SESSION=$TMP/nope run)" 0
head -c 1048576 /dev/urandom >"$TMP/garbage"
before=$(md5sum <"$TMP/garbage")
expect "foreign session file" "$(HEAPTRAIL_SESSION=$TMP/garbage run)" 0
expect "foreign file untouched" "$(md5sum <"$TMP/garbage")" "$before"
: >"$TMP/empty"
expect "empty session file" "$(HEAPTRAIL_SESSION=$TMP/empty run)" 0
expect "fork/exec/threads dormant" "$(HEAPTRAIL_SESSION=$TMP/nope LD_PRELOAD="$RINGDUMP_LIB" "$PROGS/fork_exec" >/dev/null 2>&1; echo $?)" 5
# A session of another protocol version, or whose clock the recorder does
# not know (docs/session-protocol.md, "The clock"): no record, never a
# record on a scale the collector would misread.
record -V 4 -- "$PROGS/malloc_family"
expect "older protocol version: exit" "$RC" 0
expect_count '^(alloc|realloc|free|process_start) ' 0
record -C 2 -- "$PROGS/malloc_family"
expect "unknown clock: exit" "$RC" 0
expect_count '^(alloc|realloc|free|process_start) ' 0
record -- "$PROGS/malloc_family"
expect_that "the same session with a known clock records" [ "$(count '^alloc ')" -gt 0 ]
finish
