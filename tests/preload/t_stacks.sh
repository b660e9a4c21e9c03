# Stack frames of a known call chain resolve to the test binary, innermost
# first, at ELF addresses inside the functions nm gives; none of the
# recorder's own frames remain.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/stacks"
expect "exit status" "$RC" 0
expect_count '^alloc func=malloc .* size=11001$' 1
st=$(sed -nE 's/^alloc .* stack=([0-9]+) .* size=11001$/\1/p' "$OUT")
frames=$(sed -nE "s/^stack .* stack=$st nframes=[0-9]+ frames=//p" "$OUT" | tr ',' ' ')
set -- $frames
exe=$(sed -nE 's/^module_load .* index=([0-9]+) .* path=(.*)$/\1 \2/p' "$OUT" | awk '$2 ~ /\/stacks$/ {print $1}')
self=$(sed -nE 's/^module_load .* index=([0-9]+) .* path=(.*)$/\1 \2/p' "$OUT" | awk '$2 ~ /libheaptrail\.so$/ {print $1}')
expect "main module index" "$exe" 0
# in_func FRAME NAME: the frame is module 0 and its address is inside NAME
in_func() {
	local mod=${1%%:*} rel=$((${1#*:}))
	local line start size
	line=$(nm -S "$PROGS/stacks" | awk -v n="$2" '$4 == n {print $1, $2}')
	start=$((16#${line% *})); size=$((16#${line#* }))
	if [ "$mod" = "$exe" ] && [ "$rel" -gt "$start" ] && [ "$rel" -le $((start + size)) ]; then echo yes; else echo "no ($1)"; fi
}
expect "frame 0 in level_c" "$(in_func "$1" level_c)" yes
expect "frame 1 in level_b" "$(in_func "$2" level_b)" yes
expect "frame 2 in level_a" "$(in_func "$3" level_a)" yes
expect "frame 3 in main" "$(in_func "$4" main)" yes
expect "no recorder frames" "$(echo "$frames" | tr ' ' '\n' | grep -c "^$self:")" 0
# one stack record per id, ids unique
expect "stack ids unique" "$(grep -cE '^stack ' "$OUT")" "$(sed -nE 's/^stack .* stack=([0-9]+) .*/\1/p' "$OUT" | sort -u | wc -l)"
finish
