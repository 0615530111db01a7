//! Custom metric evaluators and custom scaling executors as the host holds and calls them: one
//! entry type for an implementation linked into the binary and one exported by a plugin, and the
//! call interface both implement (as [`crate::alignment::HostMode`] is for alignment modes).
//!
//! An evaluator is called per vertex after the vertex's own evaluation and its answer is merged
//! into the vertex's metrics; executors see the job's decided operation before it is applied and
//! may change or veto it. See docs/plugin-kinds.md for the keys and what a fault does.

use std::fmt;
use std::sync::Arc;

use flowscale_sdk::{
    EvaluatorContext, ExecutorContext, ExecutorVerdict, MetricEvaluator, ModeError, ModeParams,
    ScalingExecutor, VertexMetrics,
};

use crate::alignment::ModeOrigin;

pub(super) mod chain;
pub(super) mod merge;
pub(super) mod resolve;
#[cfg(test)]
pub(crate) mod tests;

/// A custom metric evaluator as the pipeline calls it, whatever it is made of.
pub trait HostEvaluator: Send + Sync {
    /// The metrics to merge into the vertex's (see [`MetricEvaluator::evaluate`]). An error
    /// (a panic the plugin caught, a crash or a timeout of its worker) contributes nothing.
    fn evaluate(&self, ctx: &EvaluatorContext) -> Result<VertexMetrics, ModeError>;
    /// Checks the instance's parameters when a configuration is loaded.
    fn validate(&self, params: &ModeParams) -> Result<(), ModeError>;
    /// Why the evaluator must not be called at all right now, if so (quarantined after
    /// repeated crashes or timeouts): the cycle then goes on with the built-in evaluation.
    fn unavailable(&self) -> Option<String> {
        None
    }
    /// The loop of `job` ended: whatever the evaluator keeps of the job can go.
    fn forget_job(&self, _job: &str) {}
}

/// A custom scaling executor as the pipeline calls it, whatever it is made of.
pub trait HostExecutor: Send + Sync {
    /// Where it runs in a chain: lower first.
    fn priority(&self) -> i32;
    /// The scaling to apply, or a veto. An error vetoes the cycle: a policy that cannot answer
    /// must not be bypassed.
    fn apply(&self, ctx: &ExecutorContext) -> Result<ExecutorVerdict, ModeError>;
    /// Checks the instance's parameters when a configuration is loaded.
    fn validate(&self, params: &ModeParams) -> Result<(), ModeError>;
    /// Why the executor must not be called right now, if so (quarantined): the cycle is
    /// vetoed.
    fn unavailable(&self) -> Option<String> {
        None
    }
    /// The loop of `job` ended: whatever the executor keeps of the job can go.
    fn forget_job(&self, _job: &str) {}
}

/// A custom metric evaluator available under an implementation id (what
/// `metrics.custom-evaluator.<name>.class` names).
#[derive(Clone)]
pub struct CustomEvaluator {
    /// The implementation id.
    pub(crate) id: String,
    /// A one-line description.
    pub(crate) description: String,
    /// Where it comes from.
    pub origin: ModeOrigin,
    /// The evaluator. For a plugin's, calls never unwind into the host.
    pub evaluator: Arc<dyn HostEvaluator>,
}

/// A custom scaling executor available under an implementation id (what
/// `scaling.custom-executor.<name>.class` names).
#[derive(Clone)]
pub struct CustomExecutor {
    /// The implementation id.
    pub(crate) id: String,
    /// A one-line description.
    pub(crate) description: String,
    /// Where it comes from.
    pub origin: ModeOrigin,
    /// The executor. For a plugin's, calls never unwind into the host.
    pub executor: Arc<dyn HostExecutor>,
}

impl CustomEvaluator {
    /// An SDK evaluator linked into the binary.
    pub(crate) fn linked(
        id: impl Into<String>,
        description: impl Into<String>,
        evaluator: Arc<dyn MetricEvaluator>,
    ) -> CustomEvaluator {
        CustomEvaluator {
            id: id.into(),
            description: description.into(),
            origin: ModeOrigin::Linked,
            evaluator: Arc::new(SdkEvaluator(evaluator)),
        }
    }

    /// The implementation id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The one-line description.
    pub fn description(&self) -> &str {
        &self.description
    }
}

impl CustomExecutor {
    /// An SDK executor linked into the binary.
    pub(crate) fn linked(
        id: impl Into<String>,
        description: impl Into<String>,
        executor: Arc<dyn ScalingExecutor>,
    ) -> CustomExecutor {
        CustomExecutor {
            id: id.into(),
            description: description.into(),
            origin: ModeOrigin::Linked,
            executor: Arc::new(SdkExecutor(executor)),
        }
    }

    /// The implementation id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The one-line description.
    pub fn description(&self) -> &str {
        &self.description
    }
}

impl fmt::Debug for CustomEvaluator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CustomEvaluator")
            .field("id", &self.id)
            .field("description", &self.description)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for CustomExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CustomExecutor")
            .field("id", &self.id)
            .field("description", &self.description)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// An SDK evaluator called directly (linked into the binary, or a plugin's seen through the
/// plugin side of the boundary).
pub(crate) struct SdkEvaluator(pub(crate) Arc<dyn MetricEvaluator>);

impl HostEvaluator for SdkEvaluator {
    fn evaluate(&self, ctx: &EvaluatorContext) -> Result<VertexMetrics, ModeError> {
        self.0.evaluate(ctx)
    }
    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        self.0.validate(params)
    }
}

/// An SDK executor called directly.
pub(crate) struct SdkExecutor(pub(crate) Arc<dyn ScalingExecutor>);

impl HostExecutor for SdkExecutor {
    fn priority(&self) -> i32 {
        self.0.priority()
    }
    fn apply(&self, ctx: &ExecutorContext) -> Result<ExecutorVerdict, ModeError> {
        self.0.apply(ctx)
    }
    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        self.0.validate(params)
    }
}
