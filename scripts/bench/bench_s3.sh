#!/usr/bin/env bash
# sp's S3 transfers next to the AWS CLI, against the same local S3 server in
# the same run (s3rver 3 from npm on 127.0.0.1, a release build of sp in
# build-bench, a snapshot written by gen-snapshot under /tmp; all removed at
# the end):
#
#   1. sp relocate DIR s3://bench/sp-N --jobs J   vs  aws s3 cp --recursive DIR s3://bench/aws-N
#   2. sp dispose s3://bench/sp-N                 vs  aws s3 rm --recursive s3://bench/aws-N
#
#   scripts/bench/bench_s3.sh [--total-mb MB] [--files N] [--reps N] [--jobs J]
#                             (default ~1000 MB in ~2000 files, best of 2, J = 10: the AWS CLI's
#                              default max_concurrent_requests)
#
# Needs node + npm (s3rver is installed into ~/.cache/sp-s3rver) and the AWS
# CLI (`aws` on PATH, else the Debian package awscli is installed).  Runs
# are interleaved; the best wall time of each is compared.  Goal: both ratios
# sp / aws <= 1.0.  Prints a PASS / MISS table; exits 0 unless a command fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
total_mb=1000 files=2000 reps=2 jobs=10
while [ $# -gt 0 ]; do
    case "$1" in
        --total-mb) total_mb=$2; shift 2 ;;
        --files) files=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        *) echo "usage: $0 [--total-mb MB] [--files N] [--reps N] [--jobs J]" >&2; exit 2 ;;
    esac
done
build=build-bench
[ -d "$build" ] || meson setup "$build" --buildtype=release >/dev/null
ninja -C "$build" cli/sp tests/gen-snapshot >/dev/null
if ! command -v aws >/dev/null; then
    echo "aws not found: installing the Debian package awscli" >&2
    apt-get install -y awscli >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y awscli >/dev/null; }
fi
cache=${SP_S3RVER_CACHE:-$HOME/.cache/sp-s3rver}
if [ ! -x "$cache/node_modules/.bin/s3rver" ]; then
    command -v npm >/dev/null || { echo "npm not found (apt-get install nodejs npm)" >&2; exit 1; }
    mkdir -p "$cache"
    [ -f "$cache/package.json" ] || echo '{"name": "sp-s3rver", "private": true}' > "$cache/package.json"
    (cd "$cache" && npm install --no-audit --no-fund --loglevel=error s3rver@3 >/dev/null)
fi
python3 tests/s3/s3rver_fix.py "$cache"   # the same server as the S3 test suite's (a PUT waits for its file)
work=$(mktemp -d /tmp/sp-bench-s3.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# s3rver 3 makes continuation tokens with DES: Node >= 17 has it only in OpenSSL's legacy provider
NODE_OPTIONS="${NODE_OPTIONS:-} --openssl-legacy-provider" setsid "$cache/node_modules/.bin/s3rver" \
    --directory "$work/s3" --port "$port" --address 127.0.0.1 --silent --configure-bucket bench \
    > "$work/s3rver.log" 2>&1 &
server=$!
trap 'kill -- -$server 2>/dev/null || kill $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
    grep -q listening "$work/s3rver.log" 2>/dev/null && break
    sleep 0.1
done

# files = operators x parallelism; gen-snapshot's --file-size is the mean size
ops=20
par=$(( (files + ops - 1) / ops ))
size=$(( total_mb * 1024 * 1024 / (ops * par) ))
"$build/tests/gen-snapshot" --out "$work/snap" --operators "$ops" --parallelism "$par" --file-size "$size" >/dev/null

export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
export AWS_CONFIG_FILE="$work/aws-config" AWS_SHARED_CREDENTIALS_FILE="$work/aws-credentials"
printf '[default]\ns3 =\n    max_concurrent_requests = %s\n' "$jobs" > "$AWS_CONFIG_FILE"
: > "$AWS_SHARED_CREDENTIALS_FILE"

python3 - "$build/cli/sp" "$work/snap" "$reps" "$jobs" "$AWS_ENDPOINT_URL" <<'EOF'
import os, subprocess, sys, time
sp, snap, reps, jobs, endpoint = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
nfiles = sum(len(f) for _, _, f in os.walk(snap))
nbytes = sum(os.path.getsize(os.path.join(d, x)) for d, _, f in os.walk(snap) for x in f)
print("snapshot: %d files, %.1f MiB; s3rver at %s; --jobs %s / max_concurrent_requests %s; best of %d"
      % (nfiles, nbytes / 1048576, endpoint, jobs, jobs, reps), flush=True)
aws = ["aws", "--endpoint-url", endpoint, "--only-show-errors"]

def run(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t = time.perf_counter() - t0
    if p.returncode:
        sys.exit("FAILED (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr.decode()[-2000:]))
    return t

times = {k: [] for k in ("sp relocate", "aws s3 cp", "sp dispose", "aws s3 rm")}
for i in range(reps):
    times["sp relocate"].append(run([sp, "relocate", "--jobs", jobs, snap, "s3://bench/sp-%d" % i]))
    times["aws s3 cp"].append(run(aws + ["s3", "cp", "--recursive", snap, "s3://bench/aws-%d/" % i]))
    times["sp dispose"].append(run([sp, "dispose", "s3://bench/sp-%d" % i]))
    times["aws s3 rm"].append(run(aws + ["s3", "rm", "--recursive", "s3://bench/aws-%d/" % i]))
    print("  run %d: " % (i + 1) + ", ".join("%s %.2f s" % (k, v[-1]) for k, v in times.items()), flush=True)
print()
print("%-42s %10s %10s %7s  %s" % ("", "sp", "aws", "ratio", "goal <= 1.0"))
rows = [("relocate DIR s3://  vs  aws s3 cp --recursive", "sp relocate", "aws s3 cp"),
        ("dispose s3://  vs  aws s3 rm --recursive", "sp dispose", "aws s3 rm")]
for name, a, b in rows:
    ta, tb = min(times[a]), min(times[b])
    print("%-42s %9.2fs %9.2fs %7.2f  %s" % (name, ta, tb, ta / tb, "PASS" if ta / tb <= 1.0 else "MISS"))
print("(%.0f MiB/s for sp relocate)" % (nbytes / 1048576 / min(times["sp relocate"])))
EOF
