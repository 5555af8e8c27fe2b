#!/bin/sh
# tests/check_docs.sh [BUILD]: checks that the documentation matches the
# repository. Run by `make test` once the programs are built (BUILD, default
# build). Fails, naming the file and the problem, when
#
#   (a) a relative link in README.md or docs/**/*.md does not resolve to an
#       existing file or folder (http(s) and mailto links and pure #anchors are
#       not checked; a link's #anchor is dropped before checking; fenced code
#       blocks and `code spans` are skipped);
#   (b) a program's flags and its page docs/programs/<name>.md differ. A
#       program's flags are the --flags its `--help` prints (for heads, the
#       help of every subcommand its usage lists, too), leaving out flags
#       the help names as another program's ("charlm --tokens"). A page
#       documents the flags in the first cell of its tables' rows (a row
#       starting "| `--flag"); every flag of the program must be in such a
#       row and every such flag must be the program's (--help is always
#       allowed). Every program (examples/NAME.c, examples/NAME/, bench) needs
#       a page and every page a program; heads's page needs a heading naming
#       each subcommand ("## `heads scores`"). Where the help gives a flag's
#       default ("(default: X)", which cli/cli.c prints from the option
#       table), every row of a "| flag | default |" table naming the flag must
#       give the same: a number equal to X (X numeric), else X itself;
#   (c) a tracked file (git ls-files; outside git, every file but build/ and
#       out/) names the shared/ folder beside the checkout: a path out of the
#       repository, which users do not have;
#   (d) a source path named in README.md, docs/ (dated studies and recorded
#       benchmarks aside) or a comment of a .c or .h file does not exist: a
#       path under one of the source folders (core/gelu.c, ops/kernels/set.h),
#       or a header of a folder's list in a page ("`analysis/` (`roles.h`,
#       `heads.h`)"), or such a list leaves out a public header of its folder;
#   (e) a program listing of README.md or docs/ (a block marked
#       `<!-- listing -->`) differs from what its commands print now, or a
#       block of commands is left unmarked: tools/listings.sh --check, which
#       reruns them (about 45 s on 2 cores; `make listings` rewrites the
#       blocks);
#   (f) a line of a C block of docs/extending.md (```c, whose code the guide
#       says the library compiles) is no line of a .c or .h file of the
#       repository ("..." lines and blank lines aside);
#   (g) the packages README.md and docs/getting-started.md list after
#       "`tools/deps.sh`:" are not tools/deps.sh's list, or README.md does not
#       name a package `make test` adds (the test-deps target's);
#   (h) a `make TARGET` of README.md or docs/ (in a code span, or a code line
#       starting with make) names no target of the Makefile (a .PHONY one, or
#       a file under build/);
#   (i) a public header (any header of the library's folders but the
#       Makefile's INTERNAL_HEADERS) is not reached from headlab.h, or its
#       opening comment has no indented example line;
#   (j) an example of docs/library.md's table of names is no function a public
#       header declares, or is not named hl_<module>_... for a module of its
#       row;
#   (k) `make demo` (its dry run) does not build every program of examples/.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
status=0
problem() {
    printf 'check_docs: %s\n' "$*" >&2
    status=1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The Makefile's INTERNAL_HEADERS: every other header of the library is public.
internal=$(sed -n '/^INTERNAL_HEADERS :=/,/[^\\]$/p' Makefile | tr -d '\\' |
    sed 's/^INTERNAL_HEADERS :=//' | tr -s ' \n' '  ')

# ---- (a) relative links ---------------------------------------------------------

# Prints "LINE<TAB>TARGET" for every Markdown link or image in a file, code
# skipped; the target without its #anchor, title or <>.
links() {
    awk '
    /^[ \t]*(```|~~~)/ { fenced = !fenced; next }
    fenced { next }
    {
        line = $0
        gsub(/`[^`]*`/, "", line)
        while (match(line, /\]\([^)]*\)/)) {
            target = substr(line, RSTART + 2, RLENGTH - 3)
            line = substr(line, RSTART + RLENGTH)
            sub(/^[ \t]+/, "", target)
            sub(/^</, "", target)
            sub(/[ \t>].*$/, "", target)
            if (target ~ /^[a-zA-Z][a-zA-Z0-9+.-]*:/ || target ~ /^#/ || target == "")
                continue
            sub(/#.*$/, "", target)
            printf "%d\t%s\n", NR, target
        }
    }' "$1"
}

find docs -name '*.md' -type f | sort >"$tmp/pages"
for page in README.md $(cat "$tmp/pages"); do
    dir=$(dirname "$page")
    links "$page" >"$tmp/links"
    while IFS='	' read -r line target; do
        case $target in
        /*) path=.$target ;;
        *) path=$dir/$target ;;
        esac
        [ -e "$path" ] || problem "$page:$line: link to $target: no such file ($path)"
    done <"$tmp/links"
done

# ---- (b) every program's flags on its page -----------------------------------------

programs=""
for f in examples/*.c; do programs="$programs $(basename "$f" .c)"; done
for d in examples/*/; do
    name=$(basename "$d")
    [ "$name" = common ] || programs="$programs $name"
done
programs="$programs bench"

# The --flags of help text on stdin, less those named as another program's.
help_flags() {
    awk -v self="$1" -v q="'" '
    {
        line = $0
        while (match(line, /--[a-z][a-z0-9-]*/)) {
            flag = substr(line, RSTART, RLENGTH)
            before = substr(line, 1, RSTART - 1)
            line = substr(line, RSTART + RLENGTH)
            if (match(before, "[a-z_]+(" q "s)? $")) {
                word = substr(before, RSTART)
                sub("(" q "s)? $", "", word)
                if (word != self && word ~ /^(charlm|heads|toy_heads|tokenize|gradcheck|mha_run|plotcsv|demo_engine|bench)$/)
                    continue
            }
            print flag
        }
    }'
}

# The --flags in the first cell of a page's table rows, code blocks skipped.
page_flags() {
    awk '
    /^[ \t]*(```|~~~)/ { fenced = !fenced; next }
    fenced || !/^[ \t]*\|/ { next }
    {
        n = split($0, cell, "|")
        first = cell[2]
        gsub(/`/, "", first)
        sub(/^[ \t]+/, "", first)
        if (first !~ /^--[a-z]/)
            next
        while (match(first, /--[a-z][a-z0-9-]*/)) {
            print substr(first, RSTART, RLENGTH)
            first = substr(first, RSTART + RLENGTH)
        }
    }' "$1"
}

# "FLAG<TAB>DEFAULT" for every flag of help text on stdin (cli/cli.c's
# layout: "  --flag ARG" then the help, continued on lines indented 24
# columns) whose help ends "(default: X)".
help_defaults() {
    awk '
    function flush() {
        if (flag != "" && match(text, /\(default: .*\)$/))
            printf "%s\t%s\n", flag, substr(text, RSTART + 10, RLENGTH - 11)
        flag = ""
    }
    /^  --[a-z]/ {
        flush()
        flag = $1
        text = $0
        next
    }
    /^                        [^ ]/ && flag != "" { sub(/^ +/, " "); text = text $0; next }
    { flush() }
    END { flush() }'
}

# "FLAG<TAB>DEFAULT" for every row of the page's "| flag | default |" tables,
# the default cell without its code marks.
page_defaults() {
    awk '
    /^[ \t]*(```|~~~)/ { fenced = !fenced; next }
    fenced || !/^[ \t]*\|/ { table = 0; next }
    {
        n = split($0, cell, "|")
        for (i = 2; i <= 3 && i <= n; i++) {
            gsub(/`/, "", cell[i])
            gsub(/^[ \t]+|[ \t]+$/, "", cell[i])
        }
        if (cell[2] == "flag" && cell[3] == "default") { table = 1; next }
        if (table && cell[2] ~ /^--[a-z]/) {
            split(cell[2], words, " ")
            printf "%s\t%s\n", words[1], cell[3]
        }
    }' "$1"
}

# Whether a page's default cell gives the help's default: a number equal to
# it when it is a number, else the same words.
same_default() { # CELL HELP_DEFAULT
    awk -v cell="$1" -v want="$2" 'BEGIN {
        number = "^-?[0-9]+([.][0-9]+)?(e[-+]?[0-9]+)?$"
        if (want !~ number)
            exit !(cell == want)
        while (match(cell, /[0-9],[0-9][0-9][0-9]/))
            cell = substr(cell, 1, RSTART) substr(cell, RSTART + 2)
        while (match(cell, /-?[0-9]+([.][0-9]+)?(e[-+]?[0-9]+)?/)) {
            if (substr(cell, RSTART, RLENGTH) + 0 == want + 0)
                exit 0
            cell = substr(cell, RSTART + RLENGTH)
        }
        exit 1
    }'
}

for p in $programs; do
    bin=$build/$p
    page=docs/programs/$p.md
    if [ ! -f "$page" ]; then
        problem "$page: missing (every program has a page)"
        continue
    fi
    if [ ! -x "$bin" ]; then
        problem "$bin: not built (make examples $build/bench), so $page cannot be checked"
        continue
    fi
    if ! "$bin" --help >"$tmp/help" 2>&1; then
        problem "$bin --help failed"
        continue
    fi
    help_flags "$p" <"$tmp/help" >"$tmp/flags"
    if [ "$p" = heads ]; then
        commands=$(sed -n 's/^\(usage:\)\{0,1\}[ \t]*heads \([a-z][a-z-]*\).*/\2/p' "$tmp/help" | sort -u)
        [ -n "$commands" ] || problem "$bin --help lists no subcommands"
        for c in $commands; do
            if "$bin" "$c" --help >"$tmp/help_$c" 2>&1; then
                help_flags "$p" <"$tmp/help_$c" >>"$tmp/flags"
            else
                problem "$bin $c --help failed"
            fi
            grep -Eq "^#+ .*heads $c([^a-z-]|\$)" "$page" ||
                problem "$page: no section for the subcommand heads $c (a heading naming it)"
        done
    fi
    help_defaults <"$tmp/help" >"$tmp/defaults"
    page_defaults "$page" >"$tmp/page_defaults"
    while IFS="$(printf '\t')" read -r flag cell; do
        want=$(awk -F '\t' -v f="$flag" '$1 == f { print $2; exit }' "$tmp/defaults")
        [ -n "$want" ] || continue
        same_default "$cell" "$want" ||
            problem "$page: $flag's default is \"$cell\" on the page, \"$want\" in $p --help"
    done <"$tmp/page_defaults"
    sort -u "$tmp/flags" >"$tmp/has"
    page_flags "$page" | sort -u >"$tmp/documented"
    for flag in $(comm -23 "$tmp/has" "$tmp/documented"); do
        problem "$page: $p has $flag (in its --help), which no table row of the page documents"
    done
    for flag in $(comm -13 "$tmp/has" "$tmp/documented"); do
        [ "$flag" = --help ] && continue
        problem "$page: documents $flag, which $p does not have (not in $bin --help)"
    done
done
for page in docs/programs/*.md; do
    [ -e "$page" ] || continue
    name=$(basename "$page" .md)
    case " $programs " in
    *" $name "*) ;;
    *) problem "$page: no program $name (examples/$name.c, examples/$name/ or bench)" ;;
    esac
done

# ---- (c) no path out of the repository ----------------------------------------------

# Spelt in two parts, so that this script does not name the path itself.
parent=..
needle="$parent/shared"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git grep -l -I -F -e "$needle" >"$tmp/outside" || true
else
    grep -rlI -F --exclude-dir=build --exclude-dir=out --exclude-dir=.git -e "$needle" . |
        sed 's|^\./||' >"$tmp/outside" || true
fi
while read -r f; do
    problem "$f: names $needle, a path outside the repository"
done <"$tmp/outside"

# ---- (d) source paths that exist -----------------------------------------------------

folders='analysis|bench|cli|core|data|examples|files|gradcheck|io|models|ops|report|tasks|tests|text|tools|train|viz'
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files README.md 'docs/*.md' '*.c' '*.h' >"$tmp/named_in"
else
    # shellcheck disable=SC2046 # the folders are words
    { echo README.md; find docs $(echo "$folders" | tr '|' ' ') -type f \
        \( -name '*.md' -o -name '*.c' -o -name '*.h' \) 2>/dev/null || true; } >"$tmp/named_in"
fi
grep -v -e '^docs/studies/' -e '^docs/bench/' "$tmp/named_in" >"$tmp/scan" || true
# "FILE:LINE:PATH" for every path under a source folder, not inside a longer
# path; in C, on the lines that start a comment or go on with one (tests spell
# made-up paths in strings). Upper-case names are placeholders
# (examples/NAME.c). Every separator is doubled first, so that two paths one
# character apart are both matched.
while read -r f; do
    [ -f "$f" ] || continue
    case $f in
    *.c | *.h) grep -nE '^[[:blank:]]*(/\*|\*|//)' "$f" ;;
    *) grep -n '' "$f" ;;
    esac | sed 's/^\([0-9]*:\)/\1 /; s/\([^A-Za-z0-9_./-]\)/\1\1/g' |
        grep -oE "^[0-9]+:|(^|[^A-Za-z0-9_./-])($folders)/[a-z0-9_/.-]*[a-z0-9_]\.(c|h|md|sh|py)([^A-Za-z0-9_]|\$)" |
        awk -v f="$f" '/^[0-9]+:$/ { line = $0; sub(/:$/, "", line); next }
            { sub(/^[^a-z]*/, ""); sub(/[^a-z]$/, ""); print f ":" line ":" $0 }'
done <"$tmp/scan" >"$tmp/paths"
# Headers listed after a folder in a page: "`analysis/` (`roles.h`, `heads.h`)".
grep -e '^README.md$' -e '^docs/.*\.md$' "$tmp/scan" | while read -r f; do
    awk -v f="$f" 'BEGIN { RS = "" }
    {
        text = $0
        gsub(/\n/, " ", text)
        while (match(text, /`[a-z]+\/` \([^)]*\)/)) {
            list = substr(text, RSTART, RLENGTH)
            text = substr(text, RSTART + RLENGTH)
            folder = list
            sub(/\/`.*/, "", folder)
            sub(/^`/, "", folder)
            sub(/^[^(]*\(/, "", list)
            while (match(list, /`[A-Za-z0-9_]+\.[a-z]+`/)) {
                print f ":list:" folder "/" substr(list, RSTART + 1, RLENGTH - 2)
                list = substr(list, RSTART + RLENGTH)
            }
        }
    }' "$f"
done >>"$tmp/paths"
# Such a list names every public header of its folder: one left out has drifted.
grep ':list:' "$tmp/paths" | sed 's|:list:| |; s|/[^/]*$||' | sort -u |
    while read -r f folder; do
        for h in "$folder"/*.h; do
            [ -e "$h" ] || continue
            case " $internal " in *" $h "*) continue ;; esac
            grep -qxF "$f:list:$h" "$tmp/paths" ||
                echo "$f: its list of $folder/ leaves out $(basename "$h")"
        done
    done >"$tmp/lists"
while read -r p; do problem "$p"; done <"$tmp/lists"
while IFS=: read -r f line path; do
    # ops/op_headers.h is written by the build, into $build/include/
    [ -e "$path" ] || [ -e "$build/include/$path" ] ||
        problem "$f:$line: names $path, which does not exist"
done <"$tmp/paths"

# ---- (e) program listings -----------------------------------------------------------

tools/listings.sh --check "$build" || status=1

# ---- (f) the guide's code is the library's -------------------------------------------

git ls-files '*.c' '*.h' 2>/dev/null >"$tmp/sources" ||
    find . -name '*.[ch]' -not -path './build/*' | sed 's|^\./||' >"$tmp/sources"
xargs cat <"$tmp/sources" | sed 's/[[:blank:]]*$//' | sort -u >"$tmp/source_lines"
awk '/^```c$/ { c = 1; next } /^```/ { c = 0 } c { print NR "\t" $0 }' docs/extending.md |
    while IFS='	' read -r line code; do
        trimmed=$(printf '%s' "$code" | sed 's/[[:blank:]]*$//')
        case $trimmed in '' | *...) continue ;; esac
        grep -qxF -- "$trimmed" "$tmp/source_lines" ||
            printf 'docs/extending.md:%s: quotes a line no source has: %s\n' "$line" "$trimmed"
    done >"$tmp/quotes"
while read -r q; do problem "$q"; done <"$tmp/quotes"

# ---- (g) the packages the make targets install ---------------------------------------

# tools/deps.sh's own list (gcc and make aside, which must be there to run it) and
# the extra packages of `make test` (the test-deps target's arguments).
deps=$(sed -n 's/^need="gcc make \(.*\) \$\*"$/\1/p' tools/deps.sh | tr ' ' '\n' | sort)
test_deps=$(awk '/^test-deps:/ { getline; print }' Makefile | sed 's/.*tools\/deps\.sh//' |
    tr ' ' '\n' | grep -v -e '^$' -e '^\$' || true)
[ -n "$deps" ] || problem "tools/deps.sh: no need=\"gcc make ...\" list found"
for page in README.md docs/getting-started.md; do
    named=$(tr '\n' ' ' <"$page" | grep -o '`tools/deps\.sh`: `[^`]*`' | head -n 1 |
        sed 's/.*: `//; s/`$//' | tr ' ' '\n' | grep -v '^$' | sort || true)
    [ "$named" = "$deps" ] || problem "$page: the packages after \`tools/deps.sh\`: are not \
tools/deps.sh's ($(echo $deps))"
done
for pkg in $test_deps; do
    grep -q "\`$pkg\`" README.md ||
        problem "README.md: does not name $pkg, which make test installs (test-deps)"
done

# ---- (h) make targets that exist ------------------------------------------------------

# Every `make TARGET` of README.md and docs/ (studies aside), in a code span or at the
# start of a line of a code block, names a target of the Makefile: a .PHONY one or a
# file under build/.
phony=$(sed -n 's/^\.PHONY: //p' Makefile)
grep -v -e '^docs/studies/' -e '^docs/bench/' "$tmp/named_in" | grep '\.md$' |
    while read -r f; do
        { grep -o '`make [^`]*`' "$f" | sed 's/^`//; s/`$//'
          grep -E '^(\$ )?make( |$)' "$f" | sed 's/^\$ //'; } |
            awk '{ for (i = 2; i <= NF; i++) {
                       if ($i ~ /^(#|&&|\|\||;|\||>|2>)/) break
                       if ($i !~ /=/ && $i !~ /^-/) print $i } }' |
            sed 's/[^A-Za-z0-9_./-].*//' | sort -u | while read -r target; do
                case " $phony " in *" $target "*) continue ;; esac
                case $target in build/* | '') continue ;; esac
                echo "$f: names \`make $target\`, which is no target of the Makefile"
            done
    done >"$tmp/targets"
while read -r t; do problem "$t"; done <"$tmp/targets"

# ---- (i) the public headers ----------------------------------------------------------

# Every header of the library's folders but the Makefile's INTERNAL_HEADERS is
# public: headlab.h must reach it (the compiler's list of what headlab.h
# includes), and its opening comment must show a use (an indented line).
lib_dirs=$(sed -n 's/^LIB_DIRS := //p' Makefile)
${CC:-cc} -std=c11 -I. -I"$build/include" -x c -MM -MT headlab headlab.h >"$tmp/mm" 2>&1 ||
    problem "headlab.h: its includes do not resolve: $(head -n 3 "$tmp/mm")"
tr -d '\\' <"$tmp/mm" | tr ' ' '\n' | grep '\.h$' | sed 's|^\./||' | sort -u >"$tmp/reached" || true
for dir in $lib_dirs; do
    for h in "$dir"/*.h; do
        [ -e "$h" ] || continue
        case " $internal " in *" $h "*) continue ;; esac
        grep -qxF "$h" "$tmp/reached" ||
            problem "headlab.h: does not include $h, a public header (not in INTERNAL_HEADERS)"
        awk 'NR == 1 && !/^\/\*/ { exit 1 } /\*\// { exit !found } /^ \*     [^ ]/ { found = 1 }' \
            "$h" || problem "$h: its opening comment shows no use (an indented example line)"
    done
done

# ---- (j) the naming rule's examples --------------------------------------------------

# Each example of docs/library.md's table of names is a function a public header
# declares, named hl_<module>_... for a module of its row.
for dir in $lib_dirs; do
    for h in "$dir"/*.h; do
        case " $internal " in *" $h "*) ;; *) cat "$h" ;; esac
    done
done >"$tmp/public_decls"
awk '/^## Names/ { on = 1; next } /^## / { on = 0 } on && /^\| `/' docs/library.md |
    while IFS='|' read -r _ modules examples _; do
        for fn in $(echo "$examples" | grep -o '`hl_[a-z0-9_]*`' | tr -d '`'); do
            grep -q "[ *]$fn(" "$tmp/public_decls" ||
                echo "docs/library.md: names $fn, which no public header declares"
            ok=no
            for m in $(echo "$modules" | grep -o '`[a-z0-9_]*`' | tr -d '`'); do
                case $fn in "hl_${m}_"*) ok=yes ;; esac
            done
            [ "$ok" = yes ] ||
                echo "docs/library.md: $fn is no hl_<module>_ name of its row's modules:$modules"
        done
    done >"$tmp/names"
while read -r p; do problem "$p"; done <"$tmp/names"

# ---- (k) what make demo builds -----------------------------------------------------------

# README.md and docs/getting-started.md say `make demo` builds every program: its
# dry run (make -n -B, into a scratch build folder) must link each one.
make --no-print-directory -n -B demo BUILD="$tmp/demo" >"$tmp/demo.log" 2>&1 ||
    problem "make -n demo failed: $(tail -n 3 "$tmp/demo.log")"
for p in $(ls examples/*.c | sed 's|examples/||; s|\.c$||') \
    $(ls -d examples/*/ | sed 's|examples/||; s|/$||'); do
    grep -q -- "-o $tmp/demo/$p\b" "$tmp/demo.log" ||
        problem "make demo does not build $p, and README.md says it builds every program"
done

if [ "$status" = 0 ]; then
    echo "docs: links resolve, every program's flags are on its page, no path outside the"
    echo "  repository, every source path named exists, every listing is the programs' output,"
    echo "  the extending guide quotes the source, the package lists are tools/deps.sh's, every"
    echo "  make target named exists, headlab.h reaches every public header and each shows a use,"
    echo "  the naming rule's examples exist and follow it, make demo builds every program"
fi
exit "$status"
