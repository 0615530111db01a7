//! The command line.

pub mod plugins;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// flowscale: an autoscaler for stream-processing jobs with pluggable parallelism alignment.
#[derive(Debug, Parser)]
#[command(name = "flowscale", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the plugin files of the plugins directory, their modes, and why any was refused.
    Plugins(plugins::PluginsArgs),
}

/// Runs the `flowscale` command line.
pub fn main_impl() -> ExitCode {
    init_tracing();
    match Cli::parse().command {
        Command::Plugins(args) => plugins::exec(args),
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
