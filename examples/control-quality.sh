#!/usr/bin/env bash
# The control-quality table of docs/simulate.md: every example job under BALANCED, EVENLY_SPREAD and
# load-align, then BALANCED and load-align with scaling.skew-aware = true (docs/skew-aware.md), on
# the same seeded workload, printed as a Markdown table.
#
#   examples/control-quality.sh            # builds flowscale and load-align (release) first
#
# Extra arguments go to every `flowscale simulate` (e.g. --duration 4h).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet -p flowscale -p load-align
plugins=$(mktemp -d)
trap 'rm -rf "$plugins"' EXIT
chmod 700 "$plugins"
install -m 0755 target/release/libload_align.so "$plugins/"

for job in examples/jobs/*.toml; do
    target/release/flowscale simulate "$job" --compare BALANCED,EVENLY_SPREAD,load-align \
        --plugins "$plugins" --json "$@"
    target/release/flowscale simulate "$job" --compare BALANCED,load-align \
        --set scaling.skew-aware=true --plugins "$plugins" --json "$@" \
        | python3 examples/control-quality.py relabel " + skew-aware"
done | python3 examples/control-quality.py
