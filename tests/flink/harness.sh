# harness.sh - what every real-Flink test script shares; sourced, not run:
#
#   HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
#   NAME=test_x            # prefix of log lines and of the temp dir
#   source "$HERE/harness.sh"
#
# It skips the whole script (TAP "1..0 # SKIP why", exit 0) when SP_SKIP_FLINK=1, when java,
# mvn, curl or python are missing, when no Flink version is listed, or when a Flink
# distribution or the test job's Maven artifacts cannot be downloaded (first run only; later
# runs use the cache).  It sets
#   ROOT SCRIPTS PY   the repository, scripts/flink, the python to use
#   SP_BIN HAVE_SP    the sp binary (SP_BIN, default build/cli/sp) and whether it exists
#   VERSIONS          Flink versions (SP_FLINK_VERSIONS, else scripts/flink/versions.txt)
#   JARS[v]           the test job's jar for Flink v ("" when its build failed: BUILD_FAILED=1)
#   TMPROOT           a temp dir, removed at exit unless a check failed or SP_FLINK_KEEP=1
#   CUR_VERSION CUR_WORK  set them while a cluster runs: it is stopped (by its PID file) at exit
# and defines log, skip_all, ok, not_ok, skip and check (TAP lines; N counts, FAILS failures).
# Environment: SP_BIN, SP_SKIP_FLINK, SP_FLINK_VERSIONS, SP_FLINK_CACHE (scripts/flink), SP_FLINK_KEEP.

ROOT=$(cd "$HERE/../.." && pwd)
SCRIPTS="$ROOT/scripts/flink"
PY=${PYTHON:-python3}

log() { echo "$NAME: $*" >&2; }
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

if [[ -n "${SP_FLINK_VERSIONS:-}" ]]; then
    read -r -a VERSIONS <<<"$SP_FLINK_VERSIONS"
else
    mapfile -t VERSIONS < <(grep -v '^\s*#' "$SCRIPTS/versions.txt" | awk 'NF {print $1}')
fi
[[ ${#VERSIONS[@]} -gt 0 ]] || skip_all "no Flink versions listed"

# Flink distributions and the Maven build of the test job: unavailable downloads mean SKIP,
# a job that does not compile means failure (BUILD_FAILED).
declare -A JARS
BUILD_FAILED=""
_build_log=$(mktemp "${TMPDIR:-/tmp}/$NAME-build.XXXXXX")
for v in "${VERSIONS[@]}"; do
    "$SCRIPTS/install-flink.sh" "$v" >/dev/null || { rm -f "$_build_log"; skip_all "Flink $v download/install unavailable"; }
    if ! JARS[$v]=$("$SCRIPTS/build-job.sh" "$v" 2>"$_build_log"); then
        cat "$_build_log" >&2
        if grep -qiE 'could not (resolve|transfer)|unknown host|connect|offline' "$_build_log"; then
            rm -f "$_build_log"
            skip_all "Maven artifacts for Flink $v unavailable"
        fi
        JARS[$v]=""
        BUILD_FAILED=1
    fi
done
rm -f "$_build_log"

TMPROOT=$(mktemp -d "${TMPDIR:-/tmp}/$NAME.XXXXXX")
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
