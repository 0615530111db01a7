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
//! Not implemented: memory tuning, resource/quota checks, custom evaluators and custom scaling
//! executors, cron expressions in `excluded.periods`.

mod cycle;
mod error;
mod evaluation;
mod metrics;
pub mod numeric;
mod operation;
mod options;
mod outcome;
mod serde_double;
mod state;
mod target;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
mod topology;

pub use cycle::{Autoscaler, run_cycle};
pub use error::CycleError;
pub use evaluation::Evaluation;
pub use metrics::{
    CollectedMetrics, EvaluatedScalingMetric, MetricHistory, MetricMap, MetricMapIter,
    ScalingMetric, VertexEvaluation, average, average_or_rate, rate,
};
pub use operation::{REPORT_HEADER_DISABLED, REPORT_HEADER_ENABLED};
pub use options::{
    AutoscalerOptions, BusyTimeAggregator, DailyRange, ExcludedPeriods, PeriodError,
};
pub use outcome::{CycleOutcome, CycleStage, VertexDecision};
pub use state::{
    DelayedScaleDown, JobScalingState, RecommendedParallelism, SECTION_DELAYED_SCALE_DOWN,
    SECTION_METRIC_HISTORY, SECTION_PARALLELISM_OVERRIDES, SECTION_PENDING_SUMMARIES,
    SECTION_SCALING_HISTORY, SECTION_SCALING_TRACKING, ScalingHistory, ScalingRecord,
    ScalingSummary, ScalingTracking, VertexDelayedScaleDown,
};
pub use target::{
    ParallelismChange, Reason, ScaledTarget, observed_scalability_coefficient, scaled_target,
};
