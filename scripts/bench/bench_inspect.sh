#!/usr/bin/env bash
# Time and peak memory of `sp inspect` and `sp inspect --json` on a large
# retained incremental checkpoint `_metadata` (written by gen-snapshot:
# hundreds of operators at parallelism 256, RocksDB incremental handles with
# ~20 shared files each), next to `sha256sum` of the same file in the same run.
#
#   scripts/bench/bench_inspect.sh [OPERATORS] [SHARED_FILES]   (default 360 20: ~260 MB)
#
# Goals: inspect <= 1.5x sha256sum, inspect --json <= 3x, peak memory < 3x the file.
set -euo pipefail
cd "$(dirname "$0")/../.."
ops=${1:-360}
shared=${2:-20}
build=build-bench
[ -d "$build" ] || meson setup "$build" --buildtype=release >/dev/null
ninja -C "$build" cli/sp tests/gen-snapshot >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
snap=$("$build/tests/gen-snapshot" --out "$work/ckpt" --kind checkpoint --no-data \
        --operators "$ops" --parallelism 256 --max-parallelism 4096 --shared-files "$shared" 2>/dev/null)
python3 scripts/bench/measure.py "$snap/_metadata" "$build/cli/sp"
