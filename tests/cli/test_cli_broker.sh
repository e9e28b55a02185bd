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
security: {allow-anonymous: true}
listeners:
  - {name: main, host: 127.0.0.1, port: 0, anycast-prefix: "anycast://", multicast-prefix: "multicast://"}
address-settings:
  "#": {auto-create-addresses: true, auto-create-queues: true}
  "closed.#": {auto-create-addresses: false}
  "block.#": {max-size-bytes: 300, address-full-policy: BLOCK}
  "fail.#": {max-size-bytes: 150, address-full-policy: FAIL}
addresses:
  orders: {anycast: [orders]}
  news: {multicast: [news.a, news.b]}
  weather: {anycast: [weather]}
  block.a: {anycast: [block.a]}
  tagged: {anycast: [tagged]}
  fail.a: {anycast: [fail.a]}
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
expect bad-url 2 "" "must be tcp://HOST:PORT" -- "$mqr" stat --url http://x
expect refused 1 "" "connection refused (is mqrd running and listening there?)" -- "$mqr" stat --url tcp://127.0.0.1:1
expect send-refused-conn 1 "" "cannot connect to tcp://127.0.0.1:1: connection refused" -- \
  "$mqr" send --url tcp://127.0.0.1:1 --body x orders
# The reason is said once, not "cannot connect to X: connect: cannot connect to X: ...".
for what in "stat" "send --body x orders" "recv orders"; do
  # shellcheck disable=SC2086
  n=$("$mqr" $what --url tcp://127.0.0.1:1 2>&1 | grep -o "cannot connect" | wc -l)
  [ "$n" = 1 ] && { echo "ok   once-$what"; passed=$((passed + 1)); } ||
    { echo "FAIL once-$what: $n"; failed=$((failed + 1)); }
done
# A peer that accepts and closes at once.
python3 -c 'import socket,sys
s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True)
for _ in range(2):
    c,_=s.accept(); c.close()' >"$tmp/closer.port" &
closer=$!
for _ in $(seq 50); do [ -s "$tmp/closer.port" ] && break; sleep 0.05; done
out=$("$mqr" stat --url "tcp://127.0.0.1:$(cat "$tmp/closer.port")" 2>&1)
n=$(echo "$out" | grep -o "cannot connect" | wc -l)
[ "$n" = 1 ] && { echo "ok   closed-once"; passed=$((passed + 1)); } ||
  { echo "FAIL closed-once: $out"; failed=$((failed + 1)); }
kill $closer 2>/dev/null
# Refused part way: the error, and how many went before it.
expect send-partial 1 "" "2 of 3 sent to fail.a OK 2; 1 refused, 0 not answered" -- \
  "$mqr" send --url "$url" --body "$(printf '%090d' 0)" --count 3 fail.a

# Option values are checked whole; usage errors exit 2 with the usage.
expect bad-timeout 2 "" "--timeout takes seconds" -- "$mqr" recv --url "$url" --timeout abc orders
expect bad-count 2 "" "--count takes a whole number from 1" -- "$mqr" send --url "$url" --count 3x --body x orders
expect bad-type 2 "" "--routing-type takes ANYCAST or MULTICAST" -- "$mqr" send --url "$url" --routing-type any x
expect bad-option 2 "" "usage: mqr recv" -- "$mqr" recv --url "$url" --frobnicate orders
for c in send recv stat config route schema avro journal; do
  expect "help-$c" 0 "*" "" -- "$mqr" "$c" --help
  head -1 "$tmp/out" | grep -q "^usage: mqr $c" && { echo "ok   help-$c-usage"; passed=$((passed + 1)); } \
    || { echo "FAIL help-$c-usage: $(head -1 "$tmp/out")"; failed=$((failed + 1)); }
done
expect help-sub 0 "*" "" -- "$mqr" avro cat --help
expect help-top 0 "*" "" -- "$mqr" --help

# A send that reaches no queue says so, and fails unless that is expected.
expect send-unrouted 1 "sent 2 to lonely: NO_BINDINGS 2" \
  "dropped: address 'lonely' has no queues (it is MULTICAST), so 2 messages went nowhere" -- \
  "$mqr" send --url "$url" --count 2 --body x lonely
expect send-unrouted-ok 0 "sent 1 to lonely: NO_BINDINGS 1" "" -- "$mqr" send --url "$url" --allow-unrouted --body x lonely
# Over the listener's max-frame-size: the limit, and the connection is not just "closed".
head -c 1100000 /dev/zero | tr '\0' 'x' >"$tmp/big"
expect send-too-big 1 "" "more than the broker's max-frame-size of 1048576 bytes" -- \
  "$mqr" send --url "$url" --file "$tmp/big" orders
# Under BLOCK the receipts wait for room: the send times out, saying why.
expect send-block-timeout 1 "" "of 5 receipts: the address may be full and its address-full-policy BLOCK" -- \
  "$mqr" send --url "$url" --timeout 2 --count 5 --body "$(head -c 100 /dev/zero | tr '\0' 'b')" block.a
# The receipted messages are in the queue (the unreceipted one may or may not have been
# read before the broker paused the producer): they drain.
receipted=$(grep -o "with [0-9]* of 5 receipts" "$tmp/err" | cut -d' ' -f2)
expect drain-block 0 "*" "" -- "$mqr" recv --url "$url" --count "${receipted:-5}" block.a

# recv: the message's metadata, as text and as JSON; prefixes as for send.
expect send-props 0 "sent 2 to anycast://tagged: OK 2" "" -- \
  "$mqr" send --url "$url" --property customer=ann --property n:int=2 --priority 7 --user-id u-1 --body "2 apples" \
  --count 2 anycast://tagged
expect recv-verbose 0 "*" "" -- "$mqr" recv --url "$url" --verbose anycast://tagged
grep -q "^message [0-9]* delivery 1 delivery-count 1 address tagged ANYCAST$" "$tmp/out" \
  && grep -q "^priority 7 timestamp [1-9][0-9]* expiration 0 user-id u-1$" "$tmp/out" \
  && grep -qx "property customer:string=ann" "$tmp/out" && grep -qx "property n:int=2" "$tmp/out" \
  && grep -qx "2 apples" "$tmp/out" \
  && { echo "ok   recv-verbose-content"; passed=$((passed + 1)); } \
  || { echo "FAIL recv-verbose-content"; cat "$tmp/out"; failed=$((failed + 1)); }
expect recv-json 0 "*" "" -- "$mqr" recv --url "$url" --json tagged
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["body"]=="2 apples" and m["properties"]=={"customer":"ann","n":2} and m["priority"]==7 and m["user_id"]=="u-1" and m["address"]=="tagged" and m["routing_type"]=="ANYCAST" and m["delivery_count"]==1 and m["message_id"]>0, m' "$tmp/out" \
  && { echo "ok   recv-json-content"; passed=$((passed + 1)); } \
  || { echo "FAIL recv-json-content"; cat "$tmp/out"; failed=$((failed + 1)); }
# A selector: only the messages it matches; the others stay for other consumers. A
# property of the wrong type is refused by send; a bad selector names its column.
expect send-typed 0 "sent 1 to anycast://sel: OK 1" "" -- \
  "$mqr" send --url "$url" --property color=red --property weight:double=1.5 --body red anycast://sel
expect send-typed-2 0 "sent 1 to anycast://sel: OK 1" "" -- \
  "$mqr" send --url "$url" --property color=blue --property weight:double=3.5 --body blue anycast://sel
expect recv-selector 0 "blue" "" -- "$mqr" recv --url "$url" --selector "weight > 2.5 AND color IN ('blue')" sel
expect recv-selector-rest 0 "red" "" -- "$mqr" recv --url "$url" sel
expect send-bad-type 2 "" "not a value of its type" -- "$mqr" send --url "$url" --property n:int=x anycast://sel
expect recv-bad-selector 1 "" "(column 9)" -- "$mqr" recv --url "$url" --timeout 1 --selector "color = " sel
# Management: mqr address and mqr queue (the MANAGE frame).
expect mgmt-address-create 0 "address 'mgmt' created" "" -- "$mqr" address --url "$url" create mgmt ANYCAST
expect mgmt-address-exists 1 "" "EADDREXISTS (-6): address 'mgmt' already exists" -- \
  "$mqr" address --url "$url" create mgmt ANYCAST
expect mgmt-queue-create 0 "queue 'mgmt.q' created on 'mgmt'" "" -- \
  "$mqr" queue --url "$url" create mgmt.q mgmt ANYCAST "filter=color = 'red'" max-consumers=2
expect mgmt-queue-option-bad 1 "" "unknown queue option 'colour'" -- \
  "$mqr" queue --url "$url" create mgmt.x mgmt ANYCAST colour=red
expect mgmt-queue-filter-bad 1 "" "ESYNTAX" -- "$mqr" queue --url "$url" create mgmt.x mgmt ANYCAST "filter=a ="
expect mgmt-send 0 "sent 2 to mgmt: OK 2" "" -- "$mqr" send --url "$url" --property color=red --body red --count 2 mgmt
expect mgmt-browse 0 "*" "" -- "$mqr" queue --url "$url" browse mgmt.q --max 1
[ "$(head -1 "$tmp/out")" = "1 message(s) in 'mgmt.q'" ] &&
  grep -q "^@message_id=[0-9]* @address=mgmt @durable=false @priority=4 .* @body=red color=red$" "$tmp/out" &&
  { echo "ok   mgmt-browse-content"; passed=$((passed + 1)); } ||
  { echo "FAIL mgmt-browse-content"; cat "$tmp/out"; failed=$((failed + 1)); }
expect mgmt-browse-json 0 "*" "" -- "$mqr" queue --url "$url" --json browse mgmt.q
python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert len(r)==2 and r[0]["@body"]=="red" and r[0]["color"]=="red", r' "$tmp/out" &&
  { echo "ok   mgmt-browse-json-content"; passed=$((passed + 1)); } ||
  { echo "FAIL mgmt-browse-json-content"; cat "$tmp/out"; failed=$((failed + 1)); }
expect mgmt-pause 0 "queue 'mgmt.q' paused" "" -- "$mqr" queue --url "$url" pause mgmt.q
expect mgmt-stat-paused 0 "*" "" -- "$mqr" stat --url "$url"
grep -q "^  mgmt.q .* depth=2 .* paused$" "$tmp/out" && { echo "ok   mgmt-stat-paused-content"; passed=$((passed + 1)); } ||
  { echo "FAIL mgmt-stat-paused-content"; cat "$tmp/out"; failed=$((failed + 1)); }
expect mgmt-recv-paused 1 "" "timed out" -- "$mqr" recv --url "$url" --timeout 0.3 mgmt.q
expect mgmt-resume 0 "queue 'mgmt.q' resumed" "" -- "$mqr" queue --url "$url" resume mgmt.q
expect mgmt-recv 0 "red" "" -- "$mqr" recv --url "$url" mgmt.q
expect mgmt-move 0 "1 message(s) moved from 'mgmt.q' to 'weather'" "" -- \
  "$mqr" queue --url "$url" move mgmt.q weather --filter "color = 'red'"
expect mgmt-recv-moved 0 "red" "" -- "$mqr" recv --url "$url" weather
expect mgmt-consumers 0 "0 consumer(s) on 'mgmt.q'" "" -- "$mqr" queue --url "$url" consumers mgmt.q
expect mgmt-send-more 0 "sent 3 to mgmt: OK 3" "" -- "$mqr" send --url "$url" --property color=red --body x --count 3 mgmt
expect mgmt-purge 0 "3 message(s) purged from 'mgmt.q'" "" -- "$mqr" queue --url "$url" purge mgmt.q
expect mgmt-delete-refused 1 "" "EADDRHASQUEUES (-13): address 'mgmt' has 1 queue(s) (force deletes them)" -- \
  "$mqr" address --url "$url" delete mgmt
expect mgmt-delete 0 "address 'mgmt' deleted" "" -- "$mqr" address --url "$url" delete mgmt --force
expect mgmt-queue-gone 1 "" "ENOQUEUE (-7): queue 'mgmt.q' does not exist" -- "$mqr" queue --url "$url" delete mgmt.q
expect mgmt-queue-delete 0 "queue 'tagged' deleted" "" -- "$mqr" queue --url "$url" delete tagged
expect mgmt-usage 2 "" "usage: mqr queue" -- "$mqr" queue --url "$url" bogus x
expect mgmt-usage-args 2 "" "wrong number of arguments for queue move" -- "$mqr" queue --url "$url" move a
expect mgmt-help 0 "*" "" -- "$mqr" address --help
# group-first-key over the network: the first of a group carries the key, true.
expect gfk-create 0 "queue 'gq' created on 'gq'" "" -- "$mqr" queue --url "$url" create gq gq ANYCAST group-first-key=first
expect gfk-send 0 "sent 2 to gq: OK 2" "" -- "$mqr" send --url "$url" --property _AMQ_GROUP_ID=g1 --body g --count 2 gq
expect gfk-recv 0 "*" "" -- "$mqr" recv --url "$url" --json --count 2 gq
python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert r[0]["properties"].get("first") is True and "first" not in r[1]["properties"] and r[1]["properties"]["_AMQ_GROUP_ID"]=="g1", r' "$tmp/out" &&
  { echo "ok   gfk-content"; passed=$((passed + 1)); } ||
  { echo "FAIL gfk-content"; cat "$tmp/out"; failed=$((failed + 1)); }
# A non-destructive queue: every consumer is given the message, which stays.
expect nd-create 0 "queue 'ndq' created on 'ndq'" "" -- "$mqr" queue --url "$url" create ndq ndq ANYCAST non-destructive=true
expect nd-send 0 "sent 1 to ndq: OK 1" "" -- "$mqr" send --url "$url" --body stays ndq
expect nd-recv-1 0 "stays" "" -- "$mqr" recv --url "$url" ndq
expect nd-recv-2 0 "stays" "" -- "$mqr" recv --url "$url" ndq
expect recv-priority 0 "p" "" -- sh -c "\"$mqr\" send --url $url --body p weather >/dev/null && \"$mqr\" recv --url $url 'weather?consumer-priority=9'"
expect recv-bad-param 1 "" "unknown target parameter 'colour=red'" -- "$mqr" recv --url "$url" --timeout 1 'weather?colour=red'
# --delay: not delivered before its time, then delivered.
expect send-delay 0 "sent 1 to anycast://later: OK 1" "" -- \
  "$mqr" send --url "$url" --delay 1500 --body later anycast://later
expect recv-too-soon 1 "" "" -- "$mqr" recv --url "$url" --timeout 0.3 later
expect recv-in-time 0 "later" "" -- "$mqr" recv --url "$url" --timeout 10 later
# --follow receives until interrupted, then exits 0 (orders still holds "once").
"$mqr" recv --url "$url" --follow orders >"$tmp/follow" 2>"$tmp/follow.err" &
fpid=$!
sleep 0.3
"$mqr" send --url "$url" --count 2 --body followed orders >/dev/null
for _ in $(seq 100); do [ "$(wc -l <"$tmp/follow")" -ge 3 ] && break; sleep 0.05; done
kill -INT $fpid
wait $fpid
frc=$?
[ "$frc" = 0 ] && [ "$(cat "$tmp/follow")" = "once
followed
followed" ] && { echo "ok   recv-follow"; passed=$((passed + 1)); } \
  || { echo "FAIL recv-follow: exit $frc"; cat "$tmp/follow" "$tmp/follow.err"; failed=$((failed + 1)); }
expect stat-json 0 "*" "" -- "$mqr" stat --url "$url" --json
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); q={x["name"]: x for x in s["queues"]}; assert q["orders"]["address"]=="orders" and q["orders"]["routing_type"]=="ANYCAST" and s["connections"]>=1, s' "$tmp/out" \
  && { echo "ok   stat-json-content"; passed=$((passed + 1)); } \
  || { echo "FAIL stat-json-content"; cat "$tmp/out"; failed=$((failed + 1)); }
expect send-usage 2 "" "usage: mqr send" -- "$mqr" send --url "$url"
expect mqrd-check 0 "$tmp/mqr.yaml: ok: 1 listeners, 6 addresses, 7 queues, 4 address-settings" "" -- "$mqrd" --check --config "$tmp/mqr.yaml"
expect mqrd-urls 0 "tcp://127.0.0.1:0" "" -- "$mqrd" --urls --config "$tmp/mqr.yaml"
printf 'addresses:\n  a: {anycast: {q: {max-consumers: -5}}}\n' >"$tmp/bad.yaml"
expect mqrd-check-bad 1 "" "bad.yaml:2:" -- "$mqrd" --check --config "$tmp/bad.yaml"
expect mqrd-version 0 "*" "" -- "$mqrd" --version
expect mqrd-help 0 "*" "" -- "$mqrd" --help
expect mqrd-bad-option 2 "" "usage: mqrd" -- "$mqrd" --frobnicate
expect mqrd-bad-recover 2 "" "--recover takes stop or truncate, not 'bogus'" -- "$mqrd" --recover=bogus

# A journal damaged in the middle: mqrd does not start, and says where; --recover=truncate
# cuts it there and starts, keeping the damaged file beside.
mkdir -p "$tmp/data"
python3 "$src/tests/cli/make_journal.py" "$tmp/data/0000000000000005.jrn" 5 3 damaged
expect mqrd-damaged 1 "" "0000000000000005.jrn: a damaged record at byte 49" -- \
  "$mqrd" --config "$tmp/mqr.yaml" --data-dir "$tmp/data"
"$mqrd" --config "$tmp/mqr.yaml" --data-dir "$tmp/data" --recover=truncate 2>"$tmp/trunc.log" &
tpid=$!
for _ in $(seq 100); do grep -q "ready" "$tmp/trunc.log" && break; sleep 0.05; done
tport=$(grep -o "on 127.0.0.1:[0-9]*" "$tmp/trunc.log" | head -1 | cut -d: -f2)
"$mqr" send --url "tcp://127.0.0.1:$tport" --durable --body kept orders >/dev/null
kill -TERM $tpid
wait $tpid
trc=$?
if [ "$trc" = 0 ] && grep -q "cut at the damaged record" "$tmp/trunc.log" && [ -f "$tmp/data/0000000000000005.jrn.damaged" ] \
  && grep -q "journal in $tmp/data" "$tmp/trunc.log"; then
  echo "ok   mqrd-recover-truncate"; passed=$((passed + 1))
else
  echo "FAIL mqrd-recover-truncate: exit $trc"; cat "$tmp/trunc.log"; failed=$((failed + 1))
fi
expect mqrd-after-truncate-check 0 "*" "" -- "$mqr" journal check "$tmp/data"
"$mqr" journal dump "$tmp/data" >"$tmp/dump"
if grep -q " ADD id=[0-9]* payload=[0-9]* address=orders$" "$tmp/dump" && grep -q " REF id=[0-9]* payload=6 queue=orders$" "$tmp/dump"; then
  echo "ok   journal-dump-broker"; passed=$((passed + 1))
else
  echo "FAIL journal-dump-broker"; cat "$tmp/dump"; failed=$((failed + 1))
fi

# global-max-size: every address together; past it, each acts on its full policy.
printf 'security: {allow-anonymous: true}\nglobal-max-size: 4KiB\nlisteners:\n  - {name: g, host: 127.0.0.1, port: 0}\naddress-settings:\n  "f.#": {address-full-policy: FAIL}\n  "b.#": {address-full-policy: BLOCK}\naddresses:\n  f.1: {anycast: [f.1]}\n  f.2: {anycast: [f.2]}\n  b.1: {anycast: [b.1]}\n' >"$tmp/global.yaml"
"$mqrd" --config "$tmp/global.yaml" 2>"$tmp/global.log" &
gpid=$!
for _ in $(seq 100); do grep -q "ready" "$tmp/global.log" && break; sleep 0.05; done
gport=$(grep -o "on 127.0.0.1:[0-9]*" "$tmp/global.log" | head -1 | cut -d: -f2)
gurl="tcp://127.0.0.1:$gport"
"$mqr" send --url "$gurl" --body "$(printf '%0200d' 0)" --count 10 f.1 >/dev/null 2>&1
expect global-full 1 "" "global-max-size" -- "$mqr" send --url "$gurl" --body "$(printf '%0200d' 0)" --count 10 f.2
expect global-block 1 "" "timed out" -- "$mqr" send --url "$gurl" --timeout 1 --count 3 --body x b.1
"$mqr" recv --url "$gurl" --count 10 f.1 >/dev/null 2>&1
expect global-room 0 "sent 1 to f.2: OK 1" "" -- "$mqr" send --url "$gurl" --body x f.2
kill -TERM $gpid
wait $gpid

# Host names: a listener on "localhost" (resolved, /etc/hosts) and a client URL naming it.
printf 'security: {allow-anonymous: true}\nlisteners:\n  - {name: named, host: localhost, port: 0}\n' >"$tmp/named.yaml"
"$mqrd" --config "$tmp/named.yaml" 2>"$tmp/named.log" &
npid=$!
for _ in $(seq 100); do grep -q "ready" "$tmp/named.log" && break; sleep 0.05; done
nport=$(grep -o "on localhost:[0-9]*" "$tmp/named.log" | head -1 | cut -d: -f2)
expect host-name 0 "*" "" -- "$mqr" stat --url "tcp://localhost:$nport"
grep -q "^connections=1 " "$tmp/out" && { echo "ok   host-name-stat"; passed=$((passed + 1)); } ||
  { echo "FAIL host-name-stat"; cat "$tmp/named.log" "$tmp/out"; failed=$((failed + 1)); }
kill -TERM $npid
wait $npid
expect host-bad-name 2 "" "is not an IP address or a host name" -- "$mqr" stat --url "tcp://-bad-:1"

kill -TERM $pid
wait $pid
rc=$?
if [ "$rc" = 0 ] && grep -q "stopped" "$tmp/mqrd.log"; then echo "ok   mqrd-sigterm"; passed=$((passed + 1));
else echo "FAIL mqrd-sigterm: exit $rc"; cat "$tmp/mqrd.log"; failed=$((failed + 1)); fi
echo "cli-broker: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
