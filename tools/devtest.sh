#!/bin/sh
# Builds and runs some test suites against only the named op sources, for
# working on one op family while others are unfinished. Not used by make.
#   tools/devtest.sh [double] SUITE[,SUITE...] ops/file.c ...
# e.g. tools/devtest.sh double softmax,mask ops/softmax.c ops/mask.c
set -eu
real=""
if [ "$1" = double ]; then real=-DHL_REAL_DOUBLE; shift; fi
suites=$1; shift
list=""
for s in $(echo "$suites" | tr , ' '); do list="$list X($s)"; done
tests=""
for s in $(echo "$suites" | tr , ' '); do tests="$tests tests/test_$s.c"; done
make --no-print-directory -s build/include/ops/op_headers.h
out=/tmp/devtest_$(echo "$suites" | tr , _)${real:+_double}
# shellcheck disable=SC2086
gcc -std=c11 -O1 -g -fopenmp -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
    -D_POSIX_C_SOURCE=200809L $real -I. -Ibuild/include $(pkg-config --cflags check libcjson) \
    -fsanitize=address,undefined -fno-sanitize-recover=undefined \
    "-DHL_TEST_SUITES(X)=$list" \
    core/error.c core/tensor.c core/arena.c core/rng.c core/graph.c core/params.c core/gradcheck.c \
    ops/op_table.c ops/op_common.c "$@" tests/main.c tests/testutil.c $tests \
    -Wl,--unresolved-symbols=ignore-all $(pkg-config --libs check libcjson) -lm -o "$out"
CK_FORK=no OMP_NUM_THREADS=2 "$out"
