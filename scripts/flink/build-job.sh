#!/usr/bin/env bash
# Build the stateful test job (tests/flink/job) against Flink VERSION; print the jar path.
# The jar is cached under ${SP_FLINK_CACHE:-$HOME/.cache/sp-flink}/job/VERSION-<source hash>/,
# so a rebuild happens only when the job sources change. Maven artifacts live in ~/.m2
# (the first build downloads them; later builds need no network).
set -euo pipefail
VERSION=${1:?usage: build-job.sh VERSION}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
JOBDIR=$(cd "$HERE/../../tests/flink/job" && pwd)
CACHE=${SP_FLINK_CACHE:-$HOME/.cache/sp-flink}
HASH=$(cd "$JOBDIR" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
OUT="$CACHE/job/$VERSION-$HASH"
JAR="$OUT/sp-flink-test-job.jar"
if [[ ! -f "$JAR" ]]; then
    echo "build-job: building the test job for Flink $VERSION" >&2
    mkdir -p "$OUT"
    BUILD="$OUT/build"
    if ! mvn -B -Dstyle.color=never -f "$JOBDIR/pom.xml" -Dflink.version="$VERSION" \
            -Dsp.build.dir="$BUILD" package >"$OUT/maven.log" 2>&1; then
        tail -n 40 "$OUT/maven.log" >&2
        echo "build-job: maven build failed (log: $OUT/maven.log)" >&2
        exit 1
    fi
    cp "$BUILD/sp-flink-test-job.jar" "$JAR.tmp"
    mv "$JAR.tmp" "$JAR"
    rm -rf "$BUILD"
fi
echo "$JAR"
