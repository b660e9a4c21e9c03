# dlopen of a library that allocates in its constructor: MODULE_LOAD before
# the STACK that uses it, frames in it, MODULE_UNLOAD after dlclose.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/dlopen_prog" "$PROGS"
expect "exit status" "$RC" 0
expect_count '^module_load .*/libdso_ctor\.so$' 1
idx=$(sed -nE 's/^module_load .* index=([0-9]+) .*\/libdso_ctor\.so$/\1/p' "$OUT")
expect_count "^module_unload .* index=$idx$" 1
for size in 8001 8002; do
	expect_count "^alloc func=malloc .* size=$size$" 1
	st=$(sed -nE "s/^alloc .* stack=([0-9]+) .* size=$size$/\1/p" "$OUT")
	# the innermost frame is in the library
	expect "stack of $size starts in the dso" \
		"$(grep -E "^stack .* stack=$st nframes=" "$OUT" | sed -E 's/.* frames=([0-9?]+):.*/\1/')" "$idx"
	expect "module before stack of $size" "$(awk -v st="$st" '
		/\/libdso_ctor\.so$/ && /^module_load/ { m = NR } $0 ~ "^stack .* stack=" st " " { s = NR }
		END { print (m && s && m < s) ? "yes" : "no" }' "$OUT")" yes
done
# after dlclose the stack table is new: the same call site gets a new id
expect_count '^alloc func=malloc .* size=8003$' 2
ids=$(sed -nE 's/^alloc .* stack=([0-9]+) .* size=8003$/\1/p' "$OUT" | sort -u | wc -l)
expect "stack ids of the 8003 site" "$ids" 2
st3=$(sed -nE 's/^alloc .* stack=([0-9]+) .* size=8003$/\1/p' "$OUT" | tail -1)
unload=$(grep -nE '^module_unload' "$OUT" | cut -d: -f1)
def3=$(grep -nE "^stack .* stack=$st3 " "$OUT" | cut -d: -f1)
expect_that "second 8003 stack defined after the unload" [ "${def3:-0}" -gt "${unload:-0}" ]
finish
