#!/usr/bin/env bash
# Fails when a C or C++ file of the tree differs from what clang-format makes of
# it with the project's .clang-format; prints the files and the command to fix them.
set -euo pipefail
cd "$1"
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' 2>/dev/null ||
	find src include tests examples bench -name '*.[ch]' -o -name '*.cpp')
present=()
for f in "${files[@]}"; do [ -f "$f" ] && present+=("$f"); done
# One clang-format for the whole tree: it names each file it would change.
out=$(clang-format --dry-run -Werror "${present[@]}" 2>&1) && rc=0 || rc=$?
if [ "$rc" -ne 0 ]; then
	mapfile -t bad < <(printf '%s\n' "$out" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' | sort -u)
	[ ${#bad[@]} -gt 0 ] || { printf '%s\n' "$out" >&2; exit 1; }
	printf 'not formatted: %s\n' "${bad[@]}" >&2
	echo "fix with: clang-format -i ${bad[*]}" >&2
	exit 1
fi
echo "${#present[@]} files formatted"
