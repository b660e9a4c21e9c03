#!/usr/bin/env bash
# Installs the Debian packages heaptrail needs that are missing (as root, with
# apt-get), or says which ones to install when not root.
#   scripts/deps.sh build   what building needs
#   scripts/deps.sh test    building plus what the tests need
#   scripts/deps.sh bench   testing plus what the benchmarks need
#   scripts/deps.sh fuzz    testing plus clang and its libFuzzer runtime
set -euo pipefail
what=${1:-build}
pkgs=(gcc g++ libc6-dev make cmake pkg-config libunwind-dev libdw-dev libelf-dev libzstd-dev
      libprotobuf-c-dev protobuf-c-compiler zlib1g-dev libsqlite3-dev libiberty-dev)
case "$what" in
  build) ;;
  test) pkgs+=(python3 heaptrack procps chromium clang-format clang
    libjemalloc-dev libgoogle-perftools-dev libmimalloc-dev rustc golang-go sqlite3 valgrind) ;;
  bench) pkgs+=(python3 heaptrack procps jq chromium clang) ;; # clang++: a bench workload
  fuzz) pkgs+=(python3 heaptrack procps chromium clang-format clang libclang-rt-dev) ;;
  *) echo "usage: scripts/deps.sh build|test|bench|fuzz" >&2; exit 2 ;;
esac
# tests/install reads the installed man pages with man.
if [ "$what" = test ]; then pkgs+=(man-db); fi
# The report page is bundled with node and npm; machines set up from
# nodesource already have them (their nodejs bundles npm), so Debian's
# packages are asked for only when the commands are missing.
if ! command -v node >/dev/null 2>&1; then pkgs+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then pkgs+=(npm); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "heaptrail: missing Debian packages: ${missing[*]}" >&2
  echo "heaptrail: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "heaptrail: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq "${missing[@]}" >&2
