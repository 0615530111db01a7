//! The Flink engine: observe and rescale jobs of a real Apache Flink cluster over its REST API.
//!
//! [`FlinkCollector`] reads a job's topology and metrics the way the Flink autoscaler's REST
//! metric collector does; [`FlinkRealizer`] rescales in place through the adaptive scheduler's
//! `resource-requirements` endpoint (what the Flink autoscaler's standalone mode does on Flink 1.18+),
//! after validating every bound it sends: Flink accepts `upperBound: -1` and then loses its
//! JobManager. [`discover_jobs`] picks the jobs to scale, and [`FlinkEngine`] is one of them as
//! the control loop runs it. Everything talks through a blocking [`FlinkClient`] with timeouts
//! and bounded retries; failures become [`EngineError`]s.
//!
//! [`EngineError`]: crate::engine::EngineError

mod access;
mod client;
mod collector;
mod engine;
mod failure;
mod jobs;
mod limit;
mod metrics;
mod realizer;
mod resources;
mod rest;
mod slots;
mod topology;

#[cfg(test)]
pub(crate) mod fake_server;
#[cfg(test)]
mod rest_tests;
#[cfg(any(test, feature = "test-support"))]
pub mod test_server;
#[cfg(test)]
mod tls_tests;

pub use client::{FlinkClient, FlinkOptions};
pub use collector::FlinkCollector;
pub(crate) use engine::FlinkEngine;
pub use jobs::discover_jobs;
pub(crate) use limit::{ClusterLimits, cluster_key};
pub use realizer::FlinkRealizer;
pub use rest::{ParallelismBounds, VertexRequirement};
pub(crate) use slots::FlinkSlots;
