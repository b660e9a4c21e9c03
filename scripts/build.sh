#!/usr/bin/env bash
# Configures and builds heaptrail into build/ (or $HT_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${HT_BUILD_DIR:-build}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${HT_CMAKE_ARGS:-} >/dev/null
cmake --build "$dir" -j"$(nproc)" -- --no-print-directory >&2
