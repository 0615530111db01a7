//! What one cycle produced: where it ended, the decided operation, and every vertex's decision
//! with its reasons.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, Serializer};

use super::custom::chain::Veto;
use super::error::CycleError;
use super::evaluation::EvaluatedVertices;
use super::metrics::{EvaluatedScalingMetric, ScalingMetric};
use super::state::ScalingSummary;
use super::target::Reason;
use super::topology::VertexInfo;
use crate::alignment::Explanation;
use crate::events::{Event, EventReason, Severity};

/// Where a cycle ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum CycleStage {
    /// The job is not RUNNING: nothing collected, state kept.
    NotRunning,
    /// The job is not ready yet (empty plan, metrics missing while stabilizing); nothing stored.
    NotReady(String),
    /// The cycle failed; an `AutoscalerError` event says why.
    Failed(String),
    /// Fewer than two samples: no evaluation yet.
    CollectingMetrics {
        /// Samples in the window.
        samples: usize,
    },
    /// Evaluated for reporting, but the window is not fully collected yet.
    WindowNotFull,
    /// GC or heap pressure above the thresholds: nothing scaled.
    MemoryPressure,
    /// No changed vertex is outside its utilization band (the Flink autoscaler's "balanced").
    WithinBounds,
    /// A decision was computed but not executed: advisor mode or an excluded period.
    Blocked(String),
    /// A decision was computed but its TaskManagers would exceed the resource quota
    /// (`quota.cpu`, `quota.memory`): nothing was applied.
    ResourceQuotaReached,
    /// A decision was computed but restart-aware scaling (`scaling.restart-aware`) judged it
    /// not worth its restart: nothing was applied.
    ScalingSkipped,
    /// A decision was computed but a custom scaling executor vetoed it (or could not answer):
    /// nothing was applied.
    Vetoed(Veto),
    /// A scaling operation was decided (`CycleOutcome::decision`).
    Scaled,
}

/// What happened to one vertex when the cycle decided its operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VertexDecision {
    /// Vertex id (the observation's), shared with the job's graph.
    #[serde(serialize_with = "serialize_str")]
    pub vertex: Arc<str>,
    /// Vertex name, shared with the job's graph.
    #[serde(serialize_with = "serialize_str")]
    pub name: Arc<str>,
    /// Current parallelism.
    pub current: u32,
    /// Target after scale factor, rounding and limits, before alignment (None: no decision
    /// possible, e.g. NaN processing rate).
    pub target: Option<u32>,
    /// Target after alignment (equal to `target` when alignment was skipped).
    pub aligned: Option<u32>,
    /// The change the vertex asked for after ineffective-scaling and delayed-scale-down rules
    /// (None: keep the current parallelism). Applied only if some changed vertex is outside its band.
    pub proposed: Option<u32>,
    /// The alignment mode that decided, when alignment ran (shared with the job's alignment).
    #[serde(serialize_with = "serialize_opt_str")]
    pub mode: Option<Arc<str>>,
    /// Outside its utilization band.
    pub outside_band: bool,
    /// Not scaled: `vertex.exclude.ids`, finished, or no finite busy time.
    pub excluded: bool,
    /// Why, in words, with the numbers (rendered when first read).
    pub reason: Reason,
    /// The alignment's explanation (rendered when read).
    pub explanation: Explanation,
}

impl VertexDecision {
    /// The parallelism the vertex runs at after a step whose scaling operation (vertex id to
    /// parallelism) is `operation`: its own there, else its current one.
    pub fn running_after(&self, operation: Option<&BTreeMap<String, u32>>) -> u32 {
        operation
            .and_then(|op| op.get(&*self.vertex))
            .copied()
            .unwrap_or(self.current)
    }

    /// The record of `vertex` before its decision: nothing decided yet, excluded or not.
    pub(crate) fn blank(vertex: &VertexInfo, excluded: bool) -> VertexDecision {
        VertexDecision {
            vertex: Arc::clone(&vertex.id),
            name: Arc::clone(&vertex.name),
            current: vertex.parallelism,
            target: None,
            aligned: None,
            proposed: None,
            mode: None,
            outside_band: false,
            excluded,
            reason: Reason::default(),
            explanation: Explanation::default(),
        }
    }
}

/// The result of one cycle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CycleOutcome {
    /// Where the cycle ended.
    pub stage: CycleStage,
    /// The complete parallelism map (every evaluated vertex; unchanged ones at their current
    /// parallelism) when a scaling operation was decided: the scaling event for the executor
    /// with cooldown.
    pub decision: Option<BTreeMap<String, u32>>,
    /// Per-vertex decisions, in topological order (empty before the operation is decided).
    pub vertices: Vec<VertexDecision>,
    /// Events of the cycle.
    pub events: Vec<Event>,
    /// Evaluated metrics per vertex id, for reporting (empty before evaluation).
    pub evaluated: EvaluatedVertices,
    /// Evaluated global metrics.
    pub(crate) global: BTreeMap<ScalingMetric, EvaluatedScalingMetric>,
    /// Some source is processing a backlog.
    pub backlog: bool,
    /// The restart time used by this cycle's capacity computations.
    pub(crate) restart_time: Option<Duration>,
    /// The per-vertex summaries of the decided operation (recorded in the scaling history at
    /// the cycle's instant); empty unless the stage is `Scaled`. Keyed by the topology's
    /// shared ids.
    #[serde(serialize_with = "super::state::by_id::serialize")]
    pub(crate) summaries: BTreeMap<Arc<str>, ScalingSummary>,
}

/// A shared string, serialized as a `String` is.
fn serialize_str<S: Serializer>(text: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(text)
}

/// An optional shared string, serialized as an `Option<String>` is.
fn serialize_opt_str<S: Serializer>(
    text: &Option<Arc<str>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match text {
        Some(text) => serializer.serialize_some(&**text),
        None => serializer.serialize_none(),
    }
}

impl CycleOutcome {
    pub(crate) fn new(stage: CycleStage) -> CycleOutcome {
        CycleOutcome {
            stage,
            decision: None,
            vertices: Vec::new(),
            events: Vec::new(),
            evaluated: EvaluatedVertices::default(),
            global: BTreeMap::new(),
            backlog: false,
            restart_time: None,
            summaries: BTreeMap::new(),
        }
    }

    /// The outcome of a cycle whose job could not be observed (the replay of a recorded job).
    #[cfg(any(test, feature = "test-support"))]
    pub(crate) fn not_observed() -> CycleOutcome {
        CycleOutcome::new(CycleStage::NotReady("the job could not be observed".into()))
    }

    #[cfg(test)]
    /// True when a scaling operation was decided (the Flink autoscaler's `scalings` counter).
    pub(crate) fn scaled(&self) -> bool {
        self.stage == CycleStage::Scaled
    }

    pub(crate) fn fail(job: &str, error: CycleError) -> CycleOutcome {
        match error {
            CycleError::NotReady(why) => {
                tracing::debug!(job, %why, "job not ready for scaling");
                CycleOutcome::new(CycleStage::NotReady(why))
            }
            other => {
                let message = other.to_string();
                tracing::warn!(job, %message, "scaling cycle failed");
                let mut out = CycleOutcome::new(CycleStage::Failed(message.clone()));
                out.events.push(
                    Event::new(EventReason::AutoscalerError, Severity::Warning, message).job(job),
                );
                out
            }
        }
    }
}
