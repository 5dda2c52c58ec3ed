#!/usr/bin/env bash
# Start / stop a private standalone Flink session cluster on 127.0.0.1.
#
# Usage:
#   scripts/flink/cluster.sh start VERSION WORKDIR   # prints http://127.0.0.1:PORT
#   scripts/flink/cluster.sh stop  VERSION WORKDIR
#
# start: installs VERSION if needed (install-flink.sh), writes WORKDIR/conf/config.yaml
# (free REST + RPC ports, 4 slots, small memory, checkpoint/savepoint dirs under WORKDIR),
# starts a JobManager and one TaskManager with FLINK_CONF_DIR=WORKDIR/conf, waits until
# GET /overview reports >= 1 TaskManager (timeout SP_FLINK_START_TIMEOUT, default 90 s),
# writes WORKDIR/pids (the daemon PIDs) and WORKDIR/rest_url, prints the REST URL.
# Also writes WORKDIR/env (FLINK_HOME, FLINK_CONF_DIR, ... as shell assignments).
# stop: kills exactly the PIDs in WORKDIR/pids and their child processes.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ACTION=${1:?usage: cluster.sh start|stop VERSION WORKDIR}
VERSION=${2:?usage: cluster.sh start|stop VERSION WORKDIR}
WORKDIR=${3:?usage: cluster.sh start|stop VERSION WORKDIR}
PY=${PYTHON:-python3}

log() { echo "cluster[$VERSION]: $*" >&2; }

# All descendants of a PID (children first-level and deeper), via /proc.
descendants() {
    local p c
    for p in "$@"; do
        for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do
            echo "$c"
            descendants "$c"
        done
    done
}

do_stop() {
    local pidfile="$WORKDIR/pids" pids all p i
    [[ -f "$pidfile" ]] || { log "no $pidfile: nothing to stop"; return 0; }
    pids=$(cat "$pidfile")
    all="$pids $(descendants $pids)"
    log "stopping PIDs: $(echo $all)"
    for p in $all; do kill -TERM "$p" 2>/dev/null || true; done
    for i in $(seq 1 30); do
        local alive=""
        for p in $all; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
        [[ -z "$alive" ]] && break
        sleep 0.5
    done
    for p in $all; do kill -KILL "$p" 2>/dev/null || true; done
    rm -f "$pidfile"
    log "stopped"
}

free_port() {
    "$PY" - <<'PYEOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PYEOF
}

do_start() {
    local home conf port rpc url
    home=$("$HERE/install-flink.sh" "$VERSION")
    mkdir -p "$WORKDIR"
    WORKDIR=$(cd "$WORKDIR" && pwd)
    if [[ -f "$WORKDIR/pids" ]]; then
        log "$WORKDIR/pids exists: stopping the previous cluster first"
        do_stop
    fi
    rm -f "$WORKDIR"/flink-*.pid   # flink-daemon.sh appends to existing pid files
    conf="$WORKDIR/conf"
    mkdir -p "$conf" "$WORKDIR/log" "$WORKDIR/checkpoints" "$WORKDIR/savepoints" "$WORKDIR/tmp"
    cp "$home"/conf/log4j*.properties "$conf/" 2>/dev/null || true
    cp "$home"/conf/logback*.xml "$conf/" 2>/dev/null || true
    port=$(free_port)
    rpc=$(free_port)
    while [[ "$rpc" == "$port" ]]; do rpc=$(free_port); done
    # JVM options needed on Java 17 come from the distribution's own default config.
    local jopts
    jopts=$(sed -n 's/^ *all: *\(--add-.*\)$/\1/p' "$home/conf/config.yaml" | head -n1)
    cat > "$conf/config.yaml" <<YAML
# Written by scripts/flink/cluster.sh for a throw-away test cluster.
env:
  java:
    opts:
      all: ${jopts}
  log:
    dir: ${WORKDIR}/log
  pid:
    dir: ${WORKDIR}
jobmanager:
  bind-host: 127.0.0.1
  rpc:
    address: 127.0.0.1
    port: ${rpc}
  memory:
    process:
      size: 1024m
  execution:
    failover-strategy: region
taskmanager:
  bind-host: 127.0.0.1
  host: 127.0.0.1
  numberOfTaskSlots: 4
  memory:
    process:
      size: 2048m
    network:
      min: 64m
      max: 64m
parallelism:
  default: 2
rest:
  address: 127.0.0.1
  bind-address: 127.0.0.1
  port: ${port}
blob:
  server:
    port: "0"
io:
  tmp:
    dirs: ${WORKDIR}/tmp
execution:
  checkpointing:
    dir: file://${WORKDIR}/checkpoints
    savepoint-dir: file://${WORKDIR}/savepoints
state:
  checkpoints:
    dir: file://${WORKDIR}/checkpoints
  savepoints:
    dir: file://${WORKDIR}/savepoints
web:
  upload:
    dir: ${WORKDIR}/tmp
YAML
    url="http://127.0.0.1:$port"
    cat > "$WORKDIR/env" <<ENV
FLINK_VERSION=$VERSION
FLINK_HOME=$home
FLINK_CONF_DIR=$conf
FLINK_LOG_DIR=$WORKDIR/log
FLINK_PID_DIR=$WORKDIR
REST_URL=$url
ENV
    export FLINK_HOME="$home" FLINK_CONF_DIR="$conf" FLINK_LOG_DIR="$WORKDIR/log" FLINK_PID_DIR="$WORKDIR"
    log "starting JobManager (rest port $port, rpc port $rpc)"
    "$home/bin/jobmanager.sh" start >"$WORKDIR/log/start-jobmanager.out" 2>&1
    log "starting TaskManager"
    "$home/bin/taskmanager.sh" start >"$WORKDIR/log/start-taskmanager.out" 2>&1
    # flink-daemon.sh writes one pid file per daemon type in FLINK_PID_DIR.
    : > "$WORKDIR/pids"
    local f
    for f in "$WORKDIR"/flink-*-standalonesession.pid "$WORKDIR"/flink-*-taskexecutor.pid; do
        [[ -f "$f" ]] && cat "$f" >> "$WORKDIR/pids"
    done
    if [[ ! -s "$WORKDIR/pids" ]]; then
        log "no daemon pid files found in $WORKDIR"; cat "$WORKDIR"/log/start-*.out >&2; exit 1
    fi
    echo "$url" > "$WORKDIR/rest_url"
    local timeout=${SP_FLINK_START_TIMEOUT:-90} start=$SECONDS tms
    while :; do
        tms=$(curl -sf --max-time 3 "$url/overview" 2>/dev/null \
              | "$PY" -c 'import json,sys; print(json.load(sys.stdin).get("taskmanagers",0))' 2>/dev/null || echo 0)
        [[ "$tms" -ge 1 ]] && break
        if (( SECONDS - start > timeout )); then
            log "cluster did not come up within ${timeout}s; logs in $WORKDIR/log"
            tail -n 30 "$WORKDIR"/log/*standalonesession*.log >&2 2>/dev/null || true
            do_stop
            exit 1
        fi
        for p in $(cat "$WORKDIR/pids"); do
            if ! kill -0 "$p" 2>/dev/null; then
                log "daemon $p died; logs in $WORKDIR/log"
                tail -n 30 "$WORKDIR"/log/*.out "$WORKDIR"/log/*.log >&2 2>/dev/null || true
                do_stop
                exit 1
            fi
        done
        sleep 1
    done
    log "up after $((SECONDS - start))s with $tms TaskManager(s): $url"
    echo "$url"
}

case "$ACTION" in
    start) do_start ;;
    stop) do_stop ;;
    *) echo "usage: cluster.sh start|stop VERSION WORKDIR" >&2; exit 2 ;;
esac
