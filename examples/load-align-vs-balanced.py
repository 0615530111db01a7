#!/usr/bin/env python3
"""load-align against BALANCED on two hot key groups, through `flowscale align --batch`.

The job: max parallelism 128, 40% of the records on two key groups (20% each), the other 60%
spread evenly over all 128 groups; both hot groups in the first half of the range. It runs at
parallelism 2, so the engine reports 70% / 30% per subtask whatever the placement. Every
placement (64 * 63 / 2 = 2,016 pairs) and every target from 3 to 6: 8,064 cases. Each case
goes to `flowscale align --batch` twice, once with load-align (with the per-subtask records-in
rates) and once with BALANCED, and the busiest subtask's share at each answer is computed from
the TRUE per-group loads by Flink's key-group ranges (subtask i of p owns groups
[ceil(i*128/p), ceil((i+1)*128/p))), not from load-align's prediction.

    examples/load-align-vs-balanced.py                       # builds flowscale and load-align (release)
    examples/load-align-vs-balanced.py --profile debug       # a debug build instead
    examples/load-align-vs-balanced.py --flowscale BIN --plugin libload_align.so
    examples/load-align-vs-balanced.py --param min-gain=0    # a load-align parameter (repeatable)

Prints a Markdown table: per target and overall, the share of cases where load-align's busiest
subtask is heavier than BALANCED's (worse) or lighter (better), the largest excess in points of
the load, the mean gain in points (BALANCED's busiest share minus load-align's), and the ratio
of load-align's subtasks to BALANCED's (the mean of the per-case ratios, and total over total).
"""

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile

K = 128
HOT_SHARE = 0.4
OBSERVED = 2
TARGETS = range(3, 7)
# Shares equal in exact arithmetic compare equal.
EPS = 1e-9


def range_start(i, p):
    return -(-i * K // p)


def group_shares(hot):
    shares = [(1.0 - HOT_SHARE) / K] * K
    for g in hot:
        shares[g] += HOT_SHARE / len(hot)
    return shares


def per_subtask(shares, p):
    return [sum(shares[range_start(i, p):range_start(i + 1, p)]) for i in range(p)]


def busiest(shares, p):
    return max(per_subtask(shares, p))


def build(profile):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    flag = ["--release"] if profile == "release" else []
    subprocess.run(["cargo", "build", "--quiet", *flag, "-p", "flowscale", "-p", "load-align"],
                   cwd=root, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    out = os.path.join(target, profile)
    return os.path.join(out, "flowscale"), os.path.join(out, "libload_align.so")


def align(flowscale, plugins, requests):
    text = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run([flowscale, "align", "--batch", "--plugins", plugins],
                          input=text, capture_output=True, text=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    if len(answers) != len(requests) or any("error" in a for a in answers):
        bad = next((a for a in answers if "error" in a), None)
        sys.exit(f"flowscale align --batch failed (exit {done.returncode}): {bad or done.stderr}")
    return [a["parallelism"] for a in answers]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", choices=["release", "debug"], default="release")
    ap.add_argument("--flowscale", help="a built flowscale binary (no build)")
    ap.add_argument("--plugin", help="a built libload_align.so (with --flowscale)")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="a load-align parameter, e.g. min-gain=0")
    args = ap.parse_args()
    if bool(args.flowscale) != bool(args.plugin):
        ap.error("--flowscale and --plugin go together")
    flowscale, plugin = (args.flowscale, args.plugin) if args.flowscale else build(args.profile)

    load_align = {"scaling.alignment.mode": "skew", "scaling.alignment.mode.skew.class": "load-align"}
    for p in args.param:
        name, sep, value = p.partition("=")
        if not sep:
            ap.error(f"--param {p}: expected NAME=VALUE")
        load_align[f"scaling.alignment.mode.skew.{name}"] = value

    cases = []
    for hot in itertools.combinations(range(K // 2), 2):
        shares = group_shares(hot)
        rates = [round(1000.0 * s, 9) for s in per_subtask(shares, OBSERVED)]
        for t in TARGETS:
            cases.append((hot, t, shares, rates))

    def request(t, rates, config):
        return {"current": OBSERVED, "target": t, "max_parallelism": K, "ship_strategies": ["HASH"],
                "subtask_records_in": rates, "config": config}

    with tempfile.TemporaryDirectory() as plugins:
        os.chmod(plugins, 0o700)
        shutil.copy(plugin, os.path.join(plugins, "libload_align.so"))
        chosen = align(flowscale, plugins, [request(t, r, load_align) for _, t, _, r in cases])
        balanced = align(flowscale, plugins,
                         [request(t, r, {"scaling.alignment.mode": "BALANCED"}) for _, t, _, r in cases])

    rows = {}
    for (hot, t, shares, _), p, b in zip(cases, chosen, balanced):
        at_p, at_b = busiest(shares, p), busiest(shares, b)
        for key in (t, "all"):
            r = rows.setdefault(key, {"n": 0, "worse": 0, "better": 0, "max_worse": 0.0, "gain": 0.0,
                                      "p": 0, "b": 0, "ratio": 0.0, "choices": set(), "balanced": set()})
            r["n"] += 1
            r["worse"] += at_p > at_b + EPS
            r["better"] += at_p < at_b - EPS
            r["max_worse"] = max(r["max_worse"], (at_p - at_b) * 100.0)
            r["gain"] += (at_b - at_p) * 100.0
            r["p"] += p
            r["b"] += b
            r["ratio"] += p / b
            r["choices"].add(p)
            r["balanced"].add(b)

    params = ", ".join(args.param) or "defaults"
    print(f"load-align ({params}) against BALANCED: K = {K}, {HOT_SHARE:.0%} on two key groups in "
          f"[0, {K // 2}), observed at {OBSERVED}; true busiest-subtask shares\n")
    print("| target | cases | BALANCED | load-align | worse | better | max worse (points) "
          "| mean gain (points) | subtasks vs BALANCED (mean per case / total) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in [*TARGETS, "all"]:
        r = rows[key]
        fmt = lambda s: ", ".join(map(str, sorted(s)))
        print(f"| {key} | {r['n']} | {fmt(r['balanced'])} | {fmt(r['choices'])} "
              f"| {100.0 * r['worse'] / r['n']:.1f}% | {100.0 * r['better'] / r['n']:.1f}% "
              f"| {max(r['max_worse'], 0.0):.1f} | {r['gain'] / r['n']:.2f} | {r['ratio'] / r['n']:.2f}x / {r['p'] / r['b']:.2f}x |")


if __name__ == "__main__":
    main()
