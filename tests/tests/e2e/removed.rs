//! A fleet file that grows from 3 simulated jobs to 10,000 and back, twice, while `flowscale
//! run --listen` runs: after each return to 3 jobs, `/api/v1/jobs` lists exactly those 3, a
//! removed job's page answers 404, `/metrics` has no series of a removed job (also none that a
//! step still running during the reload published afterwards), and the host's resident memory
//! is back near what it was before the fleet first grew.
//!
//! The simulated jobs step every second of wall time (`--pace 1`, `interval = "1s"`), so that
//! thousands of steps are under way when a reload removes their jobs. On the 2-core development
//! machine a debug build takes about 50 s (48 s quiet, 66 s beside another build), most of it
//! reading the 10,000-job fleet file and starting its jobs.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use flowscale_tests::scale_fleet::{example_jobs, fleet_of, job_name};

use crate::harness::{flowscale_bin, repo_root};
use crate::reload::write;
use crate::serve::{Killed, free_port, get, wait_for};

/// The jobs that stay.
const KEPT: usize = 3;
/// The fleet it grows to.
const LARGE: usize = 10_000;

/// `n` simulated jobs cycling every second, deciding from a window of a few seconds (so that
/// each has vertex gauges soon), for a year of simulated time: none ends by itself.
fn fleet(n: usize, jobs: &[PathBuf]) -> String {
    let header = "[host]\ninterval = \"1s\"\n\n[defaults]\n\"metrics.window\" = \"3s\"\n\
                  \"stabilization.interval\" = \"0\"\n";
    fleet_of(header, n, jobs, "365d")
}

/// The names `/api/v1/jobs` lists.
fn listed(base: &str) -> BTreeSet<String> {
    let (status, body) = get(&format!("{base}/api/v1/jobs"));
    if status != 200 {
        return BTreeSet::new();
    }
    let jobs: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    jobs.as_array()
        .map(|jobs| {
            jobs.iter()
                .filter_map(|j| j["job"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The sample lines of `text` (a `/metrics` text) with a `job` label, with the label's value.
fn job_samples(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (_, rest) = l.split_once("job=\"")?;
            let (job, _) = rest.split_once('"')?;
            Some((job, l))
        })
        .collect()
}

/// The process's resident set size (`VmRSS`), in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the host runs");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line");
    kib * 1024
}

const MIB: u64 = 1024 * 1024;

#[test]
fn jobs_a_reload_removes_leave_the_api_the_metrics_and_the_memory() {
    let began = Instant::now();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("fleet.toml");
    let jobs = example_jobs(&repo_root()).expect("the example jobs are listed");
    write(&path, &fleet(KEPT, &jobs));
    let port = free_port();
    let host = Killed(
        Command::new(flowscale_bin())
            .arg("run")
            .arg(&path)
            .args(["--pace", "1", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .env_remove("FLOWSCALE_LOG")
            .spawn()
            .expect("flowscale runs"),
    );
    let pid = host.0.id();
    let base = format!("http://127.0.0.1:{port}");
    let kept: BTreeSet<String> = (0..KEPT).map(job_name).collect();
    wait_for("the first jobs", Duration::from_secs(60), || {
        (listed(&base) == kept).then_some(())
    });
    // The host with its server, its workers and its first jobs a few steps in.
    std::thread::sleep(Duration::from_secs(3));
    let first = rss(pid);
    let mut peak = first;

    for round in 1..=2 {
        write(&path, &fleet(LARGE, &jobs));
        wait_for("the large fleet", Duration::from_secs(120), || {
            // Every other second: listing 10,000 jobs is not free either.
            std::thread::sleep(Duration::from_millis(1750));
            (listed(&base).len() == LARGE).then_some(())
        });
        // A good share of the jobs have stepped and decided (they have vertex gauges); their
        // steps keep coming, one a second each, and many are under way at any moment. Looked
        // at every other second: encoding the metrics of 10,000 jobs takes a debug build's
        // server a while, and the jobs need the cores.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            std::thread::sleep(Duration::from_secs(2));
            let (_, text) = get(&format!("{base}/metrics"));
            let gauged: BTreeSet<&str> = job_samples(&text)
                .into_iter()
                .filter(|(_, l)| l.starts_with("flowscale_vertex_parallelism{"))
                .map(|(job, _)| job)
                .collect();
            if gauged.len() >= LARGE / 20 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: {} of {LARGE} jobs decided in 120 s",
                gauged.len()
            );
        }
        peak = peak.max(rss(pid));

        write(&path, &fleet(KEPT, &jobs));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let now = listed(&base);
            if now == kept {
                break;
            }
            let removed: Vec<&String> = now.difference(&kept).collect();
            assert!(
                Instant::now() < deadline || removed.len() >= LARGE - KEPT,
                "round {round}: 60 s after the reload, /api/v1/jobs still lists {} removed \
                 jobs, e.g. {:?}",
                removed.len(),
                &removed[..removed.len().min(5)]
            );
            assert!(
                Instant::now() < deadline,
                "round {round}: the reload was not applied"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        // The steps under way when the reload was applied end after it: they have published
        // by now (the host makes every removed job's step due at once).
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(listed(&base), kept, "round {round}: /api/v1/jobs");
        let (status, text) = get(&format!("{base}/metrics"));
        assert_eq!(status, 200);
        let strays: Vec<&str> = job_samples(&text)
            .into_iter()
            .filter(|(job, _)| !kept.contains(*job))
            .map(|(_, line)| line)
            .collect();
        assert!(
            strays.is_empty(),
            "round {round}: {} series of removed jobs in /metrics, e.g. {:?}",
            strays.len(),
            &strays[..strays.len().min(5)]
        );
        assert!(
            job_samples(&text)
                .iter()
                .any(|(job, l)| *job == "job-0000" && l.starts_with("flowscale_decisions_total")),
            "the kept jobs keep their series:\n{text}"
        );
        for gone in [job_name(KEPT), job_name(LARGE / 2), job_name(LARGE - 1)] {
            let (status, body) = get(&format!("{base}/api/v1/jobs/{gone}"));
            assert_eq!(status, 404, "round {round}: /api/v1/jobs/{gone}: {body}");
        }

        // The bound: half as much again as the host held with its first jobs (the kept jobs'
        // windows and the server's cached texts grow a little; the allocator keeps some
        // pages), plus a fifth of what the large fleet added (pages the allocator keeps
        // because a live block sits in them, and the kernel's transparent huge pages filling
        // in around them). A host that kept the removed jobs' view, series, runs or simulation
        // state keeps nearly all of it: 300 MB and more of a debug build's 10,000 jobs.
        let bound = first * 3 / 2 + peak.saturating_sub(first) / 5;
        // The memory is given back once the removed jobs' tasks have ended and the workers
        // have collected their free pages: a few seconds.
        let mut lowest = u64::MAX;
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            lowest = lowest.min(rss(pid));
            if lowest <= bound {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        eprintln!(
            "round {round}: resident {} MiB with {KEPT} jobs first, {} MiB at the peak with \
             {LARGE}, {} MiB back at {KEPT} (bound {} MiB), {:.0?} in",
            first / MIB,
            peak / MIB,
            lowest / MIB,
            bound / MIB,
            began.elapsed()
        );
        assert!(
            lowest <= bound,
            "round {round}: {} MiB resident after going back to {KEPT} jobs, more than {} MiB \
             ({} MiB with them first, {} MiB at the peak)",
            lowest / MIB,
            bound / MIB,
            first / MIB,
            peak / MIB
        );
    }
    drop(host);
}
