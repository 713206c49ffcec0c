#!/usr/bin/env bash
# bench_held_spans.sh: what a held span costs in a running proflink, with
# real OTLP spans (issue 11's measurement).
#
#   tests/bench/bench_held_spans.sh [BUILD_DIR] [SPANS] [HOLD_COMPRESSION] [PROFILES]
#
# Starts proflink (OTLP/HTTP in, the correlation processor on the traces and
# profiles pipelines, nop out, max_bytes 4 GiB so no bound interferes), and
# sends SPANS (default 750000) spans with build/tests/loadgen: 100 spans a
# request (every request distinct: SPANS/100 prebuilt), 12 string attributes each (about 530 bytes a span on the wire,
# printed), 25k spans/s. loadgen's service has never sent a profile, so its
# spans are held for the assumed slowest cadence (156 s) and all of them are
# still held at the end. PROFILES=1 first posts one folded-stack profile of
# another service to the Pyroscope endpoint, so profiles are "flowing" and
# the spans are indexed as they come (the usual case with a profiler);
# PROFILES=0 (default) sends none: the spans are held without an index.
# HOLD_COMPRESSION (zstd | none; default: the processor's) is the setting.
#
# Prints held spans, the held_bytes gauge (from /metrics) per held span, the
# process's RSS (VmRSS) per held span (total, and growth over the idle
# process before the load), and its CPU time per span from start to the end
# of the shutdown, which flushes the held spans.
set -euo pipefail
BUILD=${1:-build}
SPANS=${2:-750000}
HC=${3:-}
PROFILES=${4:-0}
BIN=$BUILD/proflink
LOADGEN=$BUILD/tests/loadgen
[ -x "$BIN" ] && [ -x "$LOADGEN" ] || { echo "build $BIN and $LOADGEN first" >&2; exit 2; }
TMP=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$TMP"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
wait_port() { for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; return 1; }
metric() { curl -s "http://127.0.0.1:$MPORT/metrics" | awk -v m="$1" '$0 !~ /^#/ && index($1, m) {v = $2} END {print v + 0}'; }

PORT=$(free_port)
PPORT=$(free_port)
MPORT=$(free_port)
HCLINE=
[ -n "$HC" ] && HCLINE="hold_compression: $HC"
cat > "$TMP/c.yaml" <<YAML
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:$PORT }
  pyroscope:
    endpoint: 127.0.0.1:$PPORT
processors:
  correlation:
    max_bytes: 4GiB
    max_spans: 4000000
    $HCLINE
exporters:
  nop:
service:
  workers: 1
  telemetry: { logs: { level: warn }, metrics: { address: 127.0.0.1:$MPORT } }
  pipelines:
    traces: { receivers: [otlp], processors: [correlation], exporters: [nop] }
    profiles: { receivers: [pyroscope], processors: [correlation], exporters: [nop] }
YAML
/usr/bin/time -o "$TMP/cpu" -f "%U %S" "$BIN" --config "$TMP/c.yaml" > "$TMP/log" 2>&1 &
TPID=$!
wait_port "$PORT" && wait_port "$MPORT" || { cat "$TMP/log"; exit 1; }
PID=$(pgrep -P $TPID)
if [ "$PROFILES" = 1 ]; then
    now=$(date +%s)
    curl -sf -X POST --data-binary $'main;work 10\nmain;idle 5\n' \
        "http://127.0.0.1:$PPORT/ingest?name=other.cpu%7B%7D&from=$((now - 10))&until=$now&format=folded&spyName=gospy&sampleRate=100" >/dev/null
fi
sleep 1
RSS0=$(rss_kib $PID)
"$LOADGEN" --protocol http --endpoint 127.0.0.1:$PORT --spans 100 --attrs 12 --rate 25000 \
    --duration $(( (SPANS + 24999) / 25000 )) --connections 2 --variants $(( (SPANS + 99) / 100 )) 2>&1 |
    grep -E "body|spans=" || true
sleep 2
HELD=$(metric held_spans)
HB=$(metric held_bytes)
RSS=$(rss_kib $PID)
# Shutdown flushes every held span (unpacked, enriched, handed on): the
# process's whole CPU time covers receiving, holding and releasing them.
kill -TERM $PID
wait $TPID || true
PID=
CPU=$(awk '{print $1 + $2}' "$TMP/cpu")
awk -v c="$CPU" -v n="$SPANS" 'BEGIN {printf "process CPU (start, load, shutdown flush) %.2f s: %.2f us per span\n", c, c * 1e6 / n}'
awk -v h="$HELD" -v hb="$HB" -v r="$RSS" -v r0="$RSS0" -v hc="${HC:-default}" -v p="$PROFILES" 'BEGIN {
    if (h <= 0) { print "no spans held"; exit 1 }
    printf "hold_compression %s, profiles %s: held spans %d\n", hc, p, h
    printf "held_bytes %.0f MiB: %.0f B/held span\n", hb / 1048576, hb / h
    printf "RSS %.0f MiB: %.0f B/held span (growth over idle %.0f MiB: %.0f B/held span)\n",
        r / 1024, r * 1024 / h, (r - r0) / 1024, (r - r0) * 1024 / h
}'
