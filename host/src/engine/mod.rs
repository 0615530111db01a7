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
    ObservedVertex, SubtaskMetrics, VertexMetrics,
};

use std::collections::BTreeMap;

/// How time passes for an engine's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Wall-clock milliseconds since the epoch: cycles wait for real time to pass.
    Wall,
    /// The engine's own time (a simulation or a recording), from `start_ms` to `end_ms` when it
    /// has an end: cycles run back to back, as fast as the engine can answer.
    Virtual {
        /// The first instant.
        start_ms: i64,
        /// The last instant, if the engine has one (a recording).
        end_ms: Option<i64>,
    },
}

/// An engine a job runs on: a collector and a realizer with a clock.
pub trait Engine: Collector + Realizer + Send {
    /// How time passes.
    fn clock(&self) -> Clock;
    /// True once the job has finished (bounded jobs); the loop stops cycling it.
    fn is_finished(&self) -> bool {
        false
    }
}

impl<E: Collector + ?Sized> Collector for Box<E> {
    fn observe(&mut self, now_ms: i64) -> Result<JobObservation, EngineError> {
        (**self).observe(now_ms)
    }
}

impl<E: Realizer + ?Sized> Realizer for Box<E> {
    fn rescale(&mut self, parallelism: &BTreeMap<String, u32>) -> Result<(), EngineError> {
        (**self).rescale(parallelism)
    }
    fn set_rate_limit(
        &mut self,
        source_vertex: &str,
        records_per_second: Option<f64>,
    ) -> Result<(), EngineError> {
        (**self).set_rate_limit(source_vertex, records_per_second)
    }
}

impl<E: Engine + ?Sized> Engine for Box<E> {
    fn clock(&self) -> Clock {
        (**self).clock()
    }
    fn is_finished(&self) -> bool {
        (**self).is_finished()
    }
}

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
