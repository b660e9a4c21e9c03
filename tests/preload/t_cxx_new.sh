# C++ new[]: recorded as malloc of 12000 bytes whose innermost frame is in
# libstdc++ (operator new) and the next in the program.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/cxx_new"
expect "exit status" "$RC" 0
expect_count '^alloc func=malloc .* size=12000$' 1
st=$(sed -nE 's/^alloc .* stack=([0-9]+) .* size=12000$/\1/p' "$OUT")
frames=$(sed -nE "s/^stack .* stack=$st nframes=[0-9]+ frames=//p" "$OUT")
stdcxx=$(sed -nE 's/^module_load .* index=([0-9]+) .* path=.*libstdc\+\+\.so.*$/\1/p' "$OUT")
expect "innermost frame module" "$(echo "$frames" | cut -d, -f1 | cut -d: -f1)" "$stdcxx"
expect "second frame module" "$(echo "$frames" | cut -d, -f2 | cut -d: -f1)" 0
addr=$(sed -nE 's/^alloc .* addr=(0x[0-9a-f]+) size=12000$/\1/p' "$OUT")
expect_count "^free func=free .* addr=$addr$" 1
finish
