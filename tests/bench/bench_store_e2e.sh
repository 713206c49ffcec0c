#!/usr/bin/env bash
# bench_store_e2e.sh: the store behind the default pipelines, fed by a
# client that sends fresh trace and span ids in every request.
#
#   tests/bench/bench_store_e2e.sh [BUILD_DIR] [SECONDS] [RUNS] [BIN...]
#
# Runs proflink (BIN, default BUILD_DIR/proflink; several BINs alternate
# run by run) on the project's collector.yaml, unchanged but for the store's
# path (a fresh file per run): pipelines `traces` (correlation -> sqlite,
# debug), `traces/store` (-> sqlite) and `profiles`, so every span is
# stored as it arrives and offered again after the correlation processor's
# hold. `loadgen --fresh-ids` sends 100-span OTLP/HTTP protobuf requests
# (10 string attributes per span) on 4 connections as fast as they are
# answered (refusals, 503, are counted and not retried: the next request
# has new ids anyway). The ports are collector.yaml's (4317, 4318, 4040,
# 4041, 8888): nothing else may listen on them.
#
# Per run it prints the spans loadgen got 200 for, the spans in the store at
# the end and those the 1 GiB size limit had deleted (read before the
# drain: a long run reaches the limit), the CPU-seconds of the store's writer thread (`pl-sqlite`) and
# spans stored per writer CPU-second; RSS of the process at the end and
# the correlation processor's held bytes then.
set -euo pipefail
BUILD=${1:-build}
SECONDS_PER_RUN=${2:-60}
RUNS=${3:-1}
shift $(( $# < 3 ? $# : 3 ))
BINS=${*:-$BUILD/proflink}
LOADGEN=$BUILD/tests/loadgen
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ -x "$LOADGEN" ] || { echo "build $LOADGEN first" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "needs the sqlite3 command" >&2; exit 2; }
TICKS=$(getconf CLK_TCK)
TMP=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

writer_ticks() {
    local t
    for t in /proc/$1/task/*; do
        if [ "$(cat "$t/comm" 2>/dev/null)" = pl-sqlite ]; then
            awk '{print $14 + $15}' "$t/stat"
            return
        fi
    done
    echo 0
}

for run in $(seq 1 "$RUNS"); do
    for bin in $BINS; do
        rm -rf "$TMP/data"
        sed "s|path: ./data/proflink.db|path: $TMP/data/proflink.db|" "$ROOT/collector.yaml" >"$TMP/c.yaml"
        "$bin" --config "$TMP/c.yaml" >"$TMP/log" 2>&1 &
        PID=$!
        for _ in $(seq 50); do
            curl -sf http://127.0.0.1:8888/health >/dev/null 2>&1 && break
            sleep 0.1
        done
        out=$("$LOADGEN" --fresh-ids --connections 4 --duration "$SECONDS_PER_RUN" --quiet 2>&1 || true)
        sleep 3
        ticks=$(writer_ticks "$PID")
        rss=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$PID/status")
        metrics=$(curl -s http://127.0.0.1:8888/metrics)
        held=$(echo "$metrics" | awk '/^proflink_processor_held_bytes/ {printf "%d", $2 / 1048576}')
        deleted=$(echo "$metrics" | awk '/^proflink_exporter_retention_deleted_spans_total/ {printf "%d", $2}')
        kill "$PID"
        wait "$PID" 2>/dev/null || true
        PID=
        stored=$(sqlite3 "$TMP/data/proflink.db" "SELECT count(*) FROM spans")
        answered=$(echo "$out" | sed -n 's/.* spans=\([0-9]*\) .*/\1/p')
        cpu=$(awk -v t="$ticks" -v hz="$TICKS" 'BEGIN {printf "%.2f", t / hz}')
        deleted=${deleted:-0}
        per=$(awk -v s="$stored" -v d="$deleted" -v t="$ticks" -v hz="$TICKS" 'BEGIN {printf "%d", t ? (s + d) * hz / t : 0}')
        echo "run $run $bin: answered 200 $answered spans; stored $stored (+ $deleted deleted by the size limit before the drain); writer $cpu CPU-s; $per spans stored per writer CPU-s; RSS $rss MiB (correlation holding ${held:-?} MiB)"
    done
done
