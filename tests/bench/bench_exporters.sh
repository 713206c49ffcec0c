#!/usr/bin/env bash
# bench_exporters.sh: what the otlphttp exporter and its sending queue cost:
# OTLP/HTTP in -> otlphttp out to a local sink, in spans per CPU-second of
# the proflink under test, with the in-memory queue and with the persistent
# (SQLite) queue.
#
#   tests/bench/bench_exporters.sh [BUILD_DIR] [SECONDS] [RUNS] [COMPRESSION]
#
# Processes: tests/loadgen sends 100-span requests (10 string attributes
# per span) as fast as answers come, over 4 keep-alive connections, to the
# proflink under test (otlp receiver -> otlphttp exporter); the exporter
# sends to a second proflink acting as the sink (otlp receiver -> nop). Only
# the CPU time (utime + stime from /proc/<pid>/stat) of the proflink under
# test counts, measured from the start of the load until the exporter has
# delivered everything the receiver acknowledged (otelcol_exporter_sent_spans equals
# the receiver's otelcol_receiver_accepted_spans), so queued work is not left out.
# Per mode it prints the medians over RUNS runs of spans/s (wall clock),
# the CPU share and spans per CPU-second, and the cost of the persistent
# queue relative to the in-memory one.
set -euo pipefail
BUILD=${1:-build}
SECONDS_PER_RUN=${2:-10}
RUNS=${3:-3}
COMPRESSION=${4:-gzip}
BIN=$BUILD/proflink
LOADGEN=$BUILD/tests/loadgen
[ -x "$BIN" ] && [ -x "$LOADGEN" ] || { echo "build $BIN and $LOADGEN first" >&2; exit 2; }
TICKS=$(getconf CLK_TCK)
TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; return 1; }
metric() { # port name component
    curl -s "http://127.0.0.1:$1/metrics" |
        awk -v n="$2" -v c="$3" 'index($1, n "{") == 1 && index($1, "=\"" c "\"") > 0 {s += $2} END {print s + 0}'
}

# The sink: a proflink that takes OTLP/HTTP and discards it.
SINK_PORT=$(free_port); SINK_MPORT=$(free_port)
cat > "$TMP/sink.yaml" <<YAML
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:$SINK_PORT }
exporters:
  nop:
service:
  telemetry: { logs: { level: warn }, metrics: { address: 127.0.0.1:$SINK_MPORT } }
  pipelines:
    traces: { receivers: [otlp], exporters: [nop] }
YAML
"$BIN" --config "$TMP/sink.yaml" 2>"$TMP/sink.log" &
SINK_PID=$!
PIDS+=("$SINK_PID")
wait_port "$SINK_PORT" || { echo "sink did not start" >&2; cat "$TMP/sink.log" >&2; exit 1; }

run_once() { # mode -> "cpu_s wall_s spans"
    local mode=$1 port mport storage=""
    port=$(free_port); mport=$(free_port)
    rm -rf "$TMP/queue"
    [ "$mode" = persistent ] && storage=", storage: $TMP/queue/"
    cat > "$TMP/dut.yaml" <<YAML
receivers:
  otlp:
    protocols:
      http: { endpoint: 127.0.0.1:$port }
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:$SINK_PORT
    compression: $COMPRESSION
    sending_queue: { queue_size: 5000$storage }
service:
  telemetry: { logs: { level: warn }, metrics: { address: 127.0.0.1:$mport } }
  pipelines:
    traces: { receivers: [otlp], exporters: [otlphttp] }
YAML
    "$BIN" --config "$TMP/dut.yaml" 2>"$TMP/dut.log" &
    local pid=$!
    wait_port "$port" || { echo "proflink did not start" >&2; cat "$TMP/dut.log" >&2; exit 1; }
    local c0 t0; c0=$(cpu_ticks $pid); t0=$(date +%s.%N)
    "$LOADGEN" --protocol http --endpoint "127.0.0.1:$port" --spans 100 --attrs 10 --rate 0 \
        --connections 4 --duration "$SECONDS_PER_RUN" --quiet > "$TMP/loadgen.out" ||
        { echo "loadgen failed:" >&2; cat "$TMP/loadgen.out" >&2; }
    local accepted sent
    for _ in $(seq 600); do
        accepted=$(metric $mport otelcol_receiver_accepted_spans otlp)
        sent=$(metric $mport otelcol_exporter_sent_spans otlphttp)
        [ -n "$accepted" ] && [ "$accepted" = "$sent" ] && break
        sleep 0.05
    done
    local c1 t1; c1=$(cpu_ticks $pid); t1=$(date +%s.%N)
    [ "$accepted" = "$sent" ] || echo "warning: accepted $accepted, sent $sent" >&2
    kill -TERM $pid; wait $pid || true
    awk -v a=$c0 -v b=$c1 -v t=$TICKS -v t0=$t0 -v t1=$t1 -v s=$sent 'BEGIN{print (b-a)/t, t1-t0, s}'
}

printf "# otlp receiver -> otlphttp (compression %s) -> local sink; 100 spans x 10 attrs per request;\n" "$COMPRESSION"
printf "# %s s of load per run, median of %s runs; machine: %s, %s cores (shared with other work)\n" \
    "$SECONDS_PER_RUN" "$RUNS" "$(uname -m)" "$(nproc)"
printf "%-11s %10s %8s %14s\n" queue spans/s cpu% spans/cpu-s
declare -A PER
for mode in memory persistent; do
    : > "$TMP/results"
    for _ in $(seq "$RUNS"); do run_once "$mode" >> "$TMP/results"; done
    awk '{cpu=$1; wall=$2; sp=$3; print sp/wall, 100*cpu/wall, (cpu>0 ? sp/cpu : 0)}' "$TMP/results" > "$TMP/derived"
    sps=$(cut -d' ' -f1 "$TMP/derived" | median)
    cpu=$(cut -d' ' -f2 "$TMP/derived" | median)
    per=$(cut -d' ' -f3 "$TMP/derived" | median)
    PER[$mode]=$per
    printf "%-11s %10.0f %8.2f %14.0f\n" "$mode" "$sps" "$cpu" "$per"
done
awk -v m="${PER[memory]}" -v p="${PER[persistent]}" \
    'BEGIN{printf "persistent queue cost: %.1f %% fewer spans per CPU-second\n", 100*(1-p/m)}'
