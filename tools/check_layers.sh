#!/bin/sh
# Checks the dependency rule between headlab's layers (docs/library.md, "Folders and layers").
# Each folder may build on the folders its row of allowed() below names, and
# on no other (a layer lists only what it uses):
#
#   core                        the engine, on nothing
#   files, text, ops            on core
#   data (token files)          on core, files and text
#   cli (the option parser)     on core and ops (the kernel set it reports)
#   models                      on core and ops
#   viz                         on core and files
#   train                       on core, ops and models
#   io                          on core, files, text (the vocabulary a model
#                               file stores, strict JSON), models and train
#                               (the optimizer state a checkpoint stores)
#   tasks (datasets, probes)    on core, text, models and train (eval sets)
#   gradcheck (the catalogue)   on core, ops and models
#   analysis (head studies)     on core, text, ops, models and train
#   report (files of a study)   on core, files, text, models, viz, train, io,
#                               tasks and analysis
#
# Nothing below a layer builds on it: analysis/ never reaches report/ or
# tasks/, models/ never train/.
#
# Every `#include "dir/..."` (or `<dir/...>` naming one of headlab's folders)
# in a library file must name its own layer or one it may build on. And, when
# the library's objects are built (tools/check_layers.sh [OBJ_DIR], default
# build/obj), every function or variable an object uses from another layer
# must come from one it may build on: a call needs no include to break the
# rule (a prototype written by hand, a header that declares another layer's
# function). Prints each offence; exit 1 if any. Run by `make test`.
set -eu
cd "$(dirname "$0")/.."

allowed() {
    case $1 in
    core)      echo "core" ;;
    files)     echo "core files" ;;
    text)      echo "core text" ;;
    data)      echo "core files text data" ;;
    ops)       echo "core ops" ;;
    cli)       echo "core ops cli" ;;
    models)    echo "core ops models" ;;
    viz)       echo "core files viz" ;;
    train)     echo "core ops models train" ;;
    io)        echo "core files text models train io" ;;
    tasks)     echo "core text models train tasks" ;;
    gradcheck) echo "core ops models gradcheck" ;;
    analysis)  echo "core text ops models train analysis" ;;
    report)    echo "core files text models viz train io tasks analysis report" ;;
    esac
}

status=0
layers="core files text data ops cli models viz train io tasks gradcheck analysis report"
for layer in $layers; do
    ok=$(allowed "$layer")
    for file in "$layer"/*.c "$layer"/*.h "$layer"/*/*.c "$layer"/*/*.h; do
        [ -e "$file" ] || continue
        # line and dir of every include with a directory: quoted, or in angle
        # brackets naming one of headlab's own folders (<ops/gemm.h>)
        {
            grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"/]*/' "$file" |
                sed 's|^\([0-9]*\):[^"]*"\([^"/]*\)/.*|\1 \2|'
            grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*<[^>/]*/' "$file" |
                sed 's|^\([0-9]*\):[^<]*<\([^>/]*\)/.*|\1 \2|' |
                grep -E " ($(echo "$layers" | tr ' ' '|')|examples|tests|bench)\$"
        } >"${TMPDIR:-/tmp}/hl_layers.$$" || true
        while read -r line dir; do
            case " $ok " in
            *" $dir "*) ;;
            *)
                echo "$file:$line: $layer/ may not include $dir/ (it builds on: $ok)" >&2
                status=1
                ;;
            esac
        done <"${TMPDIR:-/tmp}/hl_layers.$$"
        # a bare "name.h" would hide which layer it comes from
        if grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"/]*"' "$file" >&2; then
            echo "$file: includes must name their directory (\"core/tensor.h\")" >&2
            status=1
        fi
    done
done
rm -f "${TMPDIR:-/tmp}/hl_layers.$$"
[ "$status" = 0 ] && echo "layers: every include follows the dependency rule"

# The calls: each layer's undefined symbols against the layer defining them.
obj=${1:-build/obj}
if [ -d "$obj/core" ]; then
    rules=""
    for layer in $layers; do rules="$rules$layer:$(allowed "$layer" | tr ' ' ,);"; done
    for layer in $layers; do
        [ -d "$obj/$layer" ] || continue
        find "$obj/$layer" -name '*.o' | sort | while read -r o; do
            # only objects of sources that exist (a stale one of a moved file
            # would speak for code that is gone); kernels are NAME.SET.o
            src=${o#"$obj"/}
            src=${src%.o}
            case $src in ops/kernels/*) src=${src%.*} ;; esac
            [ -e "$src.c" ] || continue
            nm -g --defined-only "$o" | awk -v l="$layer" 'NF == 3 { print "D", l, $3 }'
            nm -u "$o" | awk -v l="$layer" -v o="$o" '$1 == "U" { print "U", l, $2, o }'
        done
    done | awk -v rules="$rules" '
        BEGIN {
            n = split(rules, r, ";")
            for (i = 1; i <= n; i++) if (r[i] != "") {
                split(r[i], kv, ":"); ok[kv[1]] = "," kv[2] ","
            }
        }
        $1 == "D" { def[$3] = $2; next }
        { use[++m] = $0 }
        END {
            bad = 0
            for (i = 1; i <= m; i++) {
                split(use[i], u, " ")
                if (!(u[3] in def)) continue         # libc, libpng, OpenMP, ...
                if (index(ok[u[2]], "," def[u[3]] ",")) continue
                printf "%s: %s/ uses %s from %s/ (it builds on: %s)\n", u[4], u[2], u[3],
                    def[u[3]], substr(ok[u[2]], 2, length(ok[u[2]]) - 2) > "/dev/stderr"
                bad = 1
            }
            exit bad
        }' || status=1
    [ "$status" = 0 ] && echo "layers: every call between layers follows the dependency rule"
fi
exit "$status"
