# Mapping hooks: mmap/mmap64/mprotect/mremap/munmap/brk/sbrk records and values.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/mmap_ops"
expect "exit status" "$RC" 0
pg=$(getconf PAGESIZE)
expect_count "^mmap func=mmap .* len=$((3 * pg)) prot=3 flags=0x22 fd=-1 offset=0 failed=0$" 1
expect_count "^mmap func=mmap64 .* len=$((3 * pg)) prot=3 flags=0x22 fd=-1 offset=0 failed=0$" 1
expect_count "^mmap func=mmap .* len=$((3 * pg)) prot=0 flags=0x22 fd=-1 offset=0 failed=0$" 1
expect_count "^mmap func=mmap .* addr=0x0 len=$pg prot=1 flags=0x2 fd=12345 offset=0 failed=1$" 1
expect_count "^mprotect func=mprotect .* len=$pg prot=3 result=0$" 1
expect_count "^mremap func=mremap .* old_len=$((3 * pg)) new=0x[0-9a-f]+ new_len=$((5 * pg)) flags=1 failed=0$" 1
expect_count "^munmap func=munmap .* len=$((5 * pg)) prot=0 result=0$" 1
expect_count "^munmap func=munmap .* len=$((3 * pg)) prot=0 result=0$" 2
expect_count "^brk func=sbrk .* delta=$((2 * pg)) failed=0$" 1
expect_count "^brk func=brk .* delta=-$((2 * pg)) failed=0$" 1
# mmap records carry stacks by default, munmap ones do not
expect_count "^mmap .* stack=0 " 0
expect_count "^munmap .* stack=[1-9]" 0
finish
