#!/usr/bin/env bash
# Install an Apache Flink binary distribution from PyPI into
# ${SP_FLINK_CACHE:-$HOME/.cache/sp-flink}/VERSION (outside the source tree).
#
# Usage: scripts/flink/install-flink.sh VERSION
# Prints the resulting FLINK_HOME on stdout; progress goes to stderr.
# Idempotent: returns at once when the install is complete (marker .sp-installed).
#
# Layout found on PyPI (checked for 1.20.5 and 2.3.0):
#   * apache-flink-libraries==V (sdist, ~230 MB) holds the jars only, under deps/:
#     deps/lib/*.jar (flink-dist incl. the RocksDB state backend), deps/opt/,
#     deps/plugins/, deps/bin/bash-java-utils.jar. It has NO shell scripts and NO conf/.
#   * apache-flink==V (platform wheel, ~3 MB) holds the scripts and default config
#     under pyflink/bin/ (flink, config.sh, jobmanager.sh, taskmanager.sh,
#     start-cluster.sh, ...) and pyflink/conf/ (config.yaml, log4j*.properties).
# We merge both into the tarball layout: bin/ conf/ lib/ opt/ plugins/ log/.
set -euo pipefail

VERSION=${1:?usage: install-flink.sh VERSION}
CACHE=${SP_FLINK_CACHE:-$HOME/.cache/sp-flink}
DEST="$CACHE/$VERSION"
PY=${PYTHON:-python3}

log() { echo "install-flink: $*" >&2; }

if [[ -f "$DEST/.sp-installed" ]]; then
    echo "$DEST"
    exit 0
fi

mkdir -p "$CACHE"
TMP=$(mktemp -d "$CACHE/.tmp-$VERSION.XXXXXX")
trap 'rm -rf "$TMP" "$DEST.partial"' EXIT

pipdl() { "$PY" -m pip download --no-deps --disable-pip-version-check -q "$@" >&2; }

log "downloading apache-flink-libraries==$VERSION (jars) from PyPI"
pipdl --no-binary :all: -d "$TMP/libs" "apache-flink-libraries==$VERSION"
LIBS_ARCHIVE=$(ls "$TMP"/libs/* | head -n1)

log "downloading apache-flink==$VERSION (bin scripts + conf) from PyPI"
# Any platform wheel will do: the scripts inside are the same. Prefer one for this
# interpreter, otherwise fall back to explicit CPython/manylinux tags.
if ! pipdl --only-binary :all: -d "$TMP/py" "apache-flink==$VERSION" 2>/dev/null; then
    ok=""
    for pv in 3.11 3.10 3.12 3.9 3.8; do
        abi="cp${pv/./}"
        if pipdl --only-binary :all: --platform manylinux2014_x86_64 \
                 --python-version "$pv" --implementation cp --abi "$abi" \
                 -d "$TMP/py" "apache-flink==$VERSION" 2>/dev/null; then ok=1; break; fi
    done
    [[ -n "$ok" ]] || { log "no apache-flink==$VERSION wheel could be downloaded"; exit 1; }
fi
WHEEL=$(ls "$TMP"/py/*.whl | head -n1)

log "unpacking"
mkdir -p "$TMP/libx" "$TMP/pyx"
tar -xzf "$LIBS_ARCHIVE" -C "$TMP/libx"
"$PY" -m zipfile -e "$WHEEL" "$TMP/pyx"
DEPS=$(find "$TMP/libx" -maxdepth 2 -type d -name deps | head -n1)
PYF="$TMP/pyx/pyflink"
[[ -n "$DEPS" && -d "$DEPS/lib" ]] || { log "no deps/lib in apache-flink-libraries"; exit 1; }
[[ -f "$PYF/bin/flink" && -f "$PYF/bin/config.sh" ]] || { log "no pyflink/bin/flink in apache-flink wheel"; exit 1; }
compgen -G "$DEPS/lib/flink-dist*.jar" >/dev/null || { log "no lib/flink-dist*.jar"; exit 1; }

P="$DEST.partial"
rm -rf "$P"
mkdir -p "$P/bin" "$P/conf" "$P/lib" "$P/opt" "$P/plugins" "$P/log"
cp -a "$DEPS/lib/." "$P/lib/"
[[ -d "$DEPS/opt" ]] && cp -a "$DEPS/opt/." "$P/opt/"
[[ -d "$DEPS/plugins" ]] && cp -a "$DEPS/plugins/." "$P/plugins/"
[[ -d "$DEPS/bin" ]] && cp -a "$DEPS/bin/." "$P/bin/"
cp -a "$PYF/bin/." "$P/bin/"
cp -a "$PYF/conf/." "$P/conf/"
# Wheels do not keep the executable bit.
chmod +x "$P"/bin/*
echo "$VERSION" > "$P/.sp-installed"
rm -rf "$DEST"
mv "$P" "$DEST"
log "installed Flink $VERSION in $DEST"
echo "$DEST"
