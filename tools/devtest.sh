#!/bin/sh
# Builds and runs some test suites with the named sources compiled under the
# sanitizers, everything else taken from the library (make lib, brought up to
# date first): the named files' objects come first, so they stand in for the
# library's. For working on one op family in seconds. Not used by make.
#   tools/devtest.sh [double] SUITE[,SUITE...] ops/file.c ...
# e.g. tools/devtest.sh double softmax,mask ops/softmax.c ops/mask.c
set -eu
real="" lib=build/libheadlab.a make_real=float
if [ "$1" = double ]; then
    real=-DHL_REAL_DOUBLE lib=build/double/libheadlab.a make_real=double
    shift
fi
suites=$1; shift
list=""
for s in $(echo "$suites" | tr , ' '); do list="$list X($s)"; done
tests=""
for s in $(echo "$suites" | tr , ' '); do tests="$tests tests/test_$s.c"; done
make --no-print-directory -s REAL=$make_real lib # incremental: the rest as the tree has it
make --no-print-directory -s REAL=$make_real "$(dirname "$lib")/include/ops/op_headers.h"
out=/tmp/devtest_$(echo "$suites" | tr , _)${real:+_double}
libs="check libcjson libpng libpcre2-8 libutf8proc"
# shellcheck disable=SC2086
gcc -std=c11 -O1 -g -fopenmp -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
    -D_POSIX_C_SOURCE=200809L $real -I. -I"$(dirname "$lib")/include" \
    $(pkg-config --cflags $libs) -fsanitize=address,undefined -fno-sanitize-recover=undefined \
    "-DHL_TEST_SUITES(X)=$list" \
    "$@" tests/main.c tests/testutil.c $tests "$lib" $(pkg-config --libs $libs) -lm -o "$out"
CK_FORK=no OMP_NUM_THREADS=2 "$out"
