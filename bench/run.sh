#!/usr/bin/env bash
# Benchmarks heaptrail against the native run and heaptrack on four workloads
# (alloc_loop with 1 and 2 threads, python3 json, jq) and rewrites the results
# section of docs/performance.md. Usage: bench/run.sh [--quick] [--runs N] [--no-doc]
# Uses $HT_BUILD_DIR (default build) for heaptrail, building it first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh bench
scripts/build.sh
exec python3 bench/bench.py "$@"
