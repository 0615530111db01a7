//! The parser on a valid job and on broken variants of it: every problem names the file, the
//! line, the key and what would be valid.

use std::path::Path;

use flowscale_sdk::ShipStrategy;

use super::job::parse_job;
use super::trace::parse_trace;
use crate::sim::error::{JobFileProblem, SimError};

const GOOD: &str = r#"
[job]
name = "t"
seed = 3

[[vertices]]
id = "src"
kind = "source"
parallelism = 2
capacity = 1000
partitions = 4

[[vertices]]
id = "agg"
kind = "sink"
parallelism = 3
max_parallelism = 128
cost_per_record = "1ms"

[[edges]]
from = "src"
to = "agg"
ship = "CUSTOM:48"

[workload.src]
[[workload.src.rate]]
kind = "step"
from = 10
to = 20
at = "1 min"
"#;

fn problem(src: &str) -> JobFileProblem {
    match parse_job(src, "job.toml", Path::new(".")) {
        Err(SimError::Invalid(p)) => *p,
        other => panic!("expected a job-file problem, got {other:?}"),
    }
}

#[test]
fn parses_a_valid_job() {
    let job = parse_job(GOOD, "job.toml", Path::new(".")).expect("valid");
    assert_eq!(job.vertices.len(), 2);
    assert_eq!(job.vertices[1].capacity, 1000.0);
    assert_eq!(job.edges[0].ship, ShipStrategy::Custom { buckets: 48 });
    let w = job.vertices[0].workload.as_ref().expect("workload");
    assert_eq!(w.rate_at(59.0), 10.0);
    assert_eq!(w.rate_at(60.0), 20.0);
    assert_eq!(job.restart.downtime_ms, 30_000);
}

#[test]
fn errors_name_file_line_key_and_valid_values() {
    let p = problem(&GOOD.replace("ship = \"CUSTOM:48\"", "ship = \"HASHED\""));
    assert_eq!(
        (p.file.as_str(), p.line, p.key.as_str()),
        ("job.toml", 23, "edges[0].ship")
    );
    assert!(p.valid.contains("REBALANCE"), "{p}");

    let p = problem(&GOOD.replace("parallelism = 3", "parallelism = 300"));
    assert_eq!((p.line, p.key.as_str()), (16, "vertices[1].parallelism"));
    assert!(p.valid.contains("1..=128"));

    let p = problem(&GOOD.replace("to = \"agg\"", "to = \"nope\""));
    assert_eq!(p.key, "edges[0].to");
    assert!(p.valid.contains("src, agg"));

    let p = problem(&GOOD.replace("kind = \"step\"", "kind = \"stairs\""));
    assert_eq!(p.key, "workload.src.rate[0].kind");
    assert!(p.valid.contains("diurnal"));

    let p = problem(&GOOD.replace("to = 20", "too = 20"));
    assert_eq!((p.line, p.key.as_str()), (29, "too"));
    assert!(p.message.contains("unknown field"), "{p}");
    assert!(p.valid.contains("`to`"), "{p}");

    let p = problem(&GOOD.replace("kind = \"sink\"\n", ""));
    assert_eq!((p.line, p.key.as_str()), (13, "vertices.kind"));
    assert!(p.message.contains("missing field"), "{p}");

    let p = problem(&GOOD.replace("parallelism = 3", "parallelism = \"ten\""));
    assert_eq!(
        (p.line, p.key.as_str(), p.valid.as_str()),
        (16, "parallelism", "an integer")
    );

    let p = problem(&GOOD.replace("at = \"1 min\"", "at = \"1 fortnight\""));
    assert_eq!(p.line, 30);
    assert!(p.message.contains("unknown time unit"), "{p}");
}

#[test]
fn task_managers_and_slot_sharing_groups_are_read() {
    let job = parse_job(GOOD, "job.toml", Path::new(".")).expect("valid");
    assert_eq!(job.task_managers, None);
    assert!(
        job.vertices
            .iter()
            .all(|v| v.slot_sharing_group == "default")
    );
    let text = GOOD.replace(
        "cost_per_record = \"1ms\"",
        "cost_per_record = \"1ms\"\nslot_sharing_group = \" sinks \"",
    ) + "\n[taskmanager]\ncpu = 0.5\nmemory = \"1536m\"\nslots = 3\n";
    let job = parse_job(&text, "job.toml", Path::new(".")).expect("valid");
    assert_eq!(job.vertices[1].slot_sharing_group, "sinks");
    assert_eq!(
        job.task_managers,
        Some(crate::engine::TaskManagerResources {
            cpu_cores: Some(0.5),
            memory_bytes: Some(1536 << 20),
            slots: Some(3),
        })
    );
    // Every key is optional: a number of bytes, unknown CPU, Flink's 1 slot.
    let job = parse_job(
        &(GOOD.to_string() + "\n[taskmanager]\nmemory = 1000\n"),
        "job.toml",
        Path::new("."),
    )
    .expect("valid");
    assert_eq!(
        job.task_managers,
        Some(crate::engine::TaskManagerResources {
            cpu_cores: None,
            memory_bytes: Some(1000),
            slots: Some(1),
        })
    );
}

#[test]
fn bad_task_managers_and_groups_are_refused_with_their_key() {
    let with = |table: &str| problem(&(GOOD.to_string() + "\n[taskmanager]\n" + table));
    let p = with("cpu = 0\n");
    assert_eq!(p.key, "taskmanager.cpu");
    assert!(p.valid.contains("> 0"), "{p}");
    let p = with("slots = 0\n");
    assert_eq!(p.key, "taskmanager.slots");
    assert!(p.valid.contains(">= 1"), "{p}");
    let p = with("memory = \"4 GiB\"\n");
    assert!(p.message.contains("unknown memory unit `gib`"), "{p}");
    let p = with("memory = -1\n");
    assert!(p.message.contains("cannot be negative"), "{p}");
    let p = with("cores = 2\n");
    assert!(p.message.contains("unknown field"), "{p}");
    let p = problem(&GOOD.replace(
        "cost_per_record = \"1ms\"",
        "cost_per_record = \"1ms\"\nslot_sharing_group = \"  \"",
    ));
    assert_eq!(p.key, "vertices[1].slot_sharing_group");
}

#[test]
fn graph_errors_are_caught() {
    let cyclic = GOOD.replace("kind = \"sink\"", "kind = \"operator\"")
        + "\n[[edges]]\nfrom = \"agg\"\nto = \"src\"\nship = \"FORWARD\"\n";
    assert!(problem(&cyclic).message.contains("source"));
    let no_workload = GOOD
        .split("[workload.src]")
        .next()
        .unwrap_or_default()
        .to_string();
    assert_eq!(problem(&no_workload).key, "workload.src");
}

#[test]
fn trace_lines_are_checked() {
    assert_eq!(
        parse_trace("seconds,rate\n0,5\n10,7\n"),
        Ok(vec![(0.0, 5.0), (10.0, 7.0)])
    );
    assert_eq!(parse_trace("0,5\n10,x\n").map_err(|e| e.0), Err(2));
    assert_eq!(parse_trace("10,5\n0,1\n").map_err(|e| e.0), Err(2));
}
