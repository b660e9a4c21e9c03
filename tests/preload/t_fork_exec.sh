# fork, clone without CLONE_VM and exec each start their own instance with
# their own PROCESS_START; reaped children's exit codes are reported.
. "$(dirname "$0")/lib.sh"
record -- "$PROGS/fork_exec"
expect "exit status" "$RC" 5
expect_count '^process_start ' 5
root=$(sed -nE 's/^process_start .* p.pid=([0-9]+) .* flags=R instance=.*/\1/p' "$OUT")
expect "one root instance" "$(echo "$root" | wc -w)" 1
fchild=$(sed -nE 's/^alloc .* pid=([0-9]+) .* size=7002$/\1/p' "$OUT")
cchild=$(sed -nE 's/^alloc .* pid=([0-9]+) .* size=7004$/\1/p' "$OUT")
Fchild=$(sed -nE 's/^alloc .* pid=([0-9]+) .* size=7005$/\1/p' "$OUT")
expect_count "^process_start .* p.pid=$Fchild ppid=$root flags=F " 1
expect_count "^process_exit .* pid=$Fchild .* p.pid=$Fchild kind=code value=8$" 1
expect_count "^process_exit .* pid=$root .* p.pid=$Fchild kind=code value=8$" 1
expect_count "^process_start .* p.pid=$fchild ppid=$root flags=F " 1
expect_count "^process_start .* p.pid=$cchild ppid=$root flags=F " 1
expect_count "^process_start .* p.pid=$root .* flags=RE .* args=.*fork_exec exec$" 1
# the blocks are recorded by the right process and instance
inst() { sed -nE "s/^process_start .* p.pid=$1 .* flags=$2 instance=([0-9a-f]+) .*/\1/p" "$OUT"; }
expect_count "^alloc .* pid=$root .* inst=$(inst "$root" R) .* size=7001$" 1
expect_count "^alloc .* pid=$fchild .* inst=$(inst "$fchild" F) .* size=7002$" 1
expect_count "^alloc .* pid=$cchild .* inst=$(inst "$cchild" F) .* size=7004$" 1
expect_count "^alloc .* pid=$root .* inst=$(inst "$root" RE) .* size=7003$" 1
# exit codes: the child's own on_exit and its parent's waitpid/wait4
expect_count "^process_exit .* pid=$fchild .* p.pid=$fchild kind=code value=7$" 1
expect_count "^process_exit .* pid=$root .* p.pid=$fchild kind=code value=7$" 1
expect_count "^process_exit .* pid=$root .* p.pid=$cchild kind=code value=9$" 1
expect_count "^process_exit .* p.pid=$root kind=code value=5$" 1
# the exec'd image starts its own module list and stacks
expect_count "^module_load .* inst=$(inst "$root" RE) .* index=0 .*/fork_exec$" 1

# --no-follow: only the root pid is traced, through its exec
record -n -- "$PROGS/fork_exec"
expect "no-follow exit status" "$RC" 5
expect_count '^process_start ' 2
expect_count '^alloc .* size=700[1245]$' 1
expect_count '^alloc .* size=7003$' 1
finish
