#!/bin/sh
# tools/listings.sh [--check] [BUILD]: reruns the program listings of the
# docs and writes their output back into the pages (BUILD, default build).
# With --check nothing is written: it fails, naming the page and the command,
# when a listing differs from what the command prints now (tests/check_docs.sh
# runs it so; `make listings` writes).
#
# A listing is a fenced block right after a line `<!-- listing -->`: lines
# starting "$ " are commands (a line ending in a backslash goes on), the lines
# after each command its output (stdout and stderr, line-buffered). Commands
# run in a scratch folder where build/ is BUILD and out/toy_heads/ holds the
# seed-0 toy model of `make demo`; the docs' paths are relative to it.
# Compared, the figures of elapsed time ("12.3 s", "51.3 steps/s", "2.8 MB/s",
# "ETA 3s") are masked, as the machine changes them, not the code; a page
# whose listings differ only there is left as it is.
#
# A block that starts "$ build/" with no such line must say why it is not
# rerun: `<!-- listing not run: REASON -->` (needs a download, a long run).
set -eu
cd "$(dirname "$0")/.."
check=0
if [ "${1-}" = --check ]; then
    check=1
    shift
fi
build=$(cd "${1:-build}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
problem() {
    echo "listings: $*" >&2
    status=1
}

pages=$(find README.md docs -name '*.md' -type f -not -path 'docs/studies/*' \
        -not -path 'docs/bench/*' | sort)

# Each marked block's commands, one file per command: $1 = page, $2 = folder.
# Prints "LINE<TAB>problem" for a block of commands left unmarked.
split_commands() {
    awk -v dir="$2" '
    /^[ \t]*(```|~~~)/ {
        if (!fenced) { fenced = 1; block++; n = 0; first = 1; marked = (prev == "<!-- listing -->")
                       excused = (prev ~ /^<!-- listing not run: .+-->$/); next }
        fenced = 0; prev = $0; next
    }
    fenced {
        if (first && /^\$ build\// && !marked && !excused)
            printf "%d\tunmarked listing: mark it <!-- listing --> or <!-- listing not run: REASON -->\n", NR
        first = 0
        if (!marked) next
        if (more) { print > cmd; more = /\\$/; next }
        if (/^\$ /) {
            n++
            cmd = sprintf("%s/%04d_%04d.sh", dir, block, n)
            print substr($0, 3) > cmd
            more = /\\$/
        }
        next
    }
    { if ($0 != "") prev = $0 }' "$1"
}

# The page with each marked block's output replaced by the commands' output
# now: $1 = page, $2 = folder of NNNN_MMMM.sh and their .out.
merge() {
    awk -v dir="$2" '
    function emit(   f, line) {
        f = sprintf("%s/%04d_%04d.out", dir, block, n)
        while ((getline line < f) > 0) print line
        close(f)
    }
    /^[ \t]*(```|~~~)/ {
        if (!fenced) { fenced = 1; block++; n = 0; more = 0; marked = (prev == "<!-- listing -->")
                       print; next }
        if (marked && n) emit()
        fenced = 0; print; prev = $0; next
    }
    fenced && marked {
        if (more) { print; more = /\\$/; next }
        if (/^\$ /) { if (n) emit(); n++; print; more = /\\$/ }
        next
    }
    { print; if ($0 != "") prev = $0 }' "$1"
}

# Elapsed-time figures masked, for comparing: a figure in seconds, steps/s or
# MB/s, an ETA, and the cells of a table column named "*_ms" (up to a blank
# line).
mask() {
    sed -E -e 's/[0-9]+(\.[0-9]+)? (s|steps\/s|MB\/s)([^A-Za-z]|$)/# \2\3/g' \
           -e 's/ETA [0-9hms]+/ETA #/g' "$1" |
    awk '
    NF == 0 { column = 0 }
    column && $column ~ /^[0-9.]+$/ { $column = "#" }
    { for (i = 1; i <= NF; i++) if ($i ~ /_ms$/) column = i; print }'
}

# The listings are the FMA kernel sets' output (every one gives the same
# bits). x86-64 without AVX2 runs the portable set without FMA, which rounds
# otherwise (docs/kernels.md): there the comparison would fail on rounding.
if [ "$check" = 1 ] && [ "$(uname -m)" = x86_64 ] && [ -x "$build/bench" ] &&
    "$build/bench" --help 2>&1 | grep -q '^kernels: portable'; then
    echo "listings: not compared: the kernel set in use (portable, without FMA on x86-64) rounds"
    echo "  otherwise than the FMA sets the docs' listings come from"
    exit 0
fi

mkdir -p "$work/run/out"
ln -s "$build" "$work/run/build"
"$build/toy_heads" --out "$work/run/out/toy_heads" --no-report >/dev/null 2>&1 ||
    { echo "listings: $build/toy_heads failed to train the seed-0 toy model" >&2; exit 1; }

i=0
for page in $pages; do
    i=$((i + 1))
    dir=$work/page$i
    mkdir "$dir"
    split_commands "$page" "$dir" | while IFS='	' read -r line what; do
        echo "$page:$line: $what"
    done >"$dir/unmarked"
    if [ -s "$dir/unmarked" ]; then
        while read -r line; do problem "$line"; done <"$dir/unmarked"
    fi
    ls "$dir" | grep -q '\.sh$' || continue
    for cmd in "$dir"/*.sh; do
        # A command met before (the same training on two pages) runs once.
        key=$work/seen.$(md5sum <"$cmd" | cut -c1-32)
        if [ ! -f "$key" ]; then
            (cd "$work/run" && stdbuf -oL -eL sh "$cmd" >"$key" 2>&1) || true
        fi
        cp "$key" "${cmd%.sh}.out"
    done
    merge "$page" "$dir" >"$dir/new.md"
    mask "$page" >"$dir/old.masked"
    mask "$dir/new.md" >"$dir/new.masked"
    if [ "$check" = 1 ]; then
        if ! cmp -s "$dir/old.masked" "$dir/new.masked"; then
            problem "$page: a listing differs from its command's output now (tools/listings.sh rewrites it):"
            diff -u "$dir/old.masked" "$dir/new.masked" | sed -n '3,40p' >&2 || true
        fi
    elif ! cmp -s "$dir/old.masked" "$dir/new.masked"; then
        cp "$dir/new.md" "$page"
        echo "rewrote $page"
    fi
done
exit "$status"
