//! A fleet of many simulated jobs for the scale checks: `n` jobs cycling over the example jobs
//! (`examples/jobs/*.toml`) and the built-in alignment modes, each simulated for the same time.
//!
//! Built-in modes only, so that the fleet runs without any plugin built.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The built-in alignment modes the jobs of a scale fleet cycle through.
const MODES: [&str; 3] = ["BALANCED", "EVENLY_SPREAD", "ADVANCED"];

/// The example job files, sorted by name (so a fleet is the same on every machine).
pub fn example_jobs(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut jobs: Vec<PathBuf> = std::fs::read_dir(root.join("examples/jobs"))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    jobs.sort();
    Ok(jobs)
}

/// The text of a fleet file of `n` simulated jobs named `job-0000`, `job-0001`, ..., each
/// simulating one of `jobs` (in turn) for `duration` (Flink syntax, e.g. `"2h"`) under one of
/// the built-in modes (in turn). Job paths are written absolute, so the file can live anywhere.
pub fn scale_fleet(n: usize, jobs: &[PathBuf], duration: &str) -> String {
    let header = format!(
        "# {n} simulated jobs x {duration}: the example jobs and the built-in modes in turn.\n\
         [host]\ninterval = \"10s\"\n\n[defaults]\n\"metrics.window\" = \"5 min\"\n\
         \"stabilization.interval\" = \"1 min\"\n\"scaling-cooldown-period\" = \"5 min\"\n"
    );
    fleet_of(&header, n, jobs, duration)
}

/// `header` (the `[host]` and `[defaults]` sections) and the jobs of [`scale_fleet`]: job `i`
/// is the same in a fleet of any size, so that a fleet file of `m < n` jobs is a fleet of `n`
/// jobs with the last `n - m` removed.
pub fn fleet_of(header: &str, n: usize, jobs: &[PathBuf], duration: &str) -> String {
    let mut fleet = header.to_string();
    if jobs.is_empty() {
        return fleet;
    }
    for i in 0..n {
        let job = &jobs[i % jobs.len()];
        // Changes job and mode together only every `jobs.len()` jobs, so every pair occurs.
        let mode = MODES[(i / jobs.len()) % MODES.len()];
        let _ = write!(
            fleet,
            "\n[[jobs]]\nname = \"{}\"\njob = {:?}\nduration = \"{duration}\"\n\
             [jobs.config]\n\"scaling.alignment.mode\" = \"{mode}\"\n",
            job_name(i),
            job.display().to_string()
        );
    }
    fleet
}

/// The name of job `i` of a [`scale_fleet`].
pub fn job_name(i: usize) -> String {
    format!("job-{i:04}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fleet_names_every_job_once_and_cycles_through_jobs_and_modes() {
        let jobs = vec![PathBuf::from("/a.toml"), PathBuf::from("/b.toml")];
        let text = scale_fleet(7, &jobs, "2h");
        assert_eq!(text.matches("[[jobs]]").count(), 7);
        assert!(text.contains("name = \"job-0006\""));
        assert_eq!(text.matches("job = \"/a.toml\"").count(), 4);
        assert_eq!(text.matches("job = \"/b.toml\"").count(), 3);
        // Jobs 0-1 BALANCED, 2-3 EVENLY_SPREAD, 4-5 ADVANCED, 6 BALANCED.
        assert_eq!(text.matches("\"BALANCED\"").count(), 3);
        assert_eq!(text.matches("\"ADVANCED\"").count(), 2);
        assert_eq!(text.matches("duration = \"2h\"").count(), 7);
    }
}
