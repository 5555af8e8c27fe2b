#!/bin/sh
# Writes the Python 3.11 standard library's top-level modules as one text:
# every /usr/lib/python3.11/*.py in byte order of its name, each file whole
# (Debian's libpython3.11-stdlib, installed when missing). Source code rewards
# induction more than the Bible: names repeat within every window.
# Usage: tools/pystd.sh [OUT]   (default out/pystd/pystd.txt; run by `make pystd`)
set -eu
cd "$(dirname "$0")/.."
out=${1:-out/pystd/pystd.txt}
tools/deps.sh libpython3.11-stdlib
mkdir -p "$(dirname "$out")"
LC_ALL=C ls /usr/lib/python3.11/*.py | LC_ALL=C sort | xargs cat > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out ($(wc -c < "$out") bytes, $(LC_ALL=C ls /usr/lib/python3.11/*.py | wc -l) modules)"
