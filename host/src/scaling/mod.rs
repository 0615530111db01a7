//! The decision pipeline: metric window, evaluation, vertex targets, execution with cooldown.
//!
//! One [`run_cycle`] per job and interval reproduces the Flink autoscaler's decision (see
//! `shared/reference/flink-autoscaler.md`): it stores a sample of the job's metrics in the
//! window, evaluates rates and the utilization band per vertex in topological order, computes
//! each vertex's target, asks the job's [`crate::alignment::Aligner`] to align it, applies the
//! ineffective-scale-up and delayed-scale-down rules, and decides a scaling operation only if at
//! least one changed vertex is outside its band. The operation is returned as a complete
//! parallelism map ([`CycleOutcome::decision`]) for the job's executor with cooldown.
//!
//! Invariants: every number follows Java double semantics ([`numeric`]); one `now` per cycle;
//! all state that survives a cycle is in [`JobScalingState`], which the caller persists.
//!
//! Not implemented: memory tuning, resource/quota checks, custom evaluators and custom scaling
//! executors, cron expressions in `excluded.periods`.

pub mod cooldown;
mod cycle;
mod delayed_scale_down;
mod error;
mod evaluation;
mod executor;
mod history;
mod metric;
mod metrics;
pub mod numeric;
mod options;
mod periods;
mod replay_run;
mod serde_double;
mod state;
#[cfg(test)]
mod test_support;
pub mod testing;
mod topology;
mod vertex_scaler;
mod window;

pub use cycle::{Autoscaler, CycleOutcome, CycleStage, VertexDecision, run_cycle};
pub use delayed_scale_down::{DelayedScaleDown, RecommendedParallelism, VertexDelayedScaleDown};
pub use error::CycleError;
pub use evaluation::{Evaluation, VertexEvaluation, average, average_or_rate, rate};
pub use executor::{REPORT_HEADER_DISABLED, REPORT_HEADER_ENABLED};
pub use history::{ScalingHistory, ScalingRecord, ScalingSummary, ScalingTracking};
pub use metric::{EvaluatedScalingMetric, ScalingMetric};
pub use metrics::CollectedMetrics;
pub use options::{AutoscalerOptions, BusyTimeAggregator};
pub use periods::{DailyRange, ExcludedPeriods, PeriodError};
pub use replay_run::{ReplayedCycle, run_replay};
pub use state::{
    JobScalingState, SECTION_DELAYED_SCALE_DOWN, SECTION_METRIC_HISTORY,
    SECTION_PARALLELISM_OVERRIDES, SECTION_PENDING_SUMMARIES, SECTION_SCALING_HISTORY,
    SECTION_SCALING_TRACKING,
};
pub use vertex_scaler::{ParallelismChange, observed_scalability_coefficient};
pub use window::MetricHistory;
