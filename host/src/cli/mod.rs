//! The command line: `run`, `simulate`, `align`, `plugins`, `validate`, `status`, `config`
//! (the configuration reference), and `completions` and `man` generated from its own definition.
//!
//! Human output by default, `--json` for machines. Diagnostics go to stderr; stdout carries
//! only the answer, so it stays parseable when there are warnings.

mod align;
mod catalog;
mod config;
mod docs;
pub(crate) mod exit_codes;
mod json_out;
mod load;
pub(crate) mod plugins;
mod reload;
mod run;
mod serving;
mod signals;
mod simulate;
mod status;
mod validate;
mod worker;

use std::process::ExitCode;

pub use align::batch_line as align_batch_line;

use clap::{Parser, Subcommand};

/// flowscale: an autoscaler for stream-processing jobs with pluggable parallelism alignment.
#[derive(Debug, Parser)]
#[command(name = "flowscale", version, about, long_about = None)]
pub(crate) struct App {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Align one vertex's target parallelism (or a batch of JSON lines) and explain why.
    Align(align::AlignArgs),
    /// Run the autoscaler over every job of a fleet configuration.
    Run(run::RunArgs),
    /// Run the autoscaler against a simulated job, under one or several alignment modes.
    Simulate(simulate::SimulateArgs),
    /// List the plugin files of the plugins directory, their modes, and why any was refused.
    Plugins(plugins::PluginsArgs),
    /// Check a fleet configuration and report every problem with file, line and key.
    Validate(validate::ValidateArgs),
    /// Show which host owns which job of a fleet shared through `[host] state` (PostgreSQL),
    /// and the live hosts.
    Status(status::StatusArgs),
    /// Print the configuration reference: every key, its type, default, valid values and
    /// meaning (`config keys`, `config keys --markdown`).
    Config(config::ConfigArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell.
    Completions(docs::CompletionsArgs),
    /// Print the man page (roff), or write one page per command into a directory.
    Man(docs::ManArgs),
    /// Serve one plugin file to a host over stdin/stdout (started by the host itself in
    /// `process` isolation; not for people).
    #[command(hide = true)]
    PluginWorker(worker::WorkerArgs),
}

/// Runs the command line; what `main` calls.
pub fn main_impl() -> ExitCode {
    init_tracing();
    let app = match App::try_parse() {
        Ok(app) => app,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() {
                exit_codes::USAGE
            } else {
                exit_codes::OK
            });
        }
    };
    let code = match app.command {
        Command::Align(args) => align::exec(args),
        Command::Plugins(args) => plugins::exec(args),
        Command::Run(args) => run::exec(args),
        Command::Simulate(args) => simulate::exec(args),
        Command::Validate(args) => validate::exec(args),
        Command::Status(args) => status::exec(args),
        Command::Config(args) => config::exec(args),
        Command::Completions(args) => docs::exec_completions(args),
        Command::Man(args) => docs::exec_man(args),
        Command::PluginWorker(args) => worker::exec(args),
    };
    // A plugin call still running on a thread the exit does not wait for would leave its
    // worker, and what the plugin started, behind.
    crate::plugins::isolation::end_worker_groups();
    ExitCode::from(code)
}

/// Logs go to stderr, filtered by `FLOWSCALE_LOG` (e.g. `FLOWSCALE_LOG=flowscale=debug`).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FLOWSCALE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .with_target(false)
        .compact()
        .try_init();
}

#[cfg(test)]
mod tests;
