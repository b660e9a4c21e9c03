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
finish
