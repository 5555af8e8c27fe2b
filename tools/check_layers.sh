#!/bin/sh
# Checks the dependency rule between headlab's layers (docs/library.md, "Folders and layers"):
#
#   core <- ops <- models <- analysis;  files (whole-or-nothing file writes,
#   directories), text (tokens), io, viz and train build on core (io and train
#   also on models, io on train for the optimizer state it checkpoints and on
#   text for the vocabulary it stores, io and viz on files for their file
#   writes); data (token files) builds on core, files and text.
#
# Every `#include "dir/..."` (or `<dir/...>` naming one of headlab's folders)
# in a library file must name its own layer or one it may build on. Prints each offending file and line; exit 1 if any.
# Run by `make test`.
set -eu
cd "$(dirname "$0")/.."

allowed() {
    case $1 in
    core)     echo "core" ;;
    files)    echo "core files" ;;
    text)     echo "core text" ;;
    data)     echo "core files text data" ;;
    ops)      echo "core ops" ;;
    models)   echo "core ops models" ;;
    viz)      echo "core files viz" ;;
    train)    echo "core ops models train" ;;
    io)       echo "core files text models train io" ;;
    analysis) echo "core files text data ops models io viz train analysis" ;;
    esac
}

status=0
for layer in core files text data ops models viz train io analysis; do
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
                grep -E ' (core|files|text|data|ops|models|io|viz|train|analysis|examples|tests|bench)$'
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
exit "$status"
