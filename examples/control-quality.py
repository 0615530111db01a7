"""Renders `flowscale simulate --compare ... --json` outputs (one JSON document per job, read
from stdin one after the other) as the control-quality table of docs/simulate.md."""

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


def main():
    print("| job | mode | p99 lag (s) | cost (subtask-s) | cost vs BALANCED | rescales | skew |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for doc in documents(sys.stdin.read()):
        job = os.path.splitext(os.path.basename(doc["job"]))[0]
        runs = doc["runs"]
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
