#!/usr/bin/env bash
# Real-Flink end-to-end test for sp. Emits TAP on stdout; progress and diagnostics on stderr.
#
# For each Flink version in scripts/flink/versions.txt: start a private cluster on 127.0.0.1,
# produce real snapshots of every kind (scripts/flink/produce-snapshots.sh), run a restore
# smoke test (flink run -d -s <fresh canonical savepoint> reaches RUNNING and completes a
# checkpoint), stop the cluster, then check every snapshot with sp:
#   * _metadata exists and starts with the magic 49 60 67 2d (harness self-check)
#   * the operator IDs of all the job's uids occur in _metadata (independent murmur3 check)
#   * sp inspect SNAP exits 0;  sp verify SNAP exits 0
#   * sp inspect SNAP --json has, for every uid, an operator whose operator_id equals the first
#     column of `sp uid-hash UID`, with the configured parallelism and max_parallelism
#   * sp metadata export SNAP > x.json; sp metadata import x.json OUT; cmp OUT SNAP/_metadata
#
# Environment:
#   SP_BIN             sp binary (default build/cli/sp); when missing, the sp checks are
#                      reported as "ok ... # SKIP sp binary not found"
#   SP_SKIP_FLINK=1    skip everything (prints 1..0 # SKIP)
#   SP_FLINK_VERSIONS  space separated versions overriding versions.txt
#   SP_FLINK_CACHE     Flink installs + built job jars (default ~/.cache/sp-flink)
#   SP_FLINK_KEEP=1    keep the snapshot/cluster temp dir even on success
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SCRIPTS="$ROOT/scripts/flink"
PY=${PYTHON:-python3}

log() { echo "test_real_flink: $*" >&2; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }

[[ "${SP_SKIP_FLINK:-0}" == "1" ]] && skip_all "SP_SKIP_FLINK=1"
for tool in java mvn curl "$PY"; do
    command -v "$tool" >/dev/null 2>&1 || skip_all "$tool not available"
done

SP_BIN=${SP_BIN:-build/cli/sp}
if [[ "$SP_BIN" != /* ]]; then
    if [[ -x "$PWD/$SP_BIN" ]]; then SP_BIN="$PWD/$SP_BIN"; else SP_BIN="$ROOT/$SP_BIN"; fi
fi
HAVE_SP=""
[[ -x "$SP_BIN" ]] && HAVE_SP=1
[[ -n "$HAVE_SP" ]] || log "sp binary $SP_BIN not found: sp checks will be skipped"

if [[ -n "${SP_FLINK_VERSIONS:-}" ]]; then
    VERSIONS=($SP_FLINK_VERSIONS)
else
    mapfile -t VERSIONS < <(grep -v '^\s*#' "$SCRIPTS/versions.txt" | awk 'NF {print $1}')
fi
[[ ${#VERSIONS[@]} -gt 0 ]] || skip_all "no Flink versions listed"

# Prerequisites that depend on the network (first run only): Flink distributions and the
# Maven build of the test job. Unavailable downloads mean SKIP, not failure.
for v in "${VERSIONS[@]}"; do
    "$SCRIPTS/install-flink.sh" "$v" >/dev/null || skip_all "Flink $v download/install unavailable"
    if ! jar_err=$("$SCRIPTS/build-job.sh" "$v" 2>&1 >/dev/null); then
        echo "$jar_err" >&2
        if grep -qiE 'could not (resolve|transfer)|unknown host|connect|offline' <<<"$jar_err"; then
            skip_all "Maven artifacts for Flink $v unavailable"
        fi
        BUILD_FAILED=1
    fi
done

TMPROOT=$(mktemp -d "${TMPDIR:-/tmp}/sp-real-flink.XXXXXX")
N=0
FAILS=0
CUR_WORK=""
CUR_VERSION=""

cleanup() {
    if [[ -n "$CUR_WORK" ]]; then "$SCRIPTS/cluster.sh" stop "$CUR_VERSION" "$CUR_WORK" >&2 || true; fi
    if [[ $FAILS -eq 0 && "${SP_FLINK_KEEP:-0}" != "1" ]]; then
        rm -rf "$TMPROOT"
    else
        log "snapshots and cluster logs kept in $TMPROOT"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ok() { N=$((N + 1)); echo "ok $N - $*"; }
not_ok() { N=$((N + 1)); FAILS=$((FAILS + 1)); echo "not ok $N - $*"; }
skip() { N=$((N + 1)); echo "ok $N - $1 # SKIP $2"; }
# check DESCRIPTION COMMAND...   (command output goes to stderr)
check() {
    local d=$1; shift
    if "$@" >&2; then ok "$d"; else not_ok "$d"; fi
}

if [[ -n "${BUILD_FAILED:-}" ]]; then
    not_ok "build the test job (see stderr)"
    echo "1..$N"
    exit 1
fi

# sp inspect --json vs. uid-hash vs. info.json
check_inspect_json() {
    local info=$1 json=$2 hashes=$3
    "$PY" - "$info" "$json" "$hashes" <<'PYEOF'
import json, sys
info = json.load(open(sys.argv[1]))
try:
    doc = json.load(open(sys.argv[2]))
except ValueError as e:
    print("inspect --json output is not JSON: %s" % e, file=sys.stderr)
    sys.exit(1)
ids = {}
for line in open(sys.argv[3]):
    parts = line.split()
    if len(parts) >= 2:
        ids[parts[1]] = parts[0].lower()
ops = {str(o.get("operator_id", "")).lower(): o for o in doc.get("operators", [])}
bad = 0
for uid in info["uids"]:
    oid = ids.get(uid)
    if oid is None:
        print("uid-hash printed nothing for %r" % uid, file=sys.stderr); bad += 1; continue
    op = ops.get(oid)
    if op is None:
        print("no operator %s (uid %r) in inspect --json" % (oid, uid), file=sys.stderr); bad += 1; continue
    for k in ("parallelism", "max_parallelism"):
        if op.get(k) != info[k]:
            print("operator %s (uid %r): %s = %r, expected %r" % (oid, uid, k, op.get(k), info[k]),
                  file=sys.stderr)
            bad += 1
sys.exit(1 if bad else 0)
PYEOF
}

# the uid-hash output must agree with the independent implementation
check_uid_hash() {
    local hashes=$1; shift
    diff <("$PY" "$SCRIPTS/uidhash.py" "$@" | awk '{print $1, $2}') <(awk '{print tolower($1), $2}' "$hashes") >&2
}

restore_smoke() {
    local v=$1 url=$2 snap=$3 jar out jid rid
    jar=$("$SCRIPTS/build-job.sh" "$v") || return 1
    out=$(FLINK_CONF_DIR="$CUR_WORK/conf" "$FLINK_HOME/bin/flink" run -d -s "$snap" "$jar" \
            --backend hashmap --parallelism 2 --max-parallelism 128 --checkpoint-interval 1000 \
            --job-name sp-restore-smoke 2>&1) || { echo "$out" | tail -n 30 >&2; return 1; }
    jid=$(sed -n 's/.*Job has been submitted with JobID \([0-9a-f]\{32\}\).*/\1/p' <<<"$out" | tail -n1)
    [[ -n "$jid" ]] || { echo "$out" | tail -n 30 >&2; return 1; }
    log "smoke job $jid restoring from $snap"
    "$PY" "$SCRIPTS/flinkrest.py" "$url" wait-running "$jid" --timeout 90 || return 1
    rid=$("$PY" "$SCRIPTS/flinkrest.py" "$url" restored-id "$jid") || return 1
    [[ "$rid" -ge 0 ]] || { log "smoke job did not restore from a snapshot"; return 1; }
    "$PY" "$SCRIPTS/flinkrest.py" "$url" wait-checkpoint "$jid" --after "$rid" --timeout 60 >&2 || return 1
    "$PY" "$SCRIPTS/flinkrest.py" "$url" cancel "$jid" || return 1
}

for v in "${VERSIONS[@]}"; do
    T0=$SECONDS
    OUT="$TMPROOT/$v/snapshots"
    CUR_WORK="$TMPROOT/$v/cluster"
    CUR_VERSION=$v
    FLINK_HOME=$("$SCRIPTS/install-flink.sh" "$v")
    log "=== Flink $v ==="
    if ! URL=$("$SCRIPTS/cluster.sh" start "$v" "$CUR_WORK"); then
        not_ok "[$v] start a session cluster"
        CUR_WORK=""
        continue
    fi
    if SP_FLINK_CLUSTER_DIR="$CUR_WORK" "$SCRIPTS/produce-snapshots.sh" "$v" "$OUT" >&2; then
        ok "[$v] produce snapshots of every kind ($((SECONDS - T0))s)"
    else
        not_ok "[$v] produce snapshots of every kind"
    fi
    SMOKE_SNAP=""
    if [[ -f "$OUT/savepoint-canonical-hashmap/info.json" ]]; then
        SMOKE_SNAP="$OUT/savepoint-canonical-hashmap/$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["path"])' "$OUT/savepoint-canonical-hashmap/info.json")"
    fi
    if [[ -n "$SMOKE_SNAP" ]] && restore_smoke "$v" "$URL" "$SMOKE_SNAP"; then
        ok "[$v] restore smoke: flink run -s <canonical savepoint> runs and completes a checkpoint"
    else
        not_ok "[$v] restore smoke: flink run -s <canonical savepoint> runs and completes a checkpoint"
    fi
    "$SCRIPTS/cluster.sh" stop "$v" "$CUR_WORK" >&2 || true
    CUR_WORK=""

    for info in "$OUT"/*/info.json; do
        [[ -f "$info" ]] || continue
        d=$(dirname "$info")
        name=$(basename "$d")
        snap="$d/$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["path"])' "$info")"
        mapfile -t uids < <("$PY" -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["uids"]))' "$info")
        t="[$v] $name"
        hdr=$(head -c 16 "$snap/_metadata" 2>/dev/null | od -An -tx1 | tr -s ' ' | sed 's/^ //')
        log "$name: $snap/_metadata header: $hdr"
        if [[ "$hdr" == "49 60 67 2d"* ]]; then ok "$t: _metadata has the magic 49 60 67 2d"
        else not_ok "$t: _metadata has the magic 49 60 67 2d"; fi
        check "$t: operator IDs of all uids occur in _metadata" \
            "$PY" "$SCRIPTS/uidhash.py" --check "$snap/_metadata" "${uids[@]}"
        if [[ -z "$HAVE_SP" ]]; then
            for c in "sp inspect exits 0" "sp verify exits 0" "sp inspect --json operators match uid-hash" \
                     "sp metadata export/import round trip is byte-identical"; do
                skip "$t: $c" "sp binary not found"
            done
            continue
        fi
        w="$TMPROOT/$v/work/$name"
        mkdir -p "$w"
        check "$t: sp inspect exits 0" "$SP_BIN" inspect "$snap"
        check "$t: sp verify exits 0" "$SP_BIN" verify "$snap"
        if "$SP_BIN" inspect "$snap" --json >"$w/inspect.json" 2>"$w/inspect.err" \
            && "$SP_BIN" uid-hash "${uids[@]}" >"$w/uid-hash.txt" 2>&2 \
            && check_uid_hash "$w/uid-hash.txt" "${uids[@]}" \
            && check_inspect_json "$info" "$w/inspect.json" "$w/uid-hash.txt"; then
            ok "$t: sp inspect --json operators match uid-hash (parallelism, max parallelism)"
        else
            cat "$w/inspect.err" >&2 2>/dev/null
            not_ok "$t: sp inspect --json operators match uid-hash (parallelism, max parallelism)"
        fi
        if "$SP_BIN" metadata export "$snap" >"$w/metadata.json" \
            && "$SP_BIN" metadata import "$w/metadata.json" "$w/out_metadata" >&2 \
            && cmp "$snap/_metadata" "$w/out_metadata" >&2; then
            ok "$t: sp metadata export/import round trip is byte-identical"
        else
            not_ok "$t: sp metadata export/import round trip is byte-identical"
        fi
    done
    log "Flink $v done in $((SECONDS - T0))s"
done

echo "1..$N"
log "$N tests, $FAILS failed"
[[ $FAILS -eq 0 ]]
