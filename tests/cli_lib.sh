# cli_lib.sh: sourced by the shell tests of the proflink binary
# (test_cli.sh, test_query_cli.sh): the binary's path (first argument,
# PROFLINK_BIN, or build/proflink), a temp dir $TMP removed on exit along
# with a still-running proflink ($PID), TAP output (ok / not_ok / check,
# counted in $N and $FAILS; not_ok shows the tail of $LOG_FILE) and
# free_port. The sourcing script sets LOG_FILE and ends with
# `echo "1..$N"; [ "$FAILS" -eq 0 ]`. start_proflink runs the binary in
# the background and waits for its /health on $TEL (set by the script).

BIN=${1:-${PROFLINK_BIN:-$(dirname "$0")/../build/proflink}}
case "$BIN" in /*) ;; *) BIN="$(pwd)/$BIN" ;; esac
TMP=$(mktemp -d)
PID=
FAILS=0
N=0
LOG_FILE="$TMP/log"

cleanup() {
    [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

ok() { N=$((N + 1)); echo "ok $N $1"; }
not_ok() {
    N=$((N + 1))
    FAILS=$((FAILS + 1))
    echo "not ok $N $1"
    [ -f "$LOG_FILE" ] && sed 's/^/    # /' "$LOG_FILE" | tail -20
}
check() { # check "name" command...
    name=$1
    shift
    if "$@"; then ok "$name"; else not_ok "$name"; fi
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_proflink() { # start_proflink CONFIG [LOG]: 0 once /health answers 200 (5 s at most)
    "$BIN" --config "$1" 2>"${2:-$TMP/log}" &
    PID=$!
    i=0
    while [ $i -lt 100 ]; do
        code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$TEL/health" 2>/dev/null)
        [ "$code" = 200 ] && return 0
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}
