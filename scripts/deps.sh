#!/usr/bin/env bash
# Installs, idempotently, every Debian package that mqr's build, tests and benchmarks use.
# apt-get update runs only when something is missing, so a ready machine pays nothing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libuv1-dev libcmocka-dev libjemalloc-dev libjansson-dev libyaml-dev zlib1g-dev
  clang libclang-rt-14-dev clang-format valgrind
  python3 gnuplot-nox
  libavro-dev python3-avro
  libnats-dev nats-server
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "deps.sh: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
