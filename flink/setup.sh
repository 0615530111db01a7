#!/usr/bin/env bash
# Fetches the Apache Flink 2.3.0 jars into a cache outside the repository (idempotent).
#
# The jars come from the PyPI wheel `apache-flink-libraries` (it carries flink-dist, the log4j
# jars and bash-java-utils.jar), fetched with `pip download --no-deps`: no Flink distribution
# tarball mirror is needed, only a Python package index. Only the needed jars are unpacked.
#
# Layout of the cache (${FLOWSCALE_CACHE:-$HOME/.cache/flowscale}/flink-2.3.0):
#   wheel/apache_flink_libraries-2.3.0-*.whl   the downloaded wheel
#   lib/flink-dist-2.3.0.jar, lib/log4j-*.jar   the class path of the cluster and of job builds
#   bin/bash-java-utils.jar                     BashJavaUtils (JVM flags from config.yaml)
#
# Prints the Flink home (the directory holding lib/ and bin/) on its last line of stdout.
set -euo pipefail

FLINK_VERSION=2.3.0
CACHE="${FLOWSCALE_CACHE:-$HOME/.cache/flowscale}"
HOME_DIR="$CACHE/flink-$FLINK_VERSION"
WHEEL_DIR="$HOME_DIR/wheel"
DONE_MARK="$HOME_DIR/.complete"

if [[ -f "$DONE_MARK" ]]; then
    echo "$HOME_DIR"
    exit 0
fi

mkdir -p "$WHEEL_DIR"
# One fetch at a time: a second caller waits, then finds the work done.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$HOME_DIR/.lock"
    flock 9
    if [[ -f "$DONE_MARK" ]]; then
        echo "$HOME_DIR"
        exit 0
    fi
fi
# pip, else pip3, else the interpreter's module.
pip_cmd=("${PIP:-pip}")
if ! command -v "${pip_cmd[0]}" >/dev/null 2>&1; then
    if command -v pip3 >/dev/null 2>&1; then pip_cmd=(pip3); else pip_cmd=(python3 -m pip); fi
fi

find_wheel() {
    find "$WHEEL_DIR" -maxdepth 1 -name "apache_flink_libraries-$FLINK_VERSION-*.whl" -print -quit
}

wheel=$(find_wheel)
if [[ -z "$wheel" ]]; then
    echo "setup: downloading apache-flink-libraries==$FLINK_VERSION (about 330 MB)" >&2
    "${pip_cmd[@]}" download --no-deps --only-binary=:all: --dest "$WHEEL_DIR" \
        "apache-flink-libraries==$FLINK_VERSION" >&2
    wheel=$(find_wheel)
    [[ -n "$wheel" ]] || { echo "setup: pip saved no wheel into $WHEEL_DIR" >&2; exit 1; }
fi

# Unpack into a scratch directory first so an interrupted run never leaves a half-filled lib/.
scratch=$(mktemp -d "$HOME_DIR/unpack.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/lib" "$scratch/bin"
unzip -q -j -o "$wheel" "pyflink/lib/flink-dist-$FLINK_VERSION.jar" "pyflink/lib/log4j-*.jar" -d "$scratch/lib"
unzip -q -j -o "$wheel" "pyflink/bin/bash-java-utils.jar" -d "$scratch/bin"
[[ -s "$scratch/lib/flink-dist-$FLINK_VERSION.jar" ]] || { echo "setup: flink-dist missing from the wheel" >&2; exit 1; }
[[ -s "$scratch/bin/bash-java-utils.jar" ]] || { echo "setup: bash-java-utils.jar missing" >&2; exit 1; }

rm -rf "${HOME_DIR:?}/lib" "${HOME_DIR:?}/bin"
mv "$scratch/lib" "$HOME_DIR/lib"
mv "$scratch/bin" "$HOME_DIR/bin"
touch "$DONE_MARK"
echo "$HOME_DIR"
