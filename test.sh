#!/usr/bin/env bash
# Runs the whole test suite: installs what is missing, builds, runs ctest.
#   ./test.sh              the normal build, in build/
#   ./test.sh --sanitize   the tools under ASan and UBSan, in build-san/
#                          (the recorder stays unsanitized; the stress
#                          tests run in the normal build only: docs/testing.md)
# Fuzz tests (label fuzz) exist only in a fuzz build and never run here.
set -euo pipefail
cd "$(dirname "$0")"
dir=build
args=
skip=fuzz
if [ "${1:-}" = --sanitize ]; then
  dir=build-san
  args=-DHT_SANITIZE=ON
  skip='fuzz|stress' # minutes of huge traces under ASan: the normal run has them
fi
scripts/deps.sh test
HT_BUILD_DIR=$dir HT_CMAKE_ARGS="$args ${HT_CMAKE_ARGS:-}" scripts/build.sh
cd "$dir"
ctest --output-on-failure -j2 --timeout 300 -LE "$skip"
