#!/usr/bin/env bash
# install.sh - 'cmake --install' into a temporary prefix, then use heaptrail
# from there only: record (the recorder must come from PREFIX/lib/heaptrail),
# analyze, report, a program built against heaptrail.pc reading the trace,
# the exported symbols, the man pages against --help, bash completion, and
# the paths that the IFEO hook and the AutoLogger unit name.
# Usage: install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1") src=$2
tmp=$(mktemp -d /tmp/ht-install-XXXXXX)
# cmake --install rewrites BUILD/install_manifest.txt: the one of a real
# install is put back afterwards, so its uninstall still works.
manifest=$build/install_manifest.txt
[[ -e $manifest ]] && cp -p "$manifest" "$tmp/manifest.saved"
restore() {
  if [[ -e $tmp/manifest.saved ]]; then cp -p "$tmp/manifest.saved" "$manifest"; else rm -f "$manifest"; fi
  rm -rf "$tmp"
}
trap restore EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
p=$tmp/prefix
cmake --install "$build" --prefix "$p" > "$tmp/install.log"
cp "$manifest" "$tmp/manifest"
ht=$p/bin/heaptrail

for f in bin/heaptrail lib/heaptrail/libheaptrail.so lib/heaptrail/libheaptrail-ifeo.so \
         lib/libheaptrail-api.so lib/pkgconfig/heaptrail.pc \
         include/heaptrail/trace.h include/heaptrail/control.h include/heaptrail/heap.h \
         share/man/man1/heaptrail.1 share/bash-completion/completions/heaptrail \
         share/zsh/site-functions/_heaptrail; do
  [[ -e $p/$f ]] || fail "$f is not installed"
done
# The soname: MAJOR.MINOR before 1.0 (every 0.x may change the ABI), MAJOR after.
version=$(sed -n 's/^Version: //p' "$p/lib/pkgconfig/heaptrail.pc")
[[ $version =~ ^([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || fail "heaptrail.pc has no version: '$version'"
so=${BASH_REMATCH[1]}
[[ $so == 0 ]] && so=0.${BASH_REMATCH[2]}
soname=$(readelf -d "$p/lib/libheaptrail-api.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == libheaptrail-api.so.$so ]] || fail "soname '$soname', want libheaptrail-api.so.$so"
[[ $(readlink "$p/lib/$soname") == "libheaptrail-api.so.$version" ]] ||
  fail "$soname is not a link to the versioned file"

# Record from the prefix: the traced program's own maps show which recorder it got.
cd "$tmp"
"$ht" record -q -o t.htr -- cat /proc/self/maps > maps.txt
grep -q " $p/lib/heaptrail/libheaptrail.so$" maps.txt ||
  fail "the recorder was not loaded from $p/lib/heaptrail: $(grep heaptrail maps.txt)"
grep -q "$build" maps.txt && fail "something was loaded from the build tree"
"$ht" analyze t.htr -stacks so -top 1 > analyze.txt
grep -q "^STACK 1" analyze.txt || fail "analyze from the prefix: $(head analyze.txt)"
allocs=$("$ht" info --format json t.htr | python3 -c 'import json,sys; print(json.load(sys.stdin)["events"]["alloc"])')
(( allocs > 0 )) || fail "no allocations in the trace"
if [[ -e $p/share/heaptrail/report.html ]]; then
  "$ht" report -o t.html t.htr > /dev/null
  [[ $(stat -c %s t.html) -gt 10000 ]] || fail "report from the prefix"
fi

# A program built with pkg-config against the installed library reads the trace.
cat > reader.c <<'C'
#include <heaptrail/trace.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	struct ht_reader *r;
	int rc = ht_reader_open(&r, argv[1]);
	if (rc < 0) {
		fprintf(stderr, "%s\n", ht_strerror(rc));
		return 1;
	}
	struct ht_event ev;
	unsigned long allocs = 0;
	while ((rc = ht_reader_next(r, &ev)) > 0)
		allocs += ev.type == HT_EV_ALLOC;
	ht_reader_close(r);
	printf("%lu\n", allocs);
	return rc < 0;
}
C
export PKG_CONFIG_PATH=$p/lib/pkgconfig
# shellcheck disable=SC2046
cc -Wall -Werror -o reader reader.c $(pkg-config --cflags --libs heaptrail) -Wl,-rpath,"$p/lib"
got=$(./reader t.htr)
[[ $got == "$allocs" ]] || fail "the pkg-config reader counts $got allocations, info $allocs"
# (grep -q on a here-string, not a pipe: pipefail would catch ldd's SIGPIPE)
grep -q "$p/lib/$soname" <<< "$(ldd reader)" || fail "reader is not linked to the installed library"

# Only the API of trace.h and control.h is exported.
declared=$(cat "$p/include/heaptrail/trace.h" "$p/include/heaptrail/control.h" |
  grep -E '^[a-z].*[ *]ht_[a-z0-9_]+\(' | grep -oE 'ht_[a-z0-9_]+\(' | tr -d '(' | sort -u)
exported=$(nm -D --defined-only "$p/lib/$soname" | awk '$2 ~ /^[TDBRW]$/ {print $3}' | sort -u)
[[ $declared == "$exported" ]] || fail "exported symbols differ from the headers: $(diff <(echo "$declared") <(echo "$exported"))"

# Man pages: one per command, each with every option its --help names.
cmds=$("$ht" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')
(( $(wc -w <<< "$cmds") >= 13 )) || fail "command list: $cmds"
for c in $cmds; do
  page=$p/share/man/man1/heaptrail-$c.1
  [[ -e $page ]] || fail "no man page for $c"
  text=$(MANWIDTH=200 man -l "$page" 2>/dev/null)
  for o in $("$ht" "$c" --help | grep -oE -- '--[a-z][-a-z]*' | sort -u); do
    grep -q -- "$o" <<< "$text" || fail "heaptrail-$c(1) lacks $o"
  done
done
grep -q "heaptrail-record" "$p/share/man/man1/heaptrail.1" || fail "heaptrail(1) names the pages"

# bash completion, run as bash runs it.
comp() { # WORDS... -> the candidates
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _heaptrail; echo "${COMPREPLY[*]}"' \
    _ "$p/share/bash-completion/completions/heaptrail" "$@"
}
[[ $(comp "$ht" rec) == record ]] || fail "completing 'rec': $(comp "$ht" rec)"
[[ $(comp "$ht" info --fo) == --format ]] || fail "completing 'info --fo': $(comp "$ht" info --fo)"
[[ $(comp "$ht" help chec) == check ]] || fail "completing 'help chec'"

# What the installed binary writes into system files names the prefix.
grep -q "^ExecStart=$p/bin/heaptrail start " <<< "$("$ht" autologger unit)" || fail "the unit names $p/bin/heaptrail"
mkdir -p root/etc
HEAPTRAIL_ROOT=$tmp/root "$ht" ifeo install > /dev/null
[[ $(cat root/etc/ld.so.preload) == "$p/lib/heaptrail/libheaptrail-ifeo.so" ]] ||
  fail "the IFEO hook path: $(cat root/etc/ld.so.preload)"

# Uninstall as the README says: nothing is left but directories.
xargs rm -f < "$tmp/manifest"
[[ -z $(find "$p" -type f) ]] || fail "left after uninstall: $(find "$p" -type f)"
echo "ok install"
