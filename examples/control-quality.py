"""Renders `flowscale simulate --compare ... --json` outputs (JSON documents read from stdin one
after the other) as the control-quality table of docs/simulate.md. Documents of the same job
are one group, their runs in order; the cost column compares with the group's first BALANCED run.

`control-quality.py relabel SUFFIX` instead copies the documents from stdin to stdout with
SUFFIX appended to every run's mode (e.g. a run with `--set scaling.skew-aware=true`)."""

import json
import os
import sys


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


def relabel(suffix):
    for doc in documents(sys.stdin.read()):
        for run in doc["runs"]:
            run["mode"] = f"{run['mode']}{suffix}"
        print(json.dumps(doc))


def grouped(docs):
    """The runs of each job, the jobs in their first document's order."""
    groups = {}
    for doc in docs:
        job = os.path.splitext(os.path.basename(doc["job"]))[0]
        groups.setdefault(job, []).extend(doc["runs"])
    return groups.items()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "relabel":
        relabel(sys.argv[2])
        return
    print("| job | mode | p99 lag (s) | cost (subtask-s) | cost vs BALANCED | rescales | skew |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for job, runs in grouped(documents(sys.stdin.read())):
        base = next(
            (r["summary"]["subtask_seconds"] for r in runs
             if r["mode"] == "BALANCED" and r.get("summary")),
            None,
        )
        for run in runs:
            s = run.get("summary")
            if not s:
                print(f"| {job} | {run['mode']} | error: {run.get('error')} | | | | |")
                continue
            cost = s["subtask_seconds"]
            delta = f"{(cost / base - 1) * 100:+.1f}%" if base else "-"
            print(
                f"| {job} | {run['mode']} | {s['p99_lag_s']:.1f} | {cost:.0f} | {delta} "
                f"| {s['rescales']} | {s['skew']:.3f} |"
            )


if __name__ == "__main__":
    main()
