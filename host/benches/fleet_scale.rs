//! A fleet of replayed jobs paced to the wall clock on one host: threads, memory and how late
//! the cycles start.
//!
//! Every job replays the same two-vertex recording (`tests/fixtures/replay`) at one simulated
//! second per wall second (`--pace 1`) with a 10 s interval, so that all of them are due at the
//! same instants: the worst case for a scheduler. While the fleet runs, the process's thread
//! count and resident memory are sampled from `/proc/self/status`. At the end the bench prints
//! the lateness distribution of every cycle (start vs due time) and checks the bounds:
//! threads <= workers + 8, peak RSS <= 1 GB, no cycle more than one interval late.
//!
//! ```text
//! cargo bench --bench fleet_scale                                      # 1,000 jobs, 60 s
//! FLOWSCALE_SCALE_JOBS=10000 FLOWSCALE_SCALE_SECONDS=600 cargo bench --bench fleet_scale
//! ```
//!
//! `FLOWSCALE_SCALE_WORKERS` sets `[host] workers` (default: one per core).

#![warn(missing_docs, unreachable_pub)]

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use flowscale::alignment::NoCustomModes;
use flowscale::config::parse_fleet;
use flowscale::plan::plan_fleet;
use flowscale::runner::{Lateness, Pace, RunOptions, run_fleet};
use flowscale::state::{InMemoryStateStore, StateStore};

/// The cycle interval.
const INTERVAL: Duration = Duration::from_secs(10);
/// Threads besides the workers: main, the sampler, the watchdog, and room for the runtime.
const SPARE_THREADS: usize = 8;
/// The memory bound of the whole process.
const MAX_RSS_KB: u64 = 1024 * 1024;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// A field of `/proc/self/status` in its unit (kB for memory).
fn status_field(name: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.trim_start_matches(':').split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// The fixture's first and last observations, at 0 and at `seconds`: a replay answers with the
/// newest record at or before each step, so two records cover the whole run and each job holds
/// two observations, not one per step.
fn write_trace(dir: &Path, seconds: u64) -> std::path::PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/replay/backlog_then_scale_down.jsonl");
    let text = std::fs::read_to_string(&fixture).expect("the replay fixture");
    let records: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| serde_json::from_str(l).expect("a fixture record"))
        .collect();
    let first = records.first().expect("records").clone();
    let mut last = records.last().expect("records").clone();
    // Past the end, so that the last step (at `seconds`) is still within the recording.
    last["at_ms"] = serde_json::json!((seconds + 1) * 1000);
    let path = dir.join("trace.jsonl");
    std::fs::write(&path, format!("{first}\n{last}\n")).expect("write the trace");
    path
}

fn main() {
    let jobs = env_number("FLOWSCALE_SCALE_JOBS", 1000);
    let seconds = env_number("FLOWSCALE_SCALE_SECONDS", 60);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let workers = env_number("FLOWSCALE_SCALE_WORKERS", cores);
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = write_trace(dir.path(), seconds);
    let mut fleet = format!(
        "[host]\ninterval = \"{}s\"\nworkers = {workers}\n",
        INTERVAL.as_secs()
    );
    for i in 0..jobs {
        let _ = write!(
            fleet,
            "[[jobs]]\nname = \"replay-{i}\"\nengine = \"replay\"\ntrace = {:?}\n",
            trace.display().to_string()
        );
    }
    let fleet = parse_fleet(&dir.path().join("fleet.toml"), &fleet).expect("a valid fleet");
    let plan = plan_fleet(fleet, &NoCustomModes).expect("a valid plan");

    let stop = AtomicBool::new(false);
    let store: Mutex<Box<dyn StateStore + Send>> = Mutex::new(Box::new(InMemoryStateStore::new()));
    let options = RunOptions {
        once: false,
        wall_duration: None,
        simulated_duration: None,
        pace: Some(Pace::new(1.0).expect("a valid pace")),
        stop: &stop,
        store: &store,
        timelines: false,
        arbiter: true,
    };
    let (peak_threads, peak_rss_kb) = (AtomicU64::new(0), AtomicU64::new(0));
    let done = AtomicBool::new(false);
    let started = Instant::now();
    let runs = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Acquire) {
                if let Some(threads) = status_field("Threads") {
                    peak_threads.fetch_max(threads, Ordering::AcqRel);
                }
                if let Some(rss) = status_field("VmRSS") {
                    peak_rss_kb.fetch_max(rss, Ordering::AcqRel);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        let runs = run_fleet(&plan, &options, &|_| {});
        done.store(true, Ordering::Release);
        runs
    });
    let took = started.elapsed();

    let mut lateness = Lateness::default();
    let mut failed = 0;
    for run in &runs {
        lateness.merge(&run.lateness);
        failed += usize::from(run.error.is_some());
    }
    let steps: usize = runs.iter().map(|r| r.steps).sum();
    let peak_threads = peak_threads.into_inner();
    let peak_rss_kb = peak_rss_kb.into_inner();
    println!(
        "fleet_scale: {jobs} replay jobs, {seconds} s at --pace 1, interval {} s, {workers} workers",
        INTERVAL.as_secs()
    );
    println!(
        "  wall time {:.1} s, {steps} cycles, {failed} jobs failed",
        took.as_secs_f64()
    );
    println!(
        "  peak threads {peak_threads} (bound {}), peak RSS {:.0} MB (bound {} MB)",
        workers as usize + SPARE_THREADS,
        peak_rss_kb as f64 / 1024.0,
        MAX_RSS_KB / 1024
    );
    match lateness.summary() {
        Some(summary) => println!("  lateness: {summary}"),
        None => println!("  lateness: no cycle with a due time"),
    }

    let mut broken = Vec::new();
    if failed > 0 {
        broken.push(format!("{failed} jobs could not run"));
    }
    // One step at 0, then one every interval up to and including `seconds`.
    let expected = jobs as usize * (seconds / INTERVAL.as_secs() + 1) as usize;
    if steps != expected {
        broken.push(format!("{steps} cycles, expected {expected}"));
    }
    if peak_threads > workers + SPARE_THREADS as u64 {
        broken.push(format!("{peak_threads} threads"));
    }
    if peak_rss_kb > MAX_RSS_KB {
        broken.push(format!("{peak_rss_kb} kB resident"));
    }
    if lateness.max() > INTERVAL {
        broken.push(format!("a cycle {:?} late", lateness.max()));
    }
    if !broken.is_empty() {
        eprintln!("fleet_scale: out of bounds: {}", broken.join("; "));
        std::process::exit(1);
    }
}
