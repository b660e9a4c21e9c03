#!/usr/bin/env bash
# Runs one fuzz target for SECONDS on a copy of its seed corpus (new inputs go
# to the copy, not the tree); a crash, leak or sanitizer report fails, and the
# input that caused it is kept in ./fuzz-artifacts/ of the working directory.
#   run.sh FUZZER SEED_DIR SECONDS
set -euo pipefail
fuzzer=$1 seeds=$2 secs=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/ht-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p fuzz-artifacts
# -close_fd_mask=1: the parsers print usage text; only stderr (reports) stays.
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=1 \
  -artifact_prefix="$PWD/fuzz-artifacts/$(basename "$fuzzer")-" "$work" "$seeds"
