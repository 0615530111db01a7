//! The fleet file and the simulated job file, parsed and resolved as `flowscale validate` and
//! `run` do: `parse_fleet`, then `plan_fleet` (settings, mode resolution, each simulated job's
//! file), and the job file on its own with `Simulation::from_toml_str`.
//!
//! Input: a fleet file, optionally followed by [`SEPARATOR`] and a job file. Every simulated job
//! of the fleet is pointed at that job file (or, without one, at an example job), so no input
//! can make the target read other files.
//!
//! Never panics; what is accepted obeys the limits a run relies on.

#![warn(missing_docs, unreachable_pub)]
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use flowscale::alignment::NoCustomModes;
use flowscale::config::{EngineSpec, parse_fleet};
use flowscale::plan::plan_fleet;
use flowscale::sim::Simulation;
use libfuzzer_sys::fuzz_target;

/// Separates the fleet file from the job file in an input.
const SEPARATOR: &[u8] = b"\n# fuzz: job file\n";
/// The job file when the input has none.
const EXAMPLE_JOB: &[u8] = include_bytes!("../../examples/jobs/keyed-step-spike.toml");
/// Flink's upper bound on a vertex's parallelism.
const MAX_PARALLELISM: i64 = 32_768;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temp dir").keep())
}

fn check_job(text: &[u8]) {
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let Ok(sim) = Simulation::from_toml_str(text) else {
        return;
    };
    let spec = sim.spec();
    assert!(!spec.vertices.is_empty(), "accepted a job without vertices");
    assert!(spec.tick_ms > 0, "accepted tick {} ms", spec.tick_ms);
    for v in &spec.vertices {
        assert!(
            v.parallelism >= 1 && v.parallelism <= v.max_parallelism,
            "vertex `{}`: accepted parallelism {} with max parallelism {}",
            v.id,
            v.parallelism,
            v.max_parallelism
        );
    }
    for e in &spec.edges {
        assert!(e.from < spec.vertices.len() && e.to < spec.vertices.len());
    }
    // The first observation is what every engine consumer starts from.
    let _ = sim.observation();
}

fuzz_target!(|data: &[u8]| {
    let (fleet, job) = match data.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
        Some(at) => (&data[..at], &data[at + SEPARATOR.len()..]),
        None => (data, EXAMPLE_JOB),
    };
    check_job(job);
    // `load_fleet` refuses a file that is not UTF-8 before parsing.
    let Ok(fleet_text) = std::str::from_utf8(fleet) else {
        return;
    };
    let dir = dir();
    let job_path = dir.join("job.toml");
    std::fs::write(&job_path, job).expect("write the job file");
    let Ok(mut fleet) = parse_fleet(&dir.join("fleet.toml"), fleet_text) else {
        return;
    };
    assert!(!fleet.host.interval.is_zero(), "accepted a zero interval");
    for spec in &mut fleet.jobs {
        if let EngineSpec::Sim { job, .. } = &mut spec.engine {
            *job = job_path.clone();
        }
    }
    let Ok(plan) = plan_fleet(fleet, &NoCustomModes) else {
        return;
    };
    for job in &plan.jobs {
        let o = &job.settings.autoscaler;
        let (min, max) = (o.vertex_min_parallelism, o.vertex_max_parallelism);
        assert!(
            1 <= min && min <= max && max <= MAX_PARALLELISM,
            "job `{}`: accepted parallelism limits [{min}, {max}]",
            job.spec.name
        );
        assert!(
            o.utilization_target > 0.0 && o.utilization_target <= 1.0,
            "job `{}`: accepted utilization target {}",
            job.spec.name,
            o.utilization_target
        );
    }
});
