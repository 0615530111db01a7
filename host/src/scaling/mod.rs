//! The decision pipeline: metric window, evaluation, vertex targets, the scaling operation.
//!
//! One [`run_cycle`] per job and interval reproduces the Flink autoscaler's decision (each
//! step is written down in `docs/decision-pipeline.md`): it stores a sample of the job's
//! metrics in the window, evaluates rates and the utilization band per vertex in topological
//! order, computes each vertex's target, asks the job's [`crate::alignment::Aligner`] to align it, applies the
//! ineffective-scale-up and delayed-scale-down rules, and decides a scaling operation only if at
//! least one changed vertex is outside its band. The operation is returned as a complete
//! parallelism map ([`CycleOutcome::decision`]) for the job's cooldown executor.
//!
//! Invariants: every number follows Java double semantics ([`numeric`]); one `now` per cycle;
//! all state that survives a cycle is in [`JobScalingState`], which the caller persists.
//!
//! Sub-modules, in the order a cycle uses them: `options`, the job graph (`topology`), `metrics`
//! (names, samples, the window and its statistics), `evaluation`, `target` (each vertex's target
//! and its alignment), `operation` (the cycle's decision), `state` (what survives a cycle), and
//! the `cycle` that runs them, with its `outcome`.
//!
//! A job's custom metric evaluator and custom scaling executors (`custom`, docs/plugin-kinds.md)
//! are called by the evaluation (after each vertex's own) and by the decision (after the
//! advisor check, before the operation is reported and applied).
//!
//! Not implemented: memory tuning and the cluster-resource check.

mod custom;
mod cycle;
mod error;
mod evaluation;
mod metrics;
pub(crate) mod numeric;
mod operation;
mod options;
mod outcome;
mod serde_double;
mod state;
mod target;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
mod topology;

pub use custom::chain::Veto;
pub(crate) use custom::resolve::Strictness;
pub use custom::resolve::{JobCustom, KindCatalog};
#[cfg(test)]
pub(crate) use custom::tests::TestKinds;
pub use custom::{CustomEvaluator, CustomExecutor, HostEvaluator, HostExecutor};
pub(crate) use cycle::Autoscaler;
pub use cycle::{run_cycle, run_cycle_custom};
pub use evaluation::EvaluatedVertices;
#[cfg(any(test, feature = "test-support"))]
pub use evaluation::MetricTriples;
#[cfg(test)]
pub(crate) use metrics::EvaluatedScalingMetric;
pub use metrics::ScalingMetric;
pub(crate) use metrics::VertexEvaluation;
pub(crate) use operation::REPORT_HEADER_ENABLED;
pub use options::AutoscalerOptions;
pub use outcome::{CycleOutcome, CycleStage, VertexDecision};
pub use state::JobScalingState;
#[cfg(test)]
pub(crate) use state::SECTION_SCALING_HISTORY;
pub(crate) use state::ScalingSummary;
pub(crate) use target::scaled_target;
