//! Which jobs of a cluster to scale: a given job id, or every RUNNING job.

use super::client::FlinkClient;
use super::rest::{JobDetails, JobsOverview};
use super::topology::{all_tasks_up, map_status};
use crate::engine::{EngineError, JobStatus};

/// A job found on the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlinkJob {
    /// Flink's job id (32 hex digits).
    pub id: String,
    /// The job's name.
    pub(crate) name: String,
    /// Status as the loop should see it (RUNNING with tasks still deploying reads as CREATED).
    pub(crate) status: JobStatus,
}

/// The jobs to scale: `job_id` alone when given (whatever its state, so the loop can report why
/// it waits), otherwise every job Flink reports as RUNNING (`GET /jobs/overview`).
pub fn discover_jobs(
    client: &FlinkClient,
    job_id: Option<&str>,
) -> Result<Vec<FlinkJob>, EngineError> {
    if let Some(id) = job_id {
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(EngineError::InvalidRequest(format!(
                "{id:?} is not a Flink job id (hex digits)"
            )));
        }
        let details: JobDetails = client.get(&format!("/jobs/{id}"))?;
        let up = all_tasks_up(details.vertices.iter().map(|v| &v.tasks));
        return Ok(vec![FlinkJob {
            id: id.to_string(),
            name: details.name,
            status: map_status(&details.state, up),
        }]);
    }
    let overview: JobsOverview = client.get("/jobs/overview")?;
    Ok(overview
        .jobs
        .into_iter()
        .filter(|job| job.state.eq_ignore_ascii_case("RUNNING"))
        .map(|job| FlinkJob {
            status: map_status(&job.state, all_tasks_up([&job.tasks])),
            id: job.jid,
            name: job.name,
        })
        .collect())
}
