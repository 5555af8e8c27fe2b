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
# The double build and the portable kernel set on x86-64 print other digits:
# with them the listings are neither compared nor written (a message says so).
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
    printf 'listings: %s\n' "$*" >&2
    status=1
}

pages=$(find README.md docs -name '*.md' -type f -not -path 'docs/studies/*' \
        -not -path 'docs/bench/*' | sort)

# Each marked block's commands, one file per command: $1 = page, $2 = folder.
# Prints "LINE<TAB>problem" for a block of commands left unmarked and for a
# listing that does not start with a command.
split_commands() {
    awk -v dir="$2" '
    /^[ \t]*(```|~~~)/ {
        if (!fenced) { fenced = 1; block++; n = 0; more = 0; first = 1
                       marked = (prev == "<!-- listing -->")
                       excused = (prev ~ /^<!-- listing not run: .+-->$/); next }
        if (cmd != "") close(cmd)
        fenced = 0; more = 0; cmd = ""; prev = $0; next
    }
    fenced {
        if (first && /^\$ build\// && !marked && !excused)
            printf "%d\tunmarked listing: mark it <!-- listing --> or <!-- listing not run: REASON -->\n", NR
        if (first && marked && !/^\$ /)
            printf "%d\ta listing must start with a command line (\"$ ...\")\n", NR
        first = 0
        if (!marked) next
        if (more) { print > cmd; more = /\\$/; next }
        if (/^\$ /) {
            if (cmd != "") close(cmd)
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

# The listings are the float build's output on the FMA kernel sets (every one
# gives the same bits). The double build, and x86-64 without AVX2 (the
# portable set without FMA, docs/kernels.md), print other digits: there the
# listings are not compared, and not written.
kernels=$("$build/toy_heads" --help 2>&1 | grep '^kernels:' || true)
same_bits=1
case $kernels in
*", float build") ;;
*) same_bits=0 why="$build is not a float build" ;;
esac
if [ "$(uname -m)" = x86_64 ] && [ "${kernels#kernels: portable}" != "$kernels" ]; then
    same_bits=0 why="the portable kernel set rounds without FMA on x86-64"
fi

# Runs command file $1 in the scratch folder, once per distinct command (the
# same training listed on two pages runs once); its output into $2.
run_once() {
    key=$work/seen.$(md5sum <"$1" | cut -c1-32)
    if [ ! -f "$key" ]; then
        (cd "$work/run" && stdbuf -oL -eL sh "$1" >"$key" 2>&1) || true
    fi
    cp "$key" "$2"
}

mkdir -p "$work/run/out"
ln -s "$build" "$work/run/build"
# The seed-0 toy model the heads listings read, trained by the command that
# getting-started and toy-task list (so it runs once).
if [ "$same_bits" = 1 ]; then
    printf '%s\n' "build/toy_heads --seed 0 --no-report | grep -A 9 '^held-out'" >"$work/seed0.sh"
    run_once "$work/seed0.sh" "$work/seed0.out"
    [ -f "$work/run/out/toy_heads/model.safetensors" ] ||
        { echo "listings: $build/toy_heads failed to train the seed-0 toy model" >&2; exit 1; }
fi

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
    [ "$same_bits" = 1 ] || continue
    ls "$dir" | grep -q '\.sh$' || continue
    for cmd in "$dir"/*.sh; do
        run_once "$cmd" "${cmd%.sh}.out"
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
if [ "$same_bits" = 0 ]; then
    echo "listings: not rerun: $why, and the docs' listings are the float build's on"
    echo "  the FMA kernel sets"
fi
exit "$status"
