#!/usr/bin/env bash
# bench_otlp_receiver.sh: what the otlp receiver costs, from the socket to a
# discarding exporter (`nop`), measured on proflink's own process.
#
#   tests/bench/bench_otlp_receiver.sh [BUILD_DIR] [SECONDS] [RUNS]
#
# For each scenario a fresh proflink runs `otlp -> nop`; tests/loadgen sends
# 100-span requests with 10 string attributes per span (OTLP/HTTP protobuf,
# OTLP/HTTP JSON ("json"; PROTOCOLS="http grpc json" chooses)
# or OTLP/gRPC) at a steady 10k spans/s, then as fast as answers come. It
# reads proflink's CPU time (utime + stime from /proc/<pid>/stat) before and
# after, and its resident memory (VmRSS) once a second, and prints per
# scenario the medians over RUNS runs of:
#   cpu%      share of one core used by proflink
#   spans/cpu-s   spans received per CPU-second of proflink
#   rss_mib   median resident memory during the run (max in brackets)
set -euo pipefail
BUILD=${1:-build}
SECONDS_PER_RUN=${2:-10}
RUNS=${3:-3}
BIN=$BUILD/proflink
LOADGEN=$BUILD/tests/loadgen
[ -x "$BIN" ] && [ -x "$LOADGEN" ] || { echo "build $BIN and $LOADGEN first" >&2; exit 2; }
TICKS=$(getconf CLK_TCK)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

run_once() { # protocol rate -> "cpu_s elapsed_s spans rss_median_kib rss_max_kib"
    local proto=$1 rate=$2
    local gport hport mport
    gport=$(free_port); hport=$(free_port); mport=$(free_port)
    cat > "$TMP/collector.yaml" <<YAML
receivers:
  otlp:
    protocols:
      grpc: { endpoint: 127.0.0.1:$gport }
      http: { endpoint: 127.0.0.1:$hport }
exporters:
  nop:
service:
  telemetry: { logs: { level: warn }, metrics: { address: 127.0.0.1:$mport } }
  pipelines:
    traces: { receivers: [otlp], exporters: [nop] }
YAML
    "$BIN" --config "$TMP/collector.yaml" 2>"$TMP/proflink.log" &
    local pid=$!
    for _ in $(seq 50); do
        (exec 3<>/dev/tcp/127.0.0.1/$hport) 2>/dev/null && break
        sleep 0.1
    done
    local endpoint=127.0.0.1:$hport
    [ "$proto" = grpc ] && endpoint=127.0.0.1:$gport
    # "json" is OTLP/HTTP with JSON bodies (loadgen --protocol json)
    local c0; c0=$(cpu_ticks $pid)
    local conns=1
    [ "$rate" = 0 ] && conns=4 # enough concurrent requests to keep proflink busy
    "$LOADGEN" --protocol "$proto" --endpoint "$endpoint" --rate "$rate" \
        --connections $conns --duration "$SECONDS_PER_RUN" --quiet > "$TMP/loadgen.out" &
    local lg=$!
    : > "$TMP/rss"
    sleep 1 # let the allocator settle before sampling
    local n=0
    while kill -0 $lg 2>/dev/null; do
        [ $((n % 5)) = 0 ] && rss_kib $pid >> "$TMP/rss"
        n=$((n + 1))
        sleep 0.2
    done
    wait $lg || { echo "loadgen failed:" >&2; cat "$TMP/loadgen.out" >&2; }
    local c1; c1=$(cpu_ticks $pid)
    local spans; spans=$(sed -n 's/.* spans=\([0-9]*\).*/\1/p' "$TMP/loadgen.out" | head -1)
    local elapsed; elapsed=$(sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' "$TMP/loadgen.out" | head -1)
    # what the receiver took in must match what loadgen had answered
    local sent_now; sent_now=$(curl -s "http://127.0.0.1:$mport/metrics" |
        awk '/^otelcol_receiver_accepted_spans\{receiver="otlp",/ {s += $2} END {print s + 0}')
    kill -TERM $pid; wait $pid || true
    if [ -n "$sent_now" ] && [ "${sent_now%.*}" != "$spans" ]; then
        echo "warning: loadgen sent $spans spans, the receiver counted $sent_now" >&2
    fi
    local rmed rmax
    rmed=$(median < "$TMP/rss"); rmax=$(sort -n "$TMP/rss" | tail -1)
    echo "$(awk -v a=$c0 -v b=$c1 -v t=$TICKS 'BEGIN{print (b-a)/t}') $elapsed $spans $rmed ${rmax:-0}"
}

printf "# proflink otlp receiver -> nop; 100 spans x 10 attrs per request; %s s per run, median of %s runs\n" "$SECONDS_PER_RUN" "$RUNS"
printf "# machine: %s, %s cores (shared with other work)\n" "$(uname -m)" "$(nproc)"
printf "%-8s %-8s %10s %8s %14s %10s\n" protocol rate spans/s cpu% spans/cpu-s "rss_mib (max)"
for proto in ${PROTOCOLS:-http grpc json}; do
    for rate in 10000 0; do
        : > "$TMP/results"
        for _ in $(seq "$RUNS"); do run_once "$proto" "$rate" >> "$TMP/results"; done
        awk '{cpu=$1; el=$2; sp=$3; print sp/el, 100*cpu/el, (cpu>0? sp/cpu : 0), $4/1024, $5/1024}' "$TMP/results" > "$TMP/derived"
        sps=$(cut -d' ' -f1 "$TMP/derived" | median)
        cpu=$(cut -d' ' -f2 "$TMP/derived" | median)
        per=$(cut -d' ' -f3 "$TMP/derived" | median)
        rss=$(cut -d' ' -f4 "$TMP/derived" | median)
        rmax=$(cut -d' ' -f5 "$TMP/derived" | sort -n | tail -1)
        label=$rate; [ "$rate" = 0 ] && label=max
        printf "%-8s %-8s %10.0f %8.2f %14.0f %10.1f (%.1f)\n" "$proto" "$label" "$sps" "$cpu" "$per" "$rss" "$rmax"
    done
done
