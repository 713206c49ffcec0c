#!/usr/bin/env bash
# bench_workers.sh: proflink with service.workers = 1, 2, ..., N receiver
# loops, at the maximum rate the load generator gets answered.
#
#   tests/bench/bench_workers.sh [BUILD_DIR] [SECONDS] [RUNS] [WORKERS...]
#
# WORKERS defaults to "1 2 $(nproc)": the benchmark takes the core count of
# the machine it runs on, so it runs unchanged on a larger one. "default"
# leaves service.workers out of the configuration (one worker per CPU).
#
# Scenarios (100-span requests, 10 string attributes per span, loadgen with
# 2 connections per worker, at least 4):
#   http      OTLP/HTTP protobuf -> nop (receive and discard)
#   grpc      OTLP/gRPC -> nop
#   json      OTLP/HTTP JSON -> nop
#   forward   OTLP/HTTP protobuf -> otlphttp exporter (gzip) -> a second
#             proflink (workers: 1, otlp -> nop) that is not measured
# SPANS (default 100) sets the spans per request and GZIP=1 compresses the
# requests: larger, compressed requests give the workers more to do.
# Per scenario and worker count, the medians over RUNS runs (the worker
# counts alternate run by run) of:
#   spans/s        spans answered per second (wall clock)
#   cpu-s/1M       CPU-seconds of the measured proflink per million spans
#   loop-s/1M      of which the pipeline loop's thread (the main thread): the
#                  part that does not spread over workers, so 1e6 / loop-s/1M
#                  is the spans/s ceiling with unlimited idle cores
#   rss_mib        median resident memory during the run
#   scaling        spans/s relative to 1 worker, divided by the worker count
set -euo pipefail
BUILD=${1:-build}
SECONDS_PER_RUN=${2:-8}
RUNS=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
WORKERS=${*:-"1 2 $(nproc)"}
WORKERS=$(echo $WORKERS | tr ' ' '\n' | awk '!seen[$0]++' | tr '\n' ' ')
BIN=$BUILD/proflink
LOADGEN=$BUILD/tests/loadgen
[ -x "$BIN" ] && [ -x "$LOADGEN" ] || { echo "build $BIN and $LOADGEN first" >&2; exit 2; }
TICKS=$(getconf CLK_TCK)
TMP=$(mktemp -d)
SINK_PID=
trap '[ -n "$SINK_PID" ] && kill $SINK_PID 2>/dev/null; rm -rf "$TMP"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# the main thread's own ticks (fields after the ")" of the name, which has no spaces here)
loop_ticks() { awk '{print $14 + $15}' "/proc/$1/task/$1/stat"; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; return 1; }

# The forwarding target: one proflink that discards, shared by every run.
SINK_PORT=$(free_port)
cat > "$TMP/sink.yaml" <<YAML
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:$SINK_PORT }
exporters:
  nop:
service:
  workers: 1
  telemetry: { logs: { level: warn }, metrics: { address: 127.0.0.1:$(free_port) } }
  pipelines:
    traces: { receivers: [otlp], exporters: [nop] }
YAML
"$BIN" --config "$TMP/sink.yaml" 2>"$TMP/sink.log" &
SINK_PID=$!
wait_port $SINK_PORT

run_once() { # scenario workers -> "cpu_s elapsed_s spans rss_median_kib loop_cpu_s"
    local scenario=$1 workers=$2
    local gport hport mport
    gport=$(free_port); hport=$(free_port); mport=$(free_port)
    local exporter="nop:" use="nop"
    if [ "$scenario" = forward ]; then
        exporter="otlphttp: { endpoint: http://127.0.0.1:$SINK_PORT, compression: gzip, sending_queue: { queue_size: 5000 } }"
        use="otlphttp"
    fi
    cat > "$TMP/collector.yaml" <<YAML
receivers:
  otlp:
    protocols:
      grpc: { endpoint: 127.0.0.1:$gport }
      http: { endpoint: 127.0.0.1:$hport }
exporters:
  $exporter
service:
  $([ "$workers" = default ] || echo "workers: $workers")
  telemetry: { logs: { level: warn }, metrics: { address: 127.0.0.1:$mport } }
  pipelines:
    traces: { receivers: [otlp], exporters: [$use] }
YAML
    "$BIN" --config "$TMP/collector.yaml" 2>"$TMP/proflink.log" &
    local pid=$!
    wait_port $hport
    local proto=http endpoint=127.0.0.1:$hport
    [ "$scenario" = grpc ] && { proto=grpc; endpoint=127.0.0.1:$gport; }
    [ "$scenario" = json ] && proto=json
    local nw=$workers; [ "$workers" = default ] && nw=$(nproc)
    local conns=$(( 2 * nw < 4 ? 4 : 2 * nw ))
    local c0; c0=$(cpu_ticks $pid)
    local l0; l0=$(loop_ticks $pid)
    local gz=""; [ "${GZIP:-0}" = 1 ] && gz=--gzip
    "$LOADGEN" --protocol "$proto" --endpoint "$endpoint" --rate 0 --spans "${SPANS:-100}" $gz \
        --connections $conns --duration "$SECONDS_PER_RUN" --quiet > "$TMP/loadgen.out" &
    local lg=$!
    : > "$TMP/rss"
    sleep 1
    while kill -0 $lg 2>/dev/null; do rss_kib $pid >> "$TMP/rss"; sleep 0.5; done
    wait $lg || { echo "loadgen failed:" >&2; cat "$TMP/loadgen.out" >&2; }
    local c1; c1=$(cpu_ticks $pid)
    local l1; l1=$(loop_ticks $pid)
    local spans; spans=$(sed -n 's/.* spans=\([0-9]*\).*/\1/p' "$TMP/loadgen.out" | head -1)
    local elapsed; elapsed=$(sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' "$TMP/loadgen.out" | head -1)
    local errors; errors=$(sed -n 's/.* errors=\([0-9]*\).*/\1/p' "$TMP/loadgen.out" | head -1)
    [ "${errors:-0}" = 0 ] || echo "warning: $errors errors ($scenario, $workers workers)" >&2
    kill -TERM $pid; wait $pid || true
    echo "$(awk -v a=$c0 -v b=$c1 -v t=$TICKS 'BEGIN{print (b-a)/t}') $elapsed $spans $(median < "$TMP/rss") $(awk -v a=$l0 -v b=$l1 -v t=$TICKS 'BEGIN{print (b-a)/t}')"
}

printf "# proflink, service.workers = %s; max rate; %s spans per request%s; %s s per run, median of %s runs\n" \
    "$WORKERS" "${SPANS:-100}" "$([ "${GZIP:-0}" = 1 ] && echo ", gzip")" "$SECONDS_PER_RUN" "$RUNS"
printf "# machine: %s, %s cores (shared with other work)\n" "$(uname -m)" "$(nproc)"
printf "%-8s %-7s %10s %9s %9s %8s %8s\n" scenario workers spans/s cpu-s/1M loop-s/1M rss_mib scaling
for scenario in ${SCENARIOS:-http grpc forward}; do
    # the worker counts alternate run by run, so a change in the machine's
    # load falls on every count alike
    for w in $WORKERS; do : > "$TMP/results.$w"; done
    for _ in $(seq "$RUNS"); do
        for w in $WORKERS; do run_once "$scenario" "$w" >> "$TMP/results.$w"; done
    done
    base=
    for w in $WORKERS; do
        awk '{cpu=$1; el=$2; sp=$3; print (el>0? sp/el : 0), (sp>0? 1e6*cpu/sp : 0), $4/1024, (sp>0? 1e6*$5/sp : 0)}' "$TMP/results.$w" > "$TMP/derived"
        sps=$(cut -d' ' -f1 "$TMP/derived" | median)
        per=$(cut -d' ' -f2 "$TMP/derived" | median)
        rss=$(cut -d' ' -f3 "$TMP/derived" | median)
        loop=$(cut -d' ' -f4 "$TMP/derived" | median)
        [ -z "$base" ] && base=$sps
        printf "%-8s %-7s %10.0f %9.2f %9.2f %8.1f %8.2f\n" "$scenario" "$w" "$sps" "$per" "$loop" "$rss" \
            "$(awk -v s=$sps -v b=$base -v w=$([ "$w" = default ] && nproc || echo $w) 'BEGIN{print (b>0? s/b/w : 0)}')"
    done
done
