//! `flowscale validate`: check a fleet configuration, and the state directory it names, and
//! report every problem at once.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::catalog::{load_catalog, plugins_dir};
use super::exit_codes;
use crate::config::{Diagnostic, EngineSpec, load_fleet};
use crate::plan::plan_fleet;
use crate::runner::{StateCheck, check_state_dir};

/// Arguments of `flowscale validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The fleet configuration file.
    file: PathBuf,
    /// Plugins directory (default: the one the file names, else plugins/ beside it).
    #[arg(long, env = "FLOWSCALE_PLUGINS_DIR")]
    plugins: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
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
pub fn exec(args: ValidateArgs) -> u8 {
    let mut state = StateCheck::default();
    let (jobs, mut errors, mut warnings) = match load_fleet(&args.file) {
        Err(errors) => (Vec::new(), errors.0, Vec::new()),
        Ok(fleet) => {
            if let Some(dir) = &fleet.host.state_dir {
                let entries: Vec<(&str, &EngineSpec)> = fleet
                    .jobs
                    .iter()
                    .map(|j| (j.name.as_str(), &j.engine))
                    .collect();
                state = check_state_dir(dir, &entries);
            }
            let dir = plugins_dir(args.plugins.as_deref(), Some(&fleet.host.plugins_dir));
            let catalog = load_catalog(&dir);
            let warnings = fleet.warnings.clone();
            match plan_fleet(fleet, catalog.as_ref()) {
                Ok(plan) => {
                    let jobs = plan
                        .jobs
                        .iter()
                        .map(|j| JobReport {
                            name: j.spec.name.clone(),
                            mode: j.alignment.mode_id(),
                        })
                        .collect();
                    (jobs, Vec::new(), plan.warnings)
                }
                Err(errors) => (Vec::new(), errors.0, warnings),
            }
        }
    };
    errors.extend(state.errors);
    warnings.extend(state.warnings);
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
        serde_json::to_writer_pretty(&mut out, &report)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
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
