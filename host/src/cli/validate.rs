//! `flowscale validate`: check a fleet configuration, and the state directory it names, and
//! report every problem at once.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::exit_codes;
use super::json_out::write_json;
use super::load::{Checks, check_fleet};
use crate::config::{Diagnostic, KeyPolicy};

/// Arguments of `flowscale validate`.
#[derive(Debug, clap::Args)]
pub(super) struct ValidateArgs {
    /// The fleet configuration file.
    file: PathBuf,
    /// Plugins directory (default: the one the file names, else plugins/ beside it).
    #[arg(long, env = "FLOWSCALE_PLUGINS_DIR")]
    plugins: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Refuse every key flowscale does not read, not only misspellings of the keys it reads
    /// (by default other keys of a Flink configuration are accepted and ignored).
    #[arg(long)]
    strict: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    file: String,
    valid: bool,
    jobs: Vec<JobReport>,
    errors: Vec<String>,
    warnings: Vec<String>,
}

#[derive(Debug, Serialize)]
struct JobReport {
    name: String,
    mode: String,
}

/// Runs `flowscale validate`.
pub(super) fn exec(args: ValidateArgs) -> u8 {
    let checked = check_fleet(
        &args.file,
        args.plugins.as_deref(),
        Checks {
            policy: KeyPolicy {
                strict: args.strict,
            },
            state_dir: true,
            isolation: None,
            watch_plugins: false,
        },
    );
    let jobs = checked
        .plan
        .iter()
        .flat_map(|plan| &plan.jobs)
        .map(|j| JobReport {
            name: j.spec.name.clone(),
            mode: j.alignment.mode_id(),
        })
        .collect();
    let (errors, warnings) = (checked.errors, checked.warnings);
    let text = |d: &[Diagnostic]| d.iter().map(ToString::to_string).collect::<Vec<_>>();
    let report = Report {
        file: args.file.display().to_string(),
        valid: errors.is_empty(),
        jobs,
        errors: text(&errors),
        warnings: text(&warnings),
    };
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        write_json(&mut out, &report)
    } else {
        print_human(&mut out, &report)
    };
    if written.is_err() {
        return exit_codes::FAILED;
    }
    if report.valid {
        exit_codes::OK
    } else {
        exit_codes::FAILED
    }
}

fn print_human(out: &mut impl Write, report: &Report) -> std::io::Result<()> {
    for warning in &report.warnings {
        writeln!(out, "warning: {warning}")?;
    }
    for error in &report.errors {
        writeln!(out, "error: {error}")?;
    }
    if report.valid {
        writeln!(out, "{}: valid, {} job(s)", report.file, report.jobs.len())?;
        for job in &report.jobs {
            writeln!(out, "  {:<24} mode {}", job.name, job.mode)?;
        }
    } else {
        writeln!(out, "{}: {} error(s)", report.file, report.errors.len())?;
    }
    Ok(())
}
