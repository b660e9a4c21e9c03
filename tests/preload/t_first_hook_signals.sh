# Signals at the recorder's set-up points: a handler whose events (mmap and
# munmap of 12 KiB) land in the first hook of fresh threads and fresh fork
# children, in their instance's start, and in their exit. Each handler event
# is recorded or counted as a re-entry (reentered): never neither, and no
# crash (src/preload/README.md, "Signals").
. "$(dirname "$0")/lib.sh"
# accounted MODE K
accounted() {
	record -r 64 -- "$PROGS/first_hook_signals" "$1" "$2"
	expect "$1: exit status" "$RC" 0
	handled=$(cat "$TMP/stdout")
	maps=$(count '^mmap func=mmap .* len=12288 ')
	unmaps=$(count '^munmap func=munmap .* len=12288 ')
	re=$(header reentered)
	echo "$1: handlers $handled, recorded $maps mmap and $unmaps munmap, counted as re-entries $re"
	expect_that "$1: some handlers ran" [ "${handled:-0}" -gt 0 ]
	expect "$1: handler events recorded or counted" "$((maps + unmaps + re))" "$((2 * handled))"
	expect "$1: mappings == unmappings recorded" "$maps" "$unmaps"
	expect_count '^alloc func=malloc .* size=7001$' "$((2 * $2))"
}
accounted threads 300
accounted forks 300
finish
