#!/bin/sh
# Runs each fuzz harness built by `make fuzz` for a time, one after the other.
# Usage: tools/fuzz.sh SECONDS HARNESS...
# New inputs go to build/fuzz/corpus/<harness>/ (the committed seeds in
# tests/fuzz/corpus/ stay as they are), crashes to build/fuzz/crashes/<harness>/.
# A crash: fix it, then commit the input under tests/fuzz/regressions/<harness>/
# so `make test` replays it. Exit 1 when any harness crashed.
set -eu
cd "$(dirname "$0")/.."
seconds=$1
shift
status=0
for h in "$@"; do
    mkdir -p "build/fuzz/corpus/$h" "build/fuzz/crashes/$h" "tests/fuzz/regressions/$h"
    echo "fuzz: $h for ${seconds}s"
    if ! "build/fuzz/fuzz_$h" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="build/fuzz/crashes/$h/" \
        "build/fuzz/corpus/$h" "tests/fuzz/corpus/$h" "tests/fuzz/regressions/$h"; then
        echo "fuzz: $h crashed; the input is in build/fuzz/crashes/$h/" >&2
        status=1
    fi
done
exit "$status"
