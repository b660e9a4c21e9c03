#!/bin/sh
# Writes the man pages, heaptrail(1) and heaptrail-COMMAND(1) for each command,
# from the --help texts of the heaptrail binary itself, so the pages never
# drift from --help. Run by the build (src/cli/CMakeLists.txt).
# Usage: manpages.sh HEAPTRAIL_BINARY OUTDIR VERSION
set -eu
bin=$1 out=$2 version=$3
mkdir -p "$out"

# roff-safe lines: backslashes doubled, a leading dot or quote escaped.
escape() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }

page() { # NAME SUMMARY HELP-TEXT-FILE SEE-ALSO
  upper=$(printf '%s' "$1" | tr 'a-z' 'A-Z')
  {
    printf '.TH %s 1 "" "heaptrail %s" "heaptrail manual"\n' "$upper" "$version"
    printf '.SH NAME\n%s \\- %s\n' "$1" "$(printf '%s' "$2" | escape)"
    printf '.SH DESCRIPTION\n.nf\n'
    escape < "$3"
    printf '.fi\n.SH SEE ALSO\n%s\n' "$4"
  } > "$out/$1.1.tmp"
  mv "$out/$1.1.tmp" "$out/$1.1"
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
"$bin" --help > "$tmp"
cmds=$(sed -n '/^commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p' "$tmp")
see=""
for c in $cmds; do see="$see${see:+, }\\fBheaptrail-$c\\fR(1)"; done
page heaptrail "a heap tracer for Linux, with the WPR/WPA/xperf heap views" "$tmp" "$see"
for c in $cmds; do
  summary=$(sed -n "s/^  $c  *\\(.*\\)/\\1/p" "$tmp")
  "$bin" "$c" --help > "$tmp.$c"
  page "heaptrail-$c" "$summary" "$tmp.$c" "\\fBheaptrail\\fR(1)"
  rm -f "$tmp.$c"
done
