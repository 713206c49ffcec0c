#!/usr/bin/env bash
# bench_kafka.sh: spans per CPU-second between two proflinks, through the
# Kafka bus (kafka exporter -> librdkafka's mock cluster -> kafka receiver)
# beside the direct path (otlp exporter -> OTLP/gRPC -> otlp receiver).
#
#   tests/bench/bench_kafka.sh [BUILD_DIR] [SPANS_PER_S] [SECONDS] [RUNS]
#
# loadgen sends OTLP/gRPC (100-span requests, 10 string attributes per span)
# at a fixed rate to proflink A (otlp receiver -> exporter); proflink B
# (receiver -> nop) takes what A sends. Per path, the medians over RUNS runs
# of: spans B received, CPU-seconds of A and of B, spans per CPU-second of
# A + B, and the mock cluster's own CPU-seconds (a real broker's cost would
# be elsewhere; the mock's is shown, not counted). `bus-by-trace` sets
# partition_traces_by_id (one record per trace: loadgen's requests hold 1
# trace per 10 spans).
set -euo pipefail
BUILD=${1:-build}
RATE=${2:-20000}
SECS=${3:-10}
RUNS=${4:-3}
BIN=$BUILD/proflink
LOADGEN=$BUILD/tests/loadgen
MOCK=$BUILD/tests/kafka_mock
[ -x "$BIN" ] && [ -x "$LOADGEN" ] && [ -x "$MOCK" ] || { echo "build $BIN, $LOADGEN and $MOCK first" >&2; exit 2; }
TICKS=$(getconf CLK_TCK)
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
wait_port() { for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; return 1; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 ~ "^"n"\\{" {print $2; f=1} END {if (!f) print 0}'; }

run_once() { # path -> "spans cpuA cpuB cpuMock"
    local path=$1 run=$2
    local gport=$(free_port) bport=$(free_port) ma=$(free_port) mb=$(free_port)
    local exporter receiver mockpid=
    if [ "$path" = grpc ]; then
        exporter="otlp: { endpoint: 127.0.0.1:$bport, tls: { insecure: true }, compression: gzip }"
        receiver="otlp: { protocols: { grpc: { endpoint: 127.0.0.1:$bport } } }"
    else
        # stdin stays open (the mock stops when it closes) until it is killed
        "$MOCK" -b 3 -p 4 "spans_$run" > "$TMP/mock.out" < <(sleep $((SECS + 60))) &
        mockpid=$!
        PIDS+=("$mockpid")
        for _ in $(seq 100); do [ -s "$TMP/mock.out" ] && break; sleep 0.05; done
        local brokers=$(head -1 "$TMP/mock.out")
        local by=false
        [ "$path" = bus-by-trace ] && by=true
        exporter="kafka: { brokers: [$brokers], partition_traces_by_id: $by, traces: { topic: spans_$run }, producer: { compression: none } }"
        receiver="kafka: { brokers: [$brokers], group_id: bench, initial_offset: earliest, traces: { topics: [spans_$run] } }"
    fi
    cat > "$TMP/a.yaml" <<YAML
receivers:
  otlp: { protocols: { grpc: { endpoint: 127.0.0.1:$gport } } }
exporters:
  $exporter
service:
  telemetry: { logs: { level: warn }, metrics: { address: 127.0.0.1:$ma } }
  pipelines:
    traces: { receivers: [otlp], exporters: [${exporter%%:*}] }
YAML
    cat > "$TMP/b.yaml" <<YAML
receivers:
  $receiver
exporters:
  nop:
service:
  telemetry: { logs: { level: warn }, metrics: { address: 127.0.0.1:$mb } }
  pipelines:
    traces: { receivers: [${receiver%%:*}], exporters: [nop] }
YAML
    "$BIN" --config "$TMP/b.yaml" 2>"$TMP/b.log" & local b=$!; PIDS+=("$b")
    "$BIN" --config "$TMP/a.yaml" 2>"$TMP/a.log" & local a=$!; PIDS+=("$a")
    wait_port $gport; wait_port $mb
    sleep 4 # the consumer group settles
    local a0=$(cpu_ticks $a) b0=$(cpu_ticks $b) m0=0
    [ -n "$mockpid" ] && m0=$(cpu_ticks $mockpid)
    "$LOADGEN" --protocol grpc --endpoint 127.0.0.1:$gport --spans 100 --attrs 10 \
        --rate "$RATE" --duration "$SECS" --variants 64 --quiet > "$TMP/loadgen.out"
    local sent=$(awk '{for (i=1;i<=NF;i++) if ($i ~ /^spans=/) {sub("spans=","",$i); print $i}}' "$TMP/loadgen.out" | head -1)
    for _ in $(seq 100); do # until B has everything (or 10 s)
        [ "$(metric $mb otelcol_receiver_accepted_spans)" -ge "$sent" ] && break
        sleep 0.1
    done
    local got=$(metric $mb otelcol_receiver_accepted_spans)
    local a1=$(cpu_ticks $a) b1=$(cpu_ticks $b) m1=0
    [ -n "$mockpid" ] && m1=$(cpu_ticks $mockpid)
    kill $a $b; wait $a $b 2>/dev/null || true
    if [ -n "$mockpid" ]; then kill "$mockpid" 2>/dev/null || true; wait "$mockpid" 2>/dev/null || true; fi
    echo "$got $(( a1 - a0 )) $(( b1 - b0 )) $(( m1 - m0 ))"
}

printf '%-13s %10s %8s %8s %14s %9s\n' path spans cpu_A_s cpu_B_s spans/cpu_s mock_cpu_s
for path in ${PATHS:-grpc bus bus-by-trace}; do
    : > "$TMP/runs"
    for r in $(seq "$RUNS"); do run_once "$path" "$path$r" >> "$TMP/runs"; done
    spans=$(awk '{print $1}' "$TMP/runs" | median)
    ca=$(awk -v t=$TICKS '{print $2/t}' "$TMP/runs" | median)
    cb=$(awk -v t=$TICKS '{print $3/t}' "$TMP/runs" | median)
    per=$(awk -v t=$TICKS '{c=($2+$3)/t; print (c>0 ? $1/c : 0)}' "$TMP/runs" | median)
    cm=$(awk -v t=$TICKS '{print $4/t}' "$TMP/runs" | median)
    printf '%-13s %10d %8.2f %8.2f %14.0f %9.2f\n' "$path" "$spans" "$ca" "$cb" "$per" "$cm"
done
