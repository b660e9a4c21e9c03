# 5,000 dlopen/call/dlclose cycles: the indices of unloaded modules are
# reused (a fixed cap of 4096 left later loads unannounced and their frames
# as raw addresses), and every allocation in the library is attributed to
# it by its absolute path, also when loaded by a relative path. 5,000 are
# past that cap; 10,000 took 3 s of CPU, over the 120 s timeout at a load
# of 40-60 on 2 cores.
. "$(dirname "$0")/lib.sh"
# check N: every 8002-byte allocation's innermost frame is in a module whose
# MODULE_LOAD path is $PROGS/libdso_ctor.so; few module indices in use.
check() {
	expect "$1: exit status" "$RC" 0
	expect "$1: output" "$(cat "$TMP/stdout")" "$2"
	expect_count '^module_load .* path=/.*/libdso_ctor\.so$' "$2"
	expect_count '^module_load .* path=[^/]' 0
	expect_count '^module_unload ' "$2"
	expect_count '^alloc func=malloc .* size=8002$' "$2"
	expect_count '^alloc func=malloc .* size=8001$' "$2"
	expect "$1: allocations attributed to the library" "$(awk -v want="$PROGS/libdso_ctor.so" '
		/^module_load / { i = $0; sub(/.* index=/, "", i); sub(/ .*/, "", i);
			p = $0; sub(/.* path=/, "", p); path[i] = p }
		/^stack / { s = $0; sub(/.* stack=/, "", s); sub(/ .*/, "", s);
			f = $0; sub(/.* frames=/, "", f); sub(/:.*/, "", f);
			first[s] = (f in path) ? path[f] : "?" }
		/^alloc .* size=8002$/ { s = $0; sub(/.* stack=/, "", s); sub(/ .*/, "", s);
			if (first[s] == want) good++ }
		END { print good + 0 }' "$OUT")" "$2"
	max=$(sed -nE 's/^module_load .* index=([0-9]+) .*/\1/p' "$OUT" | sort -n | tail -1)
	expect_that "$1: module indices stay few" [ "$max" -lt 32 ]
}
cd "$PROGS"
record -- ./dlopen_cycles 5000 "$PROGS/libdso_ctor.so"
check "absolute path" 5000
record -- ./dlopen_cycles 200 ./libdso_ctor.so
check "relative path" 200
LD_LIBRARY_PATH=. record -- ./dlopen_cycles 200 libdso_ctor.so
check "LD_LIBRARY_PATH=." 200
finish
