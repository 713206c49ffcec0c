#!/bin/sh
# test_cli.sh: the proflink binary as a user runs it.
#
#   validate exit codes and file:line:col messages; one clear line and a
#   non-zero exit for a missing file and a port in use; /health and
#   /metrics; SIGTERM during traffic exits 0 and every accepted span reaches
#   the exporter (through a batch processor that holds data, so the flush on
#   shutdown is what is tested); SIGHUP with a broken file keeps the old
#   pipelines running, SIGHUP with a good file switches to it.
#
# usage: tests/test_cli.sh [path/to/proflink]   (or PROFLINK_BIN)
set -u

. "$(dirname "$0")/cli_lib.sh"

# An OTLP ExportTraceServiceRequest (protobuf) with 2 spans.
python3 - "$TMP/req.bin" <<'EOF'
import struct, sys
def key(field, wt): return bytes([field << 3 | wt])
def ld(field, payload):
    n, out = len(payload), b""
    while True:
        b = n & 0x7f; n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n: break
    return key(field, 2) + out + payload
def span(i):
    return (ld(1, bytes(range(1, 17))) + ld(2, bytes([0, 0, 0, 0, 0, 0, 0, i])) + ld(5, b"op")
            + key(7, 1) + struct.pack("<Q", 1700000000000000000)
            + key(8, 1) + struct.pack("<Q", 1700000000001000000))
scope = ld(2, span(1)) + ld(2, span(2))
open(sys.argv[1], "wb").write(ld(1, ld(2, scope)))
EOF

HTTP=$(free_port)
GRPC=$(free_port)
TEL=$(free_port)

write_config() { # write_config FILE VERBOSITY [BATCH_TIMEOUT]
    cat >"$1" <<EOF
receivers:
  otlp:
    protocols:
      grpc: {endpoint: 127.0.0.1:$GRPC}
      http: {endpoint: 127.0.0.1:$HTTP}
processors:
  batch:
    timeout: ${3:-10s}
exporters:
  debug:
    verbosity: $2
service:
  shutdown_timeout: 5s
  telemetry:
    metrics: {address: 127.0.0.1:$TEL}
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [debug]
EOF
}

post() { # prints the HTTP status of one export
    curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/x-protobuf' \
        --data-binary @"$TMP/req.bin" "http://127.0.0.1:$HTTP/v1/traces" 2>/dev/null
}

spans_exported() { # sum of the span counts on the debug exporter's lines
    grep -o '[0-9]* spans' "$TMP/log" | awk '{s += $1} END {print s + 0}'
}

wait_exit() { # wait_exit SECONDS: waits for PID; its exit code goes to RC
    i=0
    while kill -0 "$PID" 2>/dev/null && [ $i -lt $(($1 * 20)) ]; do
        sleep 0.05
        i=$((i + 1))
    done
    if kill -0 "$PID" 2>/dev/null; then
        RC=timeout
        return
    fi
    wait "$PID"
    RC=$?
    PID=
}

# ---- version, components --------------------------------------------------
check "--version prints the version" sh -c "'$BIN' --version | grep -q '^proflink [0-9]'"
"$BIN" components >"$TMP/components" 2>&1
check "components lists types, signals and keys with defaults" \
    sh -c "grep -q '^exporter debug' '$TMP/components' && grep -q 'signals: traces, profiles, logs, metrics' '$TMP/components' && grep -q 'verbosity .*string .*basic' '$TMP/components'"

# ---- validate -------------------------------------------------------------
write_config "$TMP/good.yaml" basic
"$BIN" validate --config "$TMP/good.yaml" >"$TMP/out" 2>&1
check "validate: a good file exits 0" test $? -eq 0

cat >"$TMP/bad.yaml" <<'EOF'
receivers:
  otlp:
    protocols: {http: {endpoint: 127.0.0.1:0}}
exporters:
  debug: {verbosity: loud, colour: red}
service:
  shutdown_timeout: soon
  pipelines:
    traces: {receivers: [otlp], exporters: [debug, nowhere]}
    profiles: {exporters: [debug]}
EOF
"$BIN" validate --config "$TMP/bad.yaml" >"$TMP/out" 2>&1
rc=$?
check "validate: a bad file exits 1" test $rc -eq 1
check "validate: every problem with file:line:col" sh -c "
    grep -q '^$TMP/bad.yaml:5:11: .verbosity.: must be basic, normal or detailed' '$TMP/out' &&
    grep -q '^$TMP/bad.yaml:5:28: unknown key .colour.' '$TMP/out' &&
    grep -q '^$TMP/bad.yaml:7:21: .shutdown_timeout.: invalid duration' '$TMP/out' &&
    grep -q '^$TMP/bad.yaml:9:52: exporter .nowhere. is not defined' '$TMP/out' &&
    grep -q '^$TMP/bad.yaml:10:5: pipeline .profiles. has no receivers' '$TMP/out'"

printf 'receivers: [\n' >"$TMP/syntax.yaml"
"$BIN" validate --config "$TMP/syntax.yaml" >"$TMP/out" 2>&1
check "validate: a YAML syntax error exits 1 with its position" \
    sh -c "test $? -eq 1 && grep -q '^$TMP/syntax.yaml:2:1: YAML syntax error' '$TMP/out'"

"$BIN" validate --config "$TMP/missing.yaml" >"$TMP/out" 2>&1
rc=$?
check "validate: a missing file is one line and exit 1" \
    sh -c "test $rc -eq 1 && test \$(wc -l <'$TMP/out') -eq 1 && grep -q 'No such file' '$TMP/out'"

# Collector keys proflink has no use for (gRPC keepalive) are accepted with a
# warning, so copied Collector configs load; cors is implemented (no warning).
cat >"$TMP/compat.yaml" <<'EOF2'
receivers:
  otlp:
    protocols:
      grpc:
        keepalive:
          server_parameters: {max_connection_idle: 11s}
      http:
        cors: {allowed_origins: ["http://*.example.com"]}
exporters: {debug: {}}
extensions:
  pprof: {endpoint: localhost:1777}
  zpages:
service:
  extensions: [pprof, zpages]
  pipelines: {traces: {receivers: [otlp], exporters: [debug]}}
EOF2
"$BIN" validate --config "$TMP/compat.yaml" >"$TMP/out" 2>&1
rc=$?
check "validate: Collector-only keys and the pprof/zpages extensions are accepted, with a warning at each key" \
    sh -c "test $rc -eq 0 && grep -q 'compat.yaml:5:9: \\(warning: \\)\\?.keepalive. is accepted' '$TMP/out' && ! grep -q 'cors' '$TMP/out'"

# ---- the command line as the Collector's ------------------------------------
"$BIN" valdiate --config "$TMP/good.yaml" >"$TMP/out" 2>&1
rc=$?
check "an unknown subcommand is an error with the usage, exit 2, nothing started" \
    sh -c "test $rc -eq 2 && grep -q \"unknown command 'valdiate' (did you mean 'validate'?)\" '$TMP/out' && grep -q '^usage: proflink' '$TMP/out'"
for sub in validate components print-config query; do
    "$BIN" $sub --help >"$TMP/out" 2>&1
    rc=$?
    check "$sub --help: usage on stdout, exit 0" sh -c "test $rc -eq 0 && grep -qi 'usage' '$TMP/out'"
done
"$BIN" validate --config "$TMP/good.yaml" --frobnicate >"$TMP/out" 2>&1
check "an unknown option is exit 2 with the usage" sh -c "test $? -eq 2 && grep -q \"unknown argument '--frobnicate'\" '$TMP/out'"

# several --config merged in order (maps deeply, lists replaced), then --set
cat >"$TMP/base.yaml" <<EOF
receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:$HTTP}
processors:
  batch: {timeout: 10s, send_batch_size: 100}
exporters:
  debug: {verbosity: basic}
  nop:
service:
  telemetry: {metrics: {address: 127.0.0.1:$TEL}}
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [debug, nop]}
EOF
cat >"$TMP/over.yaml" <<'EOF'
processors:
  batch: {timeout: 5s}
service:
  pipelines:
    traces: {exporters: [nop]}
EOF
"$BIN" print-config --config "$TMP/base.yaml" --config "file:$TMP/over.yaml" \
    --config 'yaml:exporters::debug::verbosity: detailed' --set=processors.batch.timeout=2s \
    --set 'service::pipelines::traces::processors=[]' >"$TMP/out" 2>"$TMP/err"
rc=$?
cat >"$TMP/expect.py" <<'EOF'
import sys
t = open(sys.argv[1]).read()
assert "timeout: 2s" in t, "the --set wins over both files"
assert "send_batch_size: 100" in t, "maps merge deeply: the base's other keys stay"
assert "verbosity: detailed" in t, "yaml: fragments with :: paths apply"
ex = t.split("exporters:")[-1]
assert "- nop" in ex and "- debug" not in ex, "lists are replaced, not appended"
assert "processors: []" in t, "--set takes a YAML value"
EOF
check "print-config: --config files, file:, yaml: and --set merged in order" \
    sh -c "test $rc -eq 0 && python3 '$TMP/expect.py' '$TMP/out'"

# providers: ${file:...}, ${env:...}; an unset variable is empty with a warning
printf 's3cr3t-from-file\n' >"$TMP/password.txt"
cat >"$TMP/prov.yaml" <<EOF
receivers:
  otlp:
    protocols: {http: {endpoint: 127.0.0.1:$HTTP}}
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:9/\${env:PL_CLI_PATH}
    headers:
      Authorization: "Bearer \${file:$TMP/password.txt}"
      X-Api-Token: \${env:PL_CLI_UNSET}
      X-Tenant: \${env:PL_CLI_TENANT}
service:
  pipelines: {traces: {receivers: [otlp], exporters: [otlphttp]}}
EOF
PL_CLI_PATH=v9 PL_CLI_TENANT=acme "$BIN" print-config --config "$TMP/prov.yaml" >"$TMP/out" 2>"$TMP/err"
rc=$?
check "print-config: secrets masked, other values resolved" sh -c "
    test $rc -eq 0 && grep -q 'Authorization: .\[REDACTED\]' '$TMP/out' && ! grep -q s3cr3t '$TMP/out' &&
    grep -q 'X-Tenant: acme' '$TMP/out' && grep -q 'endpoint: http://127.0.0.1:9/v9' '$TMP/out'"
check "an unset variable is a warning with its position, not an error" \
    grep -q "prov.yaml:9:20: warning: environment variable PL_CLI_UNSET is not set" "$TMP/err"
PL_CLI_PATH=v9 "$BIN" print-config --config "$TMP/prov.yaml" --mode unredacted >"$TMP/out" 2>/dev/null
check "print-config --mode unredacted shows the file's content" grep -q 'Bearer s3cr3t-from-file' "$TMP/out"

"$BIN" validate --config "$TMP/base.yaml" --set 'exporters::otlphttp::headers::Authorization=Bearer hunter2' \
    --config 'yaml:exporters::nosuch::password: hunter2' >"$TMP/out" 2>&1
check "validate: a secret given with --set or yaml: is not repeated in the messages" sh -c "
    test $? -eq 1 && ! grep -q hunter2 '$TMP/out' && grep -q 'Authorization=\[REDACTED\]' '$TMP/out'"

# validate: every problem in one pass, addresses included
cat >"$TMP/many.yaml" <<'EOF'
receivers:
  otlp:
    protocols:
      http: {endpoint: "myhost.example:35421"}
      grpc: {endpoint: "0.0.0.0:99999"}
  pyroscope: {endpoint: "192.0.2.77:4040"}
exporters:
  otlphttp:
    endpoint: http://x:4318
    headers: {Authorization: "Bearer ${env:PL_CLI_UNSET}"}
    compression: zip
service:
  pipelines:
    traces: {receivers: [otlp], exporters: [otlphttp]}
    profiles: {receivers: [pyroscope], exporters: [otlphttp]}
EOF
"$BIN" validate --config "$TMP/many.yaml" >"$TMP/out" 2>&1
rc=$?
check "validate: unset variable, bad host, port out of range and a bad value, in one pass" sh -c "
    test $rc -eq 1 && grep -q 'many.yaml:10:30: warning: environment variable PL_CLI_UNSET' '$TMP/out' &&
    grep -q 'many.yaml:4:24: .endpoint.: .myhost.example:35421.: cannot listen on host' '$TMP/out' &&
    grep -q 'many.yaml:5:24: .endpoint.: .0.0.0.0:99999.: port must be a number from 0 to 65535' '$TMP/out' &&
    grep -q 'many.yaml:11:5: .compression.: must be' '$TMP/out'"
sed -i 's/myhost.example:35421/127.0.0.1:0/; s/0.0.0.0:99999/127.0.0.1:0/; s/compression: zip/compression: gzip/' "$TMP/many.yaml"
"$BIN" validate --config "$TMP/many.yaml" >"$TMP/out" 2>&1
rc=$?
check "validate: an IP that is not this machine's is an error at its position" sh -c "
    test $rc -eq 1 && grep -q 'many.yaml:6:25: .endpoint.: 192.0.2.77 is not an address of this machine' '$TMP/out'"
cat >"$TMP/twice.yaml" <<EOF
receivers:
  otlp: {protocols: {http: {endpoint: 127.0.0.1:$HTTP}, grpc: {endpoint: 127.0.0.1:$HTTP}}}
exporters: {nop: }
service: {pipelines: {traces: {receivers: [otlp], exporters: [nop]}}}
EOF
"$BIN" validate --config "$TMP/twice.yaml" >"$TMP/out" 2>&1
check "validate: two listeners on one port" sh -c "test $? -eq 1 && grep -q 'is also used at' '$TMP/out'"
"$BIN" validate --config "$TMP/base.yaml" --set 'processors.batch.timeout=soon' >"$TMP/out" 2>&1
check "validate: an error in a --set points at the --set" sh -c "test $? -eq 1 && grep -q '^--set processors.batch.timeout=soon:1:.*invalid duration' '$TMP/out'"

# the man page comes from the components tables
"$BIN" components --format man >"$TMP/man" 2>&1
check "components --format man: a man page with every component and key" sh -c "
    grep -q '^.TH PROFLINK 1' '$TMP/man' && grep -q '^.SS correlation' '$TMP/man' &&
    grep -q '^.B send_batch_size' '$TMP/man' && { ! command -v groff >/dev/null || groff -man -Tutf8 -ww '$TMP/man' >/dev/null 2>&1; }"

# ---- run: failures to start -----------------------------------------------
"$BIN" --config "$TMP/missing.yaml" >"$TMP/out" 2>&1
rc=$?
check "run: a missing file is one line and a non-zero exit" \
    sh -c "test $rc -ne 0 && test \$(wc -l <'$TMP/out') -eq 1"

# run_on_held_port PORT NAME: a listener of our own holds a free port, and
# proflink runs (10 s at most) with $TMP/good.yaml where 127.0.0.1:PORT is
# replaced by it ($TMP/NAME.yaml); sets HELD to that port and rc to
# proflink's exit status, its output in $TMP/out.
run_on_held_port() {
    python3 -c "
import socket, time
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)
open('$TMP/held_$2', 'w').write(str(s.getsockname()[1])); time.sleep(5)" &
    holder=$!
    i=0
    while [ ! -s "$TMP/held_$2" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    HELD=$(cat "$TMP/held_$2")
    sed "s/127.0.0.1:$1/127.0.0.1:$HELD/" "$TMP/good.yaml" >"$TMP/$2.yaml"
    timeout 10 "$BIN" --config "$TMP/$2.yaml" >"$TMP/out" 2>&1
    rc=$?
    kill $holder 2>/dev/null
    wait $holder 2>/dev/null
}

# a listener of our own holds a port; proflink is configured to use it
run_on_held_port "$HTTP" busy
check "run: a port in use is a clear error and a non-zero exit" \
    sh -c "test $rc -ne 0 && test $rc -ne 124 && grep -q '^proflink: receiver otlp: 127.0.0.1:$HELD: address already in use' '$TMP/out' && test \$(grep -c 'error\\|proflink:' '$TMP/out') -eq 1"

# the telemetry address, when set explicitly, must be free too
run_on_held_port "$TEL" busy_tel
check "run: an explicit telemetry address in use is a clear error" \
    sh -c "test $rc -eq 1 && grep -q '^proflink: service.telemetry.metrics.address: 127.0.0.1:$HELD: address already in use' '$TMP/out'"

if [ "$(id -u)" != 0 ]; then
    cp "$TMP/good.yaml" "$TMP/secret.yaml"
    chmod 000 "$TMP/secret.yaml"
    "$BIN" --config "$TMP/secret.yaml" >"$TMP/out" 2>&1
    rc=$?
    check "run: an unreadable file is one line and a non-zero exit" \
        sh -c "test $rc -ne 0 && grep -q 'Permission denied' '$TMP/out'"
fi

# ---- logs: service.telemetry.logs encoding json, level, initial fields -------
cat >"$TMP/json.yaml" <<EOF
receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:$HTTP}
exporters: {debug: {verbosity: basic}}
service:
  telemetry:
    logs: {encoding: json, level: debug, initial_fields: {service: gateway, "odd\"key": "tab\there"}}
    metrics: {address: 127.0.0.1:$TEL}
  pipelines: {traces: {receivers: [otlp], exporters: [debug]}}
EOF
if start_proflink "$TMP/json.yaml"; then
    printf '\377\001not-protobuf\n' >"$TMP/junk.bin"
    curl -s -o /dev/null -X POST -H 'Content-Type: application/x-protobuf' \
        --data-binary @"$TMP/junk.bin" "http://127.0.0.1:$HTTP/v1/traces%ff%0a"
    post >/dev/null
    kill -TERM "$PID"
    wait_exit 10
fi
cat >"$TMP/logcheck.py" <<'EOF'
import json, sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
assert lines[-1] == b"", "ends with a newline"
events = [json.loads(l) for l in lines[:-1]]
assert len(events) >= 5, events
for e in events:
    assert e["level"] in ("debug", "info", "warn", "error"), e
    assert e["ts"].endswith("Z") and e["msg"], e
    assert e["service"] == "gateway" and e['odd"key'] == "tab\there", e
assert any(e.get("otelcol.component.id") == "otlp" for e in events), "component id field"
assert any(e["msg"] == "stopped" for e in events)
EOF
check "logs: encoding json is one valid JSON object per line with level, ts, msg, component and initial fields" \
    python3 "$TMP/logcheck.py" "$TMP/log"
sed -i 's/encoding: json, level: debug/encoding: yaml, level: loud/' "$TMP/json.yaml"
"$BIN" validate --config "$TMP/json.yaml" >"$TMP/out" 2>&1
check "logs: an unknown encoding or level is a validate error" sh -c "
    grep -q 'unknown encoding .yaml. (console or json)' '$TMP/out' && grep -q 'unknown log level .loud.' '$TMP/out'"

# ---- the Collector's metrics.readers form of the telemetry address ---------
cat >"$TMP/readers.yaml" <<EOF
receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:$HTTP}
exporters: {debug: {verbosity: basic}}
service:
  telemetry:
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus:
                host: '127.0.0.1'
                port: $TEL
  pipelines: {traces: {receivers: [otlp], exporters: [debug]}}
EOF
if start_proflink "$TMP/readers.yaml"; then
    curl -s "http://127.0.0.1:$TEL/metrics" >"$TMP/metrics"
    kill -TERM "$PID"
    wait_exit 10
    check "metrics.readers (pull, prometheus host/port) serves /metrics there" \
        grep -q '^otelcol_receiver_accepted_spans{receiver="otlp",transport="http"} 0$' "$TMP/metrics"
else
    not_ok "metrics.readers (pull, prometheus host/port) serves /metrics there"
fi
"$BIN" validate --config "$TMP/readers.yaml" --set "service::telemetry::metrics::address=127.0.0.1:$TEL" >"$TMP/out" 2>&1
check "metrics: address and readers together are an error" sh -c "test $? -eq 1 && grep -q 'give either address or readers' '$TMP/out'"

# ---- run: health, metrics, SIGHUP -----------------------------------------
write_config "$TMP/run.yaml" basic
if start_proflink "$TMP/run.yaml"; then ok "run: /health answers 200 once running"; else not_ok "run: /health answers 200 once running"; fi
check "run: an export is accepted" test "$(post)" = 200
curl -s "http://127.0.0.1:$TEL/metrics" >"$TMP/metrics"
check "run: /metrics has per-component counters and process figures" sh -c "
    grep -q '^otelcol_receiver_accepted_spans{receiver=\"otlp\",transport=\"http\"} 2$' '$TMP/metrics' &&
    grep -q '^otelcol_processor_accepted_spans{processor=\"batch\"} 2$' '$TMP/metrics' &&
    grep -q '^otelcol_process_memory_rss [1-9]' '$TMP/metrics'"

printf 'receivers: {otlp: }\nexporters: {debug: {verbosity: [\n' >"$TMP/run.yaml"
kill -HUP "$PID"
sleep 0.5
check "SIGHUP with a broken file: still running" kill -0 "$PID"
check "SIGHUP with a broken file: the reason is logged" \
    sh -c "grep -q 'run.yaml:3:1: YAML syntax error' '$TMP/log' && grep -q 'keeping the running configuration' '$TMP/log'"
check "SIGHUP with a broken file: old pipelines still accept data" test "$(post)" = 200
curl -s "http://127.0.0.1:$TEL/metrics" >"$TMP/metrics"
check "SIGHUP with a broken file: counted as a failed reload" sh -c "
    grep -q '^proflink_config_reloads_total{result=\"failure\"} 1$' '$TMP/metrics' &&
    grep -q '^proflink_up 1$' '$TMP/metrics' && grep -q '^proflink_build_info{version=' '$TMP/metrics'"

# only the exporter changes: the receiver and the batch processor are kept
# as they are, the batch still holding the 4 spans, counters going on
write_config "$TMP/run.yaml" normal
kill -HUP "$PID"
i=0
while ! grep -q 'reloaded' "$TMP/log" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
check "SIGHUP with a good file: reloaded, swapping only what changed" \
    grep -q 'reloaded .*2 components kept as they were, 1 replaced, 0 added, 0 removed' "$TMP/log"
curl -s "http://127.0.0.1:$TEL/metrics" >"$TMP/metrics"
check "SIGHUP: an unchanged batch processor keeps what it holds, counters are kept" sh -c "
    test \$(grep -o '[0-9]* spans' '$TMP/log' | awk '{s += \$1} END {print s + 0}') -eq 0 &&
    grep -q '^otelcol_receiver_accepted_spans{receiver=\"otlp\",transport=\"http\"} 4$' '$TMP/metrics' &&
    grep -q '^otelcol_processor_accepted_spans{processor=\"batch\"} 4$' '$TMP/metrics' &&
    grep -q '^proflink_config_reloads_total{result=\"success\"} 1$' '$TMP/metrics'"
# now the batch processor's settings change: it is replaced, and flushes
write_config "$TMP/run.yaml" normal 9s
kill -HUP "$PID"
i=0
while [ "$(grep -c 'reloaded' "$TMP/log")" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
i=0
while [ "$(spans_exported)" -lt 4 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
check "SIGHUP with a good file: data held by the replaced batch processor was flushed" \
    test "$(spans_exported)" -eq 4
code=000
i=0
while [ "$code" != 200 ] && [ $i -lt 40 ]; do code=$(post); sleep 0.05; i=$((i + 1)); done
check "SIGHUP with a good file: the new pipelines accept data on the same port" test "$code" = 200
kill -TERM "$PID"
wait_exit 10
check "SIGTERM after reload exits 0" test "$RC" = 0

# ---- SIGTERM during traffic -----------------------------------------------
write_config "$TMP/run.yaml" basic
: >"$TMP/codes"
if start_proflink "$TMP/run.yaml"; then
    (
        i=0
        while [ $i -lt 400 ]; do
            post >>"$TMP/codes"
            echo >>"$TMP/codes"
            i=$((i + 1))
        done
    ) &
    LOAD=$!
    sleep 1
    kill -TERM "$PID"
    wait_exit 15
    kill $LOAD 2>/dev/null
    wait $LOAD 2>/dev/null
    accepted=$(grep -c '^200$' "$TMP/codes")
    check "SIGTERM during traffic exits 0" test "$RC" = 0
    check "SIGTERM during traffic: traffic was flowing ($accepted requests accepted)" test "$accepted" -gt 0
    exported=$(spans_exported)
    check "SIGTERM during traffic: every accepted span was exported ($exported of $((accepted * 2)))" \
        test "$exported" -eq $((accepted * 2))
else
    not_ok "SIGTERM during traffic: proflink did not start"
fi

# ---- drain with an unreachable backend: 503 while draining, bounded wait ---
DEAD=$(free_port)
cat >"$TMP/dead.yaml" <<EOF
receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:$HTTP}
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:$DEAD
service:
  shutdown_timeout: 1500ms
  telemetry:
    metrics: {address: 127.0.0.1:$TEL}
  pipelines:
    traces: {receivers: [otlp], exporters: [otlphttp]}
EOF
if start_proflink "$TMP/dead.yaml"; then
    post >/dev/null
    sleep 0.2
    kill -TERM "$PID"
    sleep 0.3
    health=$(curl -s "http://127.0.0.1:$TEL/health")
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$TEL/health")
    check "draining: /health answers 503 with the state" \
        sh -c "test '$code' = 503 && test '$health' = '{\"status\":\"draining\"}'"
    wait_exit 10
    check "draining: an unreachable backend delays exit only until shutdown_timeout" \
        sh -c "test '$RC' = 0 && grep -q 'drain deadline passed' '$TMP/log'"
else
    not_ok "draining: proflink did not start"
fi

echo "1..$N"
[ $FAILS -eq 0 ]
