# The stack cache and the recorder's own walker give exactly libunwind's
# stacks: with HEAPTRAIL_STACK_VERIFY=1 every stack built from them is also
# unwound by libunwind and compared (recursion, frames without frame
# pointers, alloca, C++ exceptions, signal handlers on the normal and an
# alternate stack, dlopen/dlclose, threads, deep_stacks' shape), and every
# stack found among a thread's recent stacks or in its stack tree is walked
# as well and must be the same. Nothing lost, counts exact.
. "$(dirname "$0")/lib.sh"
export HEAPTRAIL_STACK_VERIFY=1
record -- "$PROGS/stack_cases" "$PROGS"
expect "exit status" "$RC" 0
verify_counts
expect "stacks that differ from libunwind's" "$differ" 0
expect_that "stacks reusing cached frames (over 20000)" [ "${reused:-0}" -gt 20000 ]
expect_that "stacks walked whole (some)" [ "${walked:-0}" -gt 0 ]
# a capture that finds one of the thread's recent stacks is walked too and
# must give the same stack (counted in differ): mix() alternates call sites
expect_that "stacks found among the recent ones (over 1000)" [ "${recent:-0}" -gt 1000 ]
# and one found in the thread's stack tree: routes() (deep_stacks' shape,
# longjmp over its frames, called back from the library, threads reusing a
# stack)
expect_that "stacks found in the stack tree (over 1000)" [ "${tree:-0}" -gt 1000 ]
# exact counts: a catch every 10th round of mix() (300 + 100 in main, 200 + 250 in threads), 2 dso rounds of 50
expect_count '^alloc func=malloc .* size=9041$' $((30 + 10 + 20 + 25))
expect_count '^alloc func=malloc .* size=9101$' 100
expect_count '^alloc func=malloc .* size=9102$' 100
expect_count '^alloc func=malloc .* size=9103$' 100
# routes(): 8 a round of mix() (850 rounds), 4 a callback (2 x 50), 3 x 1000 in threads
expect_count '^alloc func=malloc .* size=907[12]$' $((850 * 8 + 2 * 50 * 4 + 3 * 1000))
expect "every allocation freed" "$(count '^alloc func=malloc .* size=90[0-9][0-9]$')" \
	"$(awk '/^alloc func=malloc .* size=90[0-9][0-9]$/ { match($0, / addr=0x[0-9a-f]+/); live[substr($0, RSTART, RLENGTH)]++ }
		/^free / { match($0, / addr=0x[0-9a-f]+/); a = substr($0, RSTART, RLENGTH); if (live[a] > 0) { live[a]--; f++ } }
		END { print f + 0 }' "$OUT")"
# the deep recursion is cut at the 128 frames kept, never longer
# The most frames of any stack of the last recording.
deepest() { sed -nE 's/^stack .* nframes=([0-9]+) .*/\1/p' "$OUT" | sort -n | tail -1; }
expect "deepest stack" "$(deepest)" 128
# recent_case MODE PER SIZES WHAT: MODE of stack_cases makes PER stacks a
# round for 100 rounds (allocations whose sizes match SIZES); from the
# second round on, each is found among the thread's recent stacks (WHAT
# names them) and is the same as libunwind's.
recent_case() {
	record -- "$PROGS/stack_cases" "$PROGS" "$1"
	expect "exit status ($1)" "$RC" 0
	verify_counts
	expect "stacks that differ from libunwind's ($1)" "$differ" 0
	expect_that "$4 ($1: 99 rounds of $2)" [ "${recent:-0}" -ge $((99 * $2)) ]
	expect_count "^alloc func=malloc .* size=$3\$" $((100 * $2))
}
# 24 stacks in turn (cycle()), 8 of each depth sharing the hook's slot and
# return address: from the second of 100 rounds on, every one is found among
# the thread's 32 recent stacks (4 before session 23: about none), and the
# same as libunwind's
recent_case cycle 24 9061 "stacks found among the recent ones"
# 12 stacks deeper than the 128 frames kept (deep(): 3 depths x 4 call sites
# at the bottom), cut as libunwind cuts them: from the second of 100 rounds
# on, every one is found among the thread's recent stacks (walked anew each
# time before session 27), and the same as libunwind's
recent_case deep 12 '908[1-4]' "cut stacks found among the recent ones"
expect "deepest stack (deep)" "$(deepest)" 128
finish
