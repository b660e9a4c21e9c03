#!/usr/bin/env bash
# Runs the whole test suite: installs what is missing, builds, runs ctest.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh test
scripts/build.sh
cd build
ctest --output-on-failure -j2 --timeout 300
