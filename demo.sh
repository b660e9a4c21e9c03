#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what is missing, build,
# record examples/memtestapp (time scaled to 3 s) and show its summary and
# the stacks that hold its memory, and write the HTML report.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh build
scripts/build.sh
out=memtestapp.htr
rm -f "$out"
build/bin/heaptrail record -o "$out" -- build/examples/memtestapp --seconds 3
build/bin/heaptrail info "$out"
echo
build/bin/heaptrail analyze "$out" -stacks so -top 3
echo
build/bin/heaptrail table commit "$out" --depth 3
echo
html=$PWD/memtestapp.html
if build/bin/heaptrail report "$out" -o "$html" --force >/dev/null; then
  echo "heaptrail: the HTML report is $html (open it in a browser)"
fi
