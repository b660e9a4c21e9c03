#!/usr/bin/env bash
# Configures and builds heaptrail into build/ (or $HT_BUILD_DIR), warnings as
# errors (HT_CMAKE_ARGS=-DHT_WERROR=OFF to relax; more -D options there). The compiler's
# output goes to BUILD/build.log and is shown only when the build fails.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${HT_BUILD_DIR:-build}
mkdir -p "$dir"
log="$dir/build.log"
echo "heaptrail: building into $dir/ (log: $log)" >&2
if ! { cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHT_WERROR=ON ${HT_CMAKE_ARGS:-} &&
       cmake --build "$dir" -j"$(nproc)" -- --no-print-directory; } >"$log" 2>&1; then
  tail -n 60 "$log" >&2
  echo "heaptrail: build failed; the whole log is $log" >&2
  exit 1
fi
grep -E "warning:" "$log" >&2 || true
