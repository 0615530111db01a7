//! Reading a fleet file the same way for `run` and `validate`: what one refuses, the other
//! refuses too, and both see every problem of the file in one pass.

use std::path::Path;

use super::catalog::{load_catalog, plugins_dir};
use crate::config::{Diagnostic, KeyPolicy, read_fleet};
use crate::plan::{FleetPlan, plan_fleet};

/// A fleet file checked from top to bottom: its plan when nothing is wrong, else every problem.
pub struct CheckedFleet {
    /// The plan, only when there are no errors.
    pub plan: Option<FleetPlan>,
    /// Every problem: host section, each job's fields, keys, options and mode, its engine.
    pub errors: Vec<Diagnostic>,
    /// Non-fatal findings.
    pub warnings: Vec<Diagnostic>,
}

/// Reads, checks and plans the fleet file `file`. Problems found while reading do not stop the
/// checks of the jobs that could be read (their modes and options), so one pass reports all
/// of them; plugins come from `plugins_flag`, else the directory the file names.
pub fn check_fleet(file: &Path, plugins_flag: Option<&Path>, policy: KeyPolicy) -> CheckedFleet {
    let reading = match read_fleet(file, policy) {
        Ok(reading) => reading,
        Err(errors) => {
            return CheckedFleet {
                plan: None,
                errors: errors.0,
                warnings: Vec::new(),
            };
        }
    };
    let mut errors = reading.errors;
    let warnings = reading.fleet.warnings.clone();
    let catalog = load_catalog(&plugins_dir(
        plugins_flag,
        Some(&reading.fleet.host.plugins_dir),
    ));
    let plan = match plan_fleet(reading.fleet, catalog.as_ref()) {
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
        },
        _ => CheckedFleet {
            plan: None,
            errors,
            warnings,
        },
    }
}
