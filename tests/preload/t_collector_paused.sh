# A collector that stops for three seconds (SIGSTOP, a debugger, a loaded
# machine) is late, not dead: the writers wait the whole time (lossless)
# and every event is there after it goes on. It died after two seconds
# without a heartbeat before.
. "$(dirname "$0")/lib.sh"
t0=$(date +%s%N)
# The pause starts with the program: at 100 ms in, a quiet machine and
# today's recorder had already finished (205 ms in all, nothing waited).
record -P 0:3000 -r 8 -s 65536 -- "$PROGS/flood" 4 50000
t1=$(date +%s%N)
expect "exit status" "$RC" 0
expect "output" "$(cat "$TMP/stdout")" 200000
expect_count '^alloc func=malloc .* size=12001$' 200000
expect_count '^free func=free ' 200000
expect_count '^thread_exit' 4
ms=$(((t1 - t0) / 1000000))
echo "the program took $ms ms"
expect_that "the writers waited through the pause" [ "$ms" -ge 3000 ]
finish
