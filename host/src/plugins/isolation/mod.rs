//! Process isolation of plugins: each plugin file served by a worker process of its own, so
//! that a plugin that crashes or hangs costs a decision of the jobs that use it, not the host.
//!
//! * [`protocol`]: frames and messages on the worker's pipes.
//! * [`compact`]: the binary form of the per-vertex calls (protocol 3) and of their batches
//!   (protocol 4).
//! * [`slots`]: what a worker keeps of each job between calls, so that a call carries only
//!   what changed (protocol 3).
//! * [`worker`]: the worker side (`flowscale plugin-worker FILE`).
//! * [`supervisor`]: starting, calling under a deadline, restarting and quarantining workers.
//! * [`what_if`]: the workers of the HTTP API's what-if calls, apart from the fleet's.
//! * [`pool`]: the workers of one plugin file for the what-if calls, one per call at once.
//! * [`kinds`]: the file's metric evaluators and scaling executors, served by its worker
//!   (protocol 5).
//!
//! A mode of an isolated plugin is registered like any other, as a [`HostMode`] that forwards
//! each call to its file's supervisor: alignment does not know where the mode runs. Its
//! evaluators and executors are registered as [`HostEvaluator`]s and [`HostExecutor`]s that do
//! the same.

pub mod compact;
mod kinds;
mod pool;
pub mod protocol;
pub mod slots;
mod stderr;
pub(crate) mod supervisor;
pub(crate) mod what_if;
pub(crate) mod worker;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use flowscale_sdk::abi::ManifestInfo;
use flowscale_sdk::{
    AlignmentContext, EvaluatorContext, ExecutorContext, ExecutorVerdict, ModeError, ModeParams,
    VertexMetrics,
};

use self::compact::ContextCall;
use self::kinds::{ProcessEvaluator, ProcessExecutor};
use self::protocol::{KINDS_PROTOCOL, Outcome};
pub use self::supervisor::IsolationOptions;
pub(crate) use self::supervisor::{Ask, Fault, Supervisor, end_worker_groups};
pub(crate) use self::worker::{WorkerLimits, serve};
use crate::alignment::{CustomMode, GatedAnswer, HostMode, ModeOrigin};
use crate::config::PluginIsolation;
use crate::plugins::{Exports, Refusal};
use crate::scaling::{CustomEvaluator, CustomExecutor, HostEvaluator, HostExecutor};

/// Where discovery puts the plugins it loads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Into the host.
    #[default]
    InProcess,
    /// Into a worker process per file.
    Process(IsolationOptions),
}

impl Isolation {
    /// The isolation a fleet's `[host]` section (or a command-line flag) asks for.
    pub(crate) fn from_settings(isolation: PluginIsolation, call_timeout: Duration) -> Isolation {
        match isolation {
            PluginIsolation::InProcess => Isolation::InProcess,
            PluginIsolation::Process => Isolation::Process(IsolationOptions::new(call_timeout)),
        }
    }
}

/// Starts the worker of `file` (already probed by discovery), loading the checked file it
/// resolves to, `load_from`, and registers its modes under `file`. The worker's own load is the one that
/// counts: if it refuses the file, so does discovery.
///
/// The file's metric evaluators and scaling executors are served by the same worker (protocol
/// 5). A worker of an older protocol (a replaced binary) cannot serve them: they are then
/// registered as [`NotIsolated`], which says so instead of running plugin code in the host.
pub(super) fn serve_file(
    file: &Path,
    load_from: &Path,
    info: &ManifestInfo,
    options: &IsolationOptions,
) -> Result<Exports, Refusal> {
    let (supervisor, hello) = Supervisor::start(load_from, options.clone()).map_err(|fault| {
        Refusal::Worker(match fault {
            Fault::Refused(reason) => reason,
            other => other.to_string(),
        })
    })?;
    let serves_kinds = supervisor.serves_kinds();
    same_ids("modes", hello.modes.iter().map(|m| &m.id), &info.modes)?;
    if serves_kinds {
        same_ids(
            "evaluators",
            hello.evaluators.iter().map(|e| &e.id),
            &info.evaluators,
        )?;
        same_ids(
            "executors",
            hello.executors.iter().map(|x| &x.id),
            &info.executors,
        )?;
    }
    let supervisor = Arc::new(supervisor);
    let origin = ModeOrigin::Plugin {
        file: file.to_path_buf(),
        plugin: hello.plugin.clone(),
        version: hello.version.clone(),
    };
    let modes = hello
        .modes
        .into_iter()
        .map(|mode| CustomMode {
            id: mode.id.clone(),
            description: mode.description,
            origin: origin.clone(),
            mode: Arc::new(ProcessMode {
                id: mode.id,
                workers: Workers::One(Arc::clone(&supervisor)),
            }),
        })
        .collect();
    let not_isolated = |kind: &'static str, id: &str| NotIsolated {
        why: format!(
            "{kind} `{id}` of plugin `{}` is not available with plugin-isolation = \"process\": \
             its worker speaks an older protocol than {KINDS_PROTOCOL}, which serves evaluators \
             and executors (was the binary replaced while the host runs?)",
            info.plugin_name
        ),
    };
    let evaluators = info
        .evaluators
        .iter()
        .map(|(id, description)| CustomEvaluator {
            id: id.clone(),
            description: description.clone(),
            origin: origin.clone(),
            evaluator: if serves_kinds {
                Arc::new(ProcessEvaluator::new(id, &supervisor))
            } else {
                Arc::new(not_isolated("evaluator", id))
            },
        })
        .collect();
    let executors = info
        .executors
        .iter()
        .map(|(id, description)| CustomExecutor {
            id: id.clone(),
            description: description.clone(),
            origin: origin.clone(),
            executor: match hello.executors.iter().find(|x| &x.id == id) {
                Some(served) if serves_kinds => {
                    Arc::new(ProcessExecutor::new(id, served.priority, &supervisor))
                }
                _ => Arc::new(not_isolated("executor", id)),
            },
        })
        .collect();
    Ok(Exports {
        modes,
        evaluators,
        executors,
    })
}

/// Refuses a file whose worker loaded other objects of a kind than the probe listed.
fn same_ids<'a>(
    kind: &str,
    loaded: impl Iterator<Item = &'a String>,
    probed: &[(String, String)],
) -> Result<(), Refusal> {
    let loaded: Vec<&str> = loaded.map(String::as_str).collect();
    let probed: Vec<&str> = probed.iter().map(|(id, _)| id.as_str()).collect();
    if loaded == probed {
        return Ok(());
    }
    Err(Refusal::Worker(format!(
        "the worker loaded {kind} {loaded:?}, the manifest lists {probed:?} (was the file \
         replaced during discovery?)"
    )))
}

/// An evaluator or executor of a plugin in `process` isolation whose worker does not serve
/// these kinds (it speaks protocol 4 or older): running it in the host would defeat the
/// isolation asked for, so it is listed but never called, and says why (an executor that is
/// unavailable vetoes its job's scaling, so a policy is never bypassed).
struct NotIsolated {
    why: String,
}

impl HostEvaluator for NotIsolated {
    fn evaluate(&self, _ctx: &EvaluatorContext) -> Result<VertexMetrics, ModeError> {
        Err(ModeError::new(self.why.clone()))
    }
    fn validate(&self, _params: &ModeParams) -> Result<(), ModeError> {
        Err(ModeError::new(self.why.clone()))
    }
    fn unavailable(&self) -> Option<String> {
        Some(self.why.clone())
    }
}

impl HostExecutor for NotIsolated {
    fn priority(&self) -> i32 {
        0
    }
    fn apply(&self, _ctx: &ExecutorContext) -> Result<ExecutorVerdict, ModeError> {
        Err(ModeError::new(self.why.clone()))
    }
    fn validate(&self, _params: &ModeParams) -> Result<(), ModeError> {
        Err(ModeError::new(self.why.clone()))
    }
    fn unavailable(&self) -> Option<String> {
        Some(self.why.clone())
    }
}

/// The workers the calls of an isolated mode go to.
pub(crate) enum Workers {
    /// The one worker of its file, which serves every job using a mode of the file.
    One(Arc<Supervisor>),
    /// A what-if pool: a worker of its own for each call running at once.
    Pool(Arc<pool::Pool>),
}

impl Workers {
    /// Runs `call` with a supervisor of these workers, the same one throughout.
    fn with<T>(&self, call: impl FnOnce(&Supervisor) -> T) -> T {
        match self {
            Workers::One(supervisor) => call(supervisor),
            Workers::Pool(pool) => pool.with(call),
        }
    }
}

/// A mode of an isolated plugin: each call is a request to a worker of its file.
pub(crate) struct ProcessMode {
    id: String,
    workers: Workers,
}

impl ProcessMode {
    fn call(&self, ask: Ask<'_>) -> Result<Outcome, ModeError> {
        match self
            .workers
            .with(|supervisor| supervisor.call(&self.id, ask))
        {
            Ok(Outcome::Error(message)) => Err(ModeError::new(message)),
            Ok(outcome) => Ok(outcome),
            Err(err) => Err(ModeError::new(err.to_string())),
        }
    }

    fn unexpected(call: &str, outcome: Outcome) -> ModeError {
        ModeError::new(format!(
            "the plugin worker answered {call} with {outcome:?}"
        ))
    }
}

/// What the worker's answer to the combined call means.
fn gated(answer: Result<Outcome, ModeError>) -> Result<GatedAnswer, ModeError> {
    match answer? {
        Outcome::Applicable(false) => Ok(GatedAnswer::NotApplicable),
        Outcome::Applicable(true) => Ok(GatedAnswer::NothingToAlign),
        Outcome::Aligned(p) => Ok(GatedAnswer::Aligned(p)),
        other => Err(ProcessMode::unexpected("align", other)),
    }
}

impl HostMode for ProcessMode {
    fn is_applicable(&self, ctx: &AlignmentContext) -> Result<bool, ModeError> {
        match self.call(Ask::Context(ContextCall::IsApplicable, ctx))? {
            Outcome::Applicable(applicable) => Ok(applicable),
            other => Err(Self::unexpected("is_applicable", other)),
        }
    }

    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
        match self.call(Ask::Context(ContextCall::Align, ctx))? {
            Outcome::Aligned(p) => Ok(p),
            other => Err(Self::unexpected("align", other)),
        }
    }

    /// One round trip instead of two: the worker runs the gate and `align` itself.
    fn align_if_applicable(
        &self,
        ctx: &AlignmentContext,
    ) -> Option<Result<GatedAnswer, ModeError>> {
        Some(gated(
            self.call(Ask::Context(ContextCall::AlignIfApplicable, ctx)),
        ))
    }

    fn aligns_many(&self) -> bool {
        self.workers.with(Supervisor::batches)
    }

    /// The fleet's worker forgets the job; a what-if pool's workers keep theirs (bounded by
    /// [`slots::MAX_SLOTS`], and they never serve a fleet's job).
    fn forget_job(&self, job: &str) {
        if let Workers::One(supervisor) = &self.workers {
            supervisor.forget_job(job);
        }
    }

    /// One round trip for all the vertices, when the worker speaks protocol 4.
    fn align_many(
        &self,
        ctxs: &[&AlignmentContext],
    ) -> Option<Vec<Result<GatedAnswer, ModeError>>> {
        let answers = self.workers.with(|supervisor| {
            supervisor
                .batches()
                .then(|| supervisor.call_many(&self.id, ContextCall::AlignIfApplicable, ctxs))
        })?;
        Some(
            answers
                .into_iter()
                .map(|answer| {
                    gated(match answer {
                        Ok(Outcome::Error(message)) => Err(ModeError::new(message)),
                        Ok(outcome) => Ok(outcome),
                        Err(err) => Err(ModeError::new(err.to_string())),
                    })
                })
                .collect(),
        )
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        match self.call(Ask::Validate(params))? {
            Outcome::Valid => Ok(()),
            other => Err(Self::unexpected("validate", other)),
        }
    }

    fn unavailable(&self) -> Option<String> {
        self.workers
            .with(|supervisor| supervisor.quarantined(&self.id))
    }
}
