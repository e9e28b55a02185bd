#!/usr/bin/env bash
# cmake --install into a scratch prefix, then, from the installed tree only: the docs'
# embedding example (docs/embedding.md) and client example (docs/client.md), and a
# router-and-codec consumer, built with pkg-config (shared, no --static) and with
# find_package(mqr COMPONENTS ...) (shared and static), run, and their output checked
# against the docs. The client example talks to the installed mqrd on 127.0.0.1.
# usage: test_install.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install: $*"; exit 1; }
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
p=$tmp/prefix
libdir=$(ls -d "$p"/lib*/ | head -1)
libdir=${libdir%/}

# What is installed: every library whose header is installed, shared with a versioned
# SONAME and static; both tools; man pages, the default config and the systemd unit;
# pkg-config and CMake files.
for h in mqr common routing codec journal filter config protocol broker client; do
  test -f "$p/include/mqr/$h.h" || fail "no include/mqr/$h.h"
done
for l in common routing codec journal filter config protocol broker client; do
  test -f "$libdir/libmqr_$l.a" || fail "no libmqr_$l.a"
  so=$(readlink -f "$libdir/libmqr_$l.so")
  soname=$(objdump -p "$so" | awk '/SONAME/ {print $2}')
  [ "$soname" = "libmqr_$l.so.0" ] || fail "libmqr_$l.so has SONAME '$soname'"
  test -e "$libdir/$soname" || fail "no $soname link"
  test -f "$libdir/pkgconfig/mqr-$l.pc" || fail "no mqr-$l.pc"
done
test -f "$libdir/pkgconfig/mqr.pc" || fail "no mqr.pc"
test -x "$p/bin/mqr" || fail "no bin/mqr"
test -x "$p/sbin/mqrd" || fail "no sbin/mqrd"
for m in man1/mqr.1 man5/mqr.yaml.5 man8/mqrd.8; do
  test -s "$p/share/man/$m" || fail "no man page $m"
done
test -s "$p/share/mqr/systemd/mqrd.service" || fail "no systemd unit"
"$p/sbin/mqrd" --check --config "$p/share/mqr/mqr.yaml" >/dev/null || fail "the installed default config"
"$p/sbin/mqrd" --version >/dev/null || fail "the installed mqrd does not run"

# The docs' examples, as a user copies them.
ex=$tmp/examples
python3 "$src/tests/docs/doc_examples.py" extract "$src/docs/embedding.md" "$ex" >/dev/null
python3 "$src/tests/docs/doc_examples.py" extract "$src/docs/client.md" "$ex" >/dev/null
check() { # DOC NAME PROGRAM: runs it (the client against the installed mqrd), compares
  LD_LIBRARY_PATH=$libdir python3 "$src/tests/docs/doc_examples.py" check "$src/docs/$1.md" "$2" "$3" \
    "$p/sbin/mqrd" >/dev/null || { LD_LIBRARY_PATH=$libdir python3 "$src/tests/docs/doc_examples.py" check \
    "$src/docs/$1.md" "$2" "$3" "$p/sbin/mqrd"; fail "$3"; }
}
n=0

# pkg-config, shared libraries, no --static.
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -o "$tmp/pc_embedded" "$ex/embedded.c" $(pkg-config --cflags --libs mqr-broker) || fail "pkg-config mqr-broker"
check embedding embedded "$tmp/pc_embedded"; n=$((n + 1))
cc -o "$tmp/pc_client" "$ex/client.c" $(pkg-config --cflags --libs mqr-client) || fail "pkg-config mqr-client"
check client client "$tmp/pc_client"; n=$((n + 1))
cc -o "$tmp/pc_consumer" "$src/tests/install/consumer/main.c" $(pkg-config --cflags --libs mqr) || fail "pkg-config mqr"
[ "$(LD_LIBRARY_PATH=$libdir "$tmp/pc_consumer")" = "OK q" ] || fail "pkg-config consumer"; n=$((n + 1))
objdump -p "$tmp/pc_embedded" | grep -q "NEEDED.*libmqr_broker.so.0" || fail "pkg-config did not link shared"
# pkg-config --static: every mqr library a static link needs is named (each -lmqr_X taken
# as its archive, the system's libraries as they are).
for pc in mqr-broker mqr-client; do
  libs=""
  for f in $(pkg-config --static --libs "$pc"); do
    case "$f" in -lmqr_*) libs="$libs $libdir/lib${f#-l}.a" ;; *) libs="$libs $f" ;; esac
  done
  src_c="$ex/embedded.c"; [ "$pc" = mqr-client ] && src_c="$ex/client.c"
  # shellcheck disable=SC2086
  cc -o "$tmp/static_$pc" "$src_c" $(pkg-config --cflags "$pc") $libs || fail "pkg-config --static $pc"
  objdump -p "$tmp/static_$pc" | grep -q "NEEDED.*libmqr_" && fail "pkg-config --static $pc linked a shared mqr"
  n=$((n + 1))
done

# CMake, find_package with components: shared and static.
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$p" -DEXAMPLES="$ex" >/dev/null
cmake --build "$tmp/consumer" >/dev/null || fail "find_package build"
[ "$("$tmp/consumer/consumer")" = "OK q" ] || fail "find_package consumer"; n=$((n + 1))
check embedding embedded "$tmp/consumer/embedded"; n=$((n + 1))
check embedding embedded "$tmp/consumer/embedded_static"; n=$((n + 1))
check client client "$tmp/consumer/client"; n=$((n + 1))
objdump -p "$tmp/consumer/embedded_static" | grep -q "libmqr_" && fail "embedded_static links a shared mqr"
# A component that does not exist is refused.
mkdir -p "$tmp/bad"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(b C)\nfind_package(mqr REQUIRED COMPONENTS nosuch)\n' \
  > "$tmp/bad/CMakeLists.txt"
if cmake -S "$tmp/bad" -B "$tmp/bad/b" -DCMAKE_PREFIX_PATH="$p" >/dev/null 2>&1; then
  fail "find_package accepted COMPONENTS nosuch"
fi
echo "install: $n passed, 0 failed"
