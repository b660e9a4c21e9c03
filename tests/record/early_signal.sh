#!/bin/sh
# A SIGTERM sent to `heaptrail record` right after it starts (while it creates
# the session and forks the program) must reach the program: record then exits
# 143, never 0, and leaves no session file and nothing but the trace behind.
# The window is short, so the signal is sent at a few delays, many times.
set -u
heaptrail=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
uid=$(id -u)
# Where a session's file may go (ht__session_default_dir); named after record's pid.
session_dirs="${XDG_RUNTIME_DIR:-/nonexistent}/heaptrail /run/heaptrail /tmp/heaptrail-$uid /dev/shm/heaptrail-$uid"
fail=0
for delay in 0 0.001 0.002 0.005 0.01 0.02; do
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
    for d in $session_dirs; do
      for f in "$d"/session-"$pid"-*; do
        if [ -e "$f" ]; then
          echo "SIGTERM at ${delay}s left the session file $f"
          rm -f "$f"
          fail=1
        fi
      done
    done
    left=$(ls -A "$dir" | grep -v '^x\.htr$')
    if [ -n "$left" ]; then
      echo "SIGTERM at ${delay}s left in the output directory: $left"
      fail=1
    fi
    rm -f "$dir"/* "$dir"/.[!.]*
  done
done
exit $fail
