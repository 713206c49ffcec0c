#!/bin/sh
# test_configs.sh: the configurations of tests/configs/, shaped like the
# ones Collector users run.
#
#   valid/*.yaml: each validates (with exactly the warnings its `# warning:
#   LINE:COL: TEXT` lines name), prints with print-config (and the printed
#   text validates again), and starts: every listening port is moved to a
#   free one, the process answers /health and exits 0 on SIGTERM.
#   invalid/*.yaml: each is refused; every `# expect: LINE:COL: TEXT` line
#   of the file must appear in the output as FILE:LINE:COL: TEXT, and with
#   `# errors: N` there must be exactly N such messages; `# expect-text:
#   TEXT` is a message anywhere (one positioned in an included file).
#
# usage: tests/test_configs.sh [path/to/proflink]   (or PROFLINK_BIN)
set -u

. "$(dirname "$0")/cli_lib.sh"

DIR=$(cd "$(dirname "$0")/configs" && pwd)

# Rewrites every listening host:port (0.0.0.0, 127.0.0.1, localhost, [::])
# to 127.0.0.1:<free port>, the same port for the same number, so that
# exporters aimed at a local receiver still reach it; paths under
# /tmp/proflink-configs-test move to the test's temporary directory.
move_ports() { # move_ports IN OUT
    python3 - "$1" "$2" "$TMP" <<'PY'
import re, socket, sys
text = open(sys.argv[1]).read()
ports = {}
def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def sub(m):
    old = m.group(2)
    if old not in ports:
        ports[old] = free()
    return "%s127.0.0.1:%d" % (m.group(1), ports[old])
text = re.sub(r'(^|[\s"\'/{,])(?:0\.0\.0\.0|127\.0\.0\.1|localhost|\[::\]):(\d+)', sub, text,
              flags=re.M)
# files the configurations write go to the test's own directory
text = text.replace("/tmp/proflink-configs-test", sys.argv[3])
open(sys.argv[2], "w").write(text)
PY
}

for f in "$DIR"/valid/*.yaml; do
    name=valid/$(basename "$f")
    (cd "$DIR/valid" && "$BIN" validate --config "$f") >"$TMP/out" 2>&1
    rc=$?
    # warnings: exactly the `# warning: LINE:COL: TEXT` lines of the file
    good=yes
    sed -n 's/^# warning: //p' "$f" >"$TMP/expect"
    while IFS= read -r line; do
        grep -qF "$f:${line%%: *}: warning: ${line#*: }" "$TMP/out" || {
            good=no; echo "    # missing warning: $line"; }
    done <"$TMP/expect"
    [ "$(grep -c ': warning: ' "$TMP/out")" = "$(wc -l <"$TMP/expect" | tr -d ' ')" ] || good=no
    if [ $rc -eq 0 ] && [ $good = yes ]; then ok "$name validates"; else
        not_ok "$name validates"; sed 's/^/    # /' "$TMP/out"; fi
    (cd "$DIR/valid" && "$BIN" print-config --config "$f") >"$TMP/printed.yaml" 2>"$TMP/out"
    rc=$?
    if [ $rc -eq 0 ] && (cd "$DIR/valid" && "$BIN" validate --config "$TMP/printed.yaml") \
        >>"$TMP/out" 2>&1; then ok "$name prints and the print validates"; else
        not_ok "$name prints and the print validates"; sed 's/^/    # /' "$TMP/out"; fi
    move_ports "$f" "$TMP/run.yaml"
    TEL=$(free_port)
    (cd "$DIR/valid" && exec "$BIN" --config "$TMP/run.yaml" \
        --set "service.telemetry.metrics.address=127.0.0.1:$TEL") >"$TMP/log" 2>&1 &
    PID=$!
    i=0
    up=no
    while [ $i -lt 100 ] && kill -0 "$PID" 2>/dev/null; do
        code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$TEL/health" 2>/dev/null)
        if [ "$code" = 200 ]; then up=yes; break; fi
        sleep 0.05
        i=$((i + 1))
    done
    kill -TERM "$PID" 2>/dev/null
    wait_i=0
    while kill -0 "$PID" 2>/dev/null && [ $wait_i -lt 200 ]; do sleep 0.05; wait_i=$((wait_i + 1)); done
    if kill -0 "$PID" 2>/dev/null; then kill -9 "$PID"; RC=timeout; else wait "$PID"; RC=$?; fi
    PID=
    LOG_FILE="$TMP/log"
    check "$name starts, answers /health and stops cleanly" test "$up/$RC" = yes/0
done

for f in "$DIR"/invalid/*.yaml; do
    name=invalid/$(basename "$f")
    (cd "$DIR/invalid" && "$BIN" validate --config "$f") >"$TMP/out" 2>&1
    rc=$?
    good=yes
    [ $rc -eq 1 ] || good=no
    grep -q '^# expect' "$f" || good=no
    grep '^# expect: ' "$f" | sed 's/^# expect: //' >"$TMP/expect"
    while IFS= read -r line; do
        grep -qF "$f:$line" "$TMP/out" || { good=no; echo "    # missing: $f:$line"; }
    done <"$TMP/expect"
    # `# errors: N`: exactly N lines name the file (no misleading extras)
    want=$(sed -n 's/^# errors: //p' "$f")
    if [ -n "$want" ]; then
        got=$(grep "^$f:[0-9]*:[0-9]*: " "$TMP/out" | grep -vc ': warning: ')
        [ "$got" = "$want" ] || { good=no; echo "    # $got errors, expected $want"; }
    fi
    # `# expect-text: TEXT`: a message positioned in another file
    sed -n 's/^# expect-text: //p' "$f" >"$TMP/expect"
    while IFS= read -r line; do
        grep -qF "$line" "$TMP/out" || { good=no; echo "    # missing: $line"; }
    done <"$TMP/expect"
    LOG_FILE="$TMP/out"
    check "$name is refused at its position" test $good = yes
done

echo "1..$N"
[ "$FAILS" -eq 0 ]
