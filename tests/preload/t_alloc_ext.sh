# jemalloc, tcmalloc and mimalloc: the standard functions, C++ new/delete (the
# allocator's own operators, recorded as new/delete) and each allocator's own
# API, with exact sizes and every block freed once (tests/preload/alloc/).
. "$(dirname "$0")/lib.sh"

# unmatched SIZES_REGEX: "U of N" blocks of those sizes never freed, of N.
unmatched() {
	awk -v re="$1" '
	/^(alloc|realloc) / && $0 ~ (" size=(" re ")( |$)") {
		match($0, / (addr|new)=0x[0-9a-f]+/); a = substr($0, RSTART + 1, RLENGTH - 1)
		sub(/^[a-z]+=/, "", a); if (a != "0x0") { live[a] = 1; n++ } }
	/^realloc / { match($0, / old=0x[0-9a-f]+/); o = substr($0, RSTART + 5, RLENGTH - 5)
		if (o in live) delete live[o] }
	/^free / { match($0, / addr=0x[0-9a-f]+/); a = substr($0, RSTART + 6, RLENGTH - 6)
		if (a in live) delete live[a] }
	END { c = 0; for (k in live) c++; print c " of " n }' "$OUT"
}

# common TAG: what every build of alloc_ext.cpp does through standard names.
common() {
	expect_count '^alloc func=malloc .* size=1001$' 1
	expect_count '^alloc func=calloc .* size=333$' 1
	expect_count '^realloc func=realloc .* size=1002 failed=0$' 1
	expect_count '^alloc func=new\[\] .* size=4012$' 1
	expect_count '^alloc func=new .* size=40$' 2
	expect_count '^alloc func=new .* size=1024$' 1
	expect_count '^free func=delete\[\] ' 1
	expect_count '^alloc func=malloc .* size=1005$' 1
	expect_count '^realloc func=realloc .* new=0x0 size=0 failed=0$' 1
	# No event twice: the operators do not also show up as malloc.
	expect_count '^alloc func=malloc .* size=(40|4012|1024)$' 0
	# new[]'s stack starts in the program (make_array), not in the allocator.
	st=$(sed -nE 's/^alloc func=new\[\] .* stack=([0-9]+) .* size=4012$/\1/p' "$OUT")
	first=$(sed -nE "s/^stack .* stack=$st nframes=[0-9]+ frames=//p" "$OUT" | cut -d, -f1)
	expect "$1: new[] innermost frame module" "${first%%:*}" 0
}

for tag in je tc mi; do
	prog=$PROGS/alloc_$tag
	if [ ! -x "$prog" ]; then
		echo "FAIL: $prog was not built: install the allocator (scripts/deps.sh test)"
		fails=$((fails + 1))
		continue
	fi
	echo "--- $tag"
	record -- "$prog"
	expect "$tag: exit status" "$RC" 0
	expect "$tag: output" "$(tr '\n' ' ' <"$TMP/stdout")" "$(
		case $tag in je) echo "bad_alloc xallocx 2048 done " ;; tc) echo "bad_alloc done " ;;
		mi) echo "expanded done " ;; esac)"
	common $tag
	case $tag in
	je)
		expect_count '^alloc_fail func=new .* size=4611686018427387904$' 1
		expect_count '^alloc func=mallocx .* size=2001$' 1
		expect_count '^realloc func=rallocx .* size=2002 failed=0$' 1
		# xallocx grew the block in place to its size class.
		expect_count '^realloc func=xallocx .* old=(0x[0-9a-f]+) new=\1 size=2048 failed=0$' 1
		expect_count '^free func=dallocx ' 1
		expect_count '^alloc func=mallocx .* size=2004$' 1
		expect_count '^free func=sdallocx ' 1
		expect "$tag: blocks never freed" "$(unmatched '1001|333|1002|4012|40|1024|1005|0|2001|2002|2048|2004')" "0 of 12"
		;;
	tc)
		expect_count '^alloc_fail func=new .* size=4611686018427387904$' 1
		expect_count '^alloc func=tcmalloc .* size=2001$' 1
		expect_count '^realloc func=tcmalloc .* size=2002 failed=0$' 1
		expect_count '^alloc func=tcmalloc .* size=(2002|2003|2004|2005)$' 4
		# tc_free, tc_free_sized, tc_delete, tc_deletearray_sized, tc_free (tcmalloc's
		# start-up frees some blocks of its own through tc_free before them).
		expect "$tag: tc_* frees" "$(sed -n '/ size=2001$/,$p' "$OUT" | grep -c '^free func=tcmalloc ')" 5
		expect "$tag: blocks never freed" "$(unmatched '1001|333|1002|4012|40|1024|1005|2001|2002|2003|2004|2005')" "0 of 14"
		;;
	mi)
		# mimalloc's realloc(p, 0) returns a block: a size-0 allocation of its own.
		expect_count '^alloc func=realloc .* size=0$' 1
		expect_count '^alloc func=mimalloc .* size=(2001|2003|6|3003|2005)$' 5
		expect_count '^realloc func=mimalloc .* size=2002 failed=0$' 1
		expect_count '^realloc func=mimalloc .* old=(0x[0-9a-f]+) new=\1 size=2000 failed=0$' 1
		expect_count '^alloc func=mimalloc .* size=2006$' 5
		# The heap's own bookkeeping is no event.
		expect_count '^alloc func=mimalloc .* size=3064$' 0
		expect "$tag: blocks never freed" "$(unmatched '1001|333|1002|4012|40|1024|1005|0|2001|2002|2003|6|3003|2005|2000|2006')" "0 of 21"
		;;
	esac
done

# An allocator preloaded after the recorder: a plain C++ program's new[]
# is jemalloc's own operator (recorded as new[], not as malloc).
je=$(ldd "$PROGS/alloc_je" 2>/dev/null | sed -nE 's/.*libjemalloc\.so\.2 => ([^ ]+).*/\1/p')
if [ -n "$je" ]; then
	echo "--- LD_PRELOAD=$je"
	RINGDUMP_LIB="$RINGDUMP_LIB $je" record -- "$PROGS/cxx_new"
	expect "preloaded: exit status" "$RC" 0
	expect_count '^alloc func=new\[\] .* size=12000$' 1
	expect_count '^alloc func=malloc .* size=12000$' 0
	expect_count '^free func=delete\[\] ' 1
	expect_count "^module_load .* path=.*libjemalloc\.so\.2$" 1
else
	echo "FAIL: alloc_je does not load libjemalloc.so.2"
	fails=$((fails + 1))
fi
finish
