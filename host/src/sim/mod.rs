//! The embedded simulator: a deterministic model of a pipelined stream processor that moves
//! counts of records, not records, and implements the engine seams.
//!
//! A job file (TOML, see `examples/jobs/`) describes vertices, edges with Flink's ship
//! strategies, feedback edges, workloads and restart behaviour. [`Simulation`] advances it tick
//! by tick (HASH routing by Flink's key-group ranges, CUSTOM by `bucket % p`, bounded buffers and
//! backpressure, sources reading partition `i` with subtask `i mod p`), reports Flink-named
//! metrics as a [`Collector`](crate::engine::Collector), and rescales and rate-limits as a
//! [`Realizer`](crate::engine::Realizer). Bounded iterative jobs finish by marker-based
//! termination detection, without timeouts. Every run records a [`Timeline`], summarised by
//! [`Summary`]; [`render_comparison_table`] and [`plot_svg`] compare runs.

mod error;
mod observe;
mod parse;
mod plot;
mod queue;
mod rng;
mod routing;
mod simulation;
mod spec;
mod summary;
mod timeline;
mod workload;

#[cfg(test)]
mod tests;

pub use error::{JobFileProblem, SimError};
pub use plot::{plot_svg, render_svg};
pub use routing::{key_group_range, operator_index_for_key_group};
pub use simulation::Simulation;
pub use spec::{
    EdgeSpec, FeedbackSpec, JobSpec, RestartSpec, SourceWorkload, VertexKind, VertexSpec,
};
pub use summary::{Summary, render_comparison_table};
pub use timeline::{Timeline, TimelineRow, VertexRow};
pub use workload::{Distribution, RateProfile};
