//! The seams between the control loop and the engines a job runs on.
//!
//! The loop only ever talks to an engine through [`Collector`] (what the job looks like and how
//! its vertices are doing) and [`Realizer`] (apply a parallelism map, publish a rate limit), so
//! the same decision code serves the simulator, a real Flink cluster and a replayed trace.

pub mod flink;
mod observation;
pub mod replay;
mod slots;

pub use observation::{
    AggregatedMetric, EngineError, IoMetrics, JobObservation, JobStatus, ObservedEdge,
    ObservedVertex, SubtaskMetrics, TaskManagerResources, VertexMetrics,
};
pub(crate) use slots::slots_needed;

use std::collections::BTreeMap;
use std::time::Duration;

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
    /// What happened to the engine's connection since the last call that the job's events
    /// should show (a Flink cluster's credentials reloaded, or a reload refused).
    fn take_events(&mut self) -> Vec<crate::events::Event> {
        Vec::new()
    }
}

impl<E: Collector + ?Sized> Collector for Box<E> {
    fn observe(&mut self, now_ms: i64) -> Result<JobObservation, EngineError> {
        (**self).observe(now_ms)
    }
}

impl<E: Realizer + ?Sized> Realizer for Box<E> {
    fn rescale_fenced(
        &mut self,
        parallelism: &BTreeMap<String, u32>,
        fence: &dyn WriteFence,
    ) -> Result<(), EngineError> {
        (**self).rescale_fenced(parallelism, fence)
    }
    fn forget_writes(&mut self) {
        (**self).forget_writes()
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
    fn take_events(&mut self) -> Vec<crate::events::Event> {
        (**self).take_events()
    }
}

/// Reads a job's topology and metrics.
pub trait Collector {
    /// Observes the job at `now_ms` (milliseconds since the epoch, or simulated time).
    fn observe(&mut self, now_ms: i64) -> Result<JobObservation, EngineError>;
}

/// What every request that changes a job must pass right before it leaves the host: each
/// attempt, and each retry of one.
///
/// With state shared by several hosts, a job is changed only under its lease, and a lease can
/// be lost while a change is under way (the host paused, its database slow): a fence checked
/// once, before the change started, would let a retry out long after another host took the
/// job. So the realizer asks the fence again before every attempt, and bounds each attempt by
/// the time the fence has left.
pub trait WriteFence {
    /// `Ok` when a request may leave now, with the time left before the change's deadline
    /// (`None`: no deadline), which bounds the request; `Err` with the reason when nothing more
    /// may leave: the change is then abandoned, not retried.
    fn check(&self) -> Result<Option<Duration>, String>;

    /// Who makes the change: this host's id and its fencing token, sent along with the
    /// request (`X-Flowscale-Host`, `X-Flowscale-Fencing-Token`) so that the engine's side
    /// (its logs, a proxy in front of it) can tell the writers apart.
    fn writer(&self) -> Option<(&str, i64)> {
        None
    }
}

/// The fence of a job that is only ever this host's: everything may leave, with no deadline.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unfenced;

impl WriteFence for Unfenced {
    fn check(&self) -> Result<Option<Duration>, String> {
        Ok(None)
    }
}

/// Applies decisions to a job.
pub trait Realizer {
    /// Rescales the job to `parallelism` (vertex id -> parallelism, every vertex listed),
    /// asking `fence` before each request that changes the job.
    ///
    /// An engine that can tell that another writer changed the job since this realizer last
    /// saw or changed it answers [`EngineError::Conflict`] and sends nothing; one whose fence
    /// refused a request answers [`EngineError::Abandoned`].
    fn rescale_fenced(
        &mut self,
        parallelism: &BTreeMap<String, u32>,
        fence: &dyn WriteFence,
    ) -> Result<(), EngineError>;

    /// [`Realizer::rescale_fenced`] for a job that is only ever this host's.
    fn rescale(&mut self, parallelism: &BTreeMap<String, u32>) -> Result<(), EngineError> {
        self.rescale_fenced(parallelism, &Unfenced)
    }

    /// Forgets what this realizer last saw or wrote of the job: it takes over the job (a new
    /// lease), and what the engine holds now is the truth to build on, whoever wrote it.
    fn forget_writes(&mut self) {}

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
