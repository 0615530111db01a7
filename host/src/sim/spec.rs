//! A validated simulated job: vertices, edges, feedback edges, workloads and restart behaviour.
//!
//! Built from a job file by `parse`; everything here has been checked (ids resolve, parallelism
//! within max parallelism, the non-feedback graph is acyclic and vertices are in topological
//! order), so the physics never has to second-guess it.

use flowscale_sdk::ShipStrategy;
use serde::Serialize;

use super::workload::{Distribution, RateProfile};

/// What a vertex is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VertexKind {
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
    pub name: String,
    /// Source, operator or sink.
    pub kind: VertexKind,
    /// Parallelism at start.
    pub parallelism: u32,
    /// Max parallelism: the number of key groups.
    pub max_parallelism: u32,
    /// Records per second one subtask processes at 100% busy.
    pub capacity: f64,
    /// Records emitted per record processed.
    pub selectivity: f64,
    /// Source partitions (sources only, else 0).
    pub partitions: u32,
    /// Capacity of each input channel buffer of a subtask, in records.
    pub buffer: u64,
    /// State size in bytes at start (drives a state-dependent restart downtime).
    pub state_bytes: f64,
    /// State bytes added per record processed.
    pub state_bytes_per_record: f64,
    /// The workload of a source.
    pub workload: Option<SourceWorkload>,
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
    pub ship: ShipStrategy,
    /// How records spread over key groups (HASH) or buckets (CUSTOM).
    pub keys: Distribution,
    /// A drifting hot set: every `drift_ms` the shares are drawn anew (a Zipf distribution's
    /// ranks land on other key groups), seeded by the period. `None`: fixed shares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift_ms: Option<i64>,
}

fn ship_to_string<S: serde::Serializer>(ship: &ShipStrategy, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(ship)
}

/// A feedback edge: a fraction of what the iteration tail emits goes back to the head.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FeedbackSpec {
    /// The iteration tail (vertex index).
    pub from: usize,
    /// The iteration head (vertex index).
    pub to: usize,
    /// Fraction of the tail's output fed back, in `[0, 1)`.
    pub fraction: f64,
}

/// What arrives at a source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceWorkload {
    /// Rate components; the rate is their sum.
    pub rate: Vec<RateProfile>,
    /// How arrivals spread over partitions.
    pub partition_skew: Distribution,
    /// Total records of a bounded source; `None` is unbounded.
    pub total_records: Option<u64>,
    /// Relative per-tick noise on the rate (0.05 = ±5%, uniform), seeded.
    pub noise: f64,
}

impl SourceWorkload {
    /// The noiseless rate at `t_s`.
    pub fn rate_at(&self, t_s: f64) -> f64 {
        self.rate.iter().map(|p| p.rate_at(t_s)).sum()
    }
}

/// How long a rescale keeps the job down.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RestartSpec {
    /// Fixed downtime (ms).
    pub downtime_ms: i64,
    /// Extra downtime per GiB of state over all vertices (ms).
    pub per_gib_ms: i64,
}

/// A validated simulated job: everything a job file describes, ready to run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimulatedJobSpec {
    /// Job name.
    pub name: String,
    /// Seed of every random choice.
    pub seed: u64,
    /// Simulated time per tick (ms).
    pub tick_ms: i64,
    /// Vertices in topological order of the non-feedback edges.
    pub vertices: Vec<VertexSpec>,
    /// Edges.
    pub edges: Vec<EdgeSpec>,
    /// Feedback edges.
    pub feedback: Vec<FeedbackSpec>,
    /// Restart behaviour.
    pub restart: RestartSpec,
}

impl SimulatedJobSpec {
    /// Index of the vertex with `id`.
    pub fn vertex_index(&self, id: &str) -> Option<usize> {
        self.vertices.iter().position(|v| v.id == id)
    }
}
