//! A fleet's jobs checked together: each resolved mode and settings, or every problem at once.

use crate::alignment::{JobAlignment, ModeCatalog};
use crate::config::{
    ConfigErrors, Diagnostic, EngineSpec, FleetConfig, JobConfig, JobSpec, KeyError,
    MODE_KEY_FOR_LOCATION,
};
use crate::events::Event;
use crate::sim::Simulation;

use super::settings::JobSettings;

/// One job, ready to run.
#[derive(Debug, Clone)]
pub struct JobPlan {
    /// The job as configured.
    pub spec: JobSpec,
    /// Its resolved alignment.
    pub(crate) alignment: JobAlignment,
    /// Its other settings.
    pub settings: JobSettings,
    /// Events to report at the job's next step when it takes this plan (a mode that fell back
    /// to BALANCED because its plugin went away).
    pub(crate) notes: Vec<Event>,
}

/// A fleet, ready to run.
#[derive(Debug, Clone)]
pub struct FleetPlan {
    /// The configuration it was made from.
    pub(crate) fleet: FleetConfig,
    /// The jobs.
    pub jobs: Vec<JobPlan>,
    /// Non-fatal findings.
    pub(crate) warnings: Vec<Diagnostic>,
}

/// Where a key of a job's configuration was written, or the job entry when it was not written.
pub(crate) fn locate(config: &JobConfig, key: &str, fallback: &str) -> String {
    config
        .origin(key)
        .or_else(|| config.origin(MODE_KEY_FOR_LOCATION))
        .map(|o| o.location())
        .unwrap_or_else(|| fallback.to_string())
}

/// Located diagnostics for a job's resolution errors.
pub(crate) fn resolve_diagnostics(spec: &JobSpec, errors: &[KeyError]) -> Vec<Diagnostic> {
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
    plan_with(fleet, catalog, false)
}

/// Plans a fleet that was already checked again with the custom modes of `catalog` (the plugins
/// directory changed while the host runs): a job whose custom mode is not in it any more aligns
/// with BALANCED until it is back, its plan's notes saying so (a `ModeFallback` event), instead
/// of failing the whole plan.
pub(crate) fn replan_fleet(
    fleet: FleetConfig,
    catalog: &dyn ModeCatalog,
) -> Result<FleetPlan, ConfigErrors> {
    plan_with(fleet, catalog, true)
}

fn plan_with(
    fleet: FleetConfig,
    catalog: &dyn ModeCatalog,
    lenient: bool,
) -> Result<FleetPlan, ConfigErrors> {
    let mut errors = Vec::new();
    let warnings = fleet.warnings.clone();
    let mut jobs = Vec::new();
    for spec in &fleet.jobs {
        let mut notes = Vec::new();
        let alignment = if lenient {
            let (alignment, fallback) =
                JobAlignment::resolve_or_balanced(&spec.name, &spec.config, catalog);
            notes = fallback;
            Some(alignment)
        } else {
            JobAlignment::resolve(&spec.name, &spec.config, catalog)
                .map_err(|resolve_errors| {
                    errors.extend(resolve_diagnostics(spec, &resolve_errors));
                })
                .ok()
        };
        let settings = JobSettings::from_config(&spec.config)
            .map_err(|option_errors| {
                errors.extend(option_errors.iter().map(|e| {
                    Diagnostic::new(
                        spec.config
                            .origin(&e.key)
                            .map(|o| o.location())
                            .unwrap_or_else(|| spec.location.clone()),
                        format!("job `{}`: {e}", spec.name),
                    )
                }))
            })
            .ok();
        errors.extend(engine_diagnostics(spec));
        if let (Some(alignment), Some(settings)) = (alignment, settings) {
            jobs.push(JobPlan {
                spec: spec.clone(),
                alignment,
                settings,
                notes,
            });
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

/// Problems with what a job's engine entry points to (checked without contacting a cluster).
fn engine_diagnostics(spec: &JobSpec) -> Vec<Diagnostic> {
    let problem = |message: String| {
        vec![Diagnostic::new(
            spec.location.clone(),
            format!("job `{}`: {message}", spec.name),
        )]
    };
    match &spec.engine {
        EngineSpec::Sim { job, .. } => match Simulation::from_file(job) {
            Ok(_) => Vec::new(),
            Err(err) => problem(format!("simulated job: {err}")),
        },
        EngineSpec::Replay { trace } if !trace.is_file() => {
            problem(format!("replay trace {} does not exist", trace.display()))
        }
        EngineSpec::Replay { .. } => Vec::new(),
        // The REST URL itself was checked where it was read, with its line.
        EngineSpec::Flink { job_id, .. } => {
            let mut out = Vec::new();
            if let Some(id) = job_id
                && (id.len() != 32 || !id.chars().all(|c| c.is_ascii_hexdigit()))
            {
                out.extend(problem(format!(
                    "`job-id` must be a 32-digit hex Flink job id, got `{id}`"
                )));
            }
            out
        }
    }
}
