#!/bin/sh
# Installs the Debian packages headlab builds with, when any is missing.
# Usage: tools/deps.sh [extra-package ...]   (run by `make deps`, `make demo`, `make test`)
# Uses apt-get as root, sudo apt-get otherwise; downloads nothing from anywhere else.
set -eu

need="gcc make pkg-config libpng-dev check libcjson-dev libpcre2-dev libutf8proc-dev $*"
missing=""
for pkg in $need; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $pkg"
    fi
done
[ -z "$missing" ] && exit 0

echo "headlab: installing missing Debian packages:$missing"
if [ "$(id -u)" = 0 ]; then
    as_root=""
elif command -v sudo >/dev/null 2>&1; then
    as_root="sudo"
    echo "headlab: not root, using sudo"
else
    echo "headlab: missing packages:$missing; install them as root (apt-get install$missing)" >&2
    exit 1
fi
apt_get="$as_root apt-get"
# arm64 packages (make arm) come from Debian's multiarch: add the architecture first.
case "$missing" in
*:arm64*)
    dpkg --print-foreign-architectures | grep -qx arm64 || $as_root dpkg --add-architecture arm64
    ;;
esac
$apt_get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $apt_get install -y -qq $missing
