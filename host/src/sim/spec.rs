//! A validated simulated job: vertices, edges, feedback edges, workloads and restart behaviour.
//!
//! Built from a job file by `parse`; everything here has been checked (ids resolve, parallelism
//! within max parallelism, the non-feedback graph is acyclic and vertices are in topological
//! order), so the physics never has to second-guess it.

use flowscale_sdk::ShipStrategy;
use serde::Serialize;

use super::workload::{Distribution, RateProfile};
use crate::engine::TaskManagerResources;

/// What a vertex is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum VertexKind {
    /// Reads source partitions; has no inputs.
    Source,
    /// Processes records.
    Operator,
    /// Consumes records; has no outputs.
    Sink,
}

/// One vertex.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VertexSpec {
    /// Engine id.
    pub id: String,
    /// Human-readable name (used in metric names such as `Source__<name>.numRecordsIn`).
    pub(crate) name: String,
    /// Source, operator or sink.
    pub(crate) kind: VertexKind,
    /// Parallelism at start.
    pub parallelism: u32,
    /// Max parallelism: the number of key groups.
    pub max_parallelism: u32,
    /// Records per second one subtask processes at 100% busy.
    pub(crate) capacity: f64,
    /// Records emitted per record processed.
    pub(crate) selectivity: f64,
    /// Source partitions (sources only, else 0).
    pub(crate) partitions: u32,
    /// Capacity of each input channel buffer of a subtask, in records.
    pub(crate) buffer: u64,
    /// State size in bytes at start (drives a state-dependent restart downtime).
    pub(crate) state_bytes: f64,
    /// State bytes added per record processed.
    pub(crate) state_bytes_per_record: f64,
    /// The workload of a source.
    pub(crate) workload: Option<SourceWorkload>,
    /// The slot-sharing group (default `default`, Flink's default group).
    pub(crate) slot_sharing_group: String,
}

/// One (non-feedback) edge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EdgeSpec {
    /// Upstream vertex index.
    pub from: usize,
    /// Downstream vertex index.
    pub to: usize,
    /// Ship strategy.
    #[serde(serialize_with = "ship_to_string")]
    pub(crate) ship: ShipStrategy,
    /// How records spread over key groups (HASH) or buckets (CUSTOM).
    pub(crate) keys: Distribution,
    /// A drifting hot set: every `drift_ms` the shares are drawn anew (a Zipf distribution's
    /// ranks land on other key groups), seeded by the period. `None`: fixed shares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) drift_ms: Option<i64>,
}

fn ship_to_string<S: serde::Serializer>(ship: &ShipStrategy, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(ship)
}

/// A feedback edge: a fraction of what the iteration tail emits goes back to the head.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct FeedbackSpec {
    /// The iteration tail (vertex index).
    pub(crate) from: usize,
    /// The iteration head (vertex index).
    pub(crate) to: usize,
    /// Fraction of the tail's output fed back, in `[0, 1)`.
    pub(crate) fraction: f64,
}

/// What arrives at a source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SourceWorkload {
    /// Rate components; the rate is their sum.
    pub(crate) rate: Vec<RateProfile>,
    /// How arrivals spread over partitions.
    pub(crate) partition_skew: Distribution,
    /// Total records of a bounded source; `None` is unbounded.
    pub(crate) total_records: Option<u64>,
    /// Relative per-tick noise on the rate (0.05 = ±5%, uniform), seeded.
    pub(crate) noise: f64,
}

impl SourceWorkload {
    /// The noiseless rate at `t_s`.
    pub(crate) fn rate_at(&self, t_s: f64) -> f64 {
        self.rate.iter().map(|p| p.rate_at(t_s)).sum()
    }
}

/// How long a rescale keeps the job down.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct RestartSpec {
    /// Fixed downtime (ms).
    pub(crate) downtime_ms: i64,
    /// Extra downtime per GiB of state over all vertices (ms).
    pub(crate) per_gib_ms: i64,
}

/// A validated simulated job: everything a job file describes, ready to run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimulatedJobSpec {
    /// Job name.
    pub(crate) name: String,
    /// Seed of every random choice.
    pub(crate) seed: u64,
    /// Simulated time per tick (ms).
    pub tick_ms: i64,
    /// Vertices in topological order of the non-feedback edges.
    pub vertices: Vec<VertexSpec>,
    /// Edges.
    pub edges: Vec<EdgeSpec>,
    /// Feedback edges.
    pub(crate) feedback: Vec<FeedbackSpec>,
    /// Restart behaviour.
    pub(crate) restart: RestartSpec,
    /// The size of one TaskManager (`[taskmanager]`), reported to the resource quota; `None`
    /// without the table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_managers: Option<TaskManagerResources>,
}

impl SimulatedJobSpec {
    /// Index of the vertex with `id`.
    pub(crate) fn vertex_index(&self, id: &str) -> Option<usize> {
        self.vertices.iter().position(|v| v.id == id)
    }
}
