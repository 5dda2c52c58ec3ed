#!/usr/bin/env bash
# Real-Flink end-to-end test for sp. Emits TAP on stdout; progress and diagnostics on stderr.
#
# For each Flink version in scripts/flink/versions.txt: start a private cluster on 127.0.0.1,
# produce real snapshots of every kind (scripts/flink/produce-snapshots.sh), run a restore
# smoke test (flink run -d -s <fresh canonical savepoint> reaches RUNNING and completes a
# checkpoint), then check every snapshot with sp:
#   * _metadata exists and starts with the magic 49 60 67 2d (harness self-check)
#   * the operator IDs of all the job's uids occur in _metadata (independent murmur3 check)
#   * sp inspect SNAP exits 0;  sp verify SNAP exits 0
#   * sp inspect SNAP --json has, for every uid, an operator whose operator_id equals the first
#     column of `sp uid-hash UID`, with the configured parallelism and max_parallelism
#   * sp metadata export SNAP > x.json; sp metadata import x.json OUT; cmp OUT SNAP/_metadata
# then relocate and restore, on the same cluster:
#   * the retained incremental RocksDB checkpoint (<jobid>/chk-N, absolute references into
#     <jobid>/shared/) with sp relocate to a new directory (relocatable, verifies), into
#     x.tar.zst and back into a new directory; sp dispose --include-external of the original
#     (exactly the chk dir and its shared/ files go), rm of the job dir and the intermediates;
#   * the native RocksDB savepoint the same way, every hop with --move;
#   * flink run -d -s NEWDIR of the test job for both: RUNNING, REST latest.restored names
#     NEWDIR with the snapshot's checkpoint id, a checkpoint completes, and the job's
#     SP-TEST-RESTORED log lines show restored operator state (counting-map count > 0) and
#     keyed state (a key's count larger than this run has seen) in every subtask;
# then stop the cluster and sp dispose real snapshots: four savepoints (directory gone, nothing
# else under its parent changed), a retained checkpoint without --include-external (shared/
# files kept) and one with it (shared/ files removed).
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
NAME=test_real_flink
source "$HERE/harness.sh"
[[ -n "$HAVE_SP" ]] || log "sp binary $SP_BIN not found: sp checks will be skipped"

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

info_field() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# the snapshot directory an info.json describes
info_snap() { echo "$(dirname "$1")/$(info_field "$1" path)"; }

# ---- sp relocate / sp dispose against real snapshots ------------------------------------------
#
# Steps of one chain report through step(): after a failed step the chain's remaining steps are
# reported as failed without running (the TAP line count stays the same); with CHAIN_SKIP set
# (no sp binary) every step is reported as "ok ... # SKIP $CHAIN_SKIP".
step() {
    local d=$1; shift
    if [[ -n "${CHAIN_SKIP:-}" ]]; then skip "$d" "$CHAIN_SKIP"; return 1; fi
    if [[ -n "$CHAIN_DEAD" ]]; then not_ok "$d (not run: an earlier step failed)"; return 1; fi
    if "$@" >&2; then ok "$d"; return 0; fi
    not_ok "$d"
    CHAIN_DEAD=1
    return 1
}

# the metadata's absolute references point into DIR/shared/ and the snapshot is not relocatable
reloc_pre_absolute() {
    local json=$1 jobdir=$2 n
    n=$("$PY" "$SCRIPTS/spcheck.py" field "$json" reference_counts.absolute) || return 1
    [[ "$n" -gt 0 ]] || { log "expected absolute references, found ${n:-none}"; return 1; }
    [[ "$("$PY" "$SCRIPTS/spcheck.py" field "$json" relocatable)" == "False" ]] \
        || { log "the original claims to be relocatable"; return 1; }
    "$PY" "$SCRIPTS/spcheck.py" refs "$json" --kind absolute --under "$jobdir/shared" >/dev/null
}

# relocate SRC to a new directory DST ([--move]): exit 0, the copy has NREFS file references, all
# relative, sp verify passes; with --move the source is gone
reloc_to_dir() {
    local src=$1 dst=$2 nrefs=$3 w=$4; shift 4
    "$SP_BIN" relocate "$src" "$dst" "$@" --json >"$w/relocate-dir.json" || return 1
    "$SP_BIN" inspect "$dst" --json >"$w/copy.json" || return 1
    "$PY" "$SCRIPTS/spcheck.py" relocatable "$w/copy.json" --file-refs "$nrefs" || return 1
    "$SP_BIN" verify "$dst" || return 1
    cp "$dst/_metadata" "$w/copy._metadata"
    if [[ " $* " == *" --move "* && -e "$src" ]]; then log "--move left $src"; return 1; fi
}

# relocate DIR into ARCHIVE (.tar.zst) and ARCHIVE into the new directory NEW ([--move])
reloc_via_archive() {
    local d1=$1 arc=$2 new=$3 nrefs=$4 w=$5; shift 5
    local magic
    "$SP_BIN" relocate "$d1" "$arc" "$@" || return 1
    magic=$(head -c 4 "$arc" | od -An -tx1 | tr -d ' \n')
    [[ "$magic" == "28b52ffd" ]] || { log "$arc: no zstd magic ($magic)"; return 1; }
    if [[ " $* " == *" --move "* && -e "$d1" ]]; then log "--move left $d1"; return 1; fi
    "$SP_BIN" relocate "$arc" "$new" "$@" || return 1
    if [[ " $* " == *" --move "* && -e "$arc" ]]; then log "--move left $arc"; return 1; fi
    "$SP_BIN" inspect "$new" --json >"$w/new.json" || return 1
    "$PY" "$SCRIPTS/spcheck.py" relocatable "$w/new.json" --file-refs "$nrefs" || return 1
    "$SP_BIN" verify "$new" || return 1
    cmp "$w/copy._metadata" "$new/_metadata"
}

# sp dispose SNAP --include-external: exit 0; under ROOT exactly the snapshot directory and its
# external references disappear; then remove the rest of the original (the job dir of a
# checkpoint), the intermediate copy D1 (sp dispose) and ARCHIVE; only ROOT/info.json remains
reloc_delete_originals() {
    local root=$1 snap=$2 json=$3 d1=$4 arc=$5 w=$6 gone=() p left
    "$PY" "$SCRIPTS/spcheck.py" tree "$root" >"$w/tree.before"
    gone=(--gone "${snap#"$root"/}")
    while IFS= read -r p; do
        [[ -n "$p" ]] && gone+=(--gone "${p#"$root"/}")
    done < <("$PY" "$SCRIPTS/spcheck.py" refs "$json" --kind absolute --under "$root")
    "$SP_BIN" dispose "$snap" --include-external || return 1
    "$PY" "$SCRIPTS/spcheck.py" tree "$root" >"$w/tree.after"
    [[ ! -e "$snap" ]] || { log "sp dispose left $snap"; return 1; }
    "$PY" "$SCRIPTS/spcheck.py" tree-diff "$w/tree.before" "$w/tree.after" "${gone[@]}" || return 1
    if [[ "$(dirname "$snap")" != "$root" ]]; then rm -rf "$(dirname "$snap")"; fi
    "$SP_BIN" dispose "$d1" || return 1
    [[ ! -e "$d1" ]] || { log "sp dispose left $d1"; return 1; }
    rm -f "$arc"
    left=$(find "$root" -mindepth 1 ! -name info.json)
    [[ -z "$left" ]] || { log "left of the original: $left"; return 1; }
}

# after --move hops: the original, the first copy and the archive are all gone
reloc_moved_away() {
    local root=$1 d1=$2 arc=$3 left
    [[ ! -e "$d1" && ! -e "$arc" ]] || { log "--move left $d1 or $arc"; return 1; }
    left=$(find "$root" -mindepth 1 ! -name info.json)
    [[ -z "$left" ]] || { log "left of the original: $left"; return 1; }
}

# submit_restore V INFO SNAP NAME -> prints the job id (same backend/parallelism as INFO)
submit_restore() {
    local v=$1 info=$2 snap=$3 name=$4 jar out jid
    jar=$("$SCRIPTS/build-job.sh" "$v") || return 1
    out=$(FLINK_CONF_DIR="$CUR_WORK/conf" "$FLINK_HOME/bin/flink" run -d -s "$snap" "$jar" \
            --backend "$(info_field "$info" backend)" \
            --incremental "$(info_field "$info" incremental | tr A-Z a-z)" \
            --parallelism "$(info_field "$info" parallelism)" \
            --max-parallelism "$(info_field "$info" max_parallelism)" \
            --checkpoint-interval 1000 --job-name "sp-relocated-$name" 2>&1) \
        || { echo "$out" | tail -n 30 >&2; return 1; }
    jid=$(sed -n 's/.*Job has been submitted with JobID \([0-9a-f]\{32\}\).*/\1/p' <<<"$out" | tail -n1)
    [[ -n "$jid" ]] || { echo "$out" | tail -n 30 >&2; return 1; }
    log "job $jid restoring from $snap"
    echo "$jid"
}

# the job restored from NEW: REST latest.restored names NEW and the checkpoint id of NEW
restored_from() {
    local url=$1 jid=$2 new=$3 w=$4 id
    id=$("$PY" "$SCRIPTS/spcheck.py" field "$w/new.json" checkpoint_id) || return 1
    "$PY" "$SCRIPTS/flinkrest.py" "$url" restored "$jid" >"$w/restored.json" || return 1
    "$PY" "$SCRIPTS/spcheck.py" restored-path "$w/restored.json" "$new" --id "$id"
}

# the job's SP-TEST-RESTORED log lines (tests/flink/job) show restored operator and keyed state
restored_state() {
    local jid=$1 par=$2 i
    for i in $(seq 1 60); do
        "$PY" "$SCRIPTS/spcheck.py" restored-state "$jid" "$par" "$CUR_WORK"/log/*taskexecutor*.log \
            2>/dev/null && break
        sleep 0.5
    done
    "$PY" "$SCRIPTS/spcheck.py" restored-state "$jid" "$par" "$CUR_WORK"/log/*taskexecutor*.log
}

RELOC_NAMES=(checkpoint-incremental-rocksdb savepoint-native-rocksdb)
# relocate_prepare V NAME: relocation chain of one snapshot; sets RELOC_NEW[NAME] (or "")
declare -A RELOC_NEW RELOC_DEAD
relocate_prepare() {
    local v=$1 name=$2 root="$OUT/$2" info="$OUT/$2/info.json" t="[$1] $2" snap="" w d1 arc new
    local mode=copy mv=() mvd="" nrefs="" kind CHAIN_DEAD="" CHAIN_SKIP=""
    [[ "$name" == savepoint-* ]] && { mode=move; mv=(--move); mvd=" --move"; }
    kind=${name%%-*}
    w="$TMPROOT/$v/relocated/$name"
    d1="$w/copy"; arc="$w/copy.tar.zst"; new="$w/new"
    RELOC_NEW[$name]=""
    mkdir -p "$w"
    if [[ -z "$HAVE_SP" ]]; then
        CHAIN_SKIP="sp binary not found"
    elif ! { snap=$(info_snap "$info" 2>/dev/null) && [[ -f "$snap/_metadata" ]] \
            && "$SP_BIN" inspect "$snap" --json >"$w/orig.json" \
            && nrefs=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["references"]))' "$w/orig.json"); }; then
        log "no usable $name snapshot"
        CHAIN_DEAD=1
    fi
    if [[ "$kind" == checkpoint ]]; then
        step "$t: original has absolute references into <jobid>/shared/ (not relocatable)" \
            reloc_pre_absolute "$w/orig.json" "$(dirname "$snap")"
    fi
    step "$t: sp relocate SNAP NEWDIR$mvd: copy relocatable (all file references relative) and sp verify passes" \
        reloc_to_dir "$snap" "$d1" "$nrefs" "$w" "${mv[@]}"
    step "$t: sp relocate NEWDIR x.tar.zst$mvd, then x.tar.zst NEWDIR2$mvd: relocatable, verifies, same _metadata" \
        reloc_via_archive "$d1" "$arc" "$new" "$nrefs" "$w" "${mv[@]}"
    if [[ "$mode" == copy ]]; then
        step "$t: originals deleted: sp dispose --include-external removes exactly the snapshot and its shared/ files; job dir and intermediate copies removed" \
            reloc_delete_originals "$root" "$snap" "$w/orig.json" "$d1" "$arc" "$w"
    else
        step "$t: --move removed the original and the intermediate copies; only NEWDIR2 is left" \
            reloc_moved_away "$root" "$d1" "$arc"
    fi
    [[ -z "$CHAIN_DEAD" ]] && RELOC_NEW[$name]=$new
    return 0
}

# relocate_restore_check V URL NAME JOBID: the restored job's checks (4 TAP lines)
relocate_restore_check() {
    local v=$1 url=$2 name=$3 jid=$4 t="[$1] $3" new=${RELOC_NEW[$3]} CHAIN_DEAD=${RELOC_DEAD[$3]:-}
    local w="$TMPROOT/$v/relocated/$name" par CHAIN_SKIP=""
    [[ -n "$HAVE_SP" ]] || CHAIN_SKIP="sp binary not found"
    par=$(info_field "$OUT/$name/info.json" parallelism 2>/dev/null || echo 2)
    step "$t: flink run -d -s NEWDIR2 (originals deleted) reaches RUNNING" \
        "$PY" "$SCRIPTS/flinkrest.py" "$url" wait-running "$jid" --timeout 90
    step "$t: REST latest.restored is NEWDIR2 with the snapshot's checkpoint id" \
        restored_from "$url" "$jid" "$new" "$w"
    step "$t: completes a checkpoint after the restored one" \
        "$PY" "$SCRIPTS/flinkrest.py" "$url" wait-checkpoint "$jid" --timeout 60
    step "$t: state restored: counting-map counts and keyed-process counts continue (SP-TEST-RESTORED)" \
        restored_state "$jid" "$par"
    [[ -n "$jid" ]] && { "$PY" "$SCRIPTS/flinkrest.py" "$url" cancel "$jid" || log "cancel $jid failed"; }
    return 0
}

# dispose_check V NAME [--include-external]: sp dispose of a real snapshot; under OUT/NAME exactly
# the snapshot directory (and with --include-external its external references) disappear; a
# checkpoint's external shared/ files must exist before and, without the option, after
dispose_check() {
    local v=$1 name=$2 ext=${3:-} root="$OUT/$2" snap w gone=() p n=0
    w="$TMPROOT/$v/dispose/$name"
    mkdir -p "$w"
    snap=$(info_snap "$root/info.json") && [[ -f "$snap/_metadata" ]] || return 1
    "$SP_BIN" inspect "$snap" --json >"$w/orig.json" || return 1
    "$PY" "$SCRIPTS/spcheck.py" refs "$w/orig.json" --kind absolute --under "$root" >"$w/external.txt" || return 1
    "$PY" "$SCRIPTS/spcheck.py" tree "$root" >"$w/tree.before"
    gone=(--gone "${snap#"$root"/}")
    while IFS= read -r p; do
        [[ -n "$p" ]] || continue
        [[ -f "$p" ]] || { log "external reference $p missing before dispose"; return 1; }
        n=$((n + 1))
        [[ -n "$ext" ]] && gone+=(--gone "${p#"$root"/}")
    done <"$w/external.txt"
    if [[ "$name" == checkpoint-* && $n -eq 0 ]]; then log "$name has no external references"; return 1; fi
    "$SP_BIN" dispose "$snap" $ext || return 1
    [[ ! -e "$snap" ]] || { log "sp dispose left $snap"; return 1; }
    "$PY" "$SCRIPTS/spcheck.py" tree "$root" >"$w/tree.after"
    "$PY" "$SCRIPTS/spcheck.py" tree-diff "$w/tree.before" "$w/tree.after" "${gone[@]}" || return 1
    log "$name: disposed ${snap#"$root"/}; $n external file(s) $([[ -n "$ext" ]] && echo removed || echo kept)"
}


# The rest is one compound command, parsed completely before it runs (editing this file during a
# run cannot change what the run executes).
{
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
    T1=$SECONDS
    if [[ -n "$SMOKE_SNAP" ]] && restore_smoke "$v" "$URL" "$SMOKE_SNAP"; then
        ok "[$v] restore smoke: flink run -s <canonical savepoint> runs and completes a checkpoint"
    else
        not_ok "[$v] restore smoke: flink run -s <canonical savepoint> runs and completes a checkpoint"
    fi
    log "restore smoke took $((SECONDS - T1))s"
    T1=$SECONDS

    # every snapshot with sp (the cluster stays up, idle, for the relocation restores below)
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
    log "sp checks of every snapshot took $((SECONDS - T1))s"

    # relocate + restore: the retained incremental checkpoint (copy, absolute shared/ references
    # gathered) and the native RocksDB savepoint (--move hops), each to a directory, through a
    # .tar.zst archive and back; originals deleted; then both jobs restore from the new copies
    T1=$SECONDS
    declare -A RJOB=()
    for name in "${RELOC_NAMES[@]}"; do
        relocate_prepare "$v" "$name"
        RELOC_DEAD[$name]=""
        RJOB[$name]=""
        if [[ -z "${RELOC_NEW[$name]}" ]] || ! RJOB[$name]=$(submit_restore "$v" "$OUT/$name/info.json" \
                "${RELOC_NEW[$name]}" "$name"); then
            RELOC_DEAD[$name]=1
        fi
    done
    for name in "${RELOC_NAMES[@]}"; do
        relocate_restore_check "$v" "$URL" "$name" "${RJOB[$name]}"
    done
    log "relocate/restore checks took $((SECONDS - T1))s"
    T1=$SECONDS
    "$SCRIPTS/cluster.sh" stop "$v" "$CUR_WORK" >&2 || true
    CUR_WORK=""
    log "cluster stop took $((SECONDS - T1))s"

    # sp dispose of real snapshots
    for spec in savepoint-canonical-hashmap savepoint-native-hashmap stop-with-savepoint \
                savepoint-canonical-rocksdb "checkpoint-after-noclaim" \
                "checkpoint-after-claim --include-external"; do
        read -r name ext <<<"$spec"
        case "$name:$ext" in
            savepoint-*|stop-*) d="[$v] $name: sp dispose exits 0, the snapshot directory is gone, nothing else changed" ;;
            *:) d="[$v] $name: sp dispose (no --include-external) removes the chk dir, keeps the referenced shared/ files, nothing else changed" ;;
            *) d="[$v] $name: sp dispose --include-external removes the chk dir and the referenced shared/ files, nothing else changed" ;;
        esac
        if [[ -z "$HAVE_SP" ]]; then skip "$d" "sp binary not found"; continue; fi
        check "$d" dispose_check "$v" "$name" $ext
    done
    log "Flink $v done in $((SECONDS - T0))s"
done

echo "1..$N"
log "$N tests, $FAILS failed"
[[ $FAILS -eq 0 ]]
exit
}
