#!/usr/bin/env bash
# The mqr tool, driven as a person would: exact stdout, the error on stderr, exit codes.
# usage: test_cli.sh MQR_BINARY SOURCE_DIR
set -u
mqr=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

# shellcheck source=expect.sh
. "$(dirname "$0")/expect.sh"

conf=$src/conf/mqr.yaml
cat >"$tmp/closed.yaml" <<'YAML'
address-settings:
  "#":
    auto-create-addresses: false
addresses:
  orders:
    anycast: [orders]
YAML

expect version 0 "mqr 0.1.0" "" -- "$mqr" --version
expect check-default 0 "*" "" -- "$mqr" config check "$conf"
grep -q "^$conf: OK: 2 listeners, 6 addresses (1 wildcard), 8 queues, 2 address-settings" "$tmp/out" \
  && { echo "ok   check-summary"; passed=$((passed + 1)); } \
  || { echo "FAIL check-summary: $(head -1 "$tmp/out")"; failed=$((failed + 1)); }
expect check-embedded 0 "*" "" -- "$mqr" config check
expect check-bad 1 "" "01-unknown-top-key.yaml:3:1: unknown key 'adresses' in the config" -- \
  "$mqr" config check "$src/tests/data/config/bad/01-unknown-top-key.yaml"
expect check-missing 1 "" "cannot open" -- "$mqr" config check "$tmp/nope.yaml"
expect route-anycast-round-robin 0 "OK jobs.worker-1
OK jobs.worker-2
OK jobs.worker-1" "" -- "$mqr" route --config "$conf" --count 3 jobs
expect route-multicast-wildcard 0 "OK news.audit news.archive news.all" "" -- "$mqr" route --config "$conf" news
expect route-prefix 0 "OK news.europe.reader news.all" "" -- "$mqr" route --config "$conf" multicast://news.europe
expect route-dup-id 0 "OK orders
DUPLICATE_ID
DUPLICATE_ID" "" -- "$mqr" route --config "$conf" --count 3 --dup-id x-1 orders
expect route-dla 0 "NO_BINDINGS_DLA (to DLQ) DLQ" "" -- "$mqr" route --config "$conf" --routing-type multicast orders.eu
expect route-no-bindings 0 "NO_BINDINGS" "" -- "$mqr" route --config "$conf" --routing-type MULTICAST weather
expect route-auto-create-queue 0 "OK tasks
OK tasks" "" -- "$mqr" route --config "$conf" --count 2 --routing-type ANYCAST tasks
expect route-fqqn 0 "OK news.archive" "" -- "$mqr" route --config "$conf" news::news.archive
expect route-json 0 '{"send":1,"status":"OK","address":"jobs","queues":["jobs.worker-1"],"diverts":[],"created_address":false,"created_queue":false,"added_routing_type":false}
{"send":2,"status":"OK","address":"jobs","queues":["jobs.worker-2"],"diverts":[],"created_address":false,"created_queue":false,"added_routing_type":false}' \
  "" -- "$mqr" route --config "$conf" --json --count 2 jobs
# Diverts: the route names the ones that take a copy; config show lists them.
cat >"$tmp/divert.yaml" <<'EOF'
addresses:
  orders: {anycast: [orders]}
diverts:
  spy: {address: orders, forwarding-address: [audit, log]}
  ex: {address: prices, forwarding-address: b, exclusive: true, routing-type: PASS, filter: "office = 'NY'"}
EOF
expect route-divert 0 "OK orders diverted: spy" "" -- "$mqr" route --config "$tmp/divert.yaml" --routing-type ANYCAST orders
"$mqr" config show "$tmp/divert.yaml" >"$tmp/out" 2>&1 &&
  grep -qx "divert ex address=prices forwarding-address=b exclusive=true routing-type=PASS routing-name=ex filter=office = 'NY'" "$tmp/out" &&
  grep -qx "divert spy address=orders forwarding-address=audit,log exclusive=false routing-type=STRIP routing-name=spy filter=" "$tmp/out" &&
  { echo "ok   config-show-diverts"; passed=$((passed + 1)); } ||
  { echo "FAIL config-show-diverts: $(grep divert "$tmp/out")"; failed=$((failed + 1)); }
expect route-wildcard-refused 1 "" "address 'news.#' is a wildcard" -- "$mqr" route --config "$conf" 'news.#'
expect route-missing-refused 1 "" "address 'ghost' does not exist (auto-create-addresses is off) [ENOADDR]" -- \
  "$mqr" route --config "$tmp/closed.yaml" ghost
expect route-type-refused 1 "" "does not exist for routing type MULTICAST" -- \
  "$mqr" route --config "$tmp/closed.yaml" --routing-type MULTICAST orders
expect route-bad-type 2 "" "unknown routing type 'BROADCAST'" -- "$mqr" route --routing-type BROADCAST orders
expect route-bad-count 2 "" "--count must be" -- "$mqr" route --count 0 orders
expect route-no-address 2 "" "give exactly one ADDRESS" -- "$mqr" route
expect route-bad-listener 1 "" "has no listener 'nope'" -- "$mqr" route --listener nope orders
expect show 0 "*" "" -- "$mqr" config show "$conf"
grep -q "^address news.europe  types=\[MULTICAST\] default=MULTICAST$" "$tmp/out" \
  && grep -q "^  routes ANYCAST: -  MULTICAST: news.europe.reader news.all$" "$tmp/out" \
  && { echo "ok   show-bindings"; passed=$((passed + 1)); } \
  || { echo "FAIL show-bindings"; cat "$tmp/out"; failed=$((failed + 1)); }
# Every setting: the listener's, the defaults, each address-settings entry as written.
grep -qx "listener main host=127.0.0.1 port=61616 protocols=mqr,mqtt,stomp,http,amqp max-frame-size=1048576 handshake-timeout=10000ms idle-timeout=60000ms mqtt-max-packet-size=1048576 mqtt-receive-maximum=65535 mqtt-server-keep-alive=-1 mqtt-topic-alias-maximum=64 mqtt-sys-interval=10000ms stomp-max-frame-size=1048576 stomp-max-headers=1000 stomp-max-header-length=10240 http-max-header-size=8192 http-max-body-size=1048576 http-request-timeout=30000ms http-keep-alive-timeout=60000ms http-anonymous-health=true http-anonymous-metrics=false amqp-max-frame-size=1048576 anycast-prefix=anycast:// multicast-prefix=multicast://" "$tmp/out" \
  && grep -qx "address-settings default auto-create-addresses=true auto-create-queues=true default-address-routing-type=MULTICAST default-queue-routing-type=MULTICAST dead-letter-address=(none) send-to-dla-on-no-route=false id-cache-size=20000 max-size-bytes=-1 address-full-policy=PAGE max-delivery-attempts=10 auto-create-dead-letter-resources=false dead-letter-queue-prefix=DLQ. dead-letter-queue-suffix= redelivery-delay=0 redelivery-delay-multiplier=1 max-redelivery-delay=0 expiry-address=(none) auto-create-expiry-resources=false expiry-queue-prefix=EXP. expiry-queue-suffix= expiry-delay=-1 min-expiry-delay=-1 max-expiry-delay=-1 default-exclusive-queue=false default-last-value-queue=false default-last-value-key= default-group-buckets=-1 default-group-rebalance=false default-ring-size=-1 default-consumers-before-dispatch=0 default-delay-before-dispatch=-1 auto-delete-queues=true auto-delete-queues-delay=0 auto-delete-queues-message-count=0 auto-delete-addresses=true auto-delete-addresses-delay=0 default-non-destructive=false default-group-first-key= config-delete-queues=OFF config-delete-addresses=OFF replicated=false" "$tmp/out" \
  && grep -qx "address-settings 'orders.#' send-to-dla-on-no-route=true" "$tmp/out" \
  && grep -qx "persistence enabled=true directory=mqr-data journal-file-size=10485760 journal-min-files=2 journal-pool-files=-1 journal-buffer-timeout=0ns journal-buffer-size=501760 journal-sync=true journal-compact-min-files=10 journal-compact-percentage=30" "$tmp/out" \
  && grep -qx "wildcard-addresses delimiter='.' any-words='#' single-word='\*' escape='\\\\'" "$tmp/out" \
  && { echo "ok   show-settings"; passed=$((passed + 1)); } \
  || { echo "FAIL show-settings"; head -6 "$tmp/out"; failed=$((failed + 1)); }
# ---- journal files, written by an independent writer (make_journal.py) ----
mkdir -p "$tmp/jdir"
python3 "$src/tests/cli/make_journal.py" "$tmp/jdir/a.jrn" 7 3
python3 "$src/tests/cli/make_journal.py" "$tmp/jdir/b.jrn" 3 2
python3 "$src/tests/cli/make_journal.py" "$tmp/torn.jrn" 4 3 torn
python3 "$src/tests/cli/make_journal.py" "$tmp/damaged.jrn" 5 3 damaged
expect journal-dir 0 "$tmp/jdir/b.jrn: file id 3, 2 records, valid data ends at byte 154 (clean)
$tmp/jdir/a.jrn: file id 7, 3 records, valid data ends at byte 234 (clean)" "" -- "$mqr" journal check "$tmp/jdir"
expect journal-dump 0 "$tmp/jdir/a.jrn:49 REF id=1 payload=10
$tmp/jdir/a.jrn:109 DELETE id=2 payload=20
$tmp/jdir/a.jrn:179 UPDATE id=3 payload=30
$tmp/jdir/a.jrn: file id 7, 3 records, valid data ends at byte 234 (clean)" "" -- "$mqr" journal dump "$tmp/jdir/a.jrn"
expect journal-torn 0 "$tmp/torn.jrn: file id 4, 2 records, valid data ends at byte 179 (torn tail at byte 179)" "" -- \
  "$mqr" journal check "$tmp/torn.jrn"
expect journal-damaged 1 "$tmp/damaged.jrn: file id 5, 0 records, valid data ends at byte 49 (DAMAGED at byte 49)" "" -- \
  "$mqr" journal check "$tmp/damaged.jrn"
expect journal-not 1 "" "not a journal file" -- "$mqr" journal check "$conf"
expect journal-usage 2 "" "usage: mqr journal" -- "$mqr" journal frobnicate "$tmp"

# ---- Avro: schemas, datums, resolution, container files ----
avro=$src/tests/data/avro
expect schema-canonical 0 '{"name":"test.Weather","type":"record","fields":[{"name":"station","type":"string"},{"name":"time","type":"long"},{"name":"temp","type":"int"}]}' "" -- \
  "$mqr" schema canonical "$avro/weather.avsc"
expect schema-fingerprint 0 "9d564df77eac7dcb" "" -- "$mqr" schema fingerprint "$avro/weather.avsc"
printf '{"type":"record","name":"R","fields":[{"name":"a","type":"nope"}]}' >"$tmp/bad.avsc"
expect schema-bad 1 "" "bad.avsc:1:58: fields[0].type: unknown type 'nope'" -- "$mqr" schema canonical "$tmp/bad.avsc"
expect schema-missing 1 "" "nope.avsc: No such file" -- "$mqr" schema fingerprint "$tmp/nope.avsc"
expect schema-usage 2 "" "usage: mqr schema" -- "$mqr" schema digest "$avro/weather.avsc"
head -3 "$avro/weather.json" >"$tmp/w3.json"
expect avro-roundtrip 0 "$(cat "$tmp/w3.json")" "" -- sh -c \
  "'$mqr' avro encode --schema '$avro/weather.avsc' <'$tmp/w3.json' | '$mqr' avro decode --schema '$avro/weather.avsc'"
expect avro-single-object 0 "$(cat "$tmp/w3.json")" "" -- sh -c \
  "'$mqr' avro encode --single-object --schema '$avro/weather.avsc' <'$tmp/w3.json' | '$mqr' avro decode --single-object --schema '$avro/weather.avsc'"
printf '{"station":"x","time":1,"temp":"warm"}\n' >"$tmp/badw.json"
expect avro-encode-bad 1 "" "stdin:1:" -- sh -c "'$mqr' avro encode --schema '$avro/weather.avsc' <'$tmp/badw.json'"
expect avro-decode-truncated 1 "" "datum 1 starting at byte 0: at byte 2: input ends inside a varint" -- sh -c \
  "printf '\002\004' | '$mqr' avro decode --schema '$avro/weather.avsc'"
expect avro-decode-unknown-fingerprint 1 "" "no schema with fingerprint" -- sh -c \
  "printf '\303\001\001\002\003\004\005\006\007\010' | '$mqr' avro decode --single-object --schema '$avro/weather.avsc'"
cat >"$tmp/weather-reader.avsc" <<'JSON'
{"type": "record", "name": "test.Weather", "fields": [
  {"name": "temp", "type": "double"}, {"name": "unit", "type": "string", "default": "F"}]}
JSON
expect avro-reader-schema 0 '{"temp":0.0,"unit":"F"}
{"temp":22.0,"unit":"F"}
{"temp":-11.0,"unit":"F"}' "" -- sh -c \
  "'$mqr' avro encode --schema '$avro/weather.avsc' <'$tmp/w3.json' | '$mqr' avro decode --schema '$avro/weather.avsc' --reader-schema '$tmp/weather-reader.avsc'"
printf '{"type":"record","name":"test.Weather","fields":[{"name":"rain","type":"int"}]}' >"$tmp/incompatible.avsc"
expect avro-reader-incompatible 1 "" "rain: the writer's test.Weather has no such field" -- sh -c \
  "'$mqr' avro encode --schema '$avro/weather.avsc' <'$tmp/w3.json' | '$mqr' avro decode --schema '$avro/weather.avsc' --reader-schema '$tmp/incompatible.avsc'"
expect avro-cat-null 0 "$(cat "$avro/weather.json")" "" -- "$mqr" avro cat "$avro/weather.avro"
expect avro-cat-deflate 0 "$(cat "$avro/weather.json")" "" -- "$mqr" avro cat "$avro/weather-deflate.avro"
expect avro-cat-reader 0 '{"temp":0.0,"unit":"F"}' "" -- sh -c \
  "'$mqr' avro cat --reader-schema '$tmp/weather-reader.avsc' '$avro/weather.avro' | head -1"
head -c 100 "$avro/weather.avro" >"$tmp/cut.avro"
expect avro-cat-truncated 1 "" "cut.avro: at byte 35: length 185 runs past the end of the input" -- "$mqr" avro cat "$tmp/cut.avro"
expect avro-cat-not-avro 1 "" "not an Avro container" -- "$mqr" avro cat "$avro/weather.json"
expect avro-write-deflate 0 "" "" -- sh -c "'$mqr' avro write --schema '$avro/weather.avsc' --codec deflate '$tmp/w.avro' <'$avro/weather.json'"
expect avro-write-cat 0 "$(cat "$avro/weather.json")" "" -- "$mqr" avro cat "$tmp/w.avro"
expect avro-write-bad-line 1 "" "stdin:1:" -- sh -c "'$mqr' avro write --schema '$avro/weather.avsc' '$tmp/bad.avro' <'$tmp/badw.json'"
[ ! -e "$tmp/bad.avro" ] && { echo "ok   avro-write-bad-leaves-nothing"; passed=$((passed + 1)); } \
  || { echo "FAIL avro-write-bad-leaves-nothing"; failed=$((failed + 1)); }
expect avro-usage 2 "" "usage: mqr avro" -- "$mqr" avro decode
expect avro-usage-codec 2 "" "usage: mqr avro" -- "$mqr" avro write --schema "$avro/weather.avsc" --codec snappy "$tmp/x.avro"

expect unknown-command 2 "" "unknown command 'frobnicate'" -- "$mqr" frobnicate

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
