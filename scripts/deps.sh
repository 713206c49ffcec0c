#!/usr/bin/env bash
# Installs what proflink needs to build and test, from Debian's packages and
# (for the interoperability tests) the npm registry. Idempotent: packages that
# are already present are not touched, and nothing runs when all are there.
set -euo pipefail

PACKAGES=(
  build-essential meson ninja-build pkg-config clang
  nanopb libnanopb-dev protobuf-compiler
  libuv1-dev libyaml-dev libzstd-dev libsqlite3-dev sqlite3
  libnghttp2-dev libcurl4-openssl-dev libssl-dev libcrypt-dev zlib1g-dev libjson-c-dev libhttp-parser-dev
  libpcre2-dev libfuzzer-14-dev libclang-rt-14-dev
  libc-ares-dev dnsmasq-base
  libnats-dev nats-server
  librdkafka-dev
  nodejs npm curl openssl zstd python3 python3-yaml ca-certificates procps
  gcovr
  faketime
  chromium
  golang-go
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm may come from elsewhere than Debian (e.g. a preinstalled Node.js).
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  filtered=()
  for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p"); done
  missing=("${filtered[@]}")
fi

if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--with-npm" ]; then
  root=$(cd "$(dirname "$0")/.." && pwd)
  if [ ! -d "$root/tests/interop/node_modules" ] || \
     [ "$root/tests/interop/package-lock.json" -nt "$root/tests/interop/node_modules/.package-lock.json" ]; then
    (cd "$root/tests/interop" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
fi
