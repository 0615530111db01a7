//! The exit codes of the `flowscale` binary.

/// Everything worked.
pub(crate) const OK: u8 = 0;
/// The command ran but something it was asked to check or do failed (a batch line, a
/// configuration error found by `validate`, a refused plugin, a failed cycle in `run --once`).
pub(crate) const FAILED: u8 = 1;
/// The command line was wrong (clap's own code for usage errors).
pub(crate) const USAGE: u8 = 2;
/// A simulated run (`run` on simulated or replayed jobs, `simulate`) was stopped by Ctrl-C
/// before its simulated time was over: 128 + 2 (SIGINT), what a shell reports for a command
/// that Ctrl-C ended. The partial summary is still printed, and stderr says at which simulated
/// time each job stopped, so the numbers are not mistaken for a full run. Stopping wall-clock
/// jobs (Flink) with Ctrl-C is their normal end and exits with `OK`.
pub(crate) const INTERRUPTED: u8 = 130;
