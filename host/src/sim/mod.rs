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
//!
//! # The job file
//!
//! ```toml
//! [job]
//! name = "orders"          # default "job"
//! seed = 42                # every random choice derives from it (default 0)
//! tick = "1s"              # simulated time per tick (default 1 s)
//!
//! [keys]                   # default key distribution of HASH/CUSTOM edges (default uniform)
//! kind = "zipf"            # uniform | zipf (exponent) | weights (weights = [..])
//! exponent = 1.1
//!
//! [[vertices]]
//! id = "src"               # unique
//! name = "Source: orders"  # default: the id; metric names derive from it
//! kind = "source"          # source | operator | sink
//! parallelism = 8
//! max_parallelism = 128    # key groups (default 128)
//! capacity = 20000         # records/s per subtask at 100% busy ...
//! # cost_per_record = "50us"   # ... or the time one record takes
//! selectivity = 1.0        # records out per record in (default 1)
//! partitions = 37          # sources only, required
//! buffer = 20000           # records per input channel of a subtask (default max(capacity, 100))
//! state_bytes = 0          # state at start; with restart.per_gib it lengthens restarts
//! state_bytes_per_record = 0
//! slot_sharing_group = "default"   # vertices of one group share slots (default `default`)
//!
//! [[edges]]
//! from = "src"
//! to = "agg"
//! ship = "HASH"            # HASH REBALANCE RESCALE FORWARD BROADCAST GLOBAL SHUFFLE CUSTOM:<buckets>
//! # buckets = 48           # alternative to CUSTOM:<buckets>
//! # keys = { kind = "zipf", exponent = 1.0 }   # this edge's key (or bucket) distribution
//! # drift = "20 min"     # a drifting hot set: the shares are drawn anew every period
//!
//! [[feedback]]             # iterations: `fraction` of what the tail emits goes back to the head
//! from = "tail"
//! to = "head"
//! fraction = 0.5           # in [0, 1)
//!
//! [workload.src]           # one per source
//! total_records = 1000000  # a bounded source (omit: unbounded)
//! noise = 0.05             # ±5% uniform per-tick noise on the rate
//! partition_skew = { kind = "zipf", exponent = 0.5 }
//! [[workload.src.rate]]    # the rate is the sum of these components
//! kind = "step"            # constant (rate) | step (from, to, at) | ramp (from, to, start, end)
//! from = 1000              # | sine (mean, amplitude, period, phase) | diurnal (low, high,
//! to = 5000                # peak_at = "14h", period = "1d") | spike (extra, at, duration)
//! at = "10 min"            # | trace (path = "x.csv" of `seconds,rate` lines, interpolate)
//!
//! [restart]
//! downtime = "30s"         # fixed part of a rescale's downtime (default 30 s)
//! per_gib = "10s"          # plus this per GiB of state over all vertices (default 0)
//!
//! [taskmanager]            # one TaskManager's size, for the resource quota (`quota.cpu`,
//! cpu = 2.0                # `quota.memory`); without the table none is reported. Cores, > 0
//! memory = "4 gb"          # process memory, Flink's syntax or a number of bytes
//! slots = 4                # task slots (default 1)
//! ```
//!
//! Durations use Flink's syntax (`"30s"`, `"5 min"`, `"1h"`, `"2d"`); a plain number is
//! milliseconds.
//!
//! # Modelling choices
//!
//! - `*PerSecond` metrics are the last tick's values (a tick is 1 s by default); counters and
//!   accumulated busy time restart at 0 after each restart, like Flink's.
//! - A feedback edge splits the tail's output: `fraction` goes back to the head, the rest goes
//!   downstream. Feedback queues are unbounded (as Flink's iteration channels are), so a loop
//!   cannot deadlock on its own backpressure. Feedback edges and iteration sources are not
//!   reported as vertices or edges: the autoscaler sees an acyclic job graph.
//! - A rescale keeps in-flight records (they are spread over the new subtasks by the new
//!   routes) and starts a fresh termination round (markers in flight are dropped, heads start
//!   again), which can only delay termination, never hasten it.
//! - A channel is one input of one subtask: the FIFO into which every upstream subtask's records,
//!   markers and end-of-input are appended in emission order. Termination is tracked per vertex:
//!   a vertex passes its k-th marker on once every subtask has passed k markers on each input
//!   that has not ended. Subtasks keep consuming past a marker while the others catch up (no
//!   blocking alignment); whatever they emit meanwhile travels ahead of the marker, which only
//!   makes a round longer, never a termination earlier. The iteration source of a head gathers
//!   all feedback edges into that head.
//! - A rate limit is split evenly over the source subtasks that own partitions.
//! - `taskSlotsTotal` is the slots the job occupies: per slot-sharing group its widest vertex,
//!   summed over the groups (`taskSlotsAvailable` is 0).
//! - [`Collector::observe`](crate::engine::Collector::observe) advances the simulation to the
//!   given time: pass simulated milliseconds, not the wall clock.

pub(crate) mod chart;
mod cluster;
mod engine;
mod error;
mod observe;
mod oracle;
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
mod cluster_tests;
#[cfg(test)]
mod tests;

pub(crate) use cluster::SlotPool;
pub(crate) use error::SimError;
pub(crate) use oracle::{Oracle, OracleSettings, clairvoyant};
pub(crate) use plot::plot_svg;
pub use simulation::Simulation;
pub(crate) use summary::{Summary, render_comparison_table};
pub(crate) use timeline::Timeline;
