#!/usr/bin/env bash
# Storage operations of sp next to the plain tools, on the same data in the
# same run (release build in build-bench, data written by gen-snapshot in a
# temporary directory under /tmp, removed at the end):
#
#   1. sp relocate SNAP DST           vs  cp -r SNAP DST2        (~2 GB in ~2000 files; --jobs 1/4/8)
#   2. sp relocate --move SNAP DST    vs  mv SNAP DST            (same file system; 2 GB vs 20 MB: constant time?)
#   3. sp dispose SNAP                vs  rm -rf SNAP            (10 000 small files)
#   4. sp relocate SNAP out.tar.zst   vs  tar -I 'zstd -T0' -cf out2.tar.zst -C SNAP .   (2 GB; output sizes)
#
#   scripts/bench/bench_storage.sh [--total-mb MB] [--files N] [--dispose-files N] [--reps-big N] [--reps-small N]
#                                  [--only copy,move,dispose,archive]
#                                  (default 2000 MB in 2000 files, 10000 files for dispose, best of 2 / best of 3,
#                                  every case; --only runs the cases named and generates only their data)
#   SP_BENCH_BUILD=DIR             build directory to use (default build-bench; set up as a release build
#                                  when missing)
#
# The page cache is dropped before every copy and archive run when
# /proc/sys/vm/drop_caches is writable (else every run is warm, and the output
# says so); move and dispose runs are warm.  With less than 8 GB free beside
# /tmp the data is scaled down, with a message.  Goals: every ratio
# sp / plain tool <= 1.0 (best wall time), and --move constant time (2 GB
# within 1.5x of 20 MB in as many files).  Runs are interleaved; next to wall
# time each line shows the CPU time (user + sys, with children) and its ratio,
# which says more than wall time when the machine is busy (the output warns
# when the load average exceeds the core count).  Prints a PASS / MISS table;
# exits 0 unless a command fails.  About 5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${SP_BENCH_BUILD:-build-bench}
[ -d "$build" ] || meson setup "$build" --buildtype=release >/dev/null
ninja -C "$build" cli/sp tests/gen-snapshot >/dev/null
if ! command -v zstd >/dev/null; then
    echo "zstd not found: installing it (apt-get install -y zstd)" >&2
    apt-get install -y zstd >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y zstd >/dev/null; }
fi
work=$(mktemp -d /tmp/sp-bench-storage.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 scripts/bench/bench_storage.py --sp "$build/cli/sp" --gen "$build/tests/gen-snapshot" --work "$work" "$@"
