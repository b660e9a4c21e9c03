#!/usr/bin/env bash
# stop_leftovers.sh BASE - stops every process that still holds a file
# under BASE open, for tests/lib/runtime.cmake's cleanup: BASE is this
# build's private session directories, so such a process is a test's
# leftover, such as the detached `heaptrail start` daemon of a test killed
# by its timeout. SIGTERM first (a daemon then finishes and removes its
# files), SIGKILL after 10 s. Prints "PID COMMAND" for each one found. A
# file already deleted (a daemon between its unlink and its exit) is not
# counted.
base=${1:?usage: stop_leftovers.sh BASE}
declare -A seen=()
for fd in $(find /proc/[0-9]*/fd -maxdepth 1 -lname "$base/*" ! -lname "* (deleted)" 2>/dev/null); do
  p=${fd#/proc/}
  p=${p%%/*}
  [ "$p" = $$ ] || seen[$p]=1
done
[ ${#seen[@]} -eq 0 ] && exit 0
for p in "${!seen[@]}"; do
  echo "$p $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null)"
  kill -TERM "$p" 2>/dev/null
done
for _ in $(seq 100); do
  left=0
  for p in "${!seen[@]}"; do
    kill -0 "$p" 2>/dev/null && left=1
  done
  [ $left = 0 ] && exit 0
  sleep 0.1
done
for p in "${!seen[@]}"; do
  kill -KILL "$p" 2>/dev/null
done
exit 0
