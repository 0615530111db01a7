//! Two real Flink jobs that both want more than a 6-slot session cluster has free share its
//! slots through the slot arbiter: the one of higher `scaling.priority` gets its slots, the
//! other is cut short with `InsufficientSlots` and gets its turn once the first scales down;
//! Flink never holds a job waiting for slots it cannot get.
//!
//! `#[ignore]`d, and gated on `FLOWSCALE_FLINK_E2E=1` like the other real-Flink tests.
//!
//! Each job reads 700 records/s and its keyed `count` vertex spends 2 ms per record (about
//! 475 records/s per subtask, measured with the sleep's overhead). With `utilization.target`
//! 0.21 a job at parallelism 1 wants 700 / 0.21 + 700 · 2 s / 30 s = 3380 records/s of
//! capacity, about 7 subtasks, capped at `vertex.max-parallelism` 4: 4 slots each (every vertex
//! in Flink's default slot-sharing group). Both start at 1 (2 slots in use, 4 free): the
//! priority job takes 3 more (4 slots), the other gets the last free one (2 slots of its 4).
//! Then the fleet file gives the priority job `utilization.target` 0.9: it wants
//! 700 / 0.9 + 47 = 825 records/s, 2 subtasks, and scales down; the 2 slots it gives back go
//! to the other job, which reaches its 4.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use flowscale_tests::flink::{self, Cluster, run_script};

use super::flink::{fast_defaults, run_flowscale, settled_parallelism, vertex};

/// The cluster's slots.
const SLOTS: u32 = 6;
/// Highest parallelism of every vertex: what each job wants.
const WANTED: u32 = 4;

fn fleet(url: &str, high: &str, low: &str, high_target: &str) -> String {
    format!(
        r#"[host]
interval = "5s"

{defaults}
[[jobs]]
name = "high"
engine = "flink"
rest = "{url}"
job-id = "{high}"
[jobs.config]
"scaling.priority" = 10
"vertex.max-parallelism" = {WANTED}
"scale-down.interval" = "0"
"utilization.target" = {high_target}

[[jobs]]
name = "low"
engine = "flink"
rest = "{url}"
job-id = "{low}"
[jobs.config]
"vertex.max-parallelism" = {WANTED}
"scale-down.interval" = "0"
"#,
        defaults = fast_defaults(),
    )
}

fn write_fleet(path: &Path, text: &str) {
    // Written aside and renamed: the host never reads half a file.
    let aside = path.with_extension("tmp");
    std::fs::write(&aside, text).expect("write the fleet file");
    std::fs::rename(&aside, path).expect("replace the fleet file");
}

/// What Flink says of one job: `count`'s settled parallelism, and whether every vertex runs
/// all the subtasks its resource requirements ask for (no vertex waits for slots).
fn job_state(cluster: &Cluster, id: &str) -> Option<(u32, bool)> {
    let details = cluster.get(&format!("/jobs/{id}"))?;
    let p = settled_parallelism(&details)?;
    let requirements = cluster.get(&format!("/jobs/{id}/resource-requirements"))?;
    let vertices = details["vertices"].as_array()?;
    let placed = details["state"] == "RUNNING"
        && vertices.iter().all(|v| {
            let running = v["tasks"]["RUNNING"].as_u64();
            let wanted =
                requirements[v["id"].as_str().unwrap_or_default()]["parallelism"]["upperBound"]
                    .as_u64();
            running.is_some() && running == v["parallelism"].as_u64() && wanted == running
        });
    Some((p, placed))
}

/// The messages of the `InsufficientSlots` events of `job`'s cycles.
fn insufficient(lines: &[(Duration, Value)], job: &str) -> Vec<String> {
    lines
        .iter()
        .filter(|(_, l)| l["type"] == "cycle" && l["data"]["job"] == job)
        .flat_map(|(_, l)| l["data"]["events"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["reason"] == "InsufficientSlots")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect()
}

#[test]
#[ignore = "needs FLOWSCALE_FLINK_E2E=1 and a local Flink (see flink/README.md)"]
fn the_priority_job_gets_the_slots_and_the_other_its_turn_after_a_scale_down() {
    flink::require_enabled();
    run_script("setup.sh", &[], &[]);
    run_script("job.sh", &["build"], &[]);
    let cluster = Cluster::start(SLOTS);
    let t0 = Instant::now();
    let submit = || {
        run_script(
            "job.sh",
            &[
                "submit",
                &cluster.url,
                "--rate",
                "700",
                "--cost-ms",
                "0",
                "--keyed-cost-ms",
                "2",
                "--parallelism",
                "1",
            ],
            &[],
        )
    };
    let (high, low) = (submit(), submit());
    let dir = tempfile::tempdir().expect("tempdir");
    let path: PathBuf = dir.path().join("fleet.toml");
    write_fleet(&path, &fleet(&cluster.url, &high, &low, "0.21"));

    // The phases as Flink shows them: both settled and placed at (high, low).
    let mut first: Option<(u32, u32)> = None;
    let mut reloaded_at: Option<Instant> = None;
    let mut last: Option<(u32, u32)> = None;
    let mut last_poll = Instant::now();
    let mut most_in_use = 0;
    let out = run_flowscale(&path, |lines| {
        if last_poll.elapsed() < Duration::from_millis(700) {
            return false;
        }
        last_poll = Instant::now();
        // Never more slots asked for than the cluster has.
        let asked: u64 = [&high, &low]
            .into_iter()
            .filter_map(|id| {
                let r = cluster.get(&format!("/jobs/{id}/resource-requirements"))?;
                r.as_object()?
                    .values()
                    .filter_map(|v| v["parallelism"]["upperBound"].as_u64())
                    .max()
            })
            .sum();
        most_in_use = most_in_use.max(asked);
        let (Some((h, h_placed)), Some((l, l_placed))) =
            (job_state(&cluster, &high), job_state(&cluster, &low))
        else {
            return false;
        };
        if !(h_placed && l_placed) {
            return false;
        }
        if first.is_none() && h == WANTED && l > 1 && !insufficient(lines, "low").is_empty() {
            first = Some((h, l));
            write_fleet(&path, &fleet(&cluster.url, &high, &low, "0.9"));
            reloaded_at = Some(Instant::now());
        }
        if reloaded_at.is_some() && h < WANTED && l == WANTED {
            last = Some((h, l));
            return true;
        }
        false
    });
    let lines = &out.lines;
    let low_short = insufficient(lines, "low");
    assert!(
        first.is_some(),
        "the priority job never ran at {WANTED} with the other cut short \
         (InsufficientSlots of low: {low_short:?}); stderr:\n{}",
        out.stderr
    );
    let (h1, l1) = first.unwrap_or_default();
    // 6 slots: the priority job's 4, and the 2 left for the other.
    assert_eq!((h1, l1), (WANTED, SLOTS - WANTED), "first phase");
    // The event names the slots wanted and free: the job wanted 4, and at its turn 1 was free.
    assert!(
        low_short
            .iter()
            .any(|m| m.contains(&format!("needs {WANTED} slots")) && m.contains("are free")),
        "{low_short:?}"
    );
    assert!(
        insufficient(lines, "high").is_empty(),
        "the priority job was never short: {:?}",
        insufficient(lines, "high")
    );
    let (h2, l2) = last.unwrap_or_else(|| {
        panic!(
            "the other job did not get its turn after the priority job scaled down \
             (InsufficientSlots of low: {low_short:?}); stderr:\n{}",
            out.stderr
        )
    });
    assert!(h2 + l2 <= SLOTS, "({h2}, {l2})");
    assert!(
        most_in_use <= u64::from(SLOTS),
        "the jobs asked Flink for {most_in_use} slots of {SLOTS}"
    );
    eprintln!(
        "first phase (high, low) = ({h1}, {l1}) at {:?} after the start; after the reload \
         ({h2}, {l2}); most slots asked for at once: {most_in_use}; InsufficientSlots of low: \
         {low_short:?}",
        reloaded_at.map(|at| at.duration_since(t0)),
    );
    // Flink's own view at the end: both jobs run every subtask they ask for.
    for id in [&high, &low] {
        let details = cluster.get(&format!("/jobs/{id}")).expect("details");
        assert!(vertex(&details, "count").is_some());
        let (_, placed) = job_state(&cluster, id).expect("state");
        assert!(placed, "{id} waits for slots: {details}");
    }
}
