//! Test doubles and helpers for the decision pipeline: aligners that stand in for a job's
//! alignment, builders of observations, and a replay of a recorded job through the pipeline.
//!
//! Built for this crate's tests and with the `test-support` feature (which the integration tests
//! and benchmarks enable), never into the binary.

mod aligners;
mod custom;
mod observations;
mod replay;

pub use aligners::{BalancedAligner, TargetAligner};
pub use custom::resolve_custom;
pub use observations::{Job, agg, backlog_opts};
pub use replay::{ReplayedCycle, run_replay};
