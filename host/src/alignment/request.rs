//! What a caller tells alignment about one vertex's decision, in plain terms.

use std::sync::Arc;

use flowscale_sdk::{
    AlignmentContext, EvaluatedMetric, JobTopology, ModeParams, ShipStrategy, SubtaskLoad,
};

/// One vertex's decision as the scaling pipeline (or `flowscale align`) describes it: the
/// vertex, where it stands, the target computed for it and the limits it was computed within.
///
/// Alignment turns it into the SDK's [`AlignmentContext`], adding the parameters of the job's
/// mode, which it resolved itself: callers never build contexts and never see the parameters.
#[derive(Debug, Clone)]
pub struct AlignmentRequest {
    /// The job's name.
    pub job: String,
    /// The engine-assigned vertex id (Flink: the hex job-vertex id).
    pub vertex_id: String,
    /// The vertex's human-readable name.
    pub vertex_name: String,
    /// The parallelism the vertex runs at now.
    pub current: u32,
    /// The computed target: after scale factor, rounding and clamping to the limits.
    pub target: u32,
    /// The vertex's max parallelism, i.e. its number of key groups.
    pub max_parallelism: u32,
    /// The partition count of a source that reports one, else 0.
    pub source_partitions: u32,
    /// The lower parallelism limit.
    pub lower_limit: u32,
    /// The upper parallelism limit.
    pub upper_limit: u32,
    /// The ship strategies of the vertex's input edges.
    pub input_ship_strategies: Vec<ShipStrategy>,
    /// The vertex's evaluated metrics, by name.
    pub metrics: Vec<(String, EvaluatedMetric)>,
    /// The job graph; the requests of one cycle share one graph instead of a copy each.
    pub topology: Arc<JobTopology>,
    /// The load of each subtask at the current parallelism, subtask `i` at index `i`; empty
    /// when the engine reported none (modes then read `None`).
    pub subtask_loads: Vec<SubtaskLoad>,
}

impl AlignmentRequest {
    /// A request for a vertex scaling from `current` to `target` over `max_parallelism` key
    /// groups, with the limits `[1, u32::MAX]` and everything else empty.
    pub fn new(current: u32, target: u32, max_parallelism: u32) -> AlignmentRequest {
        AlignmentRequest {
            job: String::new(),
            vertex_id: String::new(),
            vertex_name: String::new(),
            current,
            target,
            max_parallelism,
            source_partitions: 0,
            lower_limit: 1,
            upper_limit: u32::MAX,
            input_ship_strategies: Vec::new(),
            metrics: Vec::new(),
            topology: Arc::default(),
            subtask_loads: Vec::new(),
        }
    }

    /// The SDK's context of this decision, carrying the selected mode's parameters.
    pub(crate) fn into_context(self, params: ModeParams) -> AlignmentContext {
        AlignmentContext::builder(self.current, self.target, self.max_parallelism)
            .identity(self.job, self.vertex_id, self.vertex_name)
            .source_partitions(self.source_partitions)
            .limits(self.lower_limit, self.upper_limit)
            .input_ship_strategies(self.input_ship_strategies)
            .metrics(self.metrics)
            .shared_topology(self.topology)
            .params(params)
            .subtask_loads(self.subtask_loads)
            .build()
    }
}
