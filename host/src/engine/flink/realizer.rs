//! [`FlinkRealizer`]: rescales a running job in place through the adaptive scheduler's
//! resource-requirements API, after checking every bound it is about to send.

use std::collections::BTreeMap;

use super::client::FlinkClient;
use super::rest::{JobDetails, ParallelismBounds, ResourceRequirements, VertexRequirement};
use crate::engine::{EngineError, Realizer, Unfenced, WriteFence};

/// What the realizer knows about a vertex when it checks a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VertexLimits {
    /// The vertex's max parallelism (number of key groups); no bound may exceed it.
    pub(crate) max_parallelism: i64,
}

/// Checks a full resource-requirements map before it is sent.
///
/// Flink answers some invalid requests with 400, but it answers `upperBound: -1` with 200 and
/// then the JobManager dies (the scheduler dereferences a slot that was never reserved), taking
/// the whole cluster down. So nothing is sent unless: the job is RUNNING (raw Flink state), every
/// vertex of the job is listed and nothing else is, and each bound is an integer in
/// `[1, maxParallelism of that vertex]` with `lowerBound <= upperBound`.
pub(crate) fn validate_requirements(
    job_state: &str,
    vertices: &BTreeMap<String, VertexLimits>,
    requirements: &ResourceRequirements,
) -> Result<(), EngineError> {
    if !job_state.eq_ignore_ascii_case("RUNNING") {
        return Err(EngineError::InvalidRequest(format!(
            "the job is {job_state}, not RUNNING; resource requirements can only change on a running job"
        )));
    }
    if vertices.is_empty() {
        return Err(EngineError::InvalidRequest(
            "the job has no vertices".into(),
        ));
    }
    let missing: Vec<&str> = vertices
        .keys()
        .filter(|id| !requirements.contains_key(*id))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(EngineError::InvalidRequest(format!(
            "every vertex must be listed; missing {}",
            missing.join(", ")
        )));
    }
    for (id, requirement) in requirements {
        let Some(limits) = vertices.get(id) else {
            return Err(EngineError::InvalidRequest(format!(
                "vertex {id} is not part of the job"
            )));
        };
        let ParallelismBounds {
            lower_bound,
            upper_bound,
        } = requirement.parallelism;
        let max = limits.max_parallelism;
        if max < 1 {
            return Err(EngineError::InvalidRequest(format!(
                "vertex {id} reports max parallelism {max}"
            )));
        }
        for (what, bound) in [("lowerBound", lower_bound), ("upperBound", upper_bound)] {
            if !(1..=max).contains(&bound) {
                return Err(EngineError::InvalidRequest(format!(
                    "vertex {id}: {what} {bound} is outside [1, {max}]"
                )));
            }
        }
        if lower_bound > upper_bound {
            return Err(EngineError::InvalidRequest(format!(
                "vertex {id}: lowerBound {lower_bound} exceeds upperBound {upper_bound}"
            )));
        }
    }
    Ok(())
}

/// Refuses a job that is not proven to run under the adaptive scheduler.
///
/// Only the adaptive scheduler acts on changed resource requirements; under another scheduler a
/// PUT is either refused or accepted and ignored, and the loop would believe a rescale happened.
/// A job whose details carry no `schedulerType` (older Flink versions, or a proxy that trims
/// the answer) cannot be proven adaptive, so it is refused too, with a reason that says so.
pub(crate) fn require_adaptive(
    job_id: &str,
    scheduler_type: Option<&str>,
) -> Result<(), EngineError> {
    match scheduler_type.map(str::trim) {
        Some(scheduler) if scheduler.eq_ignore_ascii_case("adaptive") => Ok(()),
        Some(scheduler) => Err(EngineError::Unsupported(format!(
            "in-place rescaling needs the adaptive scheduler (jobmanager.scheduler: adaptive); \
             job {job_id} runs on {scheduler:?}"
        ))),
        None => Err(EngineError::Unsupported(format!(
            "in-place rescaling needs the adaptive scheduler (jobmanager.scheduler: adaptive), \
             and the details of job {job_id} do not say which scheduler runs it \
             (no schedulerType); nothing is sent"
        ))),
    }
}

/// The requirements after applying `parallelism`: listed vertices get `(1, p)`, the others keep
/// what they had. Vertices the job does not have are refused.
pub(crate) fn apply_parallelism(
    current: &ResourceRequirements,
    parallelism: &BTreeMap<String, u32>,
) -> Result<ResourceRequirements, EngineError> {
    let mut next = current.clone();
    for (vertex, p) in parallelism {
        let Some(slot) = next.get_mut(vertex) else {
            return Err(EngineError::InvalidRequest(format!(
                "vertex {vertex} has no resource requirement in this job"
            )));
        };
        *slot = VertexRequirement {
            parallelism: ParallelismBounds {
                lower_bound: 1,
                upper_bound: i64::from(*p),
            },
        };
    }
    Ok(next)
}

/// Applies parallelism decisions to one job of a Flink cluster running the adaptive scheduler,
/// like the Flink autoscaler's `RescaleApiScalingRealizer`: read the requirements, set `(1, p)` for every
/// decided vertex, and PUT the full map if anything changed. Flink then rescales in place (about
/// a second without checkpointing); it runs at what the free slots allow if fewer are free.
///
/// Flink's REST API has no compare-and-set: a PUT replaces whatever another writer (another
/// host, an operator, a second autoscaler) set. So the realizer remembers the requirements it
/// last read or wrote, and refuses to build on requirements it did not expect
/// ([`EngineError::Conflict`]): the next cycle decides from what Flink holds.
#[derive(Debug)]
pub struct FlinkRealizer {
    client: FlinkClient,
    job_id: String,
    /// The requirements as this realizer last read them or left them; several when a PUT's
    /// outcome is unknown (it failed in a way that may or may not have reached Flink: both the
    /// old and the new map are this realizer's own). Empty before the first read: what Flink
    /// holds then is the truth to build on.
    expected: Vec<ResourceRequirements>,
}

impl FlinkRealizer {
    /// A realizer for job `job_id` on the cluster behind `client`.
    pub fn new(client: FlinkClient, job_id: impl Into<String>) -> FlinkRealizer {
        FlinkRealizer {
            client,
            job_id: job_id.into(),
            expected: Vec::new(),
        }
    }

    fn requirements_path(&self) -> String {
        format!("/jobs/{}/resource-requirements", self.job_id)
    }

    /// The job's current resource requirements.
    pub fn requirements(&self) -> Result<ResourceRequirements, EngineError> {
        self.client.get(&self.requirements_path())
    }

    /// Validates `requirements` against the job as it is now and, only if valid, PUTs them.
    pub fn put_requirements(&self, requirements: &ResourceRequirements) -> Result<(), EngineError> {
        self.put_requirements_fenced(requirements, &Unfenced)
    }

    /// [`FlinkRealizer::put_requirements`], each request only while `fence` lets it leave.
    fn put_requirements_fenced(
        &self,
        requirements: &ResourceRequirements,
        fence: &dyn WriteFence,
    ) -> Result<(), EngineError> {
        let details: JobDetails = self
            .client
            .get_fenced(&format!("/jobs/{}", self.job_id), fence)?;
        require_adaptive(&self.job_id, details.scheduler_type.as_deref())?;
        let mut limits = BTreeMap::new();
        for vertex in &details.vertices {
            let max_parallelism = vertex.max_parallelism.ok_or_else(|| {
                EngineError::NotReady(format!("vertex {} reports no max parallelism", vertex.id))
            })?;
            limits.insert(vertex.id.clone(), VertexLimits { max_parallelism });
        }
        validate_requirements(&details.state, &limits, requirements)?;
        let body = serde_json::to_value(requirements)
            .map_err(|e| EngineError::Other(format!("encoding the requirements: {e}")))?;
        self.client
            .put_json_fenced(&self.requirements_path(), &body, fence)?;
        tracing::info!(job = %self.job_id, ?requirements, "in-place rescaling requested");
        Ok(())
    }
}

impl Realizer for FlinkRealizer {
    fn rescale_fenced(
        &mut self,
        parallelism: &BTreeMap<String, u32>,
        fence: &dyn WriteFence,
    ) -> Result<(), EngineError> {
        let current: ResourceRequirements =
            self.client.get_fenced(&self.requirements_path(), fence)?;
        if !self.expected.is_empty() && !self.expected.contains(&current) {
            let message = format!(
                "Flink holds {} for job {}, which this host neither read nor set last ({}); \
                 nothing was sent, the next cycle decides from what Flink holds",
                upper_bounds(&current),
                self.job_id,
                self.expected
                    .iter()
                    .map(upper_bounds)
                    .collect::<Vec<_>>()
                    .join(" or "),
            );
            self.expected = vec![current];
            return Err(EngineError::Conflict(message));
        }
        let next = apply_parallelism(&current, parallelism)?;
        if next == current {
            self.expected = vec![current];
            return Ok(());
        }
        match self.put_requirements_fenced(&next, fence) {
            Ok(()) => {
                self.expected = vec![next];
                Ok(())
            }
            // Refused before or by Flink: nothing changed there.
            Err(
                err @ (EngineError::InvalidRequest(_)
                | EngineError::Unsupported(_)
                | EngineError::Refused(_)
                | EngineError::NotReady(_)
                | EngineError::JobGone(_)),
            ) => {
                self.expected = vec![current];
                Err(err)
            }
            // A PUT that may have reached Flink: either map is this host's own.
            Err(err) => {
                self.expected = vec![current, next];
                Err(err)
            }
        }
    }

    fn forget_writes(&mut self) {
        self.expected.clear();
    }

    /// Flink cannot change a source's rate in place; the loop records the refusal.
    fn set_rate_limit(
        &mut self,
        source_vertex: &str,
        records_per_second: Option<f64>,
    ) -> Result<(), EngineError> {
        let _ = records_per_second;
        Err(EngineError::Unsupported(format!(
            "Flink cannot change the rate of source {source_vertex} of a running job"
        )))
    }
}

/// The upper bounds of `requirements`, `{vertex: p, ...}`: what a conflict names.
fn upper_bounds(requirements: &ResourceRequirements) -> String {
    let bounds: Vec<String> = requirements
        .iter()
        .map(|(vertex, r)| format!("{vertex}: {}", r.parallelism.upper_bound))
        .collect();
    format!("{{{}}}", bounds.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(list: &[(&str, i64)]) -> BTreeMap<String, VertexLimits> {
        list.iter()
            .map(|(id, max)| {
                let limits = VertexLimits {
                    max_parallelism: *max,
                };
                (id.to_string(), limits)
            })
            .collect()
    }

    fn requirements(list: &[(&str, i64, i64)]) -> ResourceRequirements {
        list.iter()
            .map(|(id, lower, upper)| {
                let requirement = VertexRequirement {
                    parallelism: ParallelismBounds {
                        lower_bound: *lower,
                        upper_bound: *upper,
                    },
                };
                (id.to_string(), requirement)
            })
            .collect()
    }

    fn refused(result: Result<(), EngineError>, needle: &str) {
        match result {
            Err(EngineError::InvalidRequest(message)) => {
                assert!(message.contains(needle), "{message:?} lacks {needle:?}")
            }
            other => panic!("expected InvalidRequest containing {needle:?}, got {other:?}"),
        }
    }

    #[test]
    fn a_full_valid_request_passes() {
        let job = limits(&[("a", 128), ("b", 4)]);
        assert!(
            validate_requirements(
                "RUNNING",
                &job,
                &requirements(&[("a", 1, 128), ("b", 1, 4)])
            )
            .is_ok()
        );
    }

    #[test]
    fn the_bound_that_kills_the_jobmanager_is_never_accepted() {
        let job = limits(&[("a", 128), ("b", 128)]);
        refused(
            validate_requirements("RUNNING", &job, &requirements(&[("a", 1, -1), ("b", 1, 1)])),
            "upperBound -1",
        );
        refused(
            validate_requirements("RUNNING", &job, &requirements(&[("a", -1, 2), ("b", 1, 1)])),
            "lowerBound -1",
        );
    }

    #[test]
    fn zero_and_above_max_parallelism_are_refused() {
        let job = limits(&[("a", 128), ("b", 8)]);
        refused(
            validate_requirements("RUNNING", &job, &requirements(&[("a", 1, 0), ("b", 1, 1)])),
            "upperBound 0",
        );
        refused(
            validate_requirements("RUNNING", &job, &requirements(&[("a", 1, 2), ("b", 1, 9)])),
            "[1, 8]",
        );
        refused(
            validate_requirements("RUNNING", &job, &requirements(&[("a", 3, 2), ("b", 1, 1)])),
            "exceeds",
        );
    }

    #[test]
    fn missing_or_unknown_vertices_and_non_running_jobs_are_refused() {
        let job = limits(&[("a", 128), ("b", 128)]);
        refused(
            validate_requirements("RUNNING", &job, &requirements(&[("a", 1, 2)])),
            "missing b",
        );
        refused(
            validate_requirements(
                "RUNNING",
                &job,
                &requirements(&[("a", 1, 2), ("b", 1, 2), ("c", 1, 2)]),
            ),
            "vertex c",
        );
        refused(
            validate_requirements(
                "RESTARTING",
                &job,
                &requirements(&[("a", 1, 2), ("b", 1, 2)]),
            ),
            "not RUNNING",
        );
        refused(
            validate_requirements("RUNNING", &limits(&[]), &requirements(&[])),
            "no vertices",
        );
    }

    #[test]
    fn only_the_adaptive_scheduler_is_accepted() {
        assert!(require_adaptive("j", Some("Adaptive")).is_ok());
        assert!(require_adaptive("j", Some("adaptive")).is_ok());
        for other in ["Default", "AdaptiveBatch", "", "ng"] {
            match require_adaptive("j", Some(other)) {
                Err(EngineError::Unsupported(message)) => {
                    assert!(message.contains(&format!("{other:?}")), "{message}")
                }
                result => panic!("{other:?} was not refused: {result:?}"),
            }
        }
        match require_adaptive("j", None) {
            Err(EngineError::Unsupported(message)) => {
                assert!(message.contains("no schedulerType"), "{message}")
            }
            result => panic!("a missing schedulerType was not refused: {result:?}"),
        }
    }

    #[test]
    fn applying_parallelism_touches_only_listed_vertices() {
        let current = requirements(&[("a", 1, 1), ("b", 2, 3)]);
        let decided: BTreeMap<String, u32> = [("a".to_string(), 4)].into();
        let next = apply_parallelism(&current, &decided).unwrap();
        assert_eq!(next, requirements(&[("a", 1, 4), ("b", 2, 3)]));
        let unknown: BTreeMap<String, u32> = [("zz".to_string(), 4)].into();
        assert!(matches!(
            apply_parallelism(&current, &unknown),
            Err(EngineError::InvalidRequest(_))
        ));
    }
}
