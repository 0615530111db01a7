//! A plugin's metric evaluators and scaling executors in `process` isolation: each call is a
//! request to the worker of its file (protocol 5), as a mode's is.
//!
//! A call that the plugin answers with an error, or a panic the SDK caught, is that error. A
//! worker that crashes, hangs past the call deadline or breaks the protocol fails the call in
//! flight only (an evaluator's error lets the cycle go on with the built-in evaluation, an
//! executor's vetoes that job's cycle); the next call starts a new worker, and repeated faults
//! quarantine the object ([`HostEvaluator::unavailable`], [`HostExecutor::unavailable`]),
//! counted apart from the file's mode of the same id.

use std::sync::Arc;

use flowscale_sdk::{
    EvaluatorContext, ExecutorContext, ExecutorVerdict, ModeError, ModeParams, VertexMetrics,
};

use super::protocol::{Outcome, metrics_from_wire};
use super::supervisor::{Ask, Supervisor, standing_key};
use crate::scaling::{HostEvaluator, HostExecutor};

/// One evaluator or executor of the file served by `supervisor`.
struct Object {
    id: String,
    /// Its faults and quarantine are kept under this key.
    standing: String,
    supervisor: Arc<Supervisor>,
}

impl Object {
    fn new(kind: &'static str, id: &str, supervisor: &Arc<Supervisor>) -> Object {
        Object {
            id: id.to_string(),
            standing: standing_key(kind, id),
            supervisor: Arc::clone(supervisor),
        }
    }

    fn call(&self, ask: Ask<'_>) -> Result<Outcome, ModeError> {
        match self.supervisor.call_as(&self.standing, &self.id, ask) {
            Ok(Outcome::Error(message)) => Err(ModeError::new(message)),
            Ok(outcome) => Ok(outcome),
            Err(err) => Err(ModeError::new(err.to_string())),
        }
    }

    fn validated(&self, ask: Ask<'_>) -> Result<(), ModeError> {
        match self.call(ask)? {
            Outcome::Valid => Ok(()),
            other => Err(self.unexpected("validate", other)),
        }
    }

    fn unexpected(&self, call: &str, outcome: Outcome) -> ModeError {
        ModeError::new(format!(
            "the plugin worker answered {call} of {} with {outcome:?}",
            self.standing
        ))
    }

    fn unavailable(&self) -> Option<String> {
        self.supervisor.quarantined(&self.standing)
    }
}

/// An evaluator of an isolated plugin.
pub(super) struct ProcessEvaluator(Object);

impl ProcessEvaluator {
    /// The evaluator `id` of the file `supervisor` serves.
    pub(super) fn new(id: &str, supervisor: &Arc<Supervisor>) -> ProcessEvaluator {
        ProcessEvaluator(Object::new("evaluator", id, supervisor))
    }
}

impl HostEvaluator for ProcessEvaluator {
    fn evaluate(&self, ctx: &EvaluatorContext) -> Result<VertexMetrics, ModeError> {
        match self.0.call(Ask::Evaluate(ctx))? {
            Outcome::Evaluated(metrics) => Ok(metrics_from_wire(metrics)),
            other => Err(self.0.unexpected("evaluate", other)),
        }
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        self.0.validated(Ask::ValidateEvaluator(params))
    }

    fn unavailable(&self) -> Option<String> {
        self.0.unavailable()
    }
}

/// An executor of an isolated plugin, with the priority its worker reported when it started.
pub(super) struct ProcessExecutor {
    object: Object,
    priority: i32,
}

impl ProcessExecutor {
    /// The executor `id` of the file `supervisor` serves.
    pub(super) fn new(id: &str, priority: i32, supervisor: &Arc<Supervisor>) -> ProcessExecutor {
        ProcessExecutor {
            object: Object::new("executor", id, supervisor),
            priority,
        }
    }
}

impl HostExecutor for ProcessExecutor {
    fn priority(&self) -> i32 {
        self.priority
    }

    fn apply(&self, ctx: &ExecutorContext) -> Result<ExecutorVerdict, ModeError> {
        match self.object.call(Ask::Apply(ctx))? {
            Outcome::Verdict(verdict) => Ok(verdict.into()),
            other => Err(self.object.unexpected("apply", other)),
        }
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        self.object.validated(Ask::ValidateExecutor(params))
    }

    fn unavailable(&self) -> Option<String> {
        self.object.unavailable()
    }
}
