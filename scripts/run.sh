#!/usr/bin/env bash
# One command from a fresh Debian machine to a running proflink:
# installs what is missing, builds, and starts proflink on collector.yaml.
#   ./scripts/run.sh [extra proflink arguments]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=release >/dev/null
ninja -C build >/dev/null
exec ./build/proflink --config "${PROFLINK_CONFIG:-collector.yaml}" "$@"
