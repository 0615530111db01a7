"""Measures how the jobs of examples/shared-cluster.toml share their cluster's slots.

Runs the fleet three times with the given flowscale binary and prints the table in
docs/running.md:
- `arbiter`: the fleet as it is, its cluster's slots shared through the cluster's arbiter;
- `alone`: only the priority jobs (`scaling.priority` > 0), on the same cluster;
- `no arbiter`: the whole fleet with `--no-arbiter`: every job decides alone, as if it had
  every slot, and runs on what the cluster gives it.

For each run: the p99 lag of each priority job, the mean p99 lag of the other jobs, and the
most slots in use at once (never more than the cluster's).

    python3 examples/slot-sharing.py target/release/flowscale [examples/shared-cluster.toml]
"""

import json
import os
import re
import subprocess
import sys
import tempfile


def run(binary, fleet, *flags):
    # The jobs of a simulated cluster step in rounds, in a fixed order within each round: the
    # table is the same on every run and machine, whatever the number of workers.
    out = subprocess.run(
        [binary, "run", fleet, "--json", *flags],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    jobs = {}
    for line in out.splitlines():
        doc = json.loads(line)
        if doc.get("type") == "summary":
            jobs[doc["data"]["job"]] = doc["data"]
    return jobs


def priority_jobs(text):
    """The names of the jobs whose `scaling.priority` is above 0, in file order."""
    names = []
    for block in re.split(r"^\[\[jobs\]\]\s*$", text, flags=re.M)[1:]:
        name = re.search(r'^name\s*=\s*"([^"]+)"', block, flags=re.M)
        prio = re.search(r'^"?scaling\.priority"?\s*=\s*(-?\d+)', block, flags=re.M)
        if name and prio and int(prio.group(1)) > 0:
            names.append(name.group(1))
    return names


def alone(text, keep, base):
    """The fleet with only the jobs in `keep`, its relative job paths made absolute."""
    head, *blocks = re.split(r"^(?=\[\[jobs\]\]\s*$)", text, flags=re.M)
    kept = [
        b for b in blocks
        if re.search(r'^name\s*=\s*"([^"]+)"', b, flags=re.M).group(1) in keep
    ]
    fixed = re.sub(
        r'^job\s*=\s*"([^"]+)"',
        lambda m: f'job = "{os.path.join(base, m.group(1))}"',
        "".join(kept),
        flags=re.M,
    )
    return head + fixed


def main():
    binary = sys.argv[1]
    fleet = sys.argv[2] if len(sys.argv) > 2 else "examples/shared-cluster.toml"
    with open(fleet) as f:
        text = f.read()
    prio = priority_jobs(text)
    base = os.path.dirname(os.path.abspath(fleet))
    with tempfile.TemporaryDirectory() as tmp:
        alone_fleet = os.path.join(tmp, "alone.toml")
        with open(alone_fleet, "w") as f:
            f.write(alone(text, set(prio), base))
        runs = [
            ("arbiter", run(binary, fleet)),
            ("alone", run(binary, alone_fleet)),
            ("no arbiter", run(binary, fleet, "--no-arbiter")),
        ]
    header = " | ".join(f"{j} p99 lag (s)" for j in prio)
    print(f"| run | {header} | other jobs' p99 lag (s, mean) | max slots in use |")
    print("|---|" + "---:|" * (len(prio) + 2))
    alone_lags = {j: runs[1][1][j]["summary"]["p99_lag_s"] for j in prio}
    for label, jobs in runs:
        cells = []
        for j in prio:
            lag = jobs[j]["summary"]["p99_lag_s"]
            ref = alone_lags[j]
            delta = f" ({(lag / ref - 1) * 100:+.0f}%)" if ref > 0 and label != "alone" else ""
            cells.append(f"{lag:.1f}{delta}")
        others = [d["summary"]["p99_lag_s"] for n, d in jobs.items() if n not in prio]
        mean = f"{sum(others) / len(others):.1f}" if others else "-"
        slots = [d["slots"] for d in jobs.values() if d.get("slots")]
        used = max((s["max_in_use"] for s in slots), default=0)
        total = slots[0]["slots"] if slots else 0
        print(f"| {label} | {' | '.join(cells)} | {mean} | {used} of {total} |")


if __name__ == "__main__":
    main()
