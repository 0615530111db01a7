//! `flowscale simulate --oracle`: the clairvoyant single rescale is printed next to the
//! autoscaler's run, in the table and in the JSON, with at most one rescale per load change,
//! each a full metric window after its change at the earliest. (It is the cheapest per segment,
//! not the one with the fewest rescales: on this job it rescales once per change at about half
//! the autoscaler's cost, more often than the autoscaler, which keeps its larger start.)

use crate::harness::{Cli, repo_root};

/// The pipeline keys of the demo fleet, so decisions come at the same moments as there.
const KEYS: [&str; 4] = [
    "--set",
    "metrics.window=5min",
    "--set",
    "stabilization.interval=1min",
];

fn simulate(extra: &[&str]) -> crate::harness::Output {
    let job = repo_root().join("examples/jobs/keyed-step-spike.toml");
    let mut args = vec![
        "simulate".to_string(),
        job.display().to_string(),
        "--duration".to_string(),
        "2h".to_string(),
        "--oracle".to_string(),
    ];
    args.extend(KEYS.iter().map(|s| s.to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = Cli::new(args).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out
}

#[test]
fn the_oracle_rescales_at_most_once_per_load_change_a_window_after_it() {
    let out = simulate(&["--json"]);
    let doc = out.json();
    assert!(
        doc["runs"][0]["summary"]["rescales"].is_u64(),
        "the autoscaler's run is there: {doc}"
    );
    let oracle = &doc["oracle"];
    let rescales = oracle["summary"]["rescales"]
        .as_u64()
        .expect("the oracle's rescales");
    let changes = oracle["load_changes"].as_u64().expect("load changes");
    let schedule = oracle["schedule"].as_array().expect("a schedule");
    // The job's load: 20k/s, a step to 40k/s at 30 min, a 5 min spike of +30k/s at 90 min.
    // The start, the step, the spike and its end: four changes.
    assert_eq!(changes, 4, "{oracle}");
    assert!(
        rescales <= changes,
        "at most one rescale per change: {oracle}"
    );
    // Each decision comes a full metric window (300 s) after its change at the earliest.
    for decision in schedule {
        let change = decision["change_at_s"].as_f64().expect("change time");
        let decided = decision["decided_at_s"].as_f64().expect("decision time");
        assert!(decided >= change + 300.0, "{decision}");
    }
    let flagged = schedule.iter().filter(|d| d["rescale"] == true).count() as u64;
    assert_eq!(flagged, rescales, "the schedule's rescales are the run's");
    assert!(
        out.stderr.contains("oracle: 4 load changes"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_table_has_an_oracle_column() {
    let out = simulate(&[]);
    let header = out.stdout.lines().next().expect("a header");
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(columns, ["metric", "BALANCED", "oracle"], "{}", out.stdout);
    let rescales: Vec<u64> = out
        .stdout
        .lines()
        .find(|l| l.starts_with("rescales"))
        .expect("a rescales row")
        .split_whitespace()
        .skip(1)
        .map(|n| n.parse().expect("a count"))
        .collect();
    assert_eq!(rescales.len(), 2, "{}", out.stdout);
    // Four load changes (see above): at most four rescales.
    assert!(rescales[1] <= 4, "{}", out.stdout);
}
