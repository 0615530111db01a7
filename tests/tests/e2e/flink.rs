//! `flowscale run` against a real Apache Flink 2.3 session cluster, on real metrics.
//!
//! `#[ignore]`d, and gated on `FLOWSCALE_FLINK_E2E=1`: it needs Java 17, `pip`, `unzip` and
//! `curl`, fetches about 330 MB once (into `${FLOWSCALE_CACHE:-$HOME/.cache/flowscale}`, never
//! into the repository), starts two JVMs and takes about two minutes. A plain `cargo test` lists
//! it as ignored; `--ignored` without the variable fails, saying what is missing.
//!
//! One cluster (16 slots), two copies of the load job, each with its keyed `count` vertex (the
//! one behind the HASH edge, whose key groups alignment is about) overloaded, and one fleet file
//! that selects a different alignment mode for each: the built-in `BALANCED` and the
//! `slot-align` plugin (multiples of 4 slots). `flowscale run --json` runs until both jobs were
//! rescaled (or its `--duration` ends); the test then checks from Flink's own REST answers that
//! the keyed vertex runs at the parallelism flowscale printed, that this value is what the mode
//! stands for, and that the jobs kept running.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use flowscale_tests::flink::{self, Cluster, run_script, wait_for};

use super::harness::flowscale_bin;

/// Records per second each job's source emits.
const RATE: &str = "1000";
/// Wall time the keyed vertex spends per record: 2 ms at 1000 records/s is two subtasks' worth,
/// so `count` is the bottleneck at parallelism 1 (about 500 records/s, busy all the time).
const KEYED_COST_MS: &str = "2";
/// Key groups of every vertex.
const MAX_PARALLELISM: u32 = 128;
/// The slot-align plugin's worker size in the fleet file.
const SLOTS_PER_WORKER: u32 = 4;
/// Upper bound of every vertex's parallelism (`vertex.max-parallelism`): two jobs at 8 fit the
/// cluster's 16 slots, so a decision is never cut short by missing slots.
const VERTEX_MAX: u32 = 8;
/// The longest `flowscale run` may take; it is stopped earlier once both jobs were rescaled.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// Kills the `flowscale run` child if the test fails before it ended.
struct RunGuard(Child);

impl Drop for RunGuard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// One job of the test: its fleet entry, its Flink id and what its mode accepts.
struct TestJob {
    name: &'static str,
    id: String,
    /// Mode id as flowscale reports it on the vertex decision.
    mode: &'static str,
    /// What the mode answers when the keyed vertex scales up to a target.
    align: fn(u32) -> u32,
    /// The keyed vertex's id (read from Flink).
    count: String,
}

/// BALANCED over the key groups, scaling up to `target`: the first parallelism from the target
/// up to the cap that divides the key groups or lowers the key groups per subtask, else the
/// target (capped).
fn balanced(target: u32) -> u32 {
    let (n, cap) = (MAX_PARALLELISM, VERTEX_MAX.min(MAX_PARALLELISM));
    (target..=cap)
        .find(|p| n.is_multiple_of(*p) || n / p < n / target)
        .unwrap_or(target.min(cap))
}

/// slot-align, scaling up to `target`: the first multiple of the worker size from the target up
/// to the cap that divides the key groups, else the first multiple, else the target (capped).
fn whole_workers(target: u32) -> u32 {
    let cap = VERTEX_MAX.min(MAX_PARALLELISM);
    let multiples = || (target..=cap).filter(|p| p.is_multiple_of(SLOTS_PER_WORKER));
    multiples()
        .find(|p| MAX_PARALLELISM.is_multiple_of(*p))
        .or_else(|| multiples().next())
        .unwrap_or(target.min(cap))
}

/// The vertex named `name` in `GET /jobs/:id`.
pub(super) fn vertex<'a>(details: &'a Value, name: &str) -> Option<&'a Value> {
    details["vertices"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == name)
}

/// `count`'s parallelism when the job is RUNNING with every subtask of `count` running.
pub(super) fn settled_parallelism(details: &Value) -> Option<u32> {
    let count = vertex(details, "count")?;
    let p = count["parallelism"].as_u64()?;
    (details["state"] == "RUNNING" && count["tasks"]["RUNNING"].as_u64() == Some(p))
        .then(|| u32::try_from(p).ok())
        .flatten()
}

/// The `[defaults]` keys of the real-Flink fleets: a decision within about a minute of a job's
/// start, and the keyed vertex's target where the modes differ.
pub(super) fn fast_defaults() -> String {
    format!(
        r#"# Short windows so that a decision comes about 50 s after the jobs start. Flink's *PerSecond
# metrics are 60 s sliding averages that start from zero: early in a job's life they show about
# half the true rates. The AVG busy-time aggregator takes busy time and input rate from counter
# differences instead, which are right at once.
[defaults]
"metrics.window" = "30s"
"metrics.busy-time.aggregator" = "AVG"
# The bottleneck runs 85-100 % busy at parallelism 1 (measured: 99 %). A low utilization target
# makes that a target of 5 (busy x (1 / 0.21 + restart 2 s / catch-up 30 s) = 4.1 to 4.8), which
# the modes answer differently: BALANCED 6 (21 key groups per subtask instead of 25), slot-align 8.
"utilization.target" = 0.21
"stabilization.interval" = "10s"
"scaling-cooldown-period" = "0s"
# The catch-up capacity adds target x restart.time / catch-up.duration: with the default restart
# time of 5 min and a short catch-up that term would be ten times the load.
"catch-up.duration" = "30s"
"restart.time" = "2s"
"vertex.max-parallelism" = {VERTEX_MAX}
"#
    )
}

fn fleet_file(dir: &Path, url: &str, plugins: &Path, jobs: &[TestJob]) -> PathBuf {
    let balanced = &jobs[0];
    let slots = &jobs[1];
    let text = format!(
        r#"[host]
plugins = "{plugins}"
interval = "5s"

{defaults}
[[jobs]]
name = "{balanced_name}"
engine = "flink"
rest = "{url}"
job-id = "{balanced_id}"
[jobs.config]
"scaling.alignment.mode" = "BALANCED"

[[jobs]]
name = "{slots_name}"
engine = "flink"
rest = "{url}"
job-id = "{slots_id}"
[jobs.config]
"scaling.alignment.mode" = "slots"
"scaling.alignment.mode.slots.class" = "slot-align"
"scaling.alignment.mode.slots.slots-per-worker" = "{SLOTS_PER_WORKER}"
"#,
        plugins = plugins.display(),
        defaults = fast_defaults(),
        balanced_name = balanced.name,
        balanced_id = balanced.id,
        slots_name = slots.name,
        slots_id = slots.id,
    );
    let path = dir.join("fleet.toml");
    std::fs::write(&path, text).expect("write the fleet file");
    path
}

/// What `flowscale run --json` printed, and when each line arrived.
pub(super) struct RunOutput {
    pub(super) lines: Vec<(Duration, Value)>,
    pub(super) code: Option<i32>,
    pub(super) stderr: String,
}

impl RunOutput {
    pub(super) fn cycles<'a>(
        &'a self,
        job: &'a str,
    ) -> impl Iterator<Item = (Duration, &'a Value)> + 'a {
        self.lines
            .iter()
            .filter(move |(_, l)| l["type"] == "cycle" && l["data"]["job"] == job)
            .map(|(t, l)| (*t, &l["data"]))
    }
    /// The cycles that rescaled the job, with the operation's parallelism of `vertex`.
    pub(super) fn operations<'a>(
        &'a self,
        job: &'a str,
        vertex: &'a str,
    ) -> impl Iterator<Item = (Duration, &'a Value, Option<u32>)> + 'a {
        self.cycles(job)
            .filter(|(_, c)| c["operation"].is_object())
            .map(move |(t, c)| {
                let p = c["operation"][vertex]
                    .as_u64()
                    .and_then(|p| u32::try_from(p).ok());
                (t, c, p)
            })
    }
}

/// Runs `flowscale run CONFIG --json`, and stops it (SIGINT, as Ctrl-C) once `done` says so
/// after a line or a poll, or at `RUN_LIMIT` through `--duration`.
pub(super) fn run_flowscale(
    fleet: &Path,
    done: impl FnMut(&[(Duration, Value)]) -> bool,
) -> RunOutput {
    run_flowscale_with(fleet, &[], done)
}

/// [`run_flowscale`] with extra environment variables (e.g. `FLOWSCALE_LOG`).
pub(super) fn run_flowscale_with(
    fleet: &Path,
    envs: &[(&str, &str)],
    mut done: impl FnMut(&[(Duration, Value)]) -> bool,
) -> RunOutput {
    let started = Instant::now();
    let child = Command::new(flowscale_bin())
        .arg("run")
        .arg(fleet)
        .args(["--json", "--duration", &format!("{}s", RUN_LIMIT.as_secs())])
        .env_remove("FLOWSCALE_PLUGINS_DIR")
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flowscale runs");
    let mut guard = RunGuard(child);
    let stdout = guard.0.stdout.take().expect("piped stdout");
    let mut stderr_pipe = guard.0.stderr.take().expect("piped stderr");
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr_pipe, &mut text);
        text
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send((started.elapsed(), line)).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let mut interrupted = false;
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok((at, line)) => {
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("flowscale printed a non-JSON line ({e}): {line}"));
                lines.push((at, value));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if !interrupted && done(&lines) {
            let pid = guard.0.id().to_string();
            let _ = Command::new("kill").args(["-INT", &pid]).status();
            interrupted = true;
        }
        assert!(
            started.elapsed() < RUN_LIMIT + Duration::from_secs(60),
            "flowscale run did not stop after --duration"
        );
    }
    let code = guard.0.wait().ok().and_then(|s| s.code());
    let stderr = stderr_reader.join().unwrap_or_default();
    RunOutput {
        lines,
        code,
        stderr,
    }
}

#[test]
#[ignore = "needs FLOWSCALE_FLINK_E2E=1 and a local Flink (see flink/README.md)"]
fn scales_real_flink_jobs_to_aligned_parallelism() {
    flink::require_enabled();
    let t0 = Instant::now();
    run_script("setup.sh", &[], &[]);
    run_script("job.sh", &["build"], &[]);
    let profile = flowscale_tests::build(&["slot-align"]);
    let plugin = flowscale_tests::plugin_file(&profile, "slot-align");
    let plugins = flowscale_tests::plugins_dir(&[(&plugin, "libslot_align.so")]);
    let prepare = t0.elapsed();

    let t = Instant::now();
    let cluster = Cluster::start(16);
    let cluster_start = t.elapsed();

    let t = Instant::now();
    let submit = || {
        run_script(
            "job.sh",
            &[
                "submit",
                &cluster.url,
                "--rate",
                RATE,
                "--cost-ms",
                "0",
                "--keyed-cost-ms",
                KEYED_COST_MS,
                "--parallelism",
                "1",
                "--max-parallelism",
                &MAX_PARALLELISM.to_string(),
            ],
            &[],
        )
    };
    let mut jobs = [
        TestJob {
            name: "balanced",
            id: submit(),
            mode: "BALANCED",
            align: balanced,
            count: String::new(),
        },
        TestJob {
            name: "slots",
            id: submit(),
            mode: "slot-align",
            align: whole_workers,
            count: String::new(),
        },
    ];
    for job in &mut jobs {
        assert_eq!(job.id.len(), 32, "job id {:?}", job.id);
        let details = wait_for("the job to run", Duration::from_secs(60), || {
            cluster
                .get(&format!("/jobs/{}", job.id))
                .filter(|d| settled_parallelism(d) == Some(1))
        });
        let count = vertex(&details, "count").expect("a count vertex");
        assert_eq!(count["maxParallelism"], MAX_PARALLELISM);
        job.count = count["id"].as_str().expect("vertex id").to_string();
        // The keyed vertex is fed by a HASH edge: key-group alignment applies to it.
        let plan = cluster
            .get(&format!("/jobs/{}/plan", job.id))
            .expect("the job's plan");
        let hash_input = plan["plan"]["nodes"]
            .as_array()
            .and_then(|nodes| nodes.iter().find(|n| n["id"] == job.count.as_str()))
            .and_then(|n| n["inputs"].as_array())
            .is_some_and(|inputs| inputs.iter().any(|i| i["ship_strategy"] == "HASH"));
        assert!(hash_input, "count has no HASH input in {plan}");
    }
    let submitted = t.elapsed();

    let dir = tempfile::tempdir().expect("temp dir");
    let fleet = fleet_file(dir.path(), &cluster.url, plugins.path(), &jobs);

    // Run until both jobs were rescaled and Flink runs each at the parallelism flowscale asked
    // for, then a little longer (the next cycles must go on without error).
    let mut seen: [Option<Duration>; 2] = [None, None];
    let mut both_seen_at: Option<Instant> = None;
    let run_started = Instant::now();
    let out = run_flowscale(&fleet, |lines| {
        for (i, job) in jobs.iter().enumerate() {
            if seen[i].is_some() {
                continue;
            }
            let asked = lines
                .iter()
                .filter(|(_, l)| l["type"] == "cycle" && l["data"]["job"] == job.name)
                .filter_map(|(_, l)| l["data"]["operation"][&job.count].as_u64())
                .next_back();
            let Some(asked) = asked else { continue };
            let running = cluster
                .get(&format!("/jobs/{}", job.id))
                .as_ref()
                .and_then(settled_parallelism);
            if running.map(u64::from) == Some(asked) {
                seen[i] = Some(run_started.elapsed());
            }
        }
        if seen.iter().all(Option::is_some) && both_seen_at.is_none() {
            both_seen_at = Some(Instant::now());
        }
        both_seen_at.is_some_and(|at| at.elapsed() > Duration::from_secs(12))
    });
    let run_time = run_started.elapsed();
    assert_eq!(
        out.code,
        Some(0),
        "flowscale run failed; stderr:\n{}",
        out.stderr
    );

    let mut report = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let cycles: Vec<_> = out.cycles(job.name).collect();
        assert!(
            !cycles.is_empty(),
            "no cycle of {} in {:?}",
            job.name,
            out.stderr
        );
        let failed: Vec<_> = cycles
            .iter()
            .filter(|(_, c)| c["stage"].get("Failed").is_some())
            .collect();
        assert!(
            failed.is_empty(),
            "failed cycles of {}: {failed:?}",
            job.name
        );
        let operations: Vec<_> = out.operations(job.name, &job.count).collect();
        assert!(
            !operations.is_empty(),
            "{} was never rescaled; stderr:\n{}\ncycles: {cycles:?}",
            job.name,
            out.stderr
        );
        let mut last = 1;
        for (n, (_, cycle, p)) in operations.iter().enumerate() {
            let p =
                p.unwrap_or_else(|| panic!("an operation of {} without count: {cycle}", job.name));
            if n == 0 {
                assert!(
                    p > 1,
                    "{}: the overloaded count was not scaled up: {cycle}",
                    job.name
                );
            }
            let decision = cycle["vertices"]
                .as_array()
                .and_then(|vs| vs.iter().find(|v| v["vertex"] == job.count.as_str()))
                .unwrap_or_else(|| panic!("no decision for count in {cycle}"));
            assert_eq!(decision["mode"], job.mode, "{decision}");
            assert_eq!(decision["aligned"], p, "{decision}");
            let target = decision["target"]
                .as_u64()
                .and_then(|t| u32::try_from(t).ok())
                .unwrap_or_else(|| panic!("no target in {decision}"));
            let current = decision["current"].as_u64().unwrap_or(0);
            if u64::from(target) > current {
                assert_eq!(
                    p,
                    (job.align)(target),
                    "{}: count rescaled to {p}, not what {} answers for target {target}",
                    job.name,
                    job.mode
                );
            }
            assert!(p <= VERTEX_MAX, "{}: {p} above the limit", job.name);
            last = p;
        }
        // Flink's own answers: count runs at the last parallelism flowscale asked for, every
        // other vertex kept its parallelism, the job is RUNNING, and the rescales completed.
        let details = wait_for("the last rescale", Duration::from_secs(30), || {
            cluster
                .get(&format!("/jobs/{}", job.id))
                .filter(|d| settled_parallelism(d) == Some(last))
        });
        for name in ["Source: source", "cost", "sink: Writer"] {
            let v = vertex(&details, name).unwrap_or_else(|| panic!("no {name} in {details}"));
            assert_eq!(v["parallelism"], 1, "{}: {name} was rescaled", job.name);
        }
        let history = cluster
            .get(&format!("/jobs/{}/rescales/history", job.id))
            .expect("rescale history");
        let completed = history.as_array().map_or(0, |entries| {
            entries
                .iter()
                .filter(|e| {
                    e["triggerCause"] == "UPDATE_REQUIREMENT" && e["terminalState"] == "COMPLETED"
                })
                .count()
        });
        assert!(
            completed >= 1,
            "{}: no completed rescale in {history}",
            job.name
        );
        let first_decision = operations[0].0;
        let decisions: Vec<String> = operations
            .iter()
            .map(|(t, c, p)| {
                let d = c["vertices"]
                    .as_array()
                    .and_then(|vs| vs.iter().find(|v| v["vertex"] == job.count.as_str()));
                format!(
                    "at {:.0?}: {} -> target {} -> aligned {} ({})",
                    t,
                    d.map_or(Value::Null, |d| d["current"].clone()),
                    d.map_or(Value::Null, |d| d["target"].clone()),
                    p.unwrap_or(0),
                    d.map_or(Value::Null, |d| d["reason"].clone())
                )
            })
            .collect();
        report.push(format!(
            "{} [{}]: {} cycles, first decision {first_decision:.1?} after the run started, \
             rescale seen by {:.1?}, {completed} completed rescale(s); decisions: {}",
            job.name,
            job.mode,
            cycles.len(),
            seen[i].unwrap_or_default(),
            decisions.join("; ")
        ));
    }
    drop(cluster);
    eprintln!(
        "flink e2e: prepare {prepare:.1?}, cluster start {cluster_start:.1?}, submit and run \
         {submitted:.1?}, flowscale run {run_time:.1?}, total {:.1?}",
        t0.elapsed()
    );
    for line in report {
        eprintln!("flink e2e: {line}");
    }
}
