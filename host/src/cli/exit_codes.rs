//! The exit codes of the `flowscale` binary.

/// Everything worked.
pub const OK: u8 = 0;
/// The command ran but something it was asked to check or do failed (a batch line, a
/// configuration error found by `validate`, a refused plugin, a failed cycle in `run --once`).
pub const FAILED: u8 = 1;
/// The command line was wrong (clap's own code for usage errors).
pub const USAGE: u8 = 2;
