//! `flowscale plugin-worker FILE`: the worker process of `process` isolation. The host starts
//! it; its stdin and stdout carry the protocol (see `plugins::isolation::protocol`), so it
//! prints nothing there itself. Errors go to stderr, which the host shares with it.

use std::path::PathBuf;

use super::exit_codes;
use crate::plugins::isolation::{WorkerLimits, serve};
use crate::plugins::load_file;

/// Arguments of `flowscale plugin-worker`.
#[derive(Debug, clap::Args)]
pub(super) struct WorkerArgs {
    /// The plugin file to serve.
    file: PathBuf,
    /// The most verbose log level the host records (1 error ... 5 trace).
    #[arg(long, default_value_t = 2)]
    log_level: u8,
    /// RLIMIT_AS of the worker, in bytes.
    #[arg(long)]
    max_address_space: Option<u64>,
    /// RLIMIT_CPU of the worker, in seconds.
    #[arg(long)]
    max_cpu_seconds: Option<u64>,
}

/// Runs `flowscale plugin-worker`.
pub(super) fn exec(args: WorkerArgs) -> u8 {
    let limits = WorkerLimits {
        address_space: args.max_address_space,
        cpu_seconds: args.max_cpu_seconds,
    };
    match serve(&args.file, limits, args.log_level, load_file) {
        Ok(()) => exit_codes::OK,
        Err(err) => {
            eprintln!("error: plugin worker for {}: {err}", args.file.display());
            exit_codes::FAILED
        }
    }
}
