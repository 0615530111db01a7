//! The resource quota (`quota.cpu`) as a user meets it: `flowscale run` on a simulated job
//! whose TaskManagers are sized in its job file, where the quota blocks the scale-up the load
//! step asks for.

use serde_json::Value;

use crate::harness::{Cli, repo_root};

/// `examples/jobs/keyed-step-spike.toml` on TaskManagers of 2 cores, 4 GiB and 4 slots (every
/// vertex in the default slot-sharing group), run for 2 simulated hours with `config` added to
/// the job's keys; the JSON lines of the run.
fn run_keyed_step_spike(config: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("tempdir");
    let example = repo_root().join("examples/jobs/keyed-step-spike.toml");
    let job = std::fs::read_to_string(&example).expect("the example job")
        + "\n[taskmanager]\ncpu = 2.0\nmemory = \"4 gb\"\nslots = 4\n";
    let job_file = dir.path().join("job.toml");
    std::fs::write(&job_file, job).expect("write the job");
    let fleet = format!(
        "[host]\ninterval = \"1min\"\n\n[defaults]\n\"metrics.window\" = \"3 min\"\n\
         \"stabilization.interval\" = \"1 min\"\n\"scale-down.interval\" = \"0\"\n\
         \"scaling-cooldown-period\" = \"0\"\n\n\
         [[jobs]]\nname = \"d\"\njob = {:?}\nduration = \"2h\"\n[jobs.config]\n{config}",
        job_file.display().to_string()
    );
    let fleet_file = dir.path().join("fleet.toml");
    std::fs::write(&fleet_file, fleet).expect("write the fleet");
    let path = fleet_file.display().to_string();
    let out = Cli::new(["run", &path, "--json", "--simulated", "2h"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json_lines()
}

/// The instants (ms) of the events `reason` the run recorded for job `d`: a simulated job's
/// events come with its cycle lines, after the per-job rate limit.
fn events_at(lines: &[Value], reason: &str) -> Vec<(i64, String)> {
    lines
        .iter()
        .filter(|l| l["type"] == "cycle" && l["data"]["job"] == "d")
        .flat_map(|l| {
            let at = l["data"]["at_ms"].as_i64().unwrap_or(-1);
            let events = l["data"]["events"].as_array().cloned().unwrap_or_default();
            events
                .into_iter()
                .filter(|e| e["reason"] == reason)
                .map(move |e| (at, e["message"].as_str().unwrap_or("").to_string()))
        })
        .collect()
}

/// The parallelism of `agg` at each cycle of job `d` (its `current`), in order.
fn agg_parallelism(lines: &[Value]) -> Vec<u64> {
    lines
        .iter()
        .filter(|l| l["type"] == "cycle" && l["data"]["job"] == "d")
        .filter_map(|l| {
            l["data"]["vertices"]
                .as_array()?
                .iter()
                .find(|v| v["vertex"] == "agg")?["current"]
                .as_u64()
        })
        .collect()
}

/// The aggregation starts at 24 subtasks in the default group: 24 / 4 = 6 TaskManagers, 12
/// cores. With `quota.cpu = 12` any operation that takes the widest changing vertex to 28 or
/// more (7 TaskManagers, 14 cores) is blocked; without the quota the load step at 30 min takes
/// the aggregation well above that.
#[test]
fn a_cpu_quota_blocks_the_scale_up_and_the_parallelism_stays() {
    let free = run_keyed_step_spike("");
    let free_max = agg_parallelism(&free).into_iter().max().unwrap_or(0);
    assert!(
        free_max >= 28,
        "without a quota the step scales the aggregation above 27 (got at most {free_max})"
    );
    assert!(events_at(&free, "ResourceQuotaReached").is_empty());

    let capped = run_keyed_step_spike("\"job.autoscaler.quota.cpu\" = \"12\"\n");
    let reached = events_at(&capped, "ResourceQuotaReached");
    assert!(!reached.is_empty(), "no ResourceQuotaReached event");
    assert_eq!(
        reached[0].1,
        "Resource usage is above the allowed limit for scaling operations. Please adjust the resource quota manually."
    );
    // Blocked every minute, reported once per `scaling.event.interval` (30 min by default).
    for pair in reached.windows(2) {
        assert!(pair[1].0 - pair[0].0 >= 30 * 60_000, "{reached:?}");
    }
    // Every blocked cycle applied nothing, and the aggregation never ran on more than 6
    // TaskManagers' worth of slots.
    let cycles: Vec<&Value> = capped
        .iter()
        .filter(|l| l["type"] == "cycle" && l["data"]["job"] == "d")
        .map(|l| &l["data"])
        .collect();
    let blocked: Vec<&&Value> = cycles
        .iter()
        .filter(|c| c["stage"] == "ResourceQuotaReached")
        .collect();
    assert!(!blocked.is_empty(), "no cycle ended at the quota");
    for cycle in &blocked {
        assert!(cycle["operation"].is_null(), "{cycle}");
    }
    let parallelism = agg_parallelism(&capped);
    assert!(
        parallelism.iter().all(|&p| p <= 27),
        "the aggregation exceeded the quota: {parallelism:?}"
    );
    // The first blocked cycle wanted the aggregation above 27, and it stayed where it was.
    let first = blocked[0];
    let agg = first["vertices"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["vertex"] == "agg"))
        .expect("agg in the blocked cycle");
    let current = agg["current"].as_u64().expect("current");
    let index = cycles
        .iter()
        .position(|c| std::ptr::eq(*c, *first))
        .expect("the blocked cycle");
    let next = cycles[index + 1..]
        .iter()
        .find_map(|c| {
            c["vertices"]
                .as_array()?
                .iter()
                .find(|v| v["vertex"] == "agg")?["current"]
                .as_u64()
        })
        .expect("a later cycle with agg");
    assert_eq!(next, current, "the blocked scale-up was not applied");
}
