#!/usr/bin/env bash
# Does `sp check` agree with the real engine?  TAP on stdout; progress and diagnostics on stderr.
#
# For each Flink version in scripts/flink/versions.txt, on one private session cluster
# (scripts/flink/cluster.sh):
#   * the test job (tests/flink/job, hashmap, parallelism 2, max parallelism 3) runs, completes a
#     checkpoint and takes a canonical savepoint SP; it is cancelled;
#   * for each variant of the job -- changed-uid, removed-operator, max parallelism changed
#     (--max-parallelism 4), parallelism above the saved max parallelism (--parallelism 4) --
#     with and without -n, `flink run -d -s SP` is tried and `sp check SP` is run with the same
#     job (uids, parallelism, max parallelism; with -n, --expect-dropped names what the variant
#     drops); sp check must exit 0 exactly when Flink restores the job (reaches RUNNING, restored
#     from SP), and both must match the documented outcome;
#   * the same job unchanged restores, and sp check agrees;
#   * `sp metadata edit SP --output SP2 --set-uid uid:keyed-process-uid=keyed-process-uid-changed`:
#     SP2 verifies, sp diff shows one operator moved, sp check SP2 for the changed-uid variant
#     passes, and `flink run -s SP2` of the changed-uid variant without -n restores with its
#     state (the job's SP-TEST-RESTORED lines: restored operator and keyed counts).
# Jobs that fail are submitted concurrently (they take no slots); restored jobs are cancelled as
# soon as they run.
#
# Environment: SP_BIN (default build/cli/sp), SP_SKIP_FLINK=1 (skip), SP_FLINK_VERSIONS (override
# versions.txt), SP_FLINK_CACHE, SP_FLINK_KEEP=1 (keep the temp dir).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=test_check_real
source "$HERE/harness.sh"
[[ -n "$HAVE_SP" ]] || skip_all "sp binary $SP_BIN not found"

UIDS_NORMAL="source-uid counting-map-uid keyed-process-uid window-uid sink-uid"
UIDS_CHANGED="source-uid counting-map-uid keyed-process-uid-changed window-uid sink-uid"
UIDS_REMOVED="source-uid counting-map-uid keyed-process-uid sink-uid"
SAVED_PAR=2
SAVED_MAXPAR=3

# Scenarios: NAME | job arguments | uids | -n? | --expect-dropped (with -n) | Flink restores?
SCENARIOS=(
    "normal|--variant normal --parallelism 2 --max-parallelism 3|$UIDS_NORMAL||-|yes"
    "changed-uid|--variant changed-uid --parallelism 2 --max-parallelism 3|$UIDS_CHANGED||-|no"
    "changed-uid -n|--variant changed-uid --parallelism 2 --max-parallelism 3|$UIDS_CHANGED|-n|uid:keyed-process-uid|yes"
    "removed-operator|--variant removed-operator --parallelism 2 --max-parallelism 3|$UIDS_REMOVED||-|no"
    "removed-operator -n|--variant removed-operator --parallelism 2 --max-parallelism 3|$UIDS_REMOVED|-n|uid:window-uid|yes"
    "max-parallelism-changed|--variant normal --parallelism 2 --max-parallelism 4|$UIDS_NORMAL||-|no"
    "max-parallelism-changed -n|--variant normal --parallelism 2 --max-parallelism 4|$UIDS_NORMAL|-n|-|no"
    "parallelism-above-max|--variant normal --parallelism 4 --max-parallelism 3|$UIDS_NORMAL||-|no"
    "parallelism-above-max -n|--variant normal --parallelism 4 --max-parallelism 3|$UIDS_NORMAL|-n|-|no"
)

# flink_run V OUTFILE [flink run options...] -- [job args...]: flink run -d; output to OUTFILE
flink_run() {
    local v=$1 outf=$2; shift 2
    local runopts=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do runopts+=("$1"); shift; done
    shift
    FLINK_CONF_DIR="$CUR_WORK/conf" "$FLINK_HOME/bin/flink" run -d "${runopts[@]}" "${JARS[$v]}" "$@" \
        --checkpoint-interval 1000 --backend hashmap >"$outf" 2>&1
}

job_id_of() { sed -n 's/.*Job has been submitted with JobID \([0-9a-f]\{32\}\).*/\1/p' "$1" | tail -n1; }

# the reason a restore failed, for the log
why_failed() { grep -E 'Caused by|Exception:' "$1" | tail -n 1 | cut -c1-400; }

# sp check exit status for a scenario (args: snapshot, uids, -n or "", expect or "-", job args)
sp_check_rc() {
    local snap=$1 uids=$2 n=$3 exp=$4 jobargs=$5 args=() u p mp
    for u in $uids; do args+=(--uid "$u"); done
    p=$(sed -n 's/.*--parallelism \([0-9]*\).*/\1/p' <<<"$jobargs")
    mp=$(sed -n 's/.*--max-parallelism \([0-9]*\).*/\1/p' <<<"$jobargs")
    # the test job always sets its max parallelism explicitly (env.setMaxParallelism)
    args+=(--parallelism "$p" --max-parallelism "$mp")
    [[ -n "$n" ]] && args+=(--allow-non-restored-state)
    [[ "$exp" != "-" ]] && args+=(--expect-dropped "$exp")
    "$SP_BIN" check "$snap" "${args[@]}" >&2
}

# the job restored from SNAP (RUNNING, restored checkpoint id >= 0): prints yes / no
restored_outcome() {
    local url=$1 outf=$2 rc=$3 jid rid
    if [[ "$rc" -ne 0 ]]; then
        log "  flink run failed: $(why_failed "$outf")"
        echo no; return
    fi
    jid=$(job_id_of "$outf")
    if [[ -z "$jid" ]]; then tail -n 20 "$outf" >&2; echo no; return; fi
    if ! "$PY" "$SCRIPTS/flinkrest.py" "$url" wait-running "$jid" --timeout 90 >&2; then
        echo no; return
    fi
    rid=$("$PY" "$SCRIPTS/flinkrest.py" "$url" restored-id "$jid" 2>/dev/null || echo -1)
    if [[ "$rid" -ge 0 ]]; then echo yes; else log "  job $jid runs but did not restore"; echo no; fi
}

cancel_job() {
    local url=$1 outf=$2 jid
    jid=$(job_id_of "$outf")
    [[ -n "$jid" ]] || return 0
    local st
    st=$("$PY" "$SCRIPTS/flinkrest.py" "$url" state "$jid" 2>/dev/null || echo "")
    case "$st" in RUNNING|CREATED|INITIALIZING|RESTARTING)
        "$PY" "$SCRIPTS/flinkrest.py" "$url" cancel "$jid" --timeout 60 >&2 || log "cancel $jid failed" ;;
    esac
}

# report one scenario: sp check vs Flink vs the documented outcome
report() {
    local v=$1 name=$2 sp_rc=$3 flink=$4 want=$5 sp_says
    sp_says=$([[ "$sp_rc" -eq 0 ]] && echo yes || echo no)
    local d="[$v] $name: sp check exits $sp_rc, flink run -s restores: $flink (documented: $want)"
    if [[ "$sp_says" == "$flink" && "$flink" == "$want" ]]; then ok "$d"; else not_ok "$d"; fi
}

{
for v in "${VERSIONS[@]}"; do
    T0=$SECONDS
    CUR_VERSION=$v
    CUR_WORK="$TMPROOT/$v/cluster"
    W="$TMPROOT/$v"
    mkdir -p "$W"
    FLINK_HOME=$("$SCRIPTS/install-flink.sh" "$v")
    log "=== Flink $v ==="
    if [[ -z "${JARS[$v]}" ]]; then
        not_ok "[$v] build the test job (see stderr)"
        CUR_WORK=""
        continue
    fi
    if ! URL=$("$SCRIPTS/cluster.sh" start "$v" "$CUR_WORK"); then
        not_ok "[$v] start a session cluster"
        CUR_WORK=""
        continue
    fi

    # the savepoint: the normal job at parallelism 2, max parallelism 3, after a checkpoint
    SP=""
    if flink_run "$v" "$W/first.out" -- --variant normal --parallelism $SAVED_PAR \
            --max-parallelism $SAVED_MAXPAR --job-name sp-check-first; then
        JID=$(job_id_of "$W/first.out")
        if [[ -n "$JID" ]] && "$PY" "$SCRIPTS/flinkrest.py" "$URL" wait-running "$JID" --timeout 90 >&2 \
            && "$PY" "$SCRIPTS/flinkrest.py" "$URL" wait-checkpoint "$JID" --after 1 --timeout 60 >/dev/null \
            && LOC=$("$PY" "$SCRIPTS/flinkrest.py" "$URL" savepoint "$JID" "file://$W/savepoints" \
                     --format canonical); then
            SP=${LOC#file:}
        fi
        [[ -n "$JID" ]] && "$PY" "$SCRIPTS/flinkrest.py" "$URL" cancel "$JID" >&2
    else
        tail -n 30 "$W/first.out" >&2
    fi
    if [[ -n "$SP" && -f "$SP/_metadata" ]]; then
        ok "[$v] canonical savepoint of the test job (parallelism $SAVED_PAR, max parallelism $SAVED_MAXPAR) ($((SECONDS - T0))s)"
    else
        not_ok "[$v] canonical savepoint of the test job"
        "$SCRIPTS/cluster.sh" stop "$v" "$CUR_WORK" >&2 || true
        CUR_WORK=""
        continue
    fi
    "$SP_BIN" inspect "$SP" >&2

    # the edited copy for the set-uid scenario
    SP2="$W/sp-set-uid"
    EDIT_OK=""
    if "$SP_BIN" metadata edit "$SP" --output "$SP2" \
            --set-uid uid:keyed-process-uid=keyed-process-uid-changed >&2 && "$SP_BIN" verify "$SP2" >&2; then
        EDIT_OK=1
        ok "[$v] sp metadata edit --set-uid uid:keyed-process-uid=keyed-process-uid-changed --output: exit 0, sp verify passes"
    else
        not_ok "[$v] sp metadata edit --set-uid uid:keyed-process-uid=keyed-process-uid-changed --output: exit 0, sp verify passes"
    fi
    DIFF_OK=""
    if [[ -n "$EDIT_OK" ]]; then
        "$SP_BIN" diff "$SP" "$SP2" --json >"$W/diff.json" # exits 1: they differ
        "$PY" -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; sys.exit(0 if (s["moved"], s["same"], s["removed"], s["added"], s["changed"]) == (1, 4, 0, 0, 0) else 1)' \
            "$W/diff.json" && DIFF_OK=1
    fi
    if [[ -n "$DIFF_OK" ]]; then
        ok "[$v] sp diff SP SP2: exactly one operator moved (same state), four unchanged"
    else
        not_ok "[$v] sp diff SP SP2: exactly one operator moved (same state), four unchanged"
    fi
    # -n without --expect-dropped: Flink restores, but sp check flags the silent drop
    if ! sp_check_rc "$SP" "$UIDS_CHANGED" -n - "--parallelism 2 --max-parallelism 3"; then
        ok "[$v] changed-uid -n without --expect-dropped: sp check exits 1 (state dropped that nobody named)"
    else
        not_ok "[$v] changed-uid -n without --expect-dropped: sp check exits 1 (state dropped that nobody named)"
    fi

    # 1. the scenarios Flink rejects, submitted concurrently (they take no task slots)
    T1=$SECONDS
    declare -A OUTF=()
    pids=()
    for i in "${!SCENARIOS[@]}"; do
        IFS='|' read -r name jobargs uids n exp want <<<"${SCENARIOS[$i]}"
        [[ "$want" == no ]] || continue
        OUTF[$i]="$W/run-$i.out"
        ( flink_run "$v" "${OUTF[$i]}" -s "$SP" $n -- $jobargs --job-name "sp-check-$i"; echo $? >"$W/run-$i.rc" ) &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    log "rejected scenarios submitted in $((SECONDS - T1))s"
    for i in "${!SCENARIOS[@]}"; do
        IFS='|' read -r name jobargs uids n exp want <<<"${SCENARIOS[$i]}"
        [[ "$want" == no ]] || continue
        log "[$v] $name"
        flink=$(restored_outcome "$URL" "${OUTF[$i]}" "$(cat "$W/run-$i.rc")")
        cancel_job "$URL" "${OUTF[$i]}"
        sp_check_rc "$SP" "$uids" "$n" "$exp" "$jobargs"
        report "$v" "$name" $? "$flink" "$want"
    done

    # 2. the scenarios Flink restores, two at a time (2 slots each of 4), cancelled once running
    T1=$SECONDS
    restoring=()
    for i in "${!SCENARIOS[@]}"; do
        IFS='|' read -r name jobargs uids n exp want <<<"${SCENARIOS[$i]}"
        [[ "$want" == yes ]] && restoring+=("$i")
    done
    restoring+=(setuid)
    for ((k = 0; k < ${#restoring[@]}; k += 2)); do
        batch=("${restoring[@]:k:2}")
        pids=()
        for i in "${batch[@]}"; do
            if [[ "$i" == setuid ]]; then
                [[ -n "$EDIT_OK" ]] || continue
                ( flink_run "$v" "$W/run-setuid.out" -s "$SP2" -- --variant changed-uid \
                    --parallelism 2 --max-parallelism 3 --job-name sp-check-setuid; echo $? >"$W/run-setuid.rc" ) &
            else
                IFS='|' read -r name jobargs uids n exp want <<<"${SCENARIOS[$i]}"
                ( flink_run "$v" "$W/run-$i.out" -s "$SP" $n -- $jobargs --job-name "sp-check-$i"
                  echo $? >"$W/run-$i.rc" ) &
            fi
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p"; done
        for i in "${batch[@]}"; do
            if [[ "$i" == setuid ]]; then
                if [[ -z "$EDIT_OK" ]]; then
                    not_ok "[$v] set-uid: sp check SP2 and flink run -s SP2 (changed-uid, no -n) (no SP2)"
                    not_ok "[$v] set-uid: keyed and operator state restored under the new uid (no SP2)"
                    continue
                fi
                log "[$v] set-uid"
                flink=$(restored_outcome "$URL" "$W/run-setuid.out" "$(cat "$W/run-setuid.rc")")
                sp_check_rc "$SP2" "$UIDS_CHANGED" "" - "--parallelism 2 --max-parallelism 3"
                report "$v" "after sp metadata edit --set-uid, changed-uid (no -n) from SP2" $? "$flink" yes
                jid=$(job_id_of "$W/run-setuid.out")
                if [[ "$flink" == yes ]]; then
                    for t in $(seq 1 40); do
                        "$PY" "$SCRIPTS/spcheck.py" restored-state "$jid" 2 "$CUR_WORK"/log/*taskexecutor*.log \
                            2>/dev/null && break
                        sleep 0.5
                    done
                fi
                check "[$v] set-uid: keyed-process-uid-changed restored the keyed state (SP-TEST-RESTORED counts continue)" \
                    "$PY" "$SCRIPTS/spcheck.py" restored-state "${jid:-none}" 2 "$CUR_WORK"/log/*taskexecutor*.log
                cancel_job "$URL" "$W/run-setuid.out"
            else
                IFS='|' read -r name jobargs uids n exp want <<<"${SCENARIOS[$i]}"
                log "[$v] $name"
                flink=$(restored_outcome "$URL" "$W/run-$i.out" "$(cat "$W/run-$i.rc")")
                cancel_job "$URL" "$W/run-$i.out"
                sp_check_rc "$SP" "$uids" "$n" "$exp" "$jobargs"
                report "$v" "$name" $? "$flink" "$want"
            fi
        done
    done
    log "restoring scenarios took $((SECONDS - T1))s"
    T1=$SECONDS
    "$SCRIPTS/cluster.sh" stop "$v" "$CUR_WORK" >&2 || true
    CUR_WORK=""
    log "Flink $v done in $((SECONDS - T0))s (cluster stop $((SECONDS - T1))s)"
done
echo "1..$N"
[[ $FAILS -eq 0 ]]
}
