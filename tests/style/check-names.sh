#!/usr/bin/env bash
# The prefix rule of CONTRIBUTING.md, checked on the built objects and the
# sources: a global symbol named ht_ (one underscore) must be declared in
# include/heaptrail/, and no static function or variable is named ht_ or ht__
# (statics have plain names). Usage: check-names.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
mapfile -t objs < <(find "$build/src" -name '*.o' | sort)
[ ${#objs[@]} -gt 0 ] || { echo "no objects under $build/src: build first" >&2; exit 1; }
declared=$(grep -ohE '\bht_[a-z0-9][a-z0-9_]*\b' "$src"/include/heaptrail/*.h | sort -u)
# A header's static inline function is shared by the files that include it:
# ht__ is its right name, even where the compiler kept a local copy.
inline=$(grep -rhoE '^static inline\b[^=;(]*\bht__[a-z0-9]\w*\s*\(' --include='*.h' "$src"/src |
	grep -oE 'ht__[a-z0-9]\w*' | sort -u)
bad=0
# nm: global (upper-case type) ht_ symbols not in the public headers; local
# (lower-case type) ones with either prefix: a static that kept it.
while read -r obj type name; do
	case $type in
	[A-Z])
		if ! grep -qx -- "$name" <<<"$declared"; then
			echo "global $name in ${obj#"$build"/} is not declared in include/heaptrail: name it ht__ (internal) or make it static" >&2
			bad=1
		fi
		;;
	*)
		grep -qx -- "$name" <<<"$inline" && continue
		echo "static $name in ${obj#"$build"/} keeps the ht_ prefix: statics have plain names" >&2
		bad=1
		;;
	esac
done < <(for o in "${objs[@]}"; do
	nm --defined-only "$o" | awk -v o="$o" '
		$3 ~ /^ht_[a-z0-9]/ && $2 ~ /^[A-Z]$/ { print o, $2, $3 }
		$3 ~ /^ht__?[a-z0-9]/ && $2 ~ /^[tdbr]$/ && $3 !~ /\./ { print o, $2, $3 }'
done)
# Sources: static functions and variables that the compiler inlined or
# folded away do not show in nm.
while IFS= read -r hit; do
	echo "static with the ht_ prefix: $hit (statics have plain names)" >&2
	bad=1
done < <(cd "$src" && grep -rnE '^(__attribute__\(\([a-z_]+\)\) )?static\b[^=;(]*\bht__?[a-z0-9]\w*\s*(\(|\[|=|;|,)' \
	--include='*.c' src || true)
[ "$bad" = 0 ] || exit 1
echo "${#objs[@]} objects: every global ht_ symbol is public, no static has the prefix"
