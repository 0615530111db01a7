//! Which custom evaluator and which executors a job uses, resolved from its configuration when
//! it is loaded or reloaded (as its alignment mode is), so that a cycle only calls them.
//!
//! The Flink autoscaler's rules: `metrics.custom-evaluators` lists evaluator instances, of
//! which only the first is used; `scaling.custom-executors` lists executor instances, each used
//! once, run by ascending priority. Each instance names its implementation with
//! `<family>.<name>.class`; a blank class leaves the instance out, and at run time so does an
//! unknown one (with a warning). `flowscale validate` and the start of `run` are strict instead:
//! an unknown class or parameters the implementation refuses are errors naming the key.

use std::collections::BTreeSet;
use std::sync::Arc;

use flowscale_sdk::{EVALUATOR_KEY, EXECUTOR_KEY, ModeError, ModeParams};

use super::{CustomEvaluator, CustomExecutor};
use crate::alignment::{NoCustomModes, UncheckedParams, contain};
use crate::config::{ConfigLookup, ConfigLookupExt, KeyError, closest};

/// The list of evaluator instances (only the first is used).
pub(crate) const EVALUATORS_KEY: &str = crate::config::reference::CUSTOM_EVALUATORS.about.name;
/// The list of executor instances.
pub(crate) const EXECUTORS_KEY: &str = crate::config::reference::CUSTOM_EXECUTORS.about.name;

/// Where evaluators and executors come from: the seam between the pipeline and plugin
/// discovery, beside [`crate::alignment::ModeCatalog`] for modes. Every lookup defaults to
/// nothing, so a catalog that only knows modes has no evaluators and no executors.
pub trait KindCatalog {
    /// The evaluator with this implementation id.
    fn evaluator(&self, id: &str) -> Option<CustomEvaluator> {
        let _ = id;
        None
    }
    /// The executor with this implementation id.
    fn executor(&self, id: &str) -> Option<CustomExecutor> {
        let _ = id;
        None
    }
    /// Every evaluator implementation id, sorted.
    fn evaluator_ids(&self) -> Vec<String> {
        Vec::new()
    }
    /// Every executor implementation id, sorted.
    fn executor_ids(&self) -> Vec<String> {
        Vec::new()
    }
}

impl KindCatalog for NoCustomModes {}

impl<T: KindCatalog + ?Sized> KindCatalog for Arc<T> {
    fn evaluator(&self, id: &str) -> Option<CustomEvaluator> {
        self.as_ref().evaluator(id)
    }
    fn executor(&self, id: &str) -> Option<CustomExecutor> {
        self.as_ref().executor(id)
    }
    fn evaluator_ids(&self) -> Vec<String> {
        self.as_ref().evaluator_ids()
    }
    fn executor_ids(&self) -> Vec<String> {
        self.as_ref().executor_ids()
    }
}

/// The job's evaluator instance.
#[derive(Debug, Clone)]
pub(crate) struct EvaluatorInstance {
    /// The instance name (`metrics.custom-evaluator.<name>.*`).
    pub(crate) name: String,
    /// The implementation.
    pub(crate) evaluator: CustomEvaluator,
    /// Its prefix-stripped parameters, `class` included.
    pub(crate) params: ModeParams,
    /// Set when the evaluator could not check the parameters when the job was resolved.
    pub(crate) unchecked: Option<UncheckedParams>,
}

impl EvaluatorInstance {
    /// Why the evaluator cannot be called now, if so (see [`cannot_call`]).
    pub(crate) fn cannot_call(&self) -> Option<String> {
        let evaluator = &self.evaluator.evaluator;
        cannot_call(evaluator.unavailable(), self.unchecked.as_ref(), || {
            evaluator.validate(&self.params)
        })
    }
}

impl ExecutorInstance {
    /// Why the executor cannot be called now, if so (see [`cannot_call`]).
    pub(crate) fn cannot_call(&self) -> Option<String> {
        let executor = &self.executor.executor;
        cannot_call(executor.unavailable(), self.unchecked.as_ref(), || {
            executor.validate(&self.params)
        })
    }
}

/// Why an instance cannot be called now: its implementation is unavailable (a plugin's,
/// quarantined), or it has not accepted the parameters it could not check when the job was
/// resolved (asked now, until it does), as a custom mode's are.
fn cannot_call(
    unavailable: Option<String>,
    unchecked: Option<&UncheckedParams>,
    validate: impl FnOnce() -> Result<(), ModeError>,
) -> Option<String> {
    if let Some(why) = unavailable {
        return Some(format!("cannot be called ({why})"));
    }
    let unchecked = unchecked.filter(|u| !u.accepted())?;
    match contain(validate) {
        Ok(Ok(())) => {
            unchecked.accept();
            None
        }
        Ok(Err(err)) => Some(format!("refused its parameters: {err}")),
        Err(panic) => Some(format!("refused its parameters: {panic}")),
    }
}

/// One executor instance of the job's chain.
#[derive(Debug, Clone)]
pub(crate) struct ExecutorInstance {
    /// The instance name (`scaling.custom-executor.<name>.*`).
    pub(crate) name: String,
    /// The implementation.
    pub(crate) executor: CustomExecutor,
    /// Its place in the chain (asked once, when the job was resolved).
    pub(crate) priority: i32,
    /// Its prefix-stripped parameters, `class` included.
    pub(crate) params: ModeParams,
    /// Set when the executor could not check the parameters when the job was resolved.
    pub(crate) unchecked: Option<UncheckedParams>,
}

/// A job's custom evaluator and executor chain.
#[derive(Debug, Clone, Default)]
pub struct JobCustom {
    /// The evaluator, if the job configures one that resolves.
    pub(crate) evaluator: Option<EvaluatorInstance>,
    /// The executors, by ascending priority (ties in configured order).
    pub(crate) executors: Vec<ExecutorInstance>,
}

/// No evaluator and no executor: the pipeline as the Flink autoscaler runs without them.
pub(crate) static NO_CUSTOM: JobCustom = JobCustom {
    evaluator: None,
    executors: Vec::new(),
};

/// A job's custom instances with what was said of those left out.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resolution {
    /// What the job uses.
    pub(crate) custom: JobCustom,
    /// Warnings (instances left out, evaluators after the first).
    pub(crate) warnings: Vec<String>,
    /// Errors of a strict resolution (unknown class, refused parameters), by key.
    pub(crate) errors: Vec<KeyError>,
}

/// How an instance that cannot be used is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strictness {
    /// An error (loading, `validate`).
    Strict,
    /// A warning, and the instance is left out (a plugin that went away while the host runs).
    Lenient,
}

impl JobCustom {
    /// Resolves a job's evaluator and executors from its configuration.
    pub(crate) fn resolve(
        config: &impl ConfigLookup,
        catalog: &dyn KindCatalog,
        strictness: Strictness,
    ) -> Resolution {
        let mut out = Resolution::default();
        out.custom.evaluator = resolve_evaluator(config, catalog, strictness, &mut out);
        out.custom.executors = resolve_executors(config, catalog, strictness, &mut out);
        out
    }

    /// The evaluator as the API shows it: `(instance, class)`.
    pub fn evaluator_view(&self) -> Option<(&str, &str)> {
        self.evaluator
            .as_ref()
            .map(|e| (e.name.as_str(), e.evaluator.id()))
    }

    /// The executor chain as the API shows it, in the order it runs:
    /// `(instance, class, priority)`.
    pub fn executors_view(&self) -> impl Iterator<Item = (&str, &str, i32)> {
        self.executors
            .iter()
            .map(|e| (e.name.as_str(), e.executor.id(), e.priority))
    }

    /// True when `other` runs the same chain with the very same implementations: the same
    /// instance names, ids, priorities and parameters, each calling the same object. A new
    /// build of a plugin creates new objects, so a running job must take the other resolution
    /// even though its configuration did not change (as for a mode, see
    /// `JobAlignment::same_implementation`).
    pub(crate) fn same_implementations(&self, other: &JobCustom) -> bool {
        let same_evaluator = match (&self.evaluator, &other.evaluator) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                a.name == b.name
                    && a.params == b.params
                    && a.evaluator.id == b.evaluator.id
                    && Arc::ptr_eq(&a.evaluator.evaluator, &b.evaluator.evaluator)
            }
            _ => false,
        };
        same_evaluator
            && self.executors.len() == other.executors.len()
            && self.executors.iter().zip(&other.executors).all(|(a, b)| {
                a.name == b.name
                    && a.priority == b.priority
                    && a.params == b.params
                    && a.executor.id == b.executor.id
                    && Arc::ptr_eq(&a.executor.executor, &b.executor.executor)
            })
    }

    /// Tells every implementation the job uses that the loop of `job` ended.
    pub(crate) fn forget_job(&self, job: &str) {
        self.forget_unused(&JobCustom::default(), job);
    }

    /// Tells every implementation this resolution uses and `next` does not (the very same
    /// object: a new build of a plugin is another) that the loop of `job` ended for it.
    pub(crate) fn forget_unused(&self, next: &JobCustom, job: &str) {
        if let Some(e) = &self.evaluator {
            let kept = next
                .evaluator
                .as_ref()
                .is_some_and(|n| Arc::ptr_eq(&n.evaluator.evaluator, &e.evaluator.evaluator));
            if !kept {
                e.evaluator.evaluator.forget_job(job);
            }
        }
        for e in &self.executors {
            let kept = next
                .executors
                .iter()
                .any(|n| Arc::ptr_eq(&n.executor.executor, &e.executor.executor));
            if !kept {
                e.executor.executor.forget_job(job);
            }
        }
    }
}

/// The class an instance of `family` names, trimmed; `None` when blank or unset.
fn class_of(params: &ModeParams) -> Option<String> {
    params
        .get("class")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
}

/// An unknown class: the key, and a message naming the classes that exist (closest first).
fn unknown_class(family: &str, name: &str, class: &str, available: &[String]) -> KeyError {
    let suggestion = closest(class, available.iter().map(String::as_str))
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default();
    let kind = if family == EVALUATOR_KEY {
        "evaluator"
    } else {
        "executor"
    };
    let available = if available.is_empty() {
        format!("no {kind}s are loaded: check the plugins directory with `flowscale plugins`")
    } else {
        format!("available {kind}s: {}", available.join(", "))
    };
    KeyError::new(
        format!("{family}.{name}.class"),
        format!("no loaded {kind} has implementation id `{class}`{suggestion}; {available}"),
    )
}

/// Asks an implementation to check its parameters, a panic counting as a refusal.
fn check_params(
    validate: impl FnOnce() -> Result<(), ModeError>,
    family: &str,
    name: &str,
    class: &str,
) -> Result<(), KeyError> {
    let why = match contain(validate) {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(err)) => err.to_string(),
        Err(panic) => panic.to_string(),
    };
    Err(KeyError::new(
        format!("{family}.{name}.class"),
        format!("`{name}` ({class}) refused its parameters: {why}"),
    ))
}

/// Checks the parameters, unless the implementation is `unavailable` (a plugin's,
/// quarantined, is not called at all, not even to check them): a reload must not fail, nor
/// leave an executor out (which would bypass its policy), because of a quarantine. The
/// parameters are then checked before the first call ([`cannot_call`]).
fn check_unless_unavailable(
    unavailable: bool,
    validate: impl FnOnce() -> Result<(), ModeError>,
    family: &str,
    name: &str,
    class: &str,
) -> Result<Option<UncheckedParams>, KeyError> {
    if unavailable {
        return Ok(Some(UncheckedParams::default()));
    }
    check_params(validate, family, name, class).map(|()| None)
}

/// Records a problem: an error when strict, else a warning (the instance is left out either way).
fn problem(out: &mut Resolution, strictness: Strictness, error: KeyError) {
    match strictness {
        Strictness::Strict => out.errors.push(error),
        Strictness::Lenient => out
            .warnings
            .push(format!("{error}; the instance is not used")),
    }
}

fn resolve_evaluator(
    config: &impl ConfigLookup,
    catalog: &dyn KindCatalog,
    strictness: Strictness,
    out: &mut Resolution,
) -> Option<EvaluatorInstance> {
    let names = config.list(EVALUATORS_KEY);
    let (first, others) = names.split_first()?;
    if !others.is_empty() {
        out.warnings.push(format!(
            "`{EVALUATORS_KEY}` lists several evaluators; only the first, `{first}`, is used \
             (ignored: {})",
            others.join(", ")
        ));
    }
    let params = config.instance_params(EVALUATOR_KEY, first);
    let class = class_of(&params)?;
    let Some(evaluator) = catalog.evaluator(&class) else {
        let error = unknown_class(EVALUATOR_KEY, first, &class, &catalog.evaluator_ids());
        problem(out, strictness, error);
        return None;
    };
    let unchecked = match check_unless_unavailable(
        evaluator.evaluator.unavailable().is_some(),
        || evaluator.evaluator.validate(&params),
        EVALUATOR_KEY,
        first,
        &class,
    ) {
        Ok(unchecked) => unchecked,
        Err(error) => {
            problem(out, strictness, error);
            return None;
        }
    };
    Some(EvaluatorInstance {
        name: first.clone(),
        evaluator,
        params,
        unchecked,
    })
}

fn resolve_executors(
    config: &impl ConfigLookup,
    catalog: &dyn KindCatalog,
    strictness: Strictness,
    out: &mut Resolution,
) -> Vec<ExecutorInstance> {
    let mut seen = BTreeSet::new();
    let mut chain = Vec::new();
    for name in config.list(EXECUTORS_KEY) {
        if !seen.insert(name.clone()) {
            continue;
        }
        let params = config.instance_params(EXECUTOR_KEY, &name);
        let Some(class) = class_of(&params) else {
            out.warnings.push(format!(
                "executor `{name}` has no `{EXECUTOR_KEY}.{name}.class`; it is not used"
            ));
            continue;
        };
        let Some(executor) = catalog.executor(&class) else {
            let error = unknown_class(EXECUTOR_KEY, &name, &class, &catalog.executor_ids());
            problem(out, strictness, error);
            continue;
        };
        let unchecked = match check_unless_unavailable(
            executor.executor.unavailable().is_some(),
            || executor.executor.validate(&params),
            EXECUTOR_KEY,
            &name,
            &class,
        ) {
            Ok(unchecked) => unchecked,
            Err(error) => {
                problem(out, strictness, error);
                continue;
            }
        };
        // A panic asking the priority is a refusal of the instance too.
        let priority = match contain(|| executor.executor.priority()) {
            Ok(p) => p,
            Err(panic) => {
                let error = KeyError::new(
                    format!("{EXECUTOR_KEY}.{name}.class"),
                    format!("`{name}` ({class}) could not say its priority: {panic}"),
                );
                problem(out, strictness, error);
                continue;
            }
        };
        chain.push(ExecutorInstance {
            name,
            executor,
            priority,
            params,
            unchecked,
        });
    }
    // Stable: equal priorities keep their configured order.
    chain.sort_by_key(|e| e.priority);
    chain
}
