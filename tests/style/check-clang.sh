#!/usr/bin/env bash
# Every C file of src/ through clang -fsyntax-only with the build's warnings
# as errors, so code that only gcc compiles cleanly fails here (the build
# itself uses the default compiler). Usage: check-clang.sh CLANG SOURCE_DIR BUILD_DIR
set -euo pipefail
clang=$1 src=$2 build=$3
cd "$src"
mapfile -t files < <(git ls-files 'src/*.c' 2>/dev/null || find src -name '*.c')
# One clang a core, as style.release (serial, 51 s at a load of 30-80).
one() {
	[ -f "$1" ] || return 0
	# -I build/src/analysis: pprof's generated profile.pb-c.h
	"$clang" -fsyntax-only -std=gnu11 -Wall -Wextra -Wno-unused-parameter \
		-Wno-missing-field-initializers -Werror -DHT_VERSION='"0"' -Iinclude -Isrc \
		-I"$build/src/analysis" "$1"
}
export -f one
export clang build
bad=0
printf '%s\0' "${files[@]}" | xargs -0 -n 1 -P "$(nproc)" bash -c 'one "$1"' one || bad=1
[ "$bad" = 0 ] || { echo "clang warns about the files above (-Wall -Wextra)" >&2; exit 1; }
echo "${#files[@]} files: clang -Wall -Wextra has nothing to say"
