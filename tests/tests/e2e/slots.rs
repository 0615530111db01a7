//! `flowscale run` on a fleet whose simulated jobs share a small cluster's slots: the job of a
//! higher `scaling.priority` gets its slots, the other is told `InsufficientSlots` and gets its
//! turn once the first scales down.

use serde_json::Value;

use crate::harness::Cli;

/// A keyed job at 1,000 records/s that surges to 5,000 from 5 to 25 min: its aggregation (1,000
/// records/s per subtask) needs about 7 subtasks at the peak, 2 before and after.
const SURGE: &str = r#"
[job]
name = "surge"
seed = 1

[[vertices]]
id = "src"
kind = "source"
parallelism = 2
capacity = 50000
partitions = 32

[[vertices]]
id = "agg"
kind = "operator"
parallelism = 2
capacity = 1000

[[vertices]]
id = "sink"
kind = "sink"
parallelism = 1
capacity = 50000

[[edges]]
from = "src"
to = "agg"
ship = "HASH"

[[edges]]
from = "agg"
to = "sink"
ship = "REBALANCE"

[workload.src]
[[workload.src.rate]]
kind = "constant"
rate = 1000

[[workload.src.rate]]
kind = "spike"
extra = 4000
at = "5 min"
duration = "20 min"

[restart]
downtime = "10s"
"#;

/// Two copies of the surging job on one 12-slot cluster, `high` at priority 10.
const FLEET: &str = r#"
[host]
interval = "10s"

[defaults]
"metrics.window" = "2 min"
"stabilization.interval" = "30s"
"scaling-cooldown-period" = "2 min"
"scale-down.interval" = "5 min"
"scaling.alignment.mode" = "OFF"

[clusters.small]
slots = 12

[[jobs]]
name = "low"
job = "surge.toml"
cluster = "small"
duration = "1h"

[[jobs]]
name = "high"
job = "surge.toml"
cluster = "small"
duration = "1h"
[jobs.config]
"scaling.priority" = 10
"#;

/// A job's cycles, in time order: (instant, the job's widest vertex after the cycle's rescale if
/// it rescaled, the reasons of its events). Every vertex starts as `SURGE` has it.
fn cycles(lines: &[Value], job: &str) -> Vec<(i64, Option<u64>, Vec<String>)> {
    let mut data: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "cycle" && l["data"]["job"] == job)
        .map(|l| &l["data"])
        .collect();
    data.sort_by_key(|d| d["at_ms"].as_i64().unwrap_or(-1));
    let mut running: std::collections::BTreeMap<String, u64> =
        [("src", 2), ("agg", 2), ("sink", 1)]
            .into_iter()
            .map(|(v, p)| (v.to_string(), p))
            .collect();
    data.into_iter()
        .map(|d| {
            let widest = d["operation"].as_object().map(|op| {
                for (vertex, p) in op {
                    running.insert(vertex.clone(), p.as_u64().unwrap_or(0));
                }
                running.values().copied().max().unwrap_or(0)
            });
            let reasons = d["events"]
                .as_array()
                .map(|events| {
                    events
                        .iter()
                        .filter_map(|e| e["reason"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            (d["at_ms"].as_i64().unwrap_or(-1), widest, reasons)
        })
        .collect()
}

#[test]
fn the_priority_job_gets_its_slots_and_the_other_its_turn_after_a_scale_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("surge.toml"), SURGE).expect("job file");
    let fleet = dir.path().join("fleet.toml");
    std::fs::write(&fleet, FLEET).expect("fleet file");
    // Two workers: the jobs of a cluster still meet in exact rounds.
    let out = Cli::new([
        "run",
        &fleet.display().to_string(),
        "--json",
        "--workers",
        "2",
    ])
    .run();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let lines = out.json_lines();
    let high = cycles(&lines, "high");
    let low = cycles(&lines, "low");

    // `high` scales up in full: it is never short of slots.
    assert!(
        high.iter()
            .all(|(_, _, reasons)| !reasons.iter().any(|r| r == "InsufficientSlots")),
        "{high:?}"
    );
    let high_width = high
        .iter()
        .filter_map(|(_, widest, _)| *widest)
        .max()
        .expect("high rescales");
    let high_up = high
        .iter()
        .find(|(_, widest, _)| *widest == Some(high_width))
        .map(|(at, _, _)| *at)
        .expect("high's widest rescale");
    assert!(
        high_width >= 7,
        "the surge needs about 7 subtasks: {high:?}"
    );

    // `low` is cut or queued from that round on, told how many slots it wanted and how many
    // were free.
    let short = low
        .iter()
        .find(|(_, _, reasons)| reasons.iter().any(|r| r == "InsufficientSlots"))
        .expect("low is told the cluster has too few slots");
    assert!(
        short.0 >= high_up,
        "{short:?} before high's scale-up at {high_up}"
    );
    let messages: Vec<String> = lines
        .iter()
        .filter(|l| l["type"] == "cycle" && l["data"]["job"] == "low")
        .flat_map(|l| l["data"]["events"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["reason"] == "InsufficientSlots")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("slots of cluster `small`")
                && m.contains("and 0 are free: queued until slots free up")),
        "{messages:#?}"
    );

    // `high` scales down after the surge; `low` then grows wider than it ran while `high`
    // held the surge's slots.
    let high_down = high
        .iter()
        .find(|(at, widest, _)| *at > high_up && widest.is_some_and(|w| w < high_width))
        .map(|(at, _, _)| *at)
        .expect("high scales down after the surge");
    let low_before: u64 = low
        .iter()
        .filter(|(at, _, _)| *at < high_down)
        .filter_map(|(_, widest, _)| *widest)
        .max()
        .unwrap_or(2);
    assert!(
        low.iter()
            .any(|(at, widest, _)| *at >= high_down && widest.is_some_and(|w| w > low_before)),
        "low gets its turn once high scaled down at {high_down}: {low:?}"
    );

    // The cluster never lent more than it has.
    for line in lines.iter().filter(|l| l["type"] == "summary") {
        let slots = &line["data"]["slots"];
        assert_eq!(slots["cluster"], "small", "{line}");
        assert_eq!(slots["slots"], 12);
        assert!(
            slots["max_in_use"].as_u64().is_some_and(|m| m <= 12),
            "{line}"
        );
    }
}

/// Each job's rescales, in time order: (instant, the operation's text).
fn rescales(lines: &[Value]) -> Vec<(String, i64, String)> {
    let mut out: Vec<(String, i64, String)> = lines
        .iter()
        .filter(|l| l["type"] == "cycle" && l["data"]["operation"].is_object())
        .map(|l| {
            let d = &l["data"];
            (
                d["job"].as_str().unwrap_or_default().to_string(),
                d["at_ms"].as_i64().unwrap_or(-1),
                d["operation"].to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_shared_cluster_gives_the_same_run_whatever_the_threads_timing() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("surge.toml"), SURGE).expect("job file");
    let fleet = dir.path().join("fleet.toml");
    std::fs::write(&fleet, FLEET).expect("fleet file");
    // Without the arbiter both jobs scale up at the same instant and the cluster gives its
    // slots first-come: which one comes first must not depend on which thread runs first.
    let run = |workers: &str| {
        let out = Cli::new([
            "run",
            &fleet.display().to_string(),
            "--json",
            "--no-arbiter",
            "--workers",
            workers,
        ])
        .run();
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        rescales(&out.json_lines())
    };
    let first = run("1");
    assert!(
        first.iter().any(|(job, _, _)| job == "low")
            && first.iter().any(|(job, _, _)| job == "high"),
        "both jobs rescale: {first:?}"
    );
    for workers in ["2", "2", "2", "1"] {
        assert_eq!(run(workers), first, "--workers {workers}");
    }
}
