#!/usr/bin/env bash
# Produce real Flink snapshots of every kind with the stateful test job.
#
# Usage: scripts/flink/produce-snapshots.sh VERSION OUTDIR
#
# Installs Flink VERSION if needed, builds the test job, starts a private cluster (unless
# SP_FLINK_CLUSTER_DIR names the WORKDIR of a cluster already started with cluster.sh, which
# is then reused and left running), and writes under OUTDIR one subdirectory per snapshot,
# each with an info.json:
#
#   savepoint-canonical-hashmap   savepoint-native-hashmap      (job A: hashmap, p=2, maxp=128)
#   stop-with-savepoint           (canonical, stops job A)
#   savepoint-canonical-rocksdb   savepoint-native-rocksdb      (job B: rocksdb incremental, p=2, maxp=64)
#   checkpoint-incremental-rocksdb  retained incremental checkpoint of job B (the whole
#                                 <jobid>/{chk-N,shared,taskowned} tree, cancelled job)
#   checkpoint-after-noclaim      job C, restored NO_CLAIM from the retained checkpoint above
#   checkpoint-after-claim        job D, restored CLAIM from a native savepoint of job B
#                                 (claim-source/, which Flink then owns and partly deletes)
#
# info.json: {"name", "kind": savepoint|checkpoint, "format": canonical|native|null, "backend",
#   "incremental", "uids": [...], "parallelism", "max_parallelism", "flink_version",
#   "path": snapshot dir relative to the info.json dir, "job_id", "restore": {...}|null}
# The snapshot itself (the directory holding _metadata) is <subdir>/<path>.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VERSION=${1:?usage: produce-snapshots.sh VERSION OUTDIR}
OUTDIR=${2:?usage: produce-snapshots.sh VERSION OUTDIR}
PY=${PYTHON:-python3}
REST="$PY $HERE/flinkrest.py"
T0=$SECONDS

log() { echo "produce[$VERSION +$((SECONDS - T0))s]: $*" >&2; }

mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)

FLINK_HOME=$("$HERE/install-flink.sh" "$VERSION")
JAR=$("$HERE/build-job.sh" "$VERSION")

OWN_CLUSTER=""
if [[ -n "${SP_FLINK_CLUSTER_DIR:-}" && -f "$SP_FLINK_CLUSTER_DIR/rest_url" ]]; then
    WORK=$SP_FLINK_CLUSTER_DIR
    URL=$(cat "$WORK/rest_url")
    log "reusing cluster $URL ($WORK)"
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/sp-flink-cluster.XXXXXX")
    OWN_CLUSTER=1
    cleanup() {
        local rc=$?
        "$HERE/cluster.sh" stop "$VERSION" "$WORK" || true
        if [[ $rc -ne 0 ]]; then
            log "FAILED (rc=$rc); cluster logs kept in $WORK/log"
        else
            rm -rf "$WORK"
        fi
    }
    trap cleanup EXIT
    URL=$("$HERE/cluster.sh" start "$VERSION" "$WORK")
fi
export FLINK_CONF_DIR="$WORK/conf"

CLUSTER_VERSION=$($REST "$URL" version)
[[ "$CLUSTER_VERSION" == "$VERSION" ]] || { log "cluster runs $CLUSTER_VERSION, wanted $VERSION"; exit 1; }

UIDS_NORMAL='["source-uid", "counting-map-uid", "keyed-process-uid", "window-uid", "sink-uid"]'

# claim-mode option of `flink run`: -cm/--claimMode from 1.20 on, -rm/--restoreMode before.
claim_opt() {
    local major minor
    IFS=. read -r major minor _ <<<"$VERSION"
    if (( major > 1 || minor >= 20 )); then echo "--claimMode"; else echo "--restoreMode"; fi
}

# submit [flink run options...] -- [job args...]  -> prints the job id
submit() {
    local runopts=() out jid
    while [[ $# -gt 0 && "$1" != "--" ]]; do runopts+=("$1"); shift; done
    shift
    out=$("$FLINK_HOME/bin/flink" run -d "${runopts[@]}" "$JAR" "$@" 2>&1) || {
        echo "$out" | tail -n 40 >&2; log "flink run failed"; return 1; }
    jid=$(echo "$out" | sed -n 's/.*Job has been submitted with JobID \([0-9a-f]\{32\}\).*/\1/p' | tail -n1)
    [[ -n "$jid" ]] || { echo "$out" | tail -n 40 >&2; log "no JobID in flink run output"; return 1; }
    echo "$jid"
}

# write_info DIR NAME KIND FORMAT BACKEND INCREMENTAL PAR MAXPAR PATH JOBID RESTORE_JSON
write_info() {
    "$PY" - "$@" "$VERSION" "$UIDS_NORMAL" <<'PYEOF'
import json, sys
(d, name, kind, fmt, backend, inc, par, maxpar, path, job, restore, version, uids) = sys.argv[1:]
info = {
    "name": name,
    "kind": kind,
    "format": None if fmt == "null" else fmt,
    "backend": backend,
    "incremental": inc == "true",
    "uids": json.loads(uids),
    "parallelism": int(par),
    "max_parallelism": int(maxpar),
    "flink_version": version,
    "path": path,
    "job_id": job,
    "restore": json.loads(restore),
}
with open(d + "/info.json", "w") as f:
    json.dump(info, f, indent=2)
    f.write("\n")
PYEOF
}

# savepoint JOB NAME FORMAT BACKEND INCREMENTAL MAXPAR [stop]
take_savepoint() {
    local job=$1 name=$2 fmt=$3 backend=$4 inc=$5 maxpar=$6 mode=${7:-savepoint} loc dir
    dir="$OUTDIR/$name"
    rm -rf "$dir"; mkdir -p "$dir"
    loc=$($REST "$URL" "$mode" "$job" "file://$dir" --format "$fmt")
    loc=${loc#file:}
    [[ -f "$loc/_metadata" ]] || { log "no _metadata in $loc"; return 1; }
    write_info "$dir" "$name" savepoint "$fmt" "$backend" "$inc" 2 "$maxpar" "${loc#$dir/}" "$job" null
    log "$name: $loc"
}

# newest chk-N holding a _metadata under DIR/JOB
latest_chk() {
    local d
    d=$(ls -d "$1/$2"/chk-* 2>/dev/null | sed 's/.*chk-//' | sort -n | tail -n1)
    [[ -n "$d" && -f "$1/$2/chk-$d/_metadata" ]] || { log "no retained checkpoint in $1/$2"; return 1; }
    echo "$2/chk-$d"
}

for n in savepoint-canonical-hashmap savepoint-native-hashmap stop-with-savepoint \
         savepoint-canonical-rocksdb savepoint-native-rocksdb checkpoint-incremental-rocksdb \
         checkpoint-after-noclaim checkpoint-after-claim; do
    rm -rf "${OUTDIR:?}/$n"
done

CKB="$OUTDIR/checkpoint-incremental-rocksdb"
mkdir -p "$CKB"

log "submitting job A (hashmap) and job B (rocksdb, incremental, retained)"
JA=$(submit -- --backend hashmap --parallelism 2 --max-parallelism 128 --checkpoint-interval 2000 \
        --job-name sp-test-A-hashmap)
JB=$(submit -- --backend rocksdb --incremental true --retain true --parallelism 2 \
        --max-parallelism 64 --checkpoint-interval 1000 --checkpoint-dir "file://$CKB" \
        --job-name sp-test-B-rocksdb)
log "job A $JA, job B $JB"
$REST "$URL" wait-running "$JA" --timeout 90
$REST "$URL" wait-running "$JB" --timeout 90
$REST "$URL" wait-checkpoint "$JA" --after 0 --timeout 60 >/dev/null
# a few incremental checkpoints so that shared/ holds files reused across checkpoints
$REST "$URL" wait-checkpoint "$JB" --after 2 --timeout 60 >/dev/null
log "jobs running with completed checkpoints"

take_savepoint "$JA" savepoint-canonical-hashmap canonical hashmap false 128
take_savepoint "$JA" savepoint-native-hashmap native hashmap false 128
take_savepoint "$JB" savepoint-canonical-rocksdb canonical rocksdb true 64
take_savepoint "$JB" savepoint-native-rocksdb native rocksdb true 64
# Native savepoint to be restored in CLAIM mode (Flink takes ownership of it).
CLAIM_SRC_DIR="$OUTDIR/checkpoint-after-claim/claim-source"
mkdir -p "$CLAIM_SRC_DIR"
CLAIM_SRC=$($REST "$URL" savepoint "$JB" "file://$CLAIM_SRC_DIR" --format native)
CLAIM_SRC=${CLAIM_SRC#file:}
take_savepoint "$JA" stop-with-savepoint canonical hashmap false 128 stop

# one more checkpoint after the savepoints, then cancel B: its checkpoint is retained
$REST "$URL" wait-checkpoint "$JB" --after "$($REST "$URL" wait-checkpoint "$JB" --after 0 | cut -d' ' -f1)" \
    --timeout 60 >/dev/null
$REST "$URL" cancel "$JB"
CHK_B=$(latest_chk "$CKB" "$JB")
write_info "$CKB" checkpoint-incremental-rocksdb checkpoint null rocksdb true 2 64 "$CHK_B" "$JB" null
log "checkpoint-incremental-rocksdb: $CKB/$CHK_B"

CM=$(claim_opt)
CKC="$OUTDIR/checkpoint-after-noclaim"
CKD="$OUTDIR/checkpoint-after-claim"
mkdir -p "$CKC"
log "restoring job C (NO_CLAIM from the retained checkpoint) and job D (CLAIM from $CLAIM_SRC)"
JC=$(submit -s "$CKB/$CHK_B" "$CM" NO_CLAIM -- --backend rocksdb --incremental true --retain true \
        --parallelism 2 --max-parallelism 64 --checkpoint-interval 1000 \
        --checkpoint-dir "file://$CKC" --job-name sp-test-C-noclaim)
JD=$(submit -s "$CLAIM_SRC" "$CM" CLAIM -- --backend rocksdb --incremental true --retain true \
        --parallelism 2 --max-parallelism 64 --checkpoint-interval 1000 \
        --checkpoint-dir "file://$CKD" --job-name sp-test-D-claim)
log "job C $JC, job D $JD"
$REST "$URL" wait-running "$JC" --timeout 90
$REST "$URL" wait-running "$JD" --timeout 90
RC=$($REST "$URL" restored-id "$JC")
RD=$($REST "$URL" restored-id "$JD")
[[ "$RC" -ge 0 && "$RD" -ge 0 ]] || { log "jobs C/D did not restore (restored ids $RC, $RD)"; exit 1; }
$REST "$URL" wait-checkpoint "$JC" --after "$RC" --timeout 60 >/dev/null
$REST "$URL" wait-checkpoint "$JD" --after "$RD" --timeout 60 >/dev/null
$REST "$URL" cancel "$JC"
$REST "$URL" cancel "$JD"
CHK_C=$(latest_chk "$CKC" "$JC")
CHK_D=$(latest_chk "$CKD" "$JD")
write_info "$CKC" checkpoint-after-noclaim checkpoint null rocksdb true 2 64 "$CHK_C" "$JC" \
    "{\"mode\": \"NO_CLAIM\", \"from\": \"$CKB/$CHK_B\", \"restored_checkpoint_id\": $RC}"
write_info "$CKD" checkpoint-after-claim checkpoint null rocksdb true 2 64 "$CHK_D" "$JD" \
    "{\"mode\": \"CLAIM\", \"from\": \"$CLAIM_SRC\", \"restored_checkpoint_id\": $RD}"
log "checkpoint-after-noclaim: $CKC/$CHK_C (restored id $RC)"
log "checkpoint-after-claim: $CKD/$CHK_D (restored id $RD)"

# self-check: every snapshot has a _metadata with Flink's magic number and the operator IDs of
# all uids (computed independently by uidhash.py)
for info in "$OUTDIR"/*/info.json; do
    d=$(dirname "$info")
    snap="$d/$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["path"])' "$info")"
    magic=$(head -c 4 "$snap/_metadata" | od -An -tx1 | tr -d ' \n')
    [[ "$magic" == "4960672d" ]] || { log "bad magic $magic in $snap/_metadata"; exit 1; }
    "$PY" "$HERE/uidhash.py" --check "$snap/_metadata" source-uid counting-map-uid keyed-process-uid \
        window-uid sink-uid || { log "operator IDs missing in $snap/_metadata"; exit 1; }
done

# index of everything produced
"$PY" - "$OUTDIR" "$VERSION" <<'PYEOF'
import json, os, sys
out, version = sys.argv[1:]
snaps = []
for name in sorted(os.listdir(out)):
    p = os.path.join(out, name, "info.json")
    if os.path.isfile(p):
        with open(p) as f:
            info = json.load(f)
        snaps.append({"name": name, "snapshot": os.path.join(out, name, info["path"])})
with open(os.path.join(out, "snapshots.json"), "w") as f:
    json.dump({"flink_version": version, "snapshots": snaps}, f, indent=2)
    f.write("\n")
PYEOF
log "done: $(ls "$OUTDIR" | grep -vc snapshots.json) snapshots in $OUTDIR (index: $OUTDIR/snapshots.json)"
