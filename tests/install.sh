#!/bin/sh
# make install into a temporary prefix; docs/library.md's library example (the C
# block after "tests/install.sh builds it") built against it with
# `pkg-config --cflags --libs headlab` alone and run: its loss must fall; then
# make uninstall must leave no file behind. Run by `make test`.
set -eu
cd "$(dirname "$0")/.."
fail() { echo "install test: $*" >&2; exit 1; }
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
make --no-print-directory install PREFIX="$prefix" >"$prefix/make.log" 2>&1 ||
    { tail -n 20 "$prefix/make.log" >&2; fail "make install failed"; }
for f in lib/libheadlab.a lib/libheadlab.so lib/libheadlab.so.0 lib/pkgconfig/headlab.pc \
    include/headlab/headlab.h include/headlab/core/graph.h bin/charlm bin/heads bin/toy_heads; do
    [ -e "$prefix/$f" ] || fail "make install did not install $f"
done
for f in core/internal.h ops/internal.h; do
    [ ! -e "$prefix/include/headlab/$f" ] || fail "an internal header ($f) was installed"
done
soname=$(objdump -p "$prefix/lib/libheadlab.so" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = libheadlab.so.0 ] || fail "soname is '$soname', not libheadlab.so.0"

mkdir "$prefix/example"
awk '/tests\/install\.sh`? builds it/ { armed = 1 }
     armed && /^```c$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside' docs/library.md >"$prefix/example/example.c"
[ -s "$prefix/example/example.c" ] || fail "no library example in docs/library.md"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -Wall -Wextra -Werror "$prefix/example/example.c" \
    $(pkg-config --cflags --libs headlab) -o "$prefix/example/example" ||
    fail "docs/library.md's example does not build against the installed library"
LD_LIBRARY_PATH="$prefix/lib" "$prefix/example/example" >"$prefix/example/out.txt" ||
    fail "docs/library.md's example failed"
cat "$prefix/example/out.txt"
awk '{ loss[NR] = $NF } END { exit !(NR >= 2 && loss[NR] < loss[1] / 10) }' \
    "$prefix/example/out.txt" || fail "the example's loss did not fall tenfold"
LD_LIBRARY_PATH="$prefix/lib" ldd "$prefix/example/example" | grep -q "$prefix/lib/libheadlab.so.0" ||
    fail "the example is not linked to the installed libheadlab.so"

make --no-print-directory uninstall PREFIX="$prefix" >"$prefix/make.log" 2>&1 ||
    fail "make uninstall failed"
left=$(find "$prefix" -path "$prefix/example" -prune -o -type f ! -name make.log -print \
       -o -type l -print)
[ -z "$left" ] || fail "make uninstall left: $left"
echo "install test: make install, pkg-config build of docs/library.md's example, make uninstall: ok"
