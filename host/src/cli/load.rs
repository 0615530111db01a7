//! Reading a fleet file the same way for `run`, `validate` and a reload while running: what one
//! refuses, the others refuse too, and each sees every problem of the file in one pass.

use std::path::Path;

use super::catalog::{isolation, load_catalog_isolated, plugins_dir};
use crate::config::{
    ConfigErrors, Diagnostic, EngineSpec, FleetConfig, FleetReading, KeyPolicy, PluginIsolation,
    read_fleet,
};
use crate::plan::PluginCatalog;
use crate::plan::{FleetPlan, plan_fleet, reload_fleet};
use crate::plugins::LivePlugins;
use crate::runner::check_state_dir;
use crate::state::postgres::check_link;

/// The custom modes of a plugins directory, as loaded at start.
pub(super) type Catalog = Box<dyn PluginCatalog + Send + Sync>;

/// A fleet file checked from top to bottom: its plan when nothing is wrong, else every problem.
pub(super) struct CheckedFleet {
    /// The plan, only when there are no errors.
    pub(crate) plan: Option<FleetPlan>,
    /// Every problem: host section, each job's fields, keys, options and mode, its engine, and
    /// (when asked) the state directory.
    pub(crate) errors: Vec<Diagnostic>,
    /// Non-fatal findings.
    pub(crate) warnings: Vec<Diagnostic>,
    /// The plugins the file was planned with, when the file could be read far enough to know
    /// where they are.
    pub(crate) catalog: Option<Catalog>,
    /// The watched plugins directory they came from (with [`Checks::watch_plugins`]).
    pub(crate) plugins: Option<LivePlugins>,
}

impl CheckedFleet {
    fn unreadable(errors: Vec<Diagnostic>) -> CheckedFleet {
        CheckedFleet {
            plan: None,
            errors,
            warnings: Vec::new(),
            catalog: None,
            plugins: None,
        }
    }
}

/// What to check besides the file itself.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Checks {
    /// Which unknown keys are errors.
    pub(crate) policy: KeyPolicy,
    /// Also look into the state directory (`validate`; `run` does when it opens it).
    pub(crate) state_dir: bool,
    /// `--plugin-isolation`, over the file's `[host] plugin-isolation`.
    pub(crate) isolation: Option<PluginIsolation>,
    /// Keep watching the plugins directory after loading it (`run`).
    pub(crate) watch_plugins: bool,
}

/// Reads, checks and plans the fleet file `file`. Problems found while reading do not stop the
/// checks of the jobs that could be read (their modes and options), so one pass reports all
/// of them; plugins come from `plugins_flag`, else the directory the file names.
pub(super) fn check_fleet(
    file: &Path,
    plugins_flag: Option<&Path>,
    checks: Checks,
) -> CheckedFleet {
    let mut reading = match read_fleet(file, checks.policy) {
        Ok(reading) => reading,
        Err(errors) => return CheckedFleet::unreadable(errors.0),
    };
    let mut extra_warnings = Vec::new();
    if checks.state_dir
        && let Some(dir) = reading.fleet.host.state_dir.clone()
    {
        let entries: Vec<(&str, &EngineSpec)> = reading
            .fleet
            .jobs
            .iter()
            .map(|j| (j.name.as_str(), &j.engine))
            .collect();
        let state = check_state_dir(&dir, &entries);
        reading.errors.extend(state.errors);
        extra_warnings = state.warnings;
    }
    // The state database's URL and TLS files, as far as they can be checked without connecting.
    if checks.state_dir
        && let Some(url) = reading.fleet.host.state_url.as_deref()
        && let Err(err) = check_link(url)
    {
        reading.errors.push(Diagnostic::new(
            format!("{}: host.state", file.display()),
            format!("the state database cannot be used: {err}"),
        ));
    }
    let dir = plugins_dir(plugins_flag, Some(&reading.fleet.host.plugins_dir));
    let isolation = isolation(checks.isolation, Some(&reading.fleet.host));
    let (catalog, plugins): (Catalog, _) = if checks.watch_plugins {
        let plugins = LivePlugins::open(&dir, isolation);
        (Box::new(plugins.registry()), Some(plugins))
    } else {
        (load_catalog_isolated(&dir, &isolation), None)
    };
    let mut checked = plan_reading(reading, |fleet| plan_fleet(fleet, catalog.as_ref()));
    checked.warnings.extend(extra_warnings);
    checked.catalog = Some(catalog);
    checked.plugins = plugins;
    checked
}

/// Reads, checks and plans `file` again while the host runs the configuration `running`, with
/// the modes it has now: see [`reload_fleet`] for the one thing it lets pass that a start does
/// not (a job whose mode went missing while running).
pub(super) fn recheck_fleet(
    file: &Path,
    running: &FleetConfig,
    catalog: &dyn PluginCatalog,
    policy: KeyPolicy,
) -> CheckedFleet {
    match read_fleet(file, policy) {
        Ok(reading) => plan_reading(reading, |fleet| reload_fleet(fleet, running, catalog)),
        Err(errors) => CheckedFleet::unreadable(errors.0),
    }
}

fn plan_reading(
    reading: FleetReading,
    plan: impl FnOnce(FleetConfig) -> Result<FleetPlan, ConfigErrors>,
) -> CheckedFleet {
    let mut errors = reading.errors;
    let warnings = reading.fleet.warnings.clone();
    let plan = match plan(reading.fleet) {
        Ok(plan) => Some(plan),
        Err(plan_errors) => {
            errors.extend(plan_errors.0);
            None
        }
    };
    match plan {
        Some(plan) if errors.is_empty() => CheckedFleet {
            warnings: plan.warnings.clone(),
            plan: Some(plan),
            errors,
            catalog: None,
            plugins: None,
        },
        _ => CheckedFleet {
            plan: None,
            errors,
            warnings,
            catalog: None,
            plugins: None,
        },
    }
}
