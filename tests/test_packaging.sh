#!/bin/sh
# test_packaging.sh: what `meson install` puts on a system.
#
#   the binary, the default configuration (valid, data under
#   localstatedir/lib/proflink), the systemd unit (checked with
#   `systemd-analyze verify` and its exposure score with `systemd-analyze
#   security`, when systemd is installed) and the man page (every component
#   the binary knows, and clean for groff when groff is installed); the
#   container recipe builds on Debian and runs as a non-root user.
#
# usage: tests/test_packaging.sh BUILD_DIR SOURCE_DIR
set -u
BUILD=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
N=0
FAILS=0
ok() { N=$((N + 1)); echo "ok $N $1"; }
not_ok() { N=$((N + 1)); FAILS=$((FAILS + 1)); echo "not ok $N $1"; [ -f "$TMP/out" ] && sed 's/^/    # /' "$TMP/out" | tail -15; }
check() { name=$1; shift; if "$@" >"$TMP/out" 2>&1; then ok "$name"; else not_ok "$name"; fi; }
skip() { N=$((N + 1)); echo "ok $N # SKIP $1"; }

ROOT="$TMP/root"
check "meson install into a staging directory" meson install -C "$BUILD" --destdir "$ROOT" --no-rebuild --quiet
BIN=$(find "$ROOT" -path '*/bin/proflink' -type f | head -1)
CONF=$(find "$ROOT" -path '*/proflink/collector.yaml' -type f | head -1)
UNIT=$(find "$ROOT" -name proflink.service -type f | head -1)
MAN=$(find "$ROOT" -path '*/man1/proflink.1' -type f | head -1)
check "the binary, the configuration, the unit and the man page are installed" \
    sh -c "test -x '$BIN' && test -s '$CONF' && test -s '$UNIT' && test -s '$MAN'"

check "the installed configuration is valid" "$BIN" validate --config "$CONF"
check "its data lives under localstatedir/lib/proflink" grep -q 'path: /.*/lib/proflink/proflink.db' "$CONF"

# the man page has every component type the binary knows, from the same tables
"$BIN" components | awk '/^(receiver|processor|exporter|extension) / {print $2}' >"$TMP/types"
check "the man page documents every component type" sh -c "
    test -s '$TMP/types' && while read -r t; do grep -qx \".SS \$t\" '$MAN' || { echo \"missing \$t\"; exit 1; }; done <'$TMP/types'"
check "the man page documents the keys (e.g. batch send_batch_size, service.telemetry.logs.encoding)" \
    sh -c "grep -q '^.B send_batch_size' '$MAN' && grep -q '^.B service.telemetry.logs.encoding' '$MAN'"
if command -v groff >/dev/null 2>&1; then
    check "groff reads the man page without a warning" sh -c "
        groff -man -ww -z '$MAN' 2>'$TMP/groff'; test ! -s '$TMP/groff' || { cat '$TMP/groff'; exit 1; }"
else
    skip "groff is not installed"
fi

# the unit, pointed at the staged binary so its ExecStart exists
sed "s|ExecStart\(Pre\)\?=[^ ]*/proflink|ExecStart\1=$BIN|" "$UNIT" >"$TMP/proflink.service"
check "the unit runs as a dynamic non-root user, hardened" sh -c "
    grep -q '^DynamicUser=yes' '$UNIT' && grep -q '^ProtectSystem=strict' '$UNIT' &&
    grep -q '^NoNewPrivileges=yes' '$UNIT' && grep -q '^CapabilityBoundingSet=$' '$UNIT' &&
    grep -q '^StateDirectory=proflink' '$UNIT' && grep -q '^ExecReload=/bin/kill -HUP' '$UNIT'"
if command -v systemd-analyze >/dev/null 2>&1; then
    check "systemd-analyze verify accepts the unit" \
        env MANPATH="$(dirname "$(dirname "$MAN")")" systemd-analyze verify "$TMP/proflink.service"
    if systemd-analyze security --offline=true "$TMP/proflink.service" >"$TMP/security" 2>&1; then
        score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$TMP/security")
        check "systemd-analyze security: exposure $score (at most 2.0)" \
            awk -v s="$score" 'BEGIN { exit !(s != "" && s + 0 <= 2.0) }'
    else
        skip "this systemd-analyze has no offline security check"
    fi
else
    skip "systemd-analyze is not installed"
    skip "systemd-analyze is not installed"
fi

# the container recipe (no container engine in CI: its shape is checked)
CF="$SRC/packaging/Containerfile"
check "the container recipe builds on Debian and runs the installed files as non-root" sh -c "
    grep -q '^FROM debian:' '$CF' && grep -q '^USER [1-9]' '$CF' &&
    grep -q 'meson install' '$CF' && grep -q '/etc/proflink/collector.yaml' '$CF'"
# its command line, run against the installed configuration, validates
args=$(sed -n '/^CMD \[/,/\]$/p' "$CF" | tr -d '[]\\\n' | sed 's/^CMD//; s/,/ /g; s/"//g')
# shellcheck disable=SC2086
set -- $args
shift 2 # --config /etc/proflink/collector.yaml: the staged file instead
check "the container's --set overrides validate against the installed configuration" \
    "$BIN" validate --config "$CONF" "$@"

echo "1..$N"
[ "$FAILS" -eq 0 ]
