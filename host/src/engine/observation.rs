//! What a collector reports about a job: topology, status and Flink-named vertex metrics.

use std::collections::BTreeMap;

use flowscale_sdk::{ShipStrategy, SubtaskLoad};
use serde::{Deserialize, Serialize};

/// The job's state as the engine reports it (Flink's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobStatus {
    /// Created, waiting for resources.
    Created,
    /// Every task is running.
    Running,
    /// Restarting (e.g. during a rescale).
    Restarting,
    /// Finished (bounded jobs).
    Finished,
    /// Failed.
    Failed,
    /// Canceled.
    Canceled,
}

/// A vertex as observed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservedVertex {
    /// Engine id (Flink: hex job-vertex id).
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// Running parallelism.
    pub parallelism: u32,
    /// Max parallelism (number of key groups).
    pub max_parallelism: u32,
    /// Partitions of a source, when the engine can tell; 0 otherwise.
    #[serde(default)]
    pub source_partitions: u32,
    /// True once the vertex has finished (bounded inputs).
    #[serde(default)]
    pub finished: bool,
    /// The vertex's slot-sharing group (Flink: `slotSharingGroupId` of the job details), when
    /// the engine reports one. Vertices of one group share slots: the group needs as many
    /// slots as its widest vertex (docs/decision-pipeline.md#resource-quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_sharing_group: Option<String>,
}

/// An edge as observed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservedEdge {
    /// Upstream vertex id.
    pub from: String,
    /// Downstream vertex id.
    pub to: String,
    /// Ship strategy, as Flink spells it (`HASH`, `REBALANCE`, `CUSTOM:48`, ...).
    pub ship_strategy: String,
}

impl ObservedEdge {
    /// The parsed ship strategy.
    pub(crate) fn strategy(&self) -> ShipStrategy {
        ShipStrategy::parse(&self.ship_strategy)
    }
}

/// min / max / avg / sum of one metric over a vertex's subtasks (Flink's aggregated subtask
/// metrics). A missing aggregate is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct AggregatedMetric {
    /// Minimum over subtasks.
    pub min: Option<f64>,
    /// Maximum over subtasks.
    pub max: Option<f64>,
    /// Average over subtasks.
    pub avg: Option<f64>,
    /// Sum over subtasks.
    pub sum: Option<f64>,
}

impl AggregatedMetric {
    /// The same value in every aggregate slot computed from per-subtask values.
    pub(crate) fn from_subtasks(values: &[f64]) -> AggregatedMetric {
        if values.is_empty() {
            return AggregatedMetric::default();
        }
        let sum: f64 = values.iter().sum();
        AggregatedMetric {
            min: values.iter().copied().reduce(f64::min),
            max: values.iter().copied().reduce(f64::max),
            avg: Some(sum / values.len() as f64),
            sum: Some(sum),
        }
    }
}

/// Cumulative counters of a vertex from the job details (`read-records`, `write-records`,
/// `accumulated-busy-time`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct IoMetrics {
    /// Records read so far (all subtasks).
    pub num_records_in: f64,
    /// Records written so far (all subtasks).
    pub num_records_out: f64,
    /// Accumulated busy time in ms (all subtasks); NaN when unknown.
    pub accumulated_busy_time: f64,
}

/// The load of one subtask as the engine reports it, under Flink's metric names. A metric the
/// engine did not report is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SubtaskMetrics {
    /// `busyTimeMsPerSecond`: ms per second the subtask was busy, in `[0, 1000]`.
    #[serde(rename = "busyTimeMsPerSecond", default)]
    pub busy_time_ms_per_second: Option<f64>,
    /// `numRecordsInPerSecond`: records the subtask received per second.
    #[serde(rename = "numRecordsInPerSecond", default)]
    pub num_records_in_per_second: Option<f64>,
}

impl SubtaskMetrics {
    /// The SDK's view: busy time as a ratio in `[0, 1]`; values that are not finite or are
    /// negative are not known.
    pub(crate) fn to_sdk(self) -> SubtaskLoad {
        let known = |x: Option<f64>| x.filter(|v| v.is_finite() && *v >= 0.0);
        SubtaskLoad {
            busy_ratio: known(self.busy_time_ms_per_second).map(|ms| (ms / 1000.0).min(1.0)),
            records_in_per_second: known(self.num_records_in_per_second),
        }
    }
}

/// The metrics of one vertex: aggregated subtask metrics by Flink metric name
/// (`busyTimeMsPerSecond`, `backPressuredTimeMsPerSecond`, `Source__x.numRecordsInPerSecond`,
/// `Source__x.numRecordsIn`, `x.pendingRecords`, `numRecordsInPerSecond`, ...) and the IO counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VertexMetrics {
    /// Aggregated subtask metrics by name.
    #[serde(default)]
    pub aggregated: BTreeMap<String, AggregatedMetric>,
    /// Cumulative IO counters.
    #[serde(default)]
    pub io: IoMetrics,
    /// Per-subtask load, subtask `i` at index `i`, when the engine reports it (empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subtasks: Vec<SubtaskMetrics>,
}

impl VertexMetrics {
    /// The per-subtask load for alignment when there is one entry per subtask of a vertex
    /// running at `parallelism` and at least one value is known; else empty ("not known").
    pub(crate) fn subtask_loads(&self, parallelism: u32) -> Vec<SubtaskLoad> {
        if self.subtasks.len() != parallelism as usize {
            return Vec::new();
        }
        let loads: Vec<SubtaskLoad> = self.subtasks.iter().map(|s| s.to_sdk()).collect();
        let any = loads
            .iter()
            .any(|l| l.busy_ratio.is_some() || l.records_in_per_second.is_some());
        if any { loads } else { Vec::new() }
    }
}

/// The size of one TaskManager of the job's cluster, as far as the engine can tell (each
/// field `None` when it cannot). The resource quota multiplies it by the number of
/// TaskManagers an operation needs (docs/decision-pipeline.md#resource-quota).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskManagerResources {
    /// CPU cores of one TaskManager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores: Option<f64>,
    /// Total process memory of one TaskManager, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Task slots per TaskManager (`taskmanager.numberOfTaskSlots`), at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
}

/// One observation of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobObservation {
    /// Status of the job.
    pub status: JobStatus,
    /// When the job last became RUNNING (Flink's `timestamps.RUNNING`), in ms.
    pub running_since_ms: i64,
    /// Vertices in topological order.
    pub vertices: Vec<ObservedVertex>,
    /// Edges.
    pub edges: Vec<ObservedEdge>,
    /// Metrics per vertex id.
    #[serde(default)]
    pub metrics: BTreeMap<String, VertexMetrics>,
    /// Job-manager / task-manager level metrics (`taskSlotsTotal`, `taskSlotsAvailable`, ...).
    #[serde(default)]
    pub global: BTreeMap<String, f64>,
    /// The size of one TaskManager, when the engine reports it (recorded observations and
    /// engines that do not know it leave it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_managers: Option<TaskManagerResources>,
}

/// Why an engine could not answer or act. Never fatal for the host: the loop records an event
/// and carries on with the other jobs.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The engine could not be reached (network, process gone).
    #[error("engine unreachable: {0}")]
    Unreachable(String),
    /// The job is not in a state that allows the request (not running, restarting, ...).
    #[error("job not ready: {0}")]
    NotReady(String),
    /// The engine no longer knows the job (Flink: HTTP 404 "Job ... not found", after it was
    /// canceled and expired, or deleted). Unlike `NotReady` it will not pass by waiting, so the
    /// loop reports it once and stops asking.
    #[error("job gone: {0}")]
    JobGone(String),
    /// The engine refused a request.
    #[error("engine refused the request: {0}")]
    Refused(String),
    /// A request was invalid and was not sent.
    #[error("invalid request (not sent): {0}")]
    InvalidRequest(String),
    /// The engine does not support this operation.
    #[error("not supported by this engine: {0}")]
    Unsupported(String),
    /// A change was given up part way: its [`WriteFence`](crate::engine::WriteFence) let no
    /// further request leave (the lease it was made under is gone, or its deadline passed).
    /// Not retried: whoever holds the job now decides again from what the engine holds.
    #[error("rescale abandoned: {0}")]
    Abandoned(String),
    /// The job is not as this host last saw or left it: another writer changed it since.
    /// Nothing was sent; the next cycle decides from what the engine holds now.
    #[error("the job was changed by another writer: {0}")]
    Conflict(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}
