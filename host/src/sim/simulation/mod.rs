//! The simulated job: state and the physics of one tick.
//!
//! Per tick, in order: a pending restart completes if its downtime is over; records arrive in the
//! source partitions (also while restarting: the source system keeps filling); then, if the job
//! is running, iteration sources forward fed-back records into their heads and every vertex, in
//! topological order, takes what its buffers hold up to its capacity and what its downstream
//! buffers can accept, and emits the result. Records move as integer counts (so conservation is
//! exact and "a record in flight" is well defined); fractional effects (selectivity, capacity,
//! feedback fraction) carry their remainders to the next tick.
//!
//! `state` holds the data; the other files each add one part of [`Simulation`]'s behaviour:
//! `build` (construction and layout), `tick` (the order of a tick, arrivals), `process` (one
//! vertex's tick), `downstream` (backpressure and emission), `termination` (iteration sources
//! and finishing), `control` (rescales and rate limits), `record` (the timeline) and `queries`.

mod build;
mod control;
mod counts;
mod downstream;
mod process;
mod queries;
mod record;
mod state;
mod termination;
mod tick;

pub use state::Simulation;
pub(crate) use state::{Subtask, VertexState};
