#!/usr/bin/env bash
# The control-quality tables of docs/simulate.md: every example job under BALANCED, EVENLY_SPREAD
# and load-align, with the oracle (the clairvoyant single rescale, docs/oracle.md) as yardstick;
# then BALANCED and load-align with scaling.skew-aware = true (docs/skew-aware.md), and with the
# new options (scaling.skew-aware and scaling.restart-aware); then the demo fleet's `orders` job
# as examples/fleet.toml runs it (ADVANCED, the fleet's defaults, two days). A second table checks
# the new options' rows against the goals (examples/control-quality.py says which).
#
#   examples/control-quality.sh            # builds flowscale and load-align (release) first
#
# Extra arguments go to every `flowscale simulate` of the example jobs (e.g. --duration 4h).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet -p flowscale -p load-align
plugins=$(mktemp -d)
trap 'rm -rf "$plugins"' EXIT
chmod 700 "$plugins"
install -m 0755 target/release/libload_align.so "$plugins/"
simulate() { target/release/flowscale simulate "$@" --plugins "$plugins" --json; }
label() { python3 examples/control-quality.py relabel "$@"; }
new=(--set scaling.skew-aware=true --set scaling.restart-aware=true)
# The demo fleet's `orders` job: its file, mode, mode keys, [defaults] and duration.
orders=(--duration 2d --set metrics.window=5min --set stabilization.interval=1min
    --set scaling-cooldown-period=5min --set scale-down.interval=30min
    --set "scaling.alignment.mode.ADVANCED.scale-up=WITHIN_RANGE:DIVISOR, ABOVE_TARGET:LOAD_REDUCING")

{
    for job in examples/jobs/*.toml; do
        simulate "$job" --compare BALANCED,EVENLY_SPREAD,load-align --oracle "$@"
        simulate "$job" --compare BALANCED,load-align --set scaling.skew-aware=true "$@" \
            | label " + skew-aware"
        simulate "$job" --compare BALANCED,load-align "${new[@]}" "$@" | label " + new options"
    done
    simulate examples/jobs/diurnal.toml --compare ADVANCED,BALANCED,EVENLY_SPREAD,load-align \
        --oracle "${orders[@]}" | label "" orders
    simulate examples/jobs/diurnal.toml --compare ADVANCED,BALANCED,load-align "${orders[@]}" \
        "${new[@]}" | label " + new options" orders
} | python3 examples/control-quality.py
