# The walk's room for the recorder's own frames (HT_OWN_FRAMES, stack.c):
# allocations by every allocating function at the bottom of stacks 110 to
# 169 frames deep, each one a walk, compared with libunwind's under
# HEAPTRAIL_STACK_VERIFY=1. A libunwind walk that begins with more of our
# frames than its room cuts a stack deeper than the 128 frames kept short
# of them, which the compare shows only on such stacks; the verify line
# also says how many of ours began the deepest-reaching walk. Session 25
# added one (errno kept in a wrapper around ht__stack_capture, whose tail
# calls then became calls) and cut 33 of CPython's deepest walks, with
# room for 8 and realloc's 8 of ours: the room keeps a margin of 8 over
# what we use, and one frame more fails here first.
. "$(dirname "$0")/lib.sh"
export HEAPTRAIL_STACK_VERIFY=1
record -- "$PROGS/stack_room"
expect "exit status" "$RC" 0
verify_counts
expect "stacks that differ from libunwind's" "$differ" 0
# 4 rounds x 60 depths x 8 functions, each verified with a libunwind walk
expect_that "stacks compared (at least 1920)" [ $((${walked:-0} + ${reused:-0})) -ge 1920 ]
expect_that "our frames at a walk's start (realloc's, 8 since session 25) leave a margin of 8 in its room" \
	[ "${own:-99}" -le $((${room:-0} - 8)) ]
# in the program's order (round, depth 110 + d, 8 functions), a stack of
# 116 + d frames (the recursion, bottom(), main and libc's three), cut at
# the 128 innermost, never fewer
expect "deep allocations whose stack is not min(128, 116 + d) frames" \
	"$(awk '/^stack / { match($0, / stack=[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7); match($0, / nframes=[0-9]+/); n[s] = substr($0, RSTART + 9, RLENGTH - 9) }
		/^(alloc|realloc) .* size=70(0[1-8]|40)( failed=0)?$/ { match($0, / stack=[0-9]+/); d = int(i / 8) % 60; i++
			if (n[substr($0, RSTART + 7, RLENGTH - 7)] != (116 + d < 128 ? 116 + d : 128)) bad++ }
		END { print bad + 0 }' "$OUT")" 0
expect_count '^alloc func=malloc .* size=7001$' 240
expect_count '^alloc func=calloc .* size=7002$' 240
expect_count '^realloc func=realloc .* size=7003 failed=0$' 240
expect_count '^realloc func=realloc .* old=0x0 .* size=7004 failed=0$' 240
expect_count '^realloc func=reallocarray .* size=7005 failed=0$' 240
expect_count '^alloc func=posix_memalign .* size=7006$' 240
expect_count '^alloc func=aligned_alloc .* size=7040$' 240
expect_count '^alloc func=memalign .* size=7008$' 240
finish
