#!/usr/bin/env bash
# mqr send, recv and stat against a real mqrd on 127.0.0.1 (an ephemeral port): exact
# stdout, errors with their codes, exit statuses; and mqrd's own options.
# usage: test_cli_broker.sh MQR MQRD SOURCE_DIR
set -u
mqr=$1
mqrd=$2
src=$3
tmp=$(mktemp -d)
passed=0
failed=0
cat >"$tmp/mqr.yaml" <<'YAML'
listeners:
  - {name: main, host: 127.0.0.1, port: 0}
address-settings:
  "#": {auto-create-addresses: true, auto-create-queues: true}
  "closed.#": {auto-create-addresses: false}
addresses:
  orders: {anycast: [orders]}
  news: {multicast: [news.a, news.b]}
  weather: {anycast: [weather]}
YAML
"$mqrd" --config "$tmp/mqr.yaml" 2>"$tmp/mqrd.log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do grep -q "ready" "$tmp/mqrd.log" && break; sleep 0.05; done
port=$(grep -o "on 127.0.0.1:[0-9]*" "$tmp/mqrd.log" | head -1 | cut -d: -f2)
url="tcp://127.0.0.1:$port"

# shellcheck source=expect.sh
. "$(dirname "$0")/expect.sh"

expect send 0 "sent 3 to orders: OK 3" "" -- "$mqr" send --url "$url" --body hello --count 3 orders
expect recv 0 "hello
hello
hello" "" -- "$mqr" recv --url "$url" --count 3 orders
expect recv-timeout 1 "" "timed out after 0.3 s with 0 of 1 messages" -- "$mqr" recv --url "$url" --timeout 0.3 orders
expect send-multicast 0 "sent 1 to news: OK 1" "" -- "$mqr" send --url "$url" --property k=v --body both news
expect recv-copy-a 0 "both" "" -- "$mqr" recv --url "$url" news.a
expect recv-copy-b 0 "both" "" -- "$mqr" recv --url "$url" news.b
expect send-file 0 "sent 1 to orders: OK 1" "" -- "$mqr" send --url "$url" --file "$src/tests/data/avro/weather.json" orders
expect recv-file 0 "$(cat "$src/tests/data/avro/weather.json")" "" -- "$mqr" recv --url "$url" orders
expect send-avro 0 "sent 1 to weather: OK 1" "" -- "$mqr" send --url "$url" \
  --json '{"station":"011990-99999","time":-619524000000,"temp":22}' --schema "$src/tests/data/avro/weather.avsc" weather
expect recv-avro 0 '{"station":"011990-99999","time":-619524000000,"temp":22}' "" -- \
  "$mqr" recv --url "$url" --schema "$src/tests/data/avro/weather.avsc" weather
expect send-avro-bad 1 "" "--json:1:" -- "$mqr" send --url "$url" --json '{"station":1}' \
  --schema "$src/tests/data/avro/weather.avsc" weather
expect send-refused 1 "" "ENOADDR (-5)" -- "$mqr" send --url "$url" --body x closed.x
expect send-wildcard 1 "" "EWILDCARDSEND (-14)" -- "$mqr" send --url "$url" --body x 'news.#'
expect recv-no-queue 1 "" "ENOQUEUE (-7)" -- "$mqr" recv --url "$url" --timeout 1 nope
expect send-dup 0 "sent 2 to orders: OK 1 DUPLICATE_ID 1" "" -- "$mqr" send --url "$url" --dup-id d1 --count 2 --body once orders
expect stat 0 "*" "" -- "$mqr" stat --url "$url"
grep -q "^  orders  *address=orders  *ANYCAST   depth=1 " "$tmp/out" \
  && grep -q "^connections=1 dropped=0$" "$tmp/out" \
  && { echo "ok   stat-content"; passed=$((passed + 1)); } \
  || { echo "FAIL stat-content"; cat "$tmp/out"; failed=$((failed + 1)); }
expect no-broker 1 "" "cannot connect to tcp://127.0.0.1:1" -- "$mqr" stat --url tcp://127.0.0.1:1
expect bad-url 1 "" "must be tcp://HOST:PORT" -- "$mqr" stat --url http://x
expect send-usage 2 "" "usage: mqr send" -- "$mqr" send --url "$url"
expect mqrd-check 0 "$tmp/mqr.yaml: ok: 1 listeners, 3 addresses, 4 queues, 2 address-settings" "" -- "$mqrd" --check --config "$tmp/mqr.yaml"
printf 'addresses:\n  a: {anycast: {q: {max-consumers: -5}}}\n' >"$tmp/bad.yaml"
expect mqrd-check-bad 1 "" "bad.yaml:2:" -- "$mqrd" --check --config "$tmp/bad.yaml"
expect mqrd-version 0 "*" "" -- "$mqrd" --version
expect mqrd-help 0 "*" "" -- "$mqrd" --help
expect mqrd-bad-option 2 "" "usage: mqrd" -- "$mqrd" --frobnicate

kill -TERM $pid
wait $pid
rc=$?
if [ "$rc" = 0 ] && grep -q "stopped" "$tmp/mqrd.log"; then echo "ok   mqrd-sigterm"; passed=$((passed + 1));
else echo "FAIL mqrd-sigterm: exit $rc"; cat "$tmp/mqrd.log"; failed=$((failed + 1)); fi
echo "cli-broker: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
