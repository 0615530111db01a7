//! From a parsed fleet configuration to what the host will run: each job's resolved mode and
//! settings, with every problem located in the file.

use crate::alignment::{JobAlignment, ModeCatalog, ResolveError};
use crate::config::{
    ConfigErrors, Diagnostic, FleetConfig, JobConfig, JobSpec, MODE_KEY_FOR_LOCATION,
    unknown_key_warning,
};

/// One job, ready to run.
#[derive(Debug, Clone)]
pub struct JobPlan {
    /// The job as configured.
    pub spec: JobSpec,
    /// Its resolved alignment.
    pub alignment: JobAlignment,
}

/// A fleet, ready to run.
#[derive(Debug, Clone)]
pub struct FleetPlan {
    /// The configuration it was made from.
    pub fleet: FleetConfig,
    /// The jobs.
    pub jobs: Vec<JobPlan>,
    /// Non-fatal findings.
    pub warnings: Vec<Diagnostic>,
}

/// Where a key of a job's configuration was written, or the job entry when it was not written.
pub fn locate(config: &JobConfig, key: &str, fallback: &str) -> String {
    config
        .origin(key)
        .or_else(|| config.origin(MODE_KEY_FOR_LOCATION))
        .map(|o| o.location())
        .unwrap_or_else(|| fallback.to_string())
}

/// Located diagnostics for a job's resolution errors.
pub fn resolve_diagnostics(spec: &JobSpec, errors: &[ResolveError]) -> Vec<Diagnostic> {
    errors
        .iter()
        .map(|e| {
            Diagnostic::new(
                locate(&spec.config, &e.key, &spec.location),
                format!("job `{}`: {e}", spec.name),
            )
        })
        .collect()
}

/// Checks every job of a fleet and resolves its mode, reporting all problems at once.
pub fn plan_fleet(
    fleet: FleetConfig,
    catalog: &dyn ModeCatalog,
) -> Result<FleetPlan, ConfigErrors> {
    let mut errors = Vec::new();
    let mut warnings = fleet.warnings.clone();
    let mut jobs = Vec::new();
    for spec in &fleet.jobs {
        for (key, _) in spec.config.iter() {
            let origin = spec.config.origin(key);
            let raw = origin.map(|o| o.raw_key.as_str()).unwrap_or(key);
            if let Some(message) = unknown_key_warning(key, raw) {
                let location = origin
                    .map(|o| o.location())
                    .unwrap_or_else(|| spec.location.clone());
                warnings.push(Diagnostic::new(location, message));
            }
        }
        match JobAlignment::resolve(&spec.name, &spec.config, catalog) {
            Ok(alignment) => jobs.push(JobPlan {
                spec: spec.clone(),
                alignment,
            }),
            Err(resolve_errors) => errors.extend(resolve_diagnostics(spec, &resolve_errors)),
        }
    }
    if errors.is_empty() {
        Ok(FleetPlan {
            fleet,
            jobs,
            warnings,
        })
    } else {
        Err(ConfigErrors(errors))
    }
}
