#!/usr/bin/env bash
# Runs every proflink test and ends with one line "N passed, N failed".
#
#   ./scripts/test.sh            everything (what CI runs)
#   FUZZ_SECONDS=5 ./scripts/test.sh    shorter fuzz runs
#   SKIP_FUZZ=1 / SKIP_ASAN=1 / SKIP_TSAN=1 / SKIP_INTEROP=1 / SKIP_COVERAGE=1   leave a stage out locally
#
# Stages:
#   1. dependencies (Debian packages, npm ci for the interop tests)
#   2. release-like build + C unit tests (meson test)
#   3. AddressSanitizer + UndefinedBehaviorSanitizer build + the same tests
#   3b. ThreadSanitizer build (clang) + the unit tests that use SQLite
#      (queue, write-ahead log, sqlite store, correlation_wal): every SQLite
#      connection has one owning thread (docs/DESIGN.md)
#   4. interoperability tests with real client libraries (node --test),
#      against the sanitizer build, so real traffic is checked for memory errors
#   5. libFuzzer targets, each for FUZZ_SECONDS (default 20)
#   6. line coverage of the C unit tests (gcovr over a -Db_coverage=true
#      build), printed as "coverage: N% of M lines"; counts as one test
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

passed=0
failed=0
failures=()

note_fail() {
    failed=$((failed + $2))
    failures+=("$1")
}

bash scripts/deps.sh --with-npm || { echo "dependency installation failed"; echo "0 passed, 1 failed"; exit 1; }

# Count results from a meson testlog.json: one JSON object per line.
count_meson() {
    local log=$1 ok bad
    ok=$(grep -c '"result": "OK"' "$log" || true)
    bad=$(grep -cE '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log" || true)
    passed=$((passed + ok))
    if [ "$bad" -gt 0 ]; then
        note_fail "$2: $(grep -E '"result": "(FAIL|TIMEOUT|ERROR)"' "$log" | sed -E 's/.*"name": "([^"]*)".*/\1/' | tr '\n' ' ')" "$bad"
    fi
}

build_and_test() { # dir, label, meson args...
    local dir=$1 label=$2
    shift 2
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; note_fail "$label: meson setup" 1; return 1; }
    fi
    if ! ninja -C "$dir" >"$dir.build.log" 2>&1; then
        tail -50 "$dir.build.log"
        note_fail "$label: build" 1
        return 1
    fi
    echo "== $label: unit tests"
    meson test -C "$dir" --print-errorlogs --num-processes 2 --timeout-multiplier 3
    count_meson "$dir/meson-logs/testlog.json" "$label"
}

echo "== build"
build_and_test build "release build" --buildtype=debugoptimized

if [ -z "${SKIP_ASAN:-}" ]; then
    echo "== sanitizer build (address, undefined)"
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
    CC=clang build_and_test build-asan "sanitizers" -Db_sanitize=address,undefined -Db_lundef=false \
        --buildtype=debug
    sanitized_bin="$root/build-asan/proflink"
fi

if [ -z "${SKIP_TSAN:-}" ]; then
    # Only the SQLite-using unit tests, built alone (a few minutes at most).
    echo "== thread sanitizer build + SQLite unit tests"
    tsan_tests="queue correlation_wal sqlite_store store_query workers"
    if [ ! -f build-tsan/build.ninja ]; then
        CC=clang meson setup build-tsan -Db_sanitize=thread -Db_lundef=false --buildtype=debugoptimized \
            >build-tsan.setup.log 2>&1 || { cat build-tsan.setup.log; note_fail "tsan: meson setup" 1; }
    fi
    if [ -f build-tsan/build.ninja ]; then
        if ninja -C build-tsan $(for t in $tsan_tests; do echo "tests/test_$t"; done) >build-tsan.build.log 2>&1; then
            TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1 exitcode=66" \
                meson test -C build-tsan --no-rebuild --print-errorlogs --num-processes 2 \
                --timeout-multiplier 3 $tsan_tests
            count_meson build-tsan/meson-logs/testlog.json "thread sanitizer"
        else
            tail -50 build-tsan.build.log
            note_fail "tsan: build" 1
        fi
    fi
fi

if [ -z "${SKIP_INTEROP:-}" ]; then
    bin=${sanitized_bin:-$root/build/proflink}
    [ -x "$bin" ] || bin="$root/build/proflink"
    echo "== interop tests (real client libraries) against $bin"
    out=$(mktemp)
    (cd tests/interop && PROFLINK_BIN="$bin" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
        timeout 1800 node --test --test-reporter=tap --test-concurrency=1 ./*.test.mjs) >"$out" 2>&1
    rc=$?
    cat "$out"
    np=$(grep -E '^# pass ' "$out" | tail -1 | awk '{print $3}')
    nf=$(grep -E '^# fail ' "$out" | tail -1 | awk '{print $3}')
    passed=$((passed + ${np:-0}))
    if [ "${nf:-0}" -gt 0 ]; then
        note_fail "interop: $(grep -E '^not ok' "$out" | head -20 | tr '\n' ' ')" "$nf"
    elif [ $rc -ne 0 ] || [ -z "$np" ]; then
        note_fail "interop: node --test exited $rc" 1
    fi
    rm -f "$out"
    # screenshots of the store's web view (store_web*.test.mjs), kept by CI
    [ -d tests/interop/artifacts ] && echo "   web view screenshots: tests/interop/artifacts/"
fi

if [ -z "${SKIP_FUZZ:-}" ]; then
    echo "== fuzz targets (libFuzzer, ${FUZZ_SECONDS:-20}s each)"
    if [ ! -f build-fuzz/build.ninja ]; then
        CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
            --buildtype=debugoptimized >build-fuzz.setup.log 2>&1 || { cat build-fuzz.setup.log; note_fail "fuzz: setup" 1; }
    fi
    if [ -f build-fuzz/build.ninja ]; then
        if ninja -C build-fuzz >build-fuzz.build.log 2>&1; then
            for f in build-fuzz/tests/fuzz/fuzz_*; do
                [ -f "$f" ] && [ -x "$f" ] || continue
                name=$(basename "$f")
                corpus="tests/fuzz/corpus/$name"
                work=$(mktemp -d)
                [ -d "$corpus" ] && cp -r "$corpus/." "$work/"
                if ASAN_OPTIONS=detect_leaks=1 "$f" -max_total_time="${FUZZ_SECONDS:-20}" -rss_limit_mb=2048 \
                    -timeout=10 -print_final_stats=0 -artifact_prefix="$work.artifact-" "$work" >"$work.log" 2>&1; then
                    echo "ok fuzz $name ($(grep -Eo '#[0-9]+' "$work.log" | tail -1 | tr -d '#') runs)"
                    passed=$((passed + 1))
                else
                    tail -40 "$work.log"
                    # Keep the crashing input where a developer can find it.
                    mkdir -p build-fuzz/artifacts && cp "$work".artifact-* build-fuzz/artifacts/ 2>/dev/null
                    note_fail "fuzz: $name" 1
                fi
                rm -rf "$work" "$work.log" "$work".artifact-*
            done
        else
            tail -50 build-fuzz.build.log
            note_fail "fuzz: build" 1
        fi
    fi
fi

if [ -z "${SKIP_COVERAGE:-}" ]; then
    # Only the unit tests, in a build of their own (gcov counters slow the
    # code; the release build stays as it is for benchmarks).
    echo "== coverage (unit tests, gcovr)"
    if [ ! -f build-cov/build.ninja ]; then
        meson setup build-cov -Db_coverage=true --buildtype=debug >build-cov.setup.log 2>&1 ||
            { cat build-cov.setup.log; note_fail "coverage: setup" 1; }
    fi
    if [ -f build-cov/build.ninja ] && ninja -C build-cov >build-cov.build.log 2>&1; then
        find build-cov -name '*.gcda' -delete
        meson test -C build-cov --num-processes 2 --timeout-multiplier 4 >build-cov.test.log 2>&1 || true
        # The report goes to a file in build-cov: gcovr replaces its output
        # file, so it must never be /dev/null.
        cov=$(gcovr -r . --object-directory build-cov --exclude 'tests/' --exclude 'build-cov/' \
            --gcov-ignore-parse-errors --print-summary -o build-cov/coverage.txt 2>build-cov/gcovr.log |
            grep '^lines:')
        if [ -n "$cov" ]; then
            echo "coverage: ${cov#lines: } (C unit tests, tests/ excluded)"
            passed=$((passed + 1))
        else
            note_fail "coverage: gcovr printed no figure" 1
        fi
    else
        tail -30 build-cov.build.log 2>/dev/null
        note_fail "coverage: build" 1
    fi
fi

if [ "$failed" -gt 0 ]; then
    echo "== failures"
    printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
