//! Reading a large fleet file: `flowscale validate` on fleets of 12,500 to 100,000 jobs, each
//! job carrying keys flowscale does not read (one with the autoscaler prefix, reported as
//! ignored, one a plain Flink key, passed silently) as fleets exported from Flink do.
//!
//! Reading must be linear in the size of the file: the bench prints the time per 1,000 jobs at
//! each size and its ratio between the largest and the smallest fleet (1.0 when linear, 8.0 when
//! quadratic over these sizes), and checks that the ratio stays below 2 and that the 100,000-job
//! file is read in under 30 s.
//!
//! ```text
//! cargo bench -p flowscale --bench fleet_read
//! ```

#![warn(missing_docs, unreachable_pub)]

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The fleet sizes, each twice the one before.
const SIZES: [usize; 4] = [12_500, 25_000, 50_000, 100_000];
/// The most a 100,000-job fleet may take to validate.
const MOST_FOR_LARGEST: Duration = Duration::from_secs(30);
/// The largest ratio of the per-job time of the largest fleet to that of the smallest.
const MOST_RATIO: f64 = 2.0;

/// A fleet of `jobs` simulated jobs sharing one job file, written to `dir`.
fn write_fleet(dir: &Path, jobs: usize) -> std::path::PathBuf {
    let job = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/jobs/keyed-step-spike.toml");
    let job = job.canonicalize().expect("the example job file");
    let mut text = String::from("[host]\ninterval = \"10s\"\n\n");
    for i in 0..jobs {
        writeln!(
            text,
            "[[jobs]]\nname = \"job-{i}\"\njob = \"{}\"\nduration = \"1h\"\n[jobs.config]\n\
             \"job.autoscaler.not-read-here\" = \"1\"\n\"pipeline.name\" = \"job {i}\"\n",
            job.display()
        )
        .expect("write to a string");
    }
    let path = dir.join(format!("fleet-{jobs}.toml"));
    std::fs::write(&path, text).expect("write the fleet");
    path
}

/// How long `flowscale validate FILE` takes, which must succeed (with warnings).
fn validate(file: &Path) -> Duration {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_flowscale"))
        .arg("validate")
        .arg(file)
        .output()
        .expect("run flowscale validate");
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "validate {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut per_thousand = Vec::new();
    println!("jobs      file MB   validate   per 1,000 jobs");
    for jobs in SIZES {
        let file = write_fleet(dir.path(), jobs);
        let size = std::fs::metadata(&file).map_or(0, |m| m.len());
        let took = validate(&file);
        let per = took.as_secs_f64() * 1000.0 / jobs as f64;
        println!(
            "{jobs:>7}   {:>7.1}   {:>7.2} s   {:>7.1} ms",
            size as f64 / 1e6,
            took.as_secs_f64(),
            per * 1000.0
        );
        per_thousand.push((jobs, took, per));
    }
    let (_, _, first) = per_thousand[0];
    let (largest, took, last) = per_thousand[per_thousand.len() - 1];
    let ratio = last / first;
    println!(
        "per-job time, {largest} jobs / {} jobs: {ratio:.2}",
        SIZES[0]
    );
    let mut failed = false;
    if ratio > MOST_RATIO {
        eprintln!("FAIL: reading is not linear (ratio {ratio:.2} > {MOST_RATIO})");
        failed = true;
    }
    if took > MOST_FOR_LARGEST {
        eprintln!("FAIL: {largest} jobs took {took:?} (> {MOST_FOR_LARGEST:?})");
        failed = true;
    }
    if failed {
        std::process::exit(1);
    }
}
