#!/usr/bin/env bash
# Install what sp needs to build and test on Debian 12 (bookworm) or later.
# Usage: scripts/install-deps.sh [--tests]
#   without --tests: compiler, meson, ninja and the product's libraries
#   with --tests:    also clang (libFuzzer, sanitizers), groff (man page
#                    checks), Java 17 and Maven (the real-Flink test job)
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
pkgs=(gcc pkg-config meson ninja-build python3
      libcjson-dev libcurl4-openssl-dev libssl-dev libarchive-dev libzstd-dev libyaml-dev)
if [ "${1:-}" = "--tests" ]; then
    pkgs+=(clang groff-base xxd curl unzip python3-pip python3-yaml openjdk-17-jdk-headless maven)
    # the S3 suite: node + npm run the test server (s3rver, from npm, installed by the test itself), openssl
    # makes its TLS certificate; awscli is the benchmark's baseline (scripts/bench/bench_s3.sh)
    pkgs+=(nodejs npm openssl awscli)
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# java/maven may come from elsewhere on the machine (e.g. a Temurin JDK): keep those
if command -v java >/dev/null && java -version 2>&1 | grep -q 'version "17'; then
    missing=("${missing[@]/openjdk-17-jdk-headless}")
fi
command -v mvn >/dev/null && missing=("${missing[@]/maven}")
# node/npm and the AWS CLI may come from elsewhere too (nvm, a node tarball, pip)
command -v node >/dev/null && command -v npm >/dev/null && missing=("${missing[@]/nodejs}") && missing=("${missing[@]/npm}")
command -v aws >/dev/null && missing=("${missing[@]/awscli}")
read -r -a missing <<< "${missing[*]}"
if [ "${#missing[@]}" -gt 0 ]; then
    echo "install-deps: apt-get install ${missing[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
