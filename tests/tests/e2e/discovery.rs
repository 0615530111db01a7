//! `flowscale run` with an entry that discovers its cluster's jobs (no `job-id`) while that
//! cluster cannot be reached: the entry waits, says why in one line naming the cluster's
//! address and the cause, the fleet's other job goes on deciding, and once the cluster comes
//! up at its address its job is found and decided on like any other.

use serde_json::Value;

use flowscale_tests::refusing_address;

use crate::fake_flink::{FakeFlink, JOB_ID};
use crate::reload::{Lines, cycle_of, signal, start_run, write};

/// An advisor fleet (decisions reported, nothing rescaled) of `steady` (the fake job by id at
/// `steady_rest`) and `late` (every RUNNING job at `late_rest`).
fn fleet(steady_rest: &str, late_rest: &str) -> String {
    format!(
        "[host]\ninterval = \"300ms\"\n\n[defaults]\n\"metrics.window\" = \"1s\"\n\
         \"stabilization.interval\" = \"0\"\n\"scaling.enabled\" = \"false\"\n\
         \"utilization.max\" = \"0.8\"\n\"utilization.min\" = \"0.5\"\n\n\
         [[jobs]]\nname = \"steady\"\nengine = \"flink\"\nrest = \"{steady_rest}\"\n\
         job-id = \"{JOB_ID}\"\n\n\
         [[jobs]]\nname = \"late\"\nengine = \"flink\"\nrest = \"{late_rest}\"\n"
    )
}

/// A cycle of `job` that decided: it evaluated at least one vertex.
fn decided(line: &Value, job: &str) -> bool {
    cycle_of(line, job)
        && line["data"]["vertices"]
            .as_array()
            .is_some_and(|vertices| !vertices.is_empty())
}

/// The messages of the `EngineError` events of a cycle of `job`.
fn engine_errors(line: &Value, job: &str) -> Vec<String> {
    if !cycle_of(line, job) {
        return Vec::new();
    }
    line["data"]["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == "EngineError")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_cluster_down_at_start_is_waited_for_while_the_other_job_decides() {
    let steady = FakeFlink::start();
    let addr = refusing_address();
    let late_rest = format!("http://{addr}");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fleet.toml");
    write(&path, &fleet(&steady.url(), &late_rest));
    let mut host = start_run(&[path.as_os_str()]);
    let mut lines = Lines::of(&mut host);

    // The cluster refuses connections: one line with its address and the cause.
    let failed = lines.wait_for("late's failure to list its cluster's jobs", |l| {
        !engine_errors(l, "late").is_empty()
    });
    let line = engine_errors(&lines.seen[failed], "late").remove(0);
    assert!(
        line.contains("cannot list the cluster's jobs"),
        "says what failed: {line}"
    );
    assert!(line.contains(&late_rest), "names the address: {line}");
    assert!(
        line.to_lowercase().contains("connection refused"),
        "the cause: {line}"
    );
    assert!(!line.contains('\n'), "one line: {line}");
    // The other job decides meanwhile, and `late` is still waiting, not given up.
    for n in 0..3 {
        lines.wait_for(&format!("steady's decision {n} while late waits"), |l| {
            decided(l, "steady")
        });
    }
    assert!(
        !lines.seen.iter().any(|l| l["type"] == "summary"),
        "no job ended: {:#?}",
        lines.seen
    );

    // The cluster comes up: its job is found and decided on.
    let late = FakeFlink::start_at(vec![addr]);
    let found = lines.wait_for("a decision of late", |l| decided(l, "late"));
    lines.wait_for("steady deciding on", |l| decided(l, "steady"));
    assert!(
        lines.seen[found..]
            .iter()
            .all(|l| engine_errors(l, "late").is_empty()),
        "no failure once found"
    );

    signal(host.id(), "INT");
    let status = host.wait().expect("the host ends");
    assert!(status.success(), "{status:?}");
    drop(late);
}
