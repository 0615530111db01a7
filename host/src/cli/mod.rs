//! The command line.

use std::process::ExitCode;

/// Runs the `flowscale` command line.
pub fn main_impl() -> ExitCode {
    ExitCode::SUCCESS
}
