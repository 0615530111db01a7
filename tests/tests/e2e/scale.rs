//! `flowscale run` of a fleet of many simulated jobs stays within a memory budget per job, and
//! a job's memory does not grow with its simulated time. CI-sized: tens of jobs; docs/performance.md
//! ("A fleet of simulated jobs") has the command for 1,000.

use std::process::{Command, Stdio};

use flowscale_tests::scale_fleet::{example_jobs, scale_fleet};

use crate::harness::{flowscale_bin, repo_root};

/// The budget of the issue this check stands for: 300 MB for 1,000 jobs.
const BYTES_PER_JOB: u64 = 300 * 1000;

/// Runs `flowscale run` on a fleet of `jobs` simulated jobs of `duration` each and returns its
/// peak resident set size in bytes, as the kernel accounts it for the reaped child (`wait4`),
/// with its stdout (the readable log and the summary table).
fn peak_rss_of_run(jobs: usize, duration: &str) -> (u64, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fleet = dir.path().join("fleet.toml");
    let job_files = example_jobs(&repo_root()).expect("the example jobs are listed");
    std::fs::write(&fleet, scale_fleet(jobs, &job_files, duration)).expect("the fleet is written");
    #[allow(
        clippy::zombie_processes,
        reason = "reaped by wait4 below, which also reports its peak RSS"
    )]
    let child = Command::new(flowscale_bin())
        .arg("run")
        .arg(&fleet)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env_remove("FLOWSCALE_LOG")
        .spawn()
        .expect("run flowscale");
    let pid = libc::pid_t::try_from(child.id()).expect("a pid fits pid_t");
    let mut stdout = child.stdout.expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).expect("stdout is UTF-8");
        text
    });
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of that plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped (its `Child` handle never waits), and both
    // pointers are to live locals of the right types.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "flowscale run of {jobs} jobs x {duration} failed: status {status}"
    );
    let out = reader.join().expect("the reader thread ends");
    // Linux reports ru_maxrss in KiB.
    (u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024, out)
}

#[test]
fn a_fleet_of_simulated_jobs_stays_within_its_memory_budget_per_job() {
    let (one, _) = peak_rss_of_run(1, "1h");
    let jobs = 40;
    let (many, out) = peak_rss_of_run(jobs, "1h");
    assert!(
        out.contains("records processed"),
        "the summary table is printed"
    );
    let per_job = many.saturating_sub(one) / (jobs as u64 - 1);
    assert!(
        per_job <= BYTES_PER_JOB,
        "{jobs} jobs x 1h: {} KiB, one job {} KiB: {} KiB per job over the budget of {} KiB",
        many / 1024,
        one / 1024,
        per_job / 1024,
        BYTES_PER_JOB / 1024
    );
}

#[test]
fn a_simulated_jobs_memory_does_not_grow_with_its_simulated_time() {
    let jobs = 40;
    let (short, _) = peak_rss_of_run(jobs, "30min");
    let (long, _) = peak_rss_of_run(jobs, "3h");
    // Six times the ticks. A timeline kept whole costs about 300 bytes per tick and job for
    // these jobs, so it would add 40 x 9,000 x 300 bytes = 108 MB; the budget allows a tenth of
    // that, for the top 1% of ticks the percentiles keep and allocator noise.
    let allowed = jobs as u64 * 9_000 * 30;
    assert!(
        long <= short + allowed,
        "{jobs} jobs: {} KiB for 30 min, {} KiB for 3 h (allowed {} KiB more)",
        short / 1024,
        long / 1024,
        allowed / 1024
    );
}
