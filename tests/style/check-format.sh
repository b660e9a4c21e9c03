#!/usr/bin/env bash
# Fails when a C or C++ file of the tree differs from what clang-format makes of
# it with the project's .clang-format; prints the files and the command to fix them.
set -euo pipefail
cd "$1"
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' 2>/dev/null ||
	find src include tests examples bench -name '*.[ch]' -o -name '*.cpp')
bad=()
for f in "${files[@]}"; do
	[ -f "$f" ] || continue
	clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
	printf 'not formatted: %s\n' "${bad[@]}" >&2
	echo "fix with: clang-format -i ${bad[*]}" >&2
	exit 1
fi
echo "${#files[@]} files formatted"
