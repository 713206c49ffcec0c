#!/usr/bin/env bash
# bench_tls.sh: what TLS costs the otlp receiver, receive -> discard (nop).
#
#   tests/bench/bench_tls.sh [BUILD_DIR] [SECONDS] [RUNS]
#
# A throw-away CA and server certificate (EC P-256) are made with openssl.
# For each scenario a fresh proflink runs `otlp -> nop` with or without
# tls: on both protocols; tests/loadgen sends the same bodies as
# bench_otlp_receiver.sh (100-span requests, 10 string attributes per span,
# OTLP/HTTP protobuf on one keep-alive connection, or OTLP/gRPC with 8
# concurrent calls) as fast as answers come. proflink's CPU time (utime +
# stime from /proc/<pid>/stat) is read before and after. Printed, medians
# over RUNS runs:
#   cpu_s/1M_spans   proflink CPU-seconds per million spans received
#   ratio            TLS over plaintext for the same protocol
# and then full TLS handshakes per second (loadgen --handshakes: connect,
# handshake, close; no session resumption) with proflink's CPU-ms per
# handshake.
set -euo pipefail
BUILD=${1:-build}
SECONDS_PER_RUN=${2:-10}
RUNS=${3:-3}
BIN=$BUILD/proflink
LOADGEN=$BUILD/tests/loadgen
[ -x "$BIN" ] && [ -x "$LOADGEN" ] || { echo "build $BIN and $LOADGEN first" >&2; exit 2; }
TICKS=$(getconf CLK_TCK)
TMP=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

(cd "$TMP" &&
 openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
   -out ca.pem -days 2 -subj "/CN=bench CA" 2>/dev/null &&
 openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key \
   -out server.csr -subj "/CN=localhost" 2>/dev/null &&
 printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > san.ext &&
 openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
   -days 2 -extfile san.ext 2>/dev/null)

start_proflink() { # tls(0|1) -> sets PID GPORT HPORT
    local tls=$1 block=""
    GPORT=$(free_port); HPORT=$(free_port)
    local mport; mport=$(free_port)
    [ "$tls" = 1 ] && block=", tls: { cert_file: $TMP/server.pem, key_file: $TMP/server.key }"
    cat > "$TMP/collector.yaml" <<YAML
receivers:
  otlp:
    protocols:
      grpc: { endpoint: "127.0.0.1:$GPORT"$block }
      http: { endpoint: "127.0.0.1:$HPORT"$block }
exporters:
  nop:
service:
  telemetry: { logs: { level: warn }, metrics: { address: "127.0.0.1:$mport" } }
  pipelines:
    traces: { receivers: [otlp], exporters: [nop] }
YAML
    "$BIN" --config "$TMP/collector.yaml" 2>"$TMP/proflink.log" &
    PID=$!
    for _ in $(seq 50); do
        (exec 3<>/dev/tcp/127.0.0.1/$HPORT) 2>/dev/null && break
        sleep 0.1
    done
}

stop_proflink() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }

run_once() { # proto tls -> "cpu_s_per_1M_spans"
    local proto=$1 tls=$2 port extra=()
    start_proflink "$tls"
    port=$HPORT
    [ "$proto" = grpc ] && port=$GPORT
    [ "$tls" = 1 ] && extra=(--tls --ca "$TMP/ca.pem")
    local c0; c0=$(cpu_ticks "$PID")
    local out
    out=$("$LOADGEN" --protocol "$proto" --endpoint "127.0.0.1:$port" --duration "$SECONDS_PER_RUN" \
        --connections 1 --streams 8 --quiet "${extra[@]}")
    local c1; c1=$(cpu_ticks "$PID")
    stop_proflink
    local spans; spans=$(echo "$out" | sed -n 's/.* spans=\([0-9]*\) .*/\1/p')
    awk -v c=$((c1 - c0)) -v t="$TICKS" -v s="$spans" 'BEGIN {printf "%.3f\n", (c / t) / (s / 1e6)}'
}

printf '%-6s %-10s %16s %8s\n' proto transport cpu_s/1M_spans ratio
for proto in ${PROTOCOLS:-http grpc}; do
    plain=$(for _ in $(seq "$RUNS"); do run_once "$proto" 0; done | median)
    tls=$(for _ in $(seq "$RUNS"); do run_once "$proto" 1; done | median)
    printf '%-6s %-10s %16s %8s\n' "$proto" plaintext "$plain" ""
    printf '%-6s %-10s %16s %8s\n' "$proto" tls "$tls" "$(awk -v a="$tls" -v b="$plain" 'BEGIN {printf "%.2fx", a / b}')"
done

hs=()
cpu=()
for _ in $(seq "$RUNS"); do
    start_proflink 1
    c0=$(cpu_ticks "$PID")
    out=$("$LOADGEN" --handshakes --ca "$TMP/ca.pem" --endpoint "127.0.0.1:$HPORT" --duration "$SECONDS_PER_RUN")
    c1=$(cpu_ticks "$PID")
    stop_proflink
    n=$(echo "$out" | sed -n 's/handshakes=\([0-9]*\) .*/\1/p')
    hs+=("$(echo "$out" | sed -n 's/.*handshakes\/s=\([0-9.]*\).*/\1/p')")
    cpu+=("$(awk -v c=$((c1 - c0)) -v t="$TICKS" -v n="$n" 'BEGIN {printf "%.3f", 1000 * (c / t) / n}')")
done
printf 'handshakes/s %s (proflink %s CPU-ms per handshake; loadgen and proflink share the machine)\n' \
    "$(printf '%s\n' "${hs[@]}" | median)" "$(printf '%s\n' "${cpu[@]}" | median)"
