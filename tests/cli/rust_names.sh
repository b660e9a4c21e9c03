# A Rust program's frames: names demangled (v0, and legacy with an older
# rustc's default), none left mangled, and the default cull list takes
# Rust's allocation layers (alloc::alloc, alloc::raw_vec) off the top.
# Usage: rust_names.sh HEAPTRAIL SRC_DIR. Exit 77 when rustc is missing.
set -u
ht=$1 src=$2
if ! command -v rustc >/dev/null; then
	echo "skip: no rustc (scripts/deps.sh test installs it)"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/htrust.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if [ "$2" != "$3" ]; then echo "FAIL: $1: got '$2', want '$3'"; fails=$((fails + 1)); else echo "ok: $1 = $3"; fi; }
for mangling in default v0; do
	flags=(-g -C opt-level=0)
	[ $mangling = v0 ] && flags+=(-C symbol-mangling-version=v0)
	rustc "${flags[@]}" "$src/tests/programs/rust/vecgrow.rs" -o "$tmp/vecgrow" || exit 1
	"$ht" record -q -o "$tmp/$mangling.htr" -- "$tmp/vecgrow" >"$tmp/out" 2>&1
	check "$mangling: program output" "$(tail -1 "$tmp/out")" "1000 7"
	"$ht" dump "$tmp/$mangling.htr" --stacks >"$tmp/dump"
	# The frames of the allocation that made the Box, and of Vec's last growth.
	box=$(grep -A12 ' alloc malloc .* size=4000 ' "$tmp/dump" | grep '^    ')
	grow=$(grep -A12 ' realloc realloc .* size=8192 ' "$tmp/dump" | grep '^    ')
	check "$mangling: Box frame" "$(echo "$box" | grep -c '!vecgrow::make_box ')" 1
	check "$mangling: Vec growth in fill" "$(echo "$grow" | grep -c '!vecgrow::fill ')" 1
	# (how many RawVec frames there are depends on the standard library's version)
	check "$mangling: RawVec frames demangled" "$(echo "$grow" | grep -qE '!<?alloc::raw_vec::' && echo yes)" yes
	check "$mangling: mangled frames left" "$(grep -cE '^    [^ ]*!(_R|_ZN)' "$tmp/dump")" 0
	# Culled: the stack of the growth starts at Vec's push, above fill.
	"$ht" analyze "$tmp/$mangling.htr" -stacks st -top 100 >"$tmp/an"
	first=$(grep -B1 -A3 'vecgrow::fill' "$tmp/an" | grep -m1 -E 'Vec.*push' || true)
	check "$mangling: growth stack starts at push" "$([ -n "$first" ] && echo yes)" yes
	check "$mangling: raw_vec frames culled" "$(grep -c 'raw_vec' "$tmp/an")" 0
	check "$mangling: alloc::alloc frames culled" "$(grep -cE '!(<)?alloc::alloc::' "$tmp/an")" 0
done
[ $fails -eq 0 ]
