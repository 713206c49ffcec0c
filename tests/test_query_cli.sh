#!/bin/sh
# test_query_cli.sh: `proflink query` against a store filled the way a user
# fills it: proflink runs with the sqlite exporter, a trace and a linked CPU
# profile arrive over OTLP/HTTP (JSON), and the queries must show the slow
# trace, its span tree with CPU time and hottest functions, folded stacks,
# an SVG flame graph and the top functions; the JSON API on the exporter's
# address answers too. Errors (bad ids, missing or corrupt store, unknown
# commands) give one clear line and the documented exit status.
#
# usage: tests/test_query_cli.sh [path/to/proflink]   (or PROFLINK_BIN)
set -u

. "$(dirname "$0")/cli_lib.sh"
LOG_FILE="$TMP/out"
has() { grep -q -- "$1" "$TMP/out"; } # has PATTERN: in the last output

HTTP=$(free_port)
GRPC=$(free_port)
TEL=$(free_port)
API=$(free_port)
DB="$TMP/data/proflink.db"
SRC=$(cd "$(dirname "$0")/.." && pwd)

cat >"$TMP/collector.yaml" <<EOF
receivers:
  otlp:
    protocols:
      grpc: {endpoint: 127.0.0.1:$GRPC}
      http: {endpoint: 127.0.0.1:$HTTP}
exporters:
  sqlite:
    path: $DB
    api: {endpoint: 127.0.0.1:$API}
service:
  telemetry:
    metrics: {address: 127.0.0.1:$TEL}
  pipelines:
    traces: {receivers: [otlp], exporters: [sqlite]}
    profiles: {receivers: [otlp], exporters: [sqlite]}
EOF

NOW=$(date +%s)
T0="${NOW}000000000"
ms() { echo "$((NOW * 1000 + $1))000000"; } # ms OFFSET: ns timestamp
TRACE=4bf92f3577b34da6a3ce929d0e0e4736
ROOT=00f067aa0ba902b7
DBQ=00f067aa0ba902b8
RENDER=00f067aa0ba902b9

cat >"$TMP/traces.json" <<EOF
{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"shop"}}]},
 "scopeSpans":[{"spans":[
  {"traceId":"$TRACE","spanId":"$ROOT","name":"GET /cart","kind":2,
   "startTimeUnixNano":"$(ms 0)","endTimeUnixNano":"$(ms 250)",
   "attributes":[{"key":"http.route","value":{"stringValue":"/cart"}}]},
  {"traceId":"$TRACE","spanId":"$DBQ","parentSpanId":"$ROOT","name":"SELECT cart","kind":3,
   "startTimeUnixNano":"$(ms 10)","endTimeUnixNano":"$(ms 200)"},
  {"traceId":"$TRACE","spanId":"$RENDER","parentSpanId":"$ROOT","name":"render","kind":1,
   "startTimeUnixNano":"$(ms 200)","endTimeUnixNano":"$(ms 240)","status":{"code":2,"message":"template missing"},
   "events":[{"name":"exception","timeUnixNano":"$(ms 239)","attributes":[
     {"key":"exception.type","value":{"stringValue":"TemplateError"}},
     {"key":"exception.message","value":{"stringValue":"cart.html not found"}}]}]}
 ]}]}]}
EOF

# cpu/nanoseconds samples: SELECT cart 30ms (sql_exec 20, sql_parse 10), render 5ms
cat >"$TMP/profiles.json" <<EOF
{"resourceProfiles":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"shop"}}]},
 "scopeProfiles":[{"profiles":[{"sampleType":{"typeStrindex":1,"unitStrindex":2},
   "timeUnixNano":"$T0","durationNano":"10000000000",
   "samples":[
    {"stackIndex":1,"linkIndex":1,"values":["20000000"],"timestampsUnixNano":["$(ms 50)"]},
    {"stackIndex":2,"linkIndex":1,"values":["10000000"],"timestampsUnixNano":["$(ms 60)"]},
    {"stackIndex":3,"linkIndex":2,"values":["5000000"],"timestampsUnixNano":["$(ms 210)"]}]}]}]}],
 "dictionary":{
  "stringTable":["","cpu","nanoseconds","main","handler","sql_exec","sql_parse","render_tpl","app.go"],
  "mappingTable":[{}],
  "functionTable":[{},{"nameStrindex":3,"filenameStrindex":8},{"nameStrindex":4,"filenameStrindex":8},
    {"nameStrindex":5,"filenameStrindex":8},{"nameStrindex":6,"filenameStrindex":8},{"nameStrindex":7,"filenameStrindex":8}],
  "locationTable":[{},{"lines":[{"functionIndex":1}]},{"lines":[{"functionIndex":2}]},
    {"lines":[{"functionIndex":3}]},{"lines":[{"functionIndex":4}]},{"lines":[{"functionIndex":5}]}],
  "stackTable":[{},{"locationIndices":[3,2,1]},{"locationIndices":[4,2,1]},{"locationIndices":[5,2,1]}],
  "linkTable":[{"traceId":"00000000000000000000000000000000","spanId":"0000000000000000"},
    {"traceId":"$TRACE","spanId":"$DBQ"},{"traceId":"$TRACE","spanId":"$RENDER"}],
  "attributeTable":[{}]}}
EOF

post() { # post PATH FILE: prints the HTTP status
    curl -s -o "$TMP/post.out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        --data-binary @"$2" "http://127.0.0.1:$HTTP$1" 2>/dev/null
}
q() { "$BIN" query "$@" --db "$DB" >"$TMP/out" 2>&1; }

start_proflink "$TMP/collector.yaml" "$TMP/log"
check "proflink starts with the sqlite exporter" test "$code" = 200

check "traces accepted over OTLP/HTTP JSON" test "$(post /v1/traces "$TMP/traces.json")" = 200
check "profiles accepted over OTLP/HTTP JSON" \
    test "$(post /v1development/profiles "$TMP/profiles.json")" = 200

# the writer thread commits shortly after
i=0
while [ $i -lt 100 ]; do
    q traces && grep -q "$TRACE" "$TMP/out" && grep -q "35.0ms" "$TMP/out" && break
    sleep 0.1
    i=$((i + 1))
done

q traces
check "query traces: the trace, its root span, duration and CPU" \
    sh -c "grep -q '$TRACE' '$TMP/out' && grep -q 'GET /cart' '$TMP/out' && grep -q '250ms' '$TMP/out' && grep -q '35.0ms' '$TMP/out' && grep -q 'shop' '$TMP/out'"
q traces --service shop --since 15m --min-duration 100ms --limit 5
check "query traces with filters" has "$TRACE"
q traces --min-duration 1s
check "query traces --min-duration excludes faster traces" sh -c "! grep -q '$TRACE' '$TMP/out'"
q traces --service nobody
check "query traces --service of another service: none" has "no traces"
q traces --json
check "query traces --json" has "\"cpu_ns\":35000000"

q trace "$TRACE"
check "query trace: the span tree with CPU and hottest functions" \
    sh -c "grep -q 'GET /cart' '$TMP/out' && grep -q '^ .*  SELECT cart' '$TMP/out' && grep -q 'hot: sql_exec 20.0ms, sql_parse 10.0ms' '$TMP/out' && grep -q 'ERROR' '$TMP/out' && grep -q 'template missing' '$TMP/out'"
check "query trace: exception events" has "exception: TemplateError: cart.html not found"
check "query trace: children are indented under the root" \
    sh -c "grep -q '  GET /cart' '$TMP/out' && grep -q '    SELECT cart' '$TMP/out'"
q trace "$TRACE" --json
check "query trace --json" has "\"name\":\"SELECT cart\""

q flamegraph --trace "$TRACE"
printf 'main;handler;render_tpl 5000000\nmain;handler;sql_exec 20000000\nmain;handler;sql_parse 10000000\n' >"$TMP/expected"
check "query flamegraph --trace: folded stacks" cmp -s "$TMP/out" "$TMP/expected"
q flamegraph --span "$DBQ" --format folded
check "query flamegraph --span: only that span" \
    sh -c "grep -q 'sql_exec 20000000' '$TMP/out' && ! grep -q render_tpl '$TMP/out'"
q flamegraph --service shop --since 15m --format svg --output "$TMP/flame.svg"
check "query flamegraph --format svg writes a self-contained SVG" \
    sh -c "head -1 '$TMP/flame.svg' | grep -q '<?xml' && grep -q '</svg>' '$TMP/flame.svg' && grep -q 'sql_exec' '$TMP/flame.svg' && ! grep -q 'src=' '$TMP/flame.svg'"
q flamegraph --service shop --format json
check "query flamegraph --format json" has '"flamegraph":{"name":"all","value":35000000'

"$BIN" query flamegraph --db "$DB" --span "$ROOT" >"$TMP/out" 2>/dev/null
check "query flamegraph --span of the root alone: its own samples only (none)" test ! -s "$TMP/out"
"$BIN" query flamegraph --db "$DB" --span "$ROOT" --descendants >"$TMP/out" 2>&1
check "query flamegraph --span --descendants: the spans below it too" cmp -s "$TMP/out" "$TMP/expected"

"$BIN" query flamegraph --db "$DB" --trace "$TRACE" --format pprof --output "$TMP/p.pb.gz" >/dev/null 2>&1
check "query flamegraph --format pprof writes a gzipped pprof" gzip -t "$TMP/p.pb.gz"
gzip -dc "$TMP/p.pb.gz" | protoc --decode=perftools.profiles.Profile \
    -I"$SRC/proto/perftools/profiles" "$SRC/proto/perftools/profiles/profile.proto" >"$TMP/out" 2>&1
check "the pprof decodes: cpu nanoseconds, sql_exec, values" \
    sh -c "grep -q '\"sql_exec\"' '$TMP/out' && grep -q '\"nanoseconds\"' '$TMP/out' && grep -q 'value: 20000000' '$TMP/out'"
q flamegraph --trace "$TRACE" --format speedscope
check "query flamegraph --format speedscope: frames and weights" \
    node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
      const p = j.profiles[0]; const names = j.shared.frames.map((f) => f.name);
      const sum = p.weights.reduce((a, b) => a + b, 0);
      if (p.unit !== "nanoseconds" || sum !== 35000000 || p.endValue !== sum) process.exit(1);
      if (!p.samples.some((s) => s.map((i) => names[i]).join(";") === "main;handler;sql_exec")) process.exit(1);' "$TMP/out"

q top --service shop --since 15m
check "query top: self and total per function" \
    sh -c "grep -q 'sql_exec' '$TMP/out' && grep -q '20.0ms.*57.1%.*20.0ms' '$TMP/out' && grep -q '0ns.*35.0ms.*100.0%.*handler' '$TMP/out'"
q services
check "query services" has "^shop$"

"$BIN" query --config "$TMP/collector.yaml" traces >"$TMP/out" 2>&1
check "--config finds the store path in collector.yaml" has "$TRACE"

code=$(curl -s -o "$TMP/out" -w '%{http_code}' "http://127.0.0.1:$API/api/traces?since=15m")
check "JSON API: /api/traces" sh -c "[ $code = 200 ] && grep -q '$TRACE' '$TMP/out'"
code=$(curl -s -o "$TMP/out" -w '%{http_code}' "http://127.0.0.1:$API/api/flamegraph?span=$DBQ&format=folded")
check "JSON API: /api/flamegraph folded" sh -c "[ $code = 200 ] && grep -q 'main;handler;sql_exec 20000000' '$TMP/out'"

code=$(curl -s -o "$TMP/out" -w '%{http_code}' "http://127.0.0.1:$API/")
check "web view: / serves the page" sh -c "[ $code = 200 ] && grep -q '<script src=\"app.js\"' '$TMP/out'"
code=$(curl -s -o "$TMP/out" -w '%{http_code}' "http://127.0.0.1:$API/app.js")
check "web view: app.js is compiled in" sh -c "[ $code = 200 ] && grep -q 'flame' '$TMP/out'"
code=$(curl -s -o "$TMP/out" -w '%{http_code}' "http://127.0.0.1:$API/api/status")
check "JSON API: /api/status" sh -c "[ $code = 200 ] && grep -q '\"spans_stored\":3' '$TMP/out' && grep -q '\"store_bytes\":[1-9]' '$TMP/out'"
code=$(curl -s -o "$TMP/out" -w '%{http_code}' "http://127.0.0.1:$API/api/links?since=15m")
check "JSON API: /api/links: spans with profiles per service" \
    sh -c "[ $code = 200 ] && grep -q '\"service\":\"shop\",\"spans\":3,\"linked\":2' '$TMP/out'"
code=$(curl -s -o "$TMP/out" -w '%{http_code}' "http://127.0.0.1:$API/api/traces?since=15m&errors=1&root=GET%20/cart&sort=cpu&min_cpu=30ms")
check "JSON API: /api/traces with root, errors, min_cpu and sort" sh -c "[ $code = 200 ] && grep -q '$TRACE' '$TMP/out'"
code=$(curl -s -o "$TMP/out" -w '%{http_code}' "http://127.0.0.1:$API/api/traces?since=15m&min_cpu=36ms")
check "JSON API: min_cpu above the trace's CPU: none" sh -c "[ $code = 200 ] && grep -q '{\"traces\":\[\]}' '$TMP/out'"
code=$(curl -s -o "$TMP/out" -w '%{http_code}' "http://127.0.0.1:$API/api/flamegraph?trace=$TRACE&format=pprof")
check "JSON API: /api/flamegraph format=pprof" sh -c "[ $code = 200 ] && gzip -t '$TMP/out'"

# ---- errors -----------------------------------------------------------------
q trace nothex
check "a bad trace id: exit 2 with a message" sh -c "[ $? -eq 2 ] && grep -q 'not a trace id' '$TMP/out'"
"$BIN" query trace nothex --db "$DB" >/dev/null 2>&1
check "a bad trace id exits 2" test $? -eq 2
"$BIN" query trace ffffffffffffffffffffffffffffffff --db "$DB" >"$TMP/out" 2>&1
check "an unknown trace: exit 1, says so" sh -c "[ $? -eq 1 ] && grep -q 'not in the store' '$TMP/out'"
"$BIN" query frobnicate >"$TMP/out" 2>&1
check "an unknown command exits 2" test $? -eq 2
"$BIN" query flamegraph --db "$DB" >"$TMP/out" 2>&1
check "flamegraph without a selection exits 2" test $? -eq 2
"$BIN" query traces --db "$TMP/missing.db" >"$TMP/out" 2>&1
check "a missing store: exit 1, clear message, nothing created" \
    sh -c "[ $? -eq 1 ] && grep -q 'no proflink store at' '$TMP/out' && [ ! -e '$TMP/missing.db' ]"
head -c 8192 /dev/urandom >"$TMP/garbage.db"
"$BIN" query traces --db "$TMP/garbage.db" >"$TMP/out" 2>&1
check "a corrupt store: exit 1, says it is not a database" \
    sh -c "[ $? -eq 1 ] && grep -q 'not a database' '$TMP/out'"
"$BIN" query --help >"$TMP/out" 2>&1
check "query --help exits 0 and lists the commands" sh -c "[ $? -eq 0 ] && grep -q flamegraph '$TMP/out'"

# ---- a store from a previous run ------------------------------------------
kill -TERM "$PID"
i=0
while kill -0 "$PID" 2>/dev/null && [ $i -lt 200 ]; do
    sleep 0.05
    i=$((i + 1))
done
wait "$PID"
RC=$?
PID=
check "SIGTERM: proflink exits 0" test "$RC" -eq 0
q trace "$TRACE"
check "the store outlives the process" has "SELECT cart"

start_proflink "$TMP/collector.yaml" "$TMP/log2"
check "proflink reopens the store of a previous run" test "$code" = 200
post /v1development/profiles "$TMP/profiles.json" >/dev/null
i=0
while [ $i -lt 100 ]; do
    q traces && grep -q "70.0ms" "$TMP/out" && break
    sleep 0.1
    i=$((i + 1))
done
check "new samples add to the stored ones" has "70.0ms"
kill -TERM "$PID"
wait "$PID"
PID=

# ---- configuration errors and a taken API port ---------------------------
sed 's/^    path: .*/&\n    busy_timeout: 0s/' "$TMP/collector.yaml" >"$TMP/bad.yaml"
"$BIN" validate --config "$TMP/bad.yaml" >"$TMP/out" 2>&1
check "validate: a bad sqlite setting names the file, line and key" \
    sh -c "[ $? -ne 0 ] && grep -q 'bad.yaml:[0-9]*:[0-9]*:.*busy_timeout' '$TMP/out'"

python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
open(sys.argv[1], "w").write(str(s.getsockname()[1])); time.sleep(30)' "$TMP/taken" &
HOLDER=$!
i=0
while [ ! -s "$TMP/taken" ] && [ $i -lt 100 ]; do
    sleep 0.05
    i=$((i + 1))
done
sed "s/127.0.0.1:$API/127.0.0.1:$(cat "$TMP/taken")/" "$TMP/collector.yaml" >"$TMP/taken.yaml"
"$BIN" --config "$TMP/taken.yaml" 2>"$TMP/log3" &
PID=$!
i=0
while [ $i -lt 100 ]; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$TEL/health" 2>/dev/null)
    [ "$code" = 200 ] && break
    sleep 0.05
    i=$((i + 1))
done
check "the query API port is taken: proflink runs anyway and says so" \
    sh -c "[ '$code' = 200 ] && grep -q 'query API disabled' '$TMP/log3'"
check "... and still stores" test "$(post /v1/traces "$TMP/traces.json")" = 200
kill -TERM "$PID"
wait "$PID"
PID=
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null

echo "1..$N"
[ "$FAILS" -eq 0 ]
