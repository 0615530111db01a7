//! The simulated job's run-time state: vertices with their subtasks and queues, edges with
//! their routes, iteration sources, a pending restart, and the scratch buffers that keep a tick
//! free of allocations. The physics that changes it lives in the sibling files.

use flowscale_sdk::ShipStrategy;

use crate::sim::queue::Queue;
use crate::sim::rng::SplitMix64;
use crate::sim::routing::Route;
use crate::sim::spec::SimulatedJobSpec;
use crate::sim::summary::SummaryBuilder;
use crate::sim::timeline::{Timeline, TimelineRow};

/// Where a vertex input comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputFrom {
    /// A regular edge (index into the job's edges).
    Edge(usize),
    /// The loop input of an iteration head (index into the iterations).
    Loop(usize),
}

/// One source partition in the source system.
#[derive(Debug, Clone)]
pub(crate) struct Partition {
    pub(crate) pending: u64,
    pub(crate) share: f64,
}

/// One subtask.
#[derive(Debug, Clone, Default)]
pub(crate) struct Subtask {
    /// One queue per vertex input (same order as `VertexState::inputs`).
    pub(crate) queues: Vec<Queue>,
    /// Markers passed per input.
    pub(crate) markers: Vec<u64>,
    /// End-of-input reached per input.
    pub(crate) ended: Vec<bool>,
    /// Partitions this source subtask reads.
    pub(crate) partitions: Vec<usize>,
    pub(super) capacity_carry: f64,
    /// `capacity_carry` plus a tick's capacity, in whole records: noted in the tick's demand,
    /// read when the tick is booked.
    pub(super) capacity_floor: u64,
    pub(super) limit_carry: f64,
    pub(super) out_carry: f64,
    /// Last tick, in ms per second of that tick.
    pub(crate) busy_ms: f64,
    pub(crate) backpressured_ms: f64,
    pub(crate) idle_ms: f64,
    /// Last tick's records.
    pub(crate) records_in: u64,
    pub(crate) records_out: u64,
    /// Since the last (re)start.
    pub(crate) cum_in: u64,
    pub(crate) cum_out: u64,
    pub(crate) cum_busy_ms: f64,
}

/// One vertex at run time.
#[derive(Debug, Clone)]
pub(crate) struct VertexState {
    pub(crate) parallelism: u32,
    pub(crate) inputs: Vec<InputFrom>,
    pub(crate) outputs: Vec<usize>,
    /// Feedback edges leaving this vertex: (iteration index, tail slot, fraction).
    pub(crate) feedback_out: Vec<(usize, usize, f64)>,
    pub(super) feedback_carry: f64,
    pub(crate) subtasks: Vec<Subtask>,
    pub(crate) finished: bool,
    /// Iteration whose head this is.
    pub(crate) head_of: Option<usize>,
    pub(super) head_initiated: bool,
    pub(super) markers_emitted: u64,
    pub(crate) partitions: Vec<Partition>,
    pub(super) arrival_carry: f64,
    pub(crate) generated: u64,
    /// Arrival rate of the last tick (records/s), sources only.
    pub(crate) arrival_rate: f64,
    /// Over the whole run (never reset).
    pub(crate) total_in: u64,
    pub(crate) total_out: u64,
    pub(crate) state_bytes: f64,
    pub(crate) rate_limit: Option<f64>,
}

/// One edge at run time.
#[derive(Debug, Clone)]
pub(crate) struct EdgeState {
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) ship: ShipStrategy,
    pub(super) shares: Vec<f64>,
    /// The drift period the shares were drawn for (0 without drift).
    pub(super) period: i64,
    pub(crate) route: Route,
    /// Index of this edge among the downstream vertex's inputs.
    pub(crate) slot: usize,
}

/// An iteration: the iteration source of one head, fed by its tails.
#[derive(Debug, Clone)]
pub(crate) struct Iteration {
    pub(crate) head: usize,
    /// One FIFO per tail (feedback edge).
    pub(crate) queues: Vec<Queue>,
    pub(super) markers: Vec<u64>,
    pub(super) ended: Vec<bool>,
    pub(super) passed: u64,
    pub(super) records_since_marker: u64,
    /// The head's loop input slot.
    pub(crate) slot: usize,
    pub(crate) terminated: bool,
    /// Records that reached a terminated iteration source (must stay 0: termination is never
    /// early).
    pub(crate) dropped: u64,
}

/// A rescale waiting for its restart downtime to pass.
#[derive(Debug, Clone)]
pub(super) struct PendingRestart {
    pub(super) until_ms: i64,
    pub(super) parallelism: Vec<u32>,
}

/// A simulated job. Build it with [`Simulation::from_file`] or [`Simulation::from_toml_str`];
/// drive it with [`Simulation::step`] / [`Simulation::advance_to`], or through the
/// [`Collector`](crate::engine::Collector) and [`Realizer`](crate::engine::Realizer) seams like
/// any engine.
#[derive(Debug, Clone)]
pub struct Simulation {
    pub(crate) spec: SimulatedJobSpec,
    pub(crate) now_ms: i64,
    pub(crate) tick: u64,
    pub(crate) running_since_ms: i64,
    pub(super) pending: Option<PendingRestart>,
    pub(crate) vertices: Vec<VertexState>,
    pub(crate) edges: Vec<EdgeState>,
    pub(crate) iterations: Vec<Iteration>,
    pub(super) noise: SplitMix64,
    pub(crate) timeline: Option<Timeline>,
    /// The run's summary so far, kept up to date whether or not the timeline is recorded.
    pub(crate) summary: SummaryBuilder,
    /// This tick's row, built in place (its vectors reused) and then summarised, and copied to
    /// the timeline when one is recorded.
    pub(super) row: TimelineRow,
    pub(super) events: Vec<String>,
    pub(crate) restarts: u32,
    pub(crate) restarting_ms: i64,
    pub(super) scratch: Scratch,
    pub(super) timeline_limit: Option<usize>,
    /// The job's place on a shared simulated cluster, when it runs on one.
    pub(super) seat: Option<crate::sim::cluster::Seat>,
}

/// Buffers reused by every vertex in every tick, so a tick allocates nothing.
#[derive(Debug, Clone, Default)]
pub(super) struct Scratch {
    pub(super) per: Vec<f64>,
    pub(super) demand: Vec<u64>,
    pub(super) grant: Vec<u64>,
    pub(super) out: Vec<u64>,
    pub(super) regular: Vec<u64>,
    pub(super) parts: Vec<u64>,
    pub(super) take: Vec<u64>,
    pub(super) weights: Vec<f64>,
}
