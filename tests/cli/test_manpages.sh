#!/usr/bin/env bash
# The man pages and the systemd unit: the pages format without a warning; every option
# the tools' usage names is in their page, every config key docs/config.md documents is in
# mqr.yaml(5); the unit passes systemd-analyze verify with no message and its exposure
# (systemd-analyze security) stays low.
# usage: test_manpages.sh MQR MQRD SOURCE_DIR
set -u
mqr=$1
mqrd=$2
src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }
plain() { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$1"; }

for page in mqr.1 mqrd.8 mqr.yaml.5; do
  if groff -man -ww -z "$src/man/$page" >"$tmp/groff" 2>&1 && [ ! -s "$tmp/groff" ]; then ok "groff-$page"
  else bad "groff-$page: $(cat "$tmp/groff")"; fi
done

# Every long option of every command's usage is in mqr(1); mqrd's in mqrd(8).
plain "$src/man/mqr.1" >"$tmp/mqr.1"
for c in send recv stat config route schema avro journal address queue user; do
  missing=""
  for o in $("$mqr" "$c" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    grep -qF -- "$o" "$tmp/mqr.1" || missing="$missing $o"
  done
  [ -z "$missing" ] && ok "mqr.1-$c" || bad "mqr.1-$c lacks$missing"
done
plain "$src/man/mqrd.8" >"$tmp/mqrd.8"
missing=""
for o in $("$mqrd" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
  grep -qF -- "$o" "$tmp/mqrd.8" || missing="$missing $o"
done
[ -z "$missing" ] && ok "mqrd.8-options" || bad "mqrd.8 lacks$missing"

# The daemon's page and the client's say which protocols mqrd speaks.
for page in mqrd.8 mqr.1; do
  grep -q MQTT "$tmp/$page" && grep -q STOMP "$tmp/$page" && ok "$page-protocols" || bad "$page names not MQTT and STOMP"
done

# The README: every option of mqr send's usage in its send synopsis, every mqr command in
# its tool list, every installed pkg-config file in its list.
readme=$src/README.md
synopsis=$(sed -n '/^mqr send \[/,/^mqr recv/p' "$readme")
missing=""
for o in $("$mqr" send --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
  [ "$o" = --help ] && continue
  echo "$synopsis" | grep -qF -- "$o" || missing="$missing $o"
done
[ -z "$missing" ] && ok "readme-send" || bad "README's mqr send lacks$missing"
missing=""
for c in send recv stat config route schema avro journal address queue user; do
  grep -q "^mqr $c " "$readme" || missing="$missing $c"
done
[ -z "$missing" ] && ok "readme-commands" || bad "README's tool list lacks$missing"
missing=""
for pc in "$src"/cmake/pc/*.pc.in; do
  name=$(basename "$pc" .pc.in)
  grep -q "\`$name\`" "$readme" || missing="$missing $name"
done
[ -z "$missing" ] && ok "readme-pkg-config" || bad "README's pkg-config list lacks$missing"

# Every key in docs/config.md's tables is in mqr.yaml(5).
plain "$src/man/mqr.yaml.5" >"$tmp/mqr.yaml.5"
missing=""
for k in $(grep -o '^| `[a-z-]*`' "$src/docs/config.md" | tr -d '|` ' | sort -u); do
  grep -qw -- "$k" "$tmp/mqr.yaml.5" || missing="$missing $k"
done
[ -z "$missing" ] && ok "mqr.yaml.5-keys" || bad "mqr.yaml.5 lacks$missing"

# The unit, pointed at this build's mqrd.
unit=$tmp/mqrd.service
sed "s|/usr/local/sbin/mqrd|$mqrd|g" "$src/contrib/systemd/mqrd.service" >"$unit"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify --man=no "$unit" >"$tmp/verify" 2>&1
  [ ! -s "$tmp/verify" ] && ok "unit-verify" || bad "unit-verify: $(cat "$tmp/verify")"
  exposure=$(systemd-analyze security --offline=yes "$unit" 2>/dev/null | grep -o 'Overall exposure level for [^:]*: [0-9.]*' |
    grep -o '[0-9.]*$')
  awk -v e="${exposure:-99}" 'BEGIN { exit !(e <= 2.5) }' && ok "unit-exposure $exposure" ||
    bad "unit-exposure ${exposure:-unknown} (want <= 2.5)"
  for k in DynamicUser=yes StateDirectory=mqr NoNewPrivileges=yes; do
    grep -qx "$k" "$unit" && ok "unit-$k" || bad "unit lacks $k"
  done
else
  bad "systemd-analyze is missing (scripts/deps.sh test installs systemd)"
fi
echo "manpages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
