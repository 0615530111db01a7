//! Why a cycle ended without a decision.

/// Why a cycle stopped early. [`CycleError::NotReady`] is expected (the job is warming up) and
/// ends the cycle silently; every other variant is reported as an `AutoscalerError` event.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum CycleError {
    /// The job cannot be evaluated yet (empty plan, metrics missing while stabilizing).
    #[error("{0}")]
    NotReady(String),
    /// A metric the Flink autoscaler requires is missing after stabilization.
    #[error("Could not find required metric {metric} for {vertex}")]
    MetricNotFound {
        /// The Flink autoscaler's metric name (`BUSY_TIME_PER_SEC`, ...).
        metric: &'static str,
        /// The vertex id.
        vertex: String,
    },
    /// A source has no ingestion rate, so no target rate can be computed.
    #[error("Cannot evaluate metrics without ingestion rate information (vertex {vertex})")]
    NoIngestionRate {
        /// The source vertex id.
        vertex: String,
    },
    /// The observation is inconsistent (duplicate vertices, edges to unknown vertices, a cycle).
    #[error("invalid observation: {0}")]
    InvalidObservation(String),
}
