#!/bin/sh
# A SIGTERM sent to `heaptrail record` right after it starts (while it forks the
# program) must reach the program: record then exits 143, never 0. The window
# is short, so the signal is sent at a few delays, many times.
set -u
heaptrail=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
for delay in 0 0.002 0.005 0.01 0.02; do
  for i in 1 2 3 4; do
    "$heaptrail" record -q --force -o "$dir/x.htr" -- sleep 5 &
    pid=$!
    sleep "$delay"
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    if [ "$rc" -ne 143 ]; then
      echo "record exited $rc after SIGTERM at ${delay}s (want 143)"
      fail=1
    fi
  done
done
exit $fail
