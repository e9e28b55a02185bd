#!/usr/bin/env bash
# Installs, idempotently, the Debian packages a task needs: `deps.sh run` (building and
# running mqrd and mqr), `deps.sh test` (the tests too), `deps.sh bench` (the benchmarks
# and their peers too). apt-get runs only when something is missing, so a ready machine
# pays nothing. When another apt or dpkg holds the lock (unattended upgrades on a fresh
# machine), it waits for it, at most DEPS_LOCK_WAIT seconds (default 600).
set -euo pipefail

what=${1:-test}
run=(build-essential cmake pkg-config libuv1-dev libjemalloc-dev libjansson-dev libyaml-dev zlib1g-dev libsodium-dev libssl-dev
  libhttp-parser-dev libwslay-dev libraft-dev liblz4-dev binutils libqpid-proton11-dev)
test=("${run[@]}" openssl python3-cryptography libcmocka-dev clang libclang-rt-14-dev python3 python3-avro libavro-dev binutils groff-base systemd
  libc6-dev-i386-cross libc6-dev-arm64-cross python3-stomp python3-paho-mqtt python3-qpid-proton mosquitto-clients python3-prometheus-client curl chromium)
bench=("${test[@]}" libnats-dev nats-server gnuplot-nox mosquitto activemq rabbitmq-server)
case "$what" in
  run) packages=("${run[@]}") ;;
  test) packages=("${test[@]}") ;;
  bench) packages=("${bench[@]}") ;;
  *) echo "usage: deps.sh run|test|bench" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
# node and npm for the STOMP client test (@stomp/stompjs): Debian's nodejs and npm, unless
# a nodejs that carries its own npm is there already.
if [ "$what" != run ]; then
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
fi

# The npm packages the tests use (STOMP, MQTT and AMQP clients, over TCP and WebSockets;
# the console's browser test's puppeteer-core), in
# .deps/npm of the source tree (not in git).
npm_deps() {
  [ "$what" = run ] && return 0
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/.deps/npm"
  [ -f "$dir/node_modules/@stomp/stompjs/package.json" ] && [ -f "$dir/node_modules/@stomp/tcp-wrapper/package.json" ] &&
    [ -f "$dir/node_modules/mqtt/package.json" ] && [ -f "$dir/node_modules/ws/package.json" ] &&
    [ -f "$dir/node_modules/puppeteer-core/package.json" ] && [ -f "$dir/node_modules/rhea/package.json" ] && return 0
  echo "deps.sh: npm install @stomp/stompjs @stomp/tcp-wrapper mqtt ws puppeteer-core rhea into $dir" >&2
  mkdir -p "$dir"
  # (puppeteer-core 24: the last for Debian 12's node 18; it drives Debian's chromium)
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error @stomp/stompjs@7 @stomp/tcp-wrapper@1 mqtt@5 ws@8 \
    puppeteer-core@24 rhea@3 >&2
}

if [ ${#missing[@]} -eq 0 ]; then
  npm_deps
  exit 0
fi

echo "deps.sh: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# apt-get's own wait for the dpkg lock (apt >= 1.9.11), and a wait of ours for the lists
# lock, which `apt-get update` does not wait for.
wait_s=${DEPS_LOCK_WAIT:-600}
apt=($sudo apt-get -o DPkg::Lock::Timeout="$wait_s")
deadline=$((SECONDS + wait_s))
until $sudo flock -n /var/lib/apt/lists/lock true 2>/dev/null; do
  if [ $SECONDS -ge $deadline ]; then
    echo "deps.sh: apt is still busy after ${wait_s}s (another apt-get or unattended-upgrades); try again later" >&2
    exit 1
  fi
  [ $((SECONDS % 30)) -eq 0 ] && echo "deps.sh: waiting for another apt to finish..." >&2
  sleep 1
done
"${apt[@]}" update -q
"${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"
# amqp.loopback starts a RabbitMQ node of its own, on 127.0.0.1 and ephemeral ports. The
# package's own service (and epmd's), listening on every address, is not left running.
if [[ " ${missing[*]} " == *" rabbitmq-server "* ]] && [ -d /run/systemd/system ]; then
  $sudo systemctl disable --now rabbitmq-server.service epmd.socket epmd.service >/dev/null 2>&1 || true
fi
npm_deps
