//! The seams between the control loop and the engines a job runs on.
//!
//! The loop only ever talks to an engine through [`Collector`] (what the job looks like and how
//! its vertices are doing) and [`Realizer`] (apply a parallelism map, publish a rate limit), so
//! the same decision code serves the simulator, a real Flink cluster and a replayed trace.

pub mod flink;
mod observation;
pub mod replay;

pub use observation::{
    AggregatedMetric, EngineError, IoMetrics, JobObservation, JobStatus, ObservedEdge,
    ObservedVertex, VertexMetrics,
};

use std::collections::BTreeMap;

/// Reads a job's topology and metrics.
pub trait Collector {
    /// Observes the job at `now_ms` (milliseconds since the epoch, or simulated time).
    fn observe(&mut self, now_ms: i64) -> Result<JobObservation, EngineError>;
}

/// Applies decisions to a job.
pub trait Realizer {
    /// Rescales the job to `parallelism` (vertex id -> parallelism, every vertex listed).
    fn rescale(&mut self, parallelism: &BTreeMap<String, u32>) -> Result<(), EngineError>;

    /// Limits the intake of a source vertex to `records_per_second` (None lifts the limit).
    /// Engines that cannot enforce a limit report it and carry on.
    fn set_rate_limit(
        &mut self,
        source_vertex: &str,
        records_per_second: Option<f64>,
    ) -> Result<(), EngineError> {
        let _ = (source_vertex, records_per_second);
        Err(EngineError::Unsupported("rate limiting".into()))
    }
}
