#!/usr/bin/env bash
# The main job on a fresh Debian machine: install, build, write a sample
# savepoint with sp's own encoder, and inspect and verify it.
#   scripts/demo.sh [SNAPSHOT]   (default: the shipped sample)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# (re)configure when there is no usable build directory; show meson's errors if it fails
if [ ! -f build/build.ninja ]; then
    rm -rf build
    meson setup build >/tmp/sp-demo-setup.log 2>&1 || { cat /tmp/sp-demo-setup.log >&2; exit 1; }
fi
ninja -C build >/dev/null || { ninja -C build >&2; exit 1; }
snap="${1:-tests/data/sample-savepoint}"
echo "\$ sp inspect $snap"
build/cli/sp inspect "$snap"
echo
echo "\$ sp verify $snap"
build/cli/sp verify "$snap"
