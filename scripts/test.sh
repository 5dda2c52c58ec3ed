#!/usr/bin/env bash
# Every test of sp on a fresh Debian machine: install, build under
# AddressSanitizer + UndefinedBehaviorSanitizer, run all suites (unit, cli,
# man, real Flink), run the fuzz targets for a short while, and end with
# "N passed, N failed".  Exit status is non-zero on any failure.
#   scripts/test.sh            (FUZZ_SECONDS=30 by default; SP_SKIP_FLINK=1 skips real Flink)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scripts/install-deps.sh --tests || { echo "0 passed, 1 failed"; exit 1; }

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# Unit tests (every parser, codec and store) run under AddressSanitizer and
# UndefinedBehaviorSanitizer; the end-to-end suites (CLI over the corpus,
# real Flink, S3, REST stand-in) run against a plain optimised build, as
# users run sp, which keeps CI well under 30 minutes.
build=build-test
rel=build-release
rm -rf "$build" "$rel"
if ! { meson setup "$build" -Db_sanitize=address,undefined -Db_lundef=false >/dev/null && ninja -C "$build" >/dev/null &&
       meson setup "$rel" --buildtype=release >/dev/null && ninja -C "$rel" >/dev/null; }; then
    echo "build failed"; echo "0 passed, 1 failed"; exit 1
fi
meson test -C "$build" --print-errorlogs --num-processes 2 --suite unit
meson_rc=$?
meson test -C "$rel" --print-errorlogs --num-processes 2 --no-suite unit
rel_rc=$?
[ "$rel_rc" -eq 0 ] || meson_rc=$rel_rc

# libFuzzer targets (clang), seeded from the shared corpus copied to a temp dir
fuzz_pass=0 fuzz_fail=0
fuzz_seconds=${FUZZ_SECONDS:-30}
if [ "$fuzz_seconds" -gt 0 ] && command -v clang >/dev/null; then
    fbuild=build-fuzz
    rm -rf "$fbuild"
    if CC=clang meson setup "$fbuild" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false >/dev/null &&
       ninja -C "$fbuild" tests/fuzz_metadata tests/fuzz_properties >/dev/null; then
        seeds=$(mktemp -d)
        trap 'rm -rf "$seeds"' EXIT
        if [ -d ../shared/corpus/flink ]; then
            i=0
            find ../shared/corpus/flink -type f \( -name _metadata -o -path '*legacy-single-file*' \) |
                while read -r f; do cp "$f" "$seeds/seed-$((i++))"; done
        fi
        for t in metadata properties; do
            work=$(mktemp -d)
            cp -r "$seeds/." "$work/" 2>/dev/null
            if "$fbuild/tests/fuzz_$t" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -max_len=262144 \
                   -print_final_stats=0 "$work" >"$fbuild/fuzz_$t.log" 2>&1; then
                echo "fuzz_$t: ${fuzz_seconds}s, no crash"; fuzz_pass=$((fuzz_pass + 1))
            else
                echo "fuzz_$t: FAILED (see $fbuild/fuzz_$t.log)"; tail -30 "$fbuild/fuzz_$t.log"; fuzz_fail=$((fuzz_fail + 1))
            fi
            rm -rf "$work"
        done
    else
        echo "fuzz build failed"; fuzz_fail=$((fuzz_fail + 1))
    fi
fi

# Count every TAP line of every suite, plus the fuzz runs.
read -r passed failed < <(python3 - "$build/meson-logs/testlog.json" "$rel/meson-logs/testlog.json" <<'PY'
import json, sys
passed = failed = 0
lines = [l for path in sys.argv[1:] for l in open(path)]
for line in lines:
    t = json.loads(line)
    sub_ok = sub_bad = 0
    for l in (t.get("stdout") or "").splitlines():
        if l.startswith("ok "):
            sub_ok += 1
        elif l.startswith("not ok "):
            sub_bad += 1
    if sub_ok + sub_bad == 0:  # not TAP, or crashed before any line
        sub_ok, sub_bad = {"OK": (1, 0), "SKIP": (0, 0)}.get(t["result"], (0, 1))
    elif t["result"] not in ("OK", "SKIP") and sub_bad == 0:
        sub_bad = 1  # crashed or timed out after its last line
    passed += sub_ok
    failed += sub_bad
print(passed, failed)
PY
)
passed=$((passed + fuzz_pass))
failed=$((failed + fuzz_fail))
if [ "$meson_rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
