#!/usr/bin/env bash
# The main job on a fresh Debian machine: install, build, write a sample
# savepoint with sp's own encoder, and inspect and verify it.
#   scripts/demo.sh [SNAPSHOT]   (default: the shipped sample)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
snap="${1:-tests/data/sample-savepoint}"
echo "\$ sp inspect $snap"
build/cli/sp inspect "$snap"
echo
echo "\$ sp verify $snap"
build/cli/sp verify "$snap"
