#!/usr/bin/env bash
# cmake --install into a scratch prefix, then build an embedder two ways: find_package(mqr)
# and pkg-config mqr. Each must compile, link and route.
# usage: test_install.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/mqr/mqr.h"
test -x "$tmp/prefix/bin/mqr"
libdir=$(ls -d "$tmp"/prefix/lib*/ | head -1)
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
out=$("$tmp/consumer/consumer")
[ "$out" = "OK q" ] || { echo "find_package consumer printed '$out'"; exit 1; }
PKG_CONFIG_PATH="$libdir/pkgconfig" cc -o "$tmp/pc" "$src/tests/install/consumer/main.c" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs --static mqr)
out=$("$tmp/pc")
[ "$out" = "OK q" ] || { echo "pkg-config consumer printed '$out'"; exit 1; }
echo "install: 2 passed, 0 failed"
