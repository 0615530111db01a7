//! A fleet's jobs checked together: each resolved mode and settings, or every problem at once.

use std::collections::BTreeSet;

use crate::alignment::{JobAlignment, ModeCatalog, custom_class};
use crate::config::{
    ConfigErrors, Diagnostic, EngineSpec, FleetConfig, JobConfig, JobSpec, KeyError,
    MODE_KEY_FOR_LOCATION,
};
use crate::events::{Event, EventReason, Severity};
use crate::scaling::{JobCustom, KindCatalog, Strictness};
use crate::sim::Simulation;

use super::settings::JobSettings;

/// One job, ready to run.
#[derive(Debug, Clone)]
pub struct JobPlan {
    /// The job as configured.
    pub spec: JobSpec,
    /// Its resolved alignment.
    pub(crate) alignment: JobAlignment,
    /// Its custom evaluator and executor chain.
    pub(crate) custom: JobCustom,
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

/// Where a fleet's jobs find their modes, evaluators and executors: the plugins directory and
/// what is linked into the binary (a [`crate::plugins::ModeRegistry`]).
pub trait PluginCatalog: ModeCatalog + KindCatalog {}

impl<T: ModeCatalog + KindCatalog + ?Sized> PluginCatalog for T {}

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
    catalog: &dyn PluginCatalog,
) -> Result<FleetPlan, ConfigErrors> {
    plan_with(fleet, catalog, Fallback::Never)
}

/// Plans a fleet that was already checked again with the custom modes of `catalog` (the plugins
/// directory changed while the host runs): a job whose custom mode is not in it any more aligns
/// with BALANCED until it is back, its plan's notes saying so (a `ModeFallback` event), instead
/// of failing the whole plan.
pub(crate) fn replan_fleet(
    fleet: FleetConfig,
    catalog: &dyn PluginCatalog,
) -> Result<FleetPlan, ConfigErrors> {
    plan_with(fleet, catalog, Fallback::Always)
}

/// Plans a fleet file read again while the host runs with the configuration `running`, as
/// strictly as at start but for one thing: a job whose custom mode `running` names too and that
/// `catalog` does not have now (its plugin file was removed or refused since) aligns with BALANCED
/// until it is back, as after a change of the plugins directory, instead of the whole file being
/// refused. Such a job falls back already; refusing every reload meanwhile would only keep every
/// other change out. A mode that no running job names must be there, as at start: it is a new
/// name, and a typo in it is an error. (A quarantined mode is there: its job resolves to it and
/// aligns with BALANCED while it is quarantined.)
pub(crate) fn reload_fleet(
    fleet: FleetConfig,
    running: &FleetConfig,
    catalog: &dyn PluginCatalog,
) -> Result<FleetPlan, ConfigErrors> {
    let missing: BTreeSet<String> = running
        .jobs
        .iter()
        .filter_map(|job| custom_class(&job.config))
        .filter(|class| catalog.find(class).is_none())
        .collect();
    plan_with(fleet, catalog, Fallback::Missing(&missing))
}

/// Which jobs align with BALANCED, with a `ModeFallback` note, when their mode cannot be
/// resolved, instead of failing the plan.
#[derive(Debug, Clone, Copy)]
enum Fallback<'a> {
    /// None: every problem is an error (start, `validate`).
    Never,
    /// Every job: the configuration was checked already, only the modes on offer changed.
    Always,
    /// The jobs whose custom mode has one of these implementation ids.
    Missing(&'a BTreeSet<String>),
}

impl Fallback<'_> {
    fn applies(self, spec: &JobSpec) -> bool {
        match self {
            Fallback::Never => false,
            Fallback::Always => true,
            Fallback::Missing(ids) => custom_class(&spec.config).is_some_and(|c| ids.contains(&c)),
        }
    }
}

fn plan_with(
    fleet: FleetConfig,
    catalog: &dyn PluginCatalog,
    fallback: Fallback<'_>,
) -> Result<FleetPlan, ConfigErrors> {
    let mut errors = Vec::new();
    let warnings = fleet.warnings.clone();
    let mut jobs = Vec::new();
    for spec in &fleet.jobs {
        let mut notes = Vec::new();
        let alignment = if fallback.applies(spec) {
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
        // Strict where the mode is (start, `validate`); at run time an instance whose class
        // went missing is left out with a warning, as the Flink autoscaler does.
        let strictness = match fallback {
            Fallback::Never => Strictness::Strict,
            Fallback::Always | Fallback::Missing(_) => Strictness::Lenient,
        };
        let custom = JobCustom::resolve(&spec.config, catalog, strictness);
        errors.extend(resolve_diagnostics(spec, &custom.errors));
        notes.extend(custom.warnings.iter().map(|warning| {
            Event::new(
                EventReason::PluginSkipped,
                Severity::Warning,
                warning.clone(),
            )
            .job(&spec.name)
        }));
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
                custom: custom.custom,
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::alignment::NoCustomModes;
    use crate::config::parse_fleet;
    use crate::events::EventReason;

    /// A fleet of Flink entries `(name, implementation id of its custom mode)`.
    fn fleet(jobs: &[(&str, &str)]) -> FleetConfig {
        let mut text = String::new();
        for (name, class) in jobs {
            text.push_str(&format!(
                "[[jobs]]\nname = \"{name}\"\nengine = \"flink\"\nrest = \"http://127.0.0.1:9\"\n\
                 job-id = \"8930b1fd94e042463a80e45360195d7e\"\n[jobs.config]\n\
                 \"scaling.alignment.mode\" = \"m\"\n\"scaling.alignment.mode.m.class\" = \"{class}\"\n"
            ));
        }
        parse_fleet(Path::new("fleet.toml"), &text).expect("a valid fleet")
    }

    #[test]
    fn a_reload_lets_a_mode_the_running_fleet_misses_fall_back_and_refuses_a_new_one() {
        // Running: `a` on the plugin mode `gone`, whose file was removed since.
        let running = fleet(&[("a", "gone")]);
        // Read again with a new job on the same missing mode: both fall back, saying so.
        let plan = reload_fleet(
            fleet(&[("a", "gone"), ("b", "gone")]),
            &running,
            &NoCustomModes,
        )
        .expect("applied");
        for job in &plan.jobs {
            assert_eq!(job.alignment.mode_id(), "BALANCED", "{}", job.spec.name);
            assert_eq!(job.notes.len(), 1, "{:?}", job.notes);
            assert_eq!(job.notes[0].reason, EventReason::ModeFallback);
            assert!(
                job.notes[0].message.contains("`gone`"),
                "{}",
                job.notes[0].message
            );
        }
        // A mode no running job names must be there, as at start.
        let errors = reload_fleet(
            fleet(&[("a", "gone"), ("c", "typo")]),
            &running,
            &NoCustomModes,
        )
        .expect_err("refused");
        assert_eq!(errors.0.len(), 1, "{errors}");
        assert!(errors.0[0].to_string().contains("`typo`"), "{errors}");
        // The same file at start is refused for both.
        let errors = plan_fleet(fleet(&[("a", "gone")]), &NoCustomModes).expect_err("refused");
        assert!(errors.0[0].to_string().contains("`gone`"), "{errors}");
    }

    /// A Flink entry whose configuration lists the executor instance `x` of class `class`.
    fn fleet_with_executor(class: &str) -> FleetConfig {
        let text = format!(
            "[[jobs]]\nname = \"a\"\nengine = \"flink\"\nrest = \"http://127.0.0.1:9\"\n\
             job-id = \"8930b1fd94e042463a80e45360195d7e\"\n[jobs.config]\n\
             \"job.autoscaler.scaling.custom-executors\" = \"x\"\n\
             \"job.autoscaler.scaling.custom-executor.x.class\" = \"{class}\"\n"
        );
        parse_fleet(Path::new("fleet.toml"), &text).expect("a valid fleet")
    }

    #[test]
    fn an_unknown_executor_class_is_refused_at_start_and_skipped_on_a_replan() {
        let registry = crate::scaling::TestKinds;
        let errors = plan_fleet(fleet_with_executor("test-exek"), &registry).expect_err("refused");
        let text = errors.to_string();
        assert!(text.contains("scaling.custom-executor.x.class"), "{text}");
        assert!(text.contains("did you mean `test-exec`?"), "{text}");
        let plan = replan_fleet(fleet_with_executor("test-exek"), &registry).expect("applied");
        assert!(plan.jobs[0].custom.executors.is_empty());
        assert_eq!(plan.jobs[0].notes.len(), 1, "{:?}", plan.jobs[0].notes);
        assert_eq!(plan.jobs[0].notes[0].reason, EventReason::PluginSkipped);
        let plan = plan_fleet(fleet_with_executor("test-exec"), &registry).expect("valid");
        let chain: Vec<_> = plan.jobs[0].custom.executors_view().collect();
        assert_eq!(chain, [("x", "test-exec", 0)]);
    }
}
