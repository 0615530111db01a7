//! The shapes of the Flink REST answers the engine reads. Every field the engine does not
//! strictly need is optional so a newer or older Flink degrades instead of failing to parse.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `GET /jobs/overview`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct JobsOverview {
    #[serde(default)]
    pub(crate) jobs: Vec<JobOverview>,
}

/// One job of `GET /jobs/overview`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct JobOverview {
    pub(crate) jid: String,
    #[serde(default)]
    pub(crate) name: String,
    pub(crate) state: String,
    #[serde(default)]
    pub(crate) tasks: BTreeMap<String, i64>,
}

/// `GET /jobs/:id`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct JobDetails {
    #[serde(default)]
    pub(crate) name: String,
    pub(crate) state: String,
    #[serde(default, rename = "schedulerType")]
    pub(crate) scheduler_type: Option<String>,
    #[serde(default)]
    pub(crate) timestamps: BTreeMap<String, i64>,
    #[serde(default)]
    pub(crate) vertices: Vec<JobVertexDetails>,
    /// Flink 1.x and 2.x embed the plan in the details; `GET /jobs/:id/plan` is the fallback.
    #[serde(default)]
    pub(crate) plan: Option<Plan>,
}

/// A vertex of `GET /jobs/:id`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct JobVertexDetails {
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) parallelism: Option<i64>,
    #[serde(default, rename = "maxParallelism")]
    pub(crate) max_parallelism: Option<i64>,
    /// The vertex's slot-sharing group (hex id), reported since Flink 1.19.
    #[serde(default, rename = "slotSharingGroupId")]
    pub(crate) slot_sharing_group_id: Option<String>,
    #[serde(default)]
    pub(crate) status: String,
    /// Subtask count per execution state.
    #[serde(default)]
    pub(crate) tasks: BTreeMap<String, i64>,
    /// `read-records`, `write-records`, `accumulated-busy-time` (a number or `"NaN"`), ...
    #[serde(default)]
    pub(crate) metrics: BTreeMap<String, Value>,
}

/// `GET /jobs/:id/plan` (`{"plan":{...}}`) or the `plan` of the details.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct PlanAnswer {
    #[serde(default)]
    pub(crate) plan: Plan,
}

/// The job graph.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Plan {
    #[serde(default)]
    pub(crate) nodes: Vec<PlanNode>,
}

/// A node of the plan (one job vertex).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct PlanNode {
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) parallelism: Option<i64>,
    /// The operator names with HTML such as `<br/>`.
    #[serde(default)]
    pub(crate) description: String,
    #[serde(default)]
    pub(crate) inputs: Vec<PlanInput>,
}

/// An input edge of a plan node.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct PlanInput {
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) ship_strategy: String,
}

/// One entry of `GET .../subtasks/metrics` (a name when listing; aggregates when `?get=`).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct AggregatedEntry {
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) min: Option<f64>,
    #[serde(default)]
    pub(crate) max: Option<f64>,
    #[serde(default)]
    pub(crate) avg: Option<f64>,
    #[serde(default)]
    pub(crate) sum: Option<f64>,
}

/// One entry of `GET /jobmanager/metrics?get=` (values are strings).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ValueEntry {
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) value: Option<String>,
}

/// `GET /taskmanagers`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct TaskManagersAnswer {
    #[serde(default)]
    pub(crate) taskmanagers: Vec<TaskManagerInfo>,
}

/// One TaskManager of `GET /taskmanagers` (only what the resource quota reads).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct TaskManagerInfo {
    /// Its task slots.
    #[serde(default, rename = "slotsNumber")]
    pub(crate) slots_number: Option<i64>,
    /// The resources Flink gave it (`cpuCores`: `taskmanager.cpu.cores`, else its slot count).
    #[serde(default, rename = "totalResource")]
    pub(crate) total_resource: Option<TaskManagerResourceInfo>,
    /// Its memory setup, in bytes.
    #[serde(default, rename = "memoryConfiguration")]
    pub(crate) memory_configuration: Option<TaskManagerMemoryInfo>,
}

/// `totalResource` of a TaskManager.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct TaskManagerResourceInfo {
    #[serde(default, rename = "cpuCores")]
    pub(crate) cpu_cores: Option<f64>,
}

/// `memoryConfiguration` of a TaskManager (bytes).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct TaskManagerMemoryInfo {
    #[serde(default, rename = "totalProcessMemory")]
    pub(crate) total_process_memory: Option<u64>,
}

/// One entry of `GET /jobmanager/config`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ConfigEntry {
    pub(crate) key: String,
    #[serde(default)]
    pub(crate) value: String,
}

/// Parallelism bounds of one vertex in `GET|PUT /jobs/:id/resource-requirements`.
///
/// Signed on purpose: Flink can hand back `-1` ("no upper bound"), and the realizer must be able
/// to read such a value in order to refuse sending it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParallelismBounds {
    /// Lowest acceptable parallelism.
    #[serde(rename = "lowerBound")]
    pub lower_bound: i64,
    /// Highest parallelism the scheduler may use.
    #[serde(rename = "upperBound")]
    pub upper_bound: i64,
}

/// The requirement of one vertex: `{"parallelism":{"lowerBound":..,"upperBound":..}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VertexRequirement {
    /// The parallelism bounds.
    pub parallelism: ParallelismBounds,
}

/// The resource requirements of a job, vertex id -> requirement.
pub(crate) type ResourceRequirements = BTreeMap<String, VertexRequirement>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_round_trip_in_flinks_spelling() {
        let json = r#"{"a":{"parallelism":{"lowerBound":1,"upperBound":-1}}}"#;
        let parsed: ResourceRequirements = serde_json::from_str(json).unwrap();
        assert_eq!(parsed["a"].parallelism.upper_bound, -1);
        assert_eq!(serde_json::to_string(&parsed).unwrap(), json);
    }

    #[test]
    fn details_tolerate_missing_optional_fields() {
        let details: JobDetails =
            serde_json::from_str(r#"{"state":"RUNNING","vertices":[{"id":"v"}]}"#).unwrap();
        assert_eq!(details.vertices[0].max_parallelism, None);
        assert!(details.plan.is_none());
    }
}
