"""Renders `flowscale simulate --compare ... --json` outputs (JSON documents read from stdin one
after the other) as the control-quality tables of docs/simulate.md. Documents of the same job
are one group, their runs in order; the cost column compares with the group's first BALANCED run.
A document made with `--oracle` adds the group's `oracle` row (the clairvoyant single rescale,
docs/oracle.md).

The second table checks, for every run with the new options (a mode ending in NEW, i.e. run with
scaling.skew-aware and scaling.restart-aware), the goals of the control-quality measurement:
rescales no more than the best built-in mode's, at most 2 rescales per load change (the oracle's
load changes), p99 lag at most 1.5x and cost at most 1.1x the oracle's, and on jobs without key
skew (no skewed key distribution in the job file) lag and cost within 2% of BALANCED.

`control-quality.py relabel SUFFIX [JOB]` instead copies the documents from stdin to stdout with
SUFFIX appended to every run's mode (e.g. a run with `--set scaling.skew-aware=true`) and, if
JOB is given, the job renamed to JOB (the demo fleet's name for a job file)."""

import json
import os
import sys
import tomllib

NEW = " + new options"
BUILT_IN = ("BALANCED", "EVENLY_SPREAD", "ADVANCED")
RESCALES_PER_CHANGE = 2.0
LAG_VS_ORACLE = 1.5
COST_VS_ORACLE = 1.1
NO_SKEW_TOLERANCE = 0.02


def documents(text):
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        doc, pos = decoder.raw_decode(text, pos)
        yield doc


def relabel(suffix, job=None):
    for doc in documents(sys.stdin.read()):
        for run in doc["runs"]:
            run["mode"] = f"{run['mode']}{suffix}"
        if job:
            doc["name"] = job
        print(json.dumps(doc))


def skewed_distribution(keys):
    """Whether a `keys` table of a job file spreads load unevenly over the key groups."""
    if not isinstance(keys, dict):
        return False
    kind = keys.get("kind", "uniform")
    if kind == "zipf":
        return keys.get("exponent", 0) > 0
    if kind == "weights":
        return len(set(keys.get("weights", []))) > 1
    return False


def key_skew(job_file):
    """Whether the job file declares skewed keys (job-wide `[keys]` or an edge's `keys`)."""
    with open(job_file, "rb") as f:
        spec = tomllib.load(f)
    tables = [spec.get("keys")] + [e.get("keys") for e in spec.get("edges", [])]
    return any(skewed_distribution(t) for t in tables)


def grouped(docs):
    """Per job, in first-seen order: its runs, its oracle (or None) and its job file."""
    groups = {}
    for doc in docs:
        job = doc.get("name") or os.path.splitext(os.path.basename(doc["job"]))[0]
        group = groups.setdefault(job, {"runs": [], "oracle": None, "file": doc["job"]})
        group["runs"].extend(doc["runs"])
        if doc.get("oracle") and group["oracle"] is None:
            group["oracle"] = doc["oracle"]
    return groups


def ratio(value, base):
    """value / base; equal zeros are 1, anything over a zero base is infinite."""
    if base == 0:
        return 1.0 if value == 0 else float("inf")
    return value / base


def check(runs, oracle, skewed):
    """The goal rows of one job: (mode, [(goal, passed, figure)]) per run with the new options.
    `runs` are (mode, summary) pairs; `oracle` is the `oracle` object of `--json --oracle`."""
    built_in = [s["rescales"] for m, s in runs if m in BUILT_IN]
    best = min(built_in) if built_in else None
    balanced = next((s for m, s in runs if m == "BALANCED"), None)
    os_ = oracle["summary"] if oracle else None
    changes = oracle["load_changes"] if oracle else 0
    rows = []
    for mode, s in runs:
        if not mode.endswith(NEW):
            continue
        goals = []
        if best is not None:
            goals.append(("rescales", s["rescales"] <= best, f"{s['rescales']} vs {best}"))
        if os_ and changes:
            per = s["rescales"] / changes
            goals.append(("per change", per <= RESCALES_PER_CHANGE,
                          f"{s['rescales']}/{changes} = {per:.2f}"))
        if os_:
            # Lag is compared at the precision it is printed with (0.1 s).
            lag, olag = round(s["p99_lag_s"], 1), round(os_["p99_lag_s"], 1)
            r = ratio(lag, olag)
            goals.append(("lag", r <= LAG_VS_ORACLE, f"{lag:.1f}/{olag:.1f} = {fmt(r)}"))
            r = ratio(s["subtask_seconds"], os_["subtask_seconds"])
            goals.append(("cost", r <= COST_VS_ORACLE, f"{fmt(r)}"))
        if not skewed and balanced:
            lag, blag = round(s["p99_lag_s"], 1), round(balanced["p99_lag_s"], 1)
            dl = ratio(lag, blag) - 1
            dc = ratio(s["subtask_seconds"], balanced["subtask_seconds"]) - 1
            ok = abs(dl) <= NO_SKEW_TOLERANCE and abs(dc) <= NO_SKEW_TOLERANCE
            goals.append(("vs BALANCED", ok, f"lag {pct(dl)}, cost {pct(dc)}"))
        rows.append((mode, goals))
    return rows


def fmt(r):
    return "∞" if r == float("inf") else f"{r:.2f}x"


def pct(d):
    return "∞" if d == float("inf") else f"{d * 100:+.1f}%"


GOALS = ("rescales", "per change", "lag", "cost", "vs BALANCED")


def main():
    if len(sys.argv) in (3, 4) and sys.argv[1] == "relabel":
        relabel(sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)
        return
    groups = grouped(documents(sys.stdin.read()))
    print("| job | mode | p99 lag (s) | cost (subtask-s) | cost vs BALANCED | rescales | skew |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for job, group in groups.items():
        runs = group["runs"]
        base = next(
            (r["summary"]["subtask_seconds"] for r in runs
             if r["mode"] == "BALANCED" and r.get("summary")),
            None,
        )
        rows = [(r["mode"], r.get("summary"), r.get("error")) for r in runs]
        if group["oracle"]:
            rows.append(("oracle", group["oracle"]["summary"], None))
        for mode, s, error in rows:
            if not s:
                print(f"| {job} | {mode} | error: {error} | | | | |")
                continue
            cost = s["subtask_seconds"]
            delta = f"{(cost / base - 1) * 100:+.1f}%" if base else "-"
            print(
                f"| {job} | {mode} | {s['p99_lag_s']:.1f} | {cost:.0f} | {delta} "
                f"| {s['rescales']} | {s['skew']:.3f} |"
            )
    print()
    print("| job | skewed keys | mode | rescales ≤ best built-in "
          "| ≤ 2 per load change | p99 lag ≤ 1.5x oracle | cost ≤ 1.1x oracle "
          "| no skew: within 2% of BALANCED |")
    print("|---|---|---|---|---|---|---|---|")
    for job, group in groups.items():
        skewed = key_skew(group["file"])
        runs = [(r["mode"], r["summary"]) for r in group["runs"] if r.get("summary")]
        for mode, goals in check(runs, group["oracle"], skewed):
            cells = dict((g, f"{'✓' if ok else '✗'} {fig}") for g, ok, fig in goals)
            print(f"| {job} | {'yes' if skewed else 'no'} | {mode} | "
                  + " | ".join(cells.get(g, "-") for g in GOALS) + " |")


if __name__ == "__main__":
    main()
