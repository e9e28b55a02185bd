#!/usr/bin/env bash
# The installed headers are contracts: each compiles on its own as C11 and C++17 (gcc and
# clang), and for 32-bit x86 and arm64 (clang --target ... -fsyntax-only, against
# Debian's cross libc headers); none holds internals, and every exported function is
# documented (check_docs.py).
# usage: test_headers.sh SOURCE_DIR
set -u
src=$1
inc=$src/include
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; sed 's/^/     /' "$tmp/log" | head -20; failed=$((failed + 1)); }

# libuv's header needs POSIX's pthread types, which strict C11 hides: what an embedder
# of the broker or the client passes anyway.
posix=-D_POSIX_C_SOURCE=200809L
# libuv's headers for the cross targets: the same files, found after the target's libc.
mkdir -p "$tmp/uv"
cp -r /usr/include/uv.h /usr/include/uv "$tmp/uv/"
resource=$(clang -print-resource-dir)/include

for h in "$inc"/mqr/*.h; do
  name=$(basename "$h")
  printf '#include <mqr/%s>\n#include <mqr/%s>\nint mqr_header_test_%s;\n' "$name" "$name" "${name%.h}" >"$tmp/t.c"
  cp "$tmp/t.c" "$tmp/t.cc"
  w="-Wall -Wextra -Werror -pedantic"
  if gcc -std=c11 $w $posix -fsyntax-only -I"$inc" "$tmp/t.c" >"$tmp/log" 2>&1; then ok "$name c11 gcc"; else bad "$name c11 gcc"; fi
  if clang -std=c11 $w $posix -fsyntax-only -I"$inc" "$tmp/t.c" >"$tmp/log" 2>&1; then ok "$name c11 clang"; else bad "$name c11 clang"; fi
  if g++ -std=c++17 $w -Wno-c99-extensions $posix -fsyntax-only -I"$inc" "$tmp/t.cc" >"$tmp/log" 2>&1; then
    ok "$name c++17 g++"; else bad "$name c++17 g++"; fi
  if clang++ -std=c++17 $w -Wno-c99-extensions $posix -fsyntax-only -I"$inc" "$tmp/t.cc" >"$tmp/log" 2>&1; then
    ok "$name c++17 clang++"; else bad "$name c++17 clang++"; fi
  for t in i686-linux-gnu aarch64-linux-gnu; do
    if [ ! -d "/usr/$t/include" ]; then
      echo "missing /usr/$t/include (scripts/deps.sh test installs the cross libc headers)" >"$tmp/log"
      bad "$name $t"
      continue
    fi
    if clang --target=$t -std=c11 $w $posix -fsyntax-only -nostdinc -isystem "$resource" -isystem "/usr/$t/include" \
      -I"$inc" -idirafter "$tmp/uv" "$tmp/t.c" >"$tmp/log" 2>&1; then ok "$name $t"; else bad "$name $t"; fi
  done
done
if python3 "$src/tests/headers/check_docs.py" "$inc"/mqr/*.h >"$tmp/log" 2>&1; then ok "contracts"; else bad "contracts"; fi
echo "headers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
