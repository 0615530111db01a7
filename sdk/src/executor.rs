//! The trait a custom scaling executor implements, and what it sees.
//!
//! Executors see a job's decided scaling before it is applied and may change it or veto it:
//! change freezes, budgets, step limits, approval gates. The host runs a job's executors in
//! ascending [`ScalingExecutor::priority`], each on the previous one's output; an empty answer
//! or a [`ExecutorVerdict::Veto`] vetoes the operation (nothing is applied), and a vertex an
//! executor drops keeps its current parallelism.

use crate::evaluator::VertexMetrics;
use crate::mode::ModeError;
use crate::params::ModeParams;
use crate::shared::{KindShared, kind_accessors};

/// The proposed scaling of one vertex.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingSummary {
    /// The vertex id.
    pub vertex_id: String,
    /// Its parallelism now.
    pub current_parallelism: u32,
    /// The parallelism the operation gives it.
    pub new_parallelism: u32,
    /// Its evaluated metrics, sorted by name.
    pub metrics: VertexMetrics,
}

/// What an executor sees: one job's proposed scaling operation in one cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorContext {
    // Crate-visible so that the plugin side of the boundary can bring a kept context up to
    // date in place (`abi::lend`); everyone else goes through the accessors.
    pub(crate) job: String,
    pub(crate) summaries: Vec<ScalingSummary>,
    pub(crate) shared: KindShared,
    pub(crate) now_ms: i64,
    pub(crate) restart_time_ms: u64,
}

impl ExecutorContext {
    /// A context for `job` with the proposed `summaries` (sorted here by vertex id), at
    /// `now_ms` milliseconds since the Unix epoch on the engine's clock (simulated time in the
    /// simulator); the rest starts empty (see the `with_*` methods).
    pub fn new(
        job: impl Into<String>,
        mut summaries: Vec<ScalingSummary>,
        now_ms: i64,
    ) -> ExecutorContext {
        summaries.sort_by(|a, b| a.vertex_id.cmp(&b.vertex_id));
        ExecutorContext {
            job: job.into(),
            summaries,
            shared: KindShared::default(),
            now_ms,
            restart_time_ms: 0,
        }
    }

    kind_accessors!("scaling.custom-executor");

    /// Sets the restart time the decision assumed, in milliseconds.
    pub fn with_restart_time_ms(mut self, restart_time_ms: u64) -> Self {
        self.restart_time_ms = restart_time_ms;
        self
    }

    /// The job's name.
    pub fn job_name(&self) -> &str {
        &self.job
    }

    /// The proposed scaling, one summary per changing vertex, sorted by vertex id: what the
    /// previous executor of the chain answered, or the pipeline's decision for the first.
    pub fn summaries(&self) -> &[ScalingSummary] {
        &self.summaries
    }

    /// The time of the decision, in milliseconds since the Unix epoch on the engine's clock.
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    /// The restart time the decision assumed, in milliseconds.
    pub fn restart_time_ms(&self) -> u64 {
        self.restart_time_ms
    }
}

/// An executor's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecutorVerdict {
    /// Apply these summaries (the proposed ones, changed or not). A vertex left out keeps its
    /// current parallelism; an empty list vetoes the operation, as in the Flink autoscaler.
    Apply(Vec<ScalingSummary>),
    /// Nothing is applied this cycle; the text says why (it becomes the `ScalingVetoed` event's
    /// message).
    Veto(String),
}

/// A custom scaling executor.
pub trait ScalingExecutor: Send + Sync {
    /// Where the executor runs in a job's chain: lower runs first (default 0).
    fn priority(&self) -> i32 {
        0
    }

    /// The scaling to apply, or a veto.
    fn apply(&self, ctx: &ExecutorContext) -> Result<ExecutorVerdict, ModeError>;

    /// Checks the instance's parameters when a configuration is loaded, so that bad values are
    /// reported by `flowscale validate` rather than at the first decision.
    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        let _ = params;
        Ok(())
    }
}
