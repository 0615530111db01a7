//! One scaling cycle of one job: collect → evaluate → execute (anchor §1 step 3, §2.7, §3, §5).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::alignment::Aligner;
use crate::engine::{JobObservation, JobStatus};
use crate::events::{Event, EventReason, Severity};

use super::error::CycleError;
use super::evaluation::{VertexEvaluation, evaluate};
use super::executor::execute;
use super::metric::{EvaluatedScalingMetric, ScalingMetric};
use super::options::AutoscalerOptions;
use super::state::JobScalingState;
use super::topology::Topology;
use super::vertex_scaler::ScalerContext;
use super::window::collect;

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
    /// No changed vertex is outside its utilization band (the anchor's "balanced").
    WithinBounds,
    /// A decision was computed but not executed: advisor mode or an excluded period.
    Blocked(String),
    /// A scaling operation was decided (`CycleOutcome::decision`).
    Scaled,
}

/// What happened to one vertex in the executor step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VertexDecision {
    /// Vertex id (the observation's).
    pub vertex: String,
    /// Vertex name.
    pub name: String,
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
    /// The alignment mode that decided, when alignment ran.
    pub mode: Option<String>,
    /// Outside its utilization band.
    pub outside_band: bool,
    /// Not scaled: `vertex.exclude.ids`, finished, or no finite busy time.
    pub excluded: bool,
    /// Why, in words, with the numbers.
    pub reason: String,
    /// The alignment's explanation.
    pub explanation: Vec<String>,
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
    /// Per-vertex decisions, in topological order (empty before the executor step).
    pub vertices: Vec<VertexDecision>,
    /// Events of the cycle.
    pub events: Vec<Event>,
    /// Evaluated metrics per vertex id, for reporting (empty before evaluation).
    pub evaluated: BTreeMap<String, VertexEvaluation>,
    /// Evaluated global metrics.
    pub global: BTreeMap<ScalingMetric, EvaluatedScalingMetric>,
    /// Some source is processing a backlog.
    pub backlog: bool,
    /// The restart time used by this cycle's capacity computations.
    pub restart_time: Option<Duration>,
}

impl CycleOutcome {
    fn new(stage: CycleStage) -> CycleOutcome {
        CycleOutcome {
            stage,
            decision: None,
            vertices: Vec::new(),
            events: Vec::new(),
            evaluated: BTreeMap::new(),
            global: BTreeMap::new(),
            backlog: false,
            restart_time: None,
        }
    }

    /// True when a scaling operation was decided (the anchor's `scalings` counter).
    pub fn scaled(&self) -> bool {
        self.stage == CycleStage::Scaled
    }

    fn fail(job: &str, error: CycleError) -> CycleOutcome {
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

/// The decision pipeline with its options, for callers that keep one per job.
#[derive(Debug, Clone, PartialEq)]
pub struct Autoscaler {
    options: AutoscalerOptions,
}

impl Autoscaler {
    /// A pipeline with fixed options.
    pub fn new(options: AutoscalerOptions) -> Autoscaler {
        Autoscaler { options }
    }

    /// The options.
    pub fn options(&self) -> &AutoscalerOptions {
        &self.options
    }

    /// Runs one cycle; see [`run_cycle`].
    pub fn run_cycle(
        &self,
        job: &str,
        observation: &JobObservation,
        now_ms: i64,
        aligner: &dyn Aligner,
        state: &mut JobScalingState,
    ) -> CycleOutcome {
        run_cycle(job, &self.options, observation, now_ms, aligner, state)
    }
}

/// Runs one cycle of the decision pipeline for `job` at `now_ms` on an observation, updating
/// the job's persisted `state`. Never fails: errors end the cycle with an `AutoscalerError`
/// event, warming up ends it silently (see [`CycleOutcome::stage`]).
///
/// The caller decides whether the autoscaler is enabled for the job (and clears the state when
/// it is not); `opts.enabled` is not read here.
pub fn run_cycle(
    job: &str,
    opts: &AutoscalerOptions,
    observation: &JobObservation,
    now_ms: i64,
    aligner: &dyn Aligner,
    state: &mut JobScalingState,
) -> CycleOutcome {
    if observation.status != JobStatus::Running {
        return CycleOutcome::new(CycleStage::NotRunning);
    }
    let topology = match Topology::from_observation(observation) {
        Ok(t) => t,
        Err(e) => return CycleOutcome::fail(job, e),
    };
    state.scaling_history.trim(now_ms, opts);
    state.scaling_history.retain_vertices(&topology);

    let collection = match collect(
        &mut state.metric_history,
        observation,
        &topology,
        opts,
        now_ms,
    ) {
        Ok(c) => c,
        Err(e) => return CycleOutcome::fail(job, e),
    };
    if collection.restarted {
        tracing::info!(job, "job (re)started: metric history cleared");
    }
    state.scaling_tracking.trim(now_ms, opts);
    state.scaling_tracking.record_restart_if_completed(
        observation.running_since_ms,
        &topology,
        &state.scaling_history,
    );
    let samples = state.metric_history.len();
    if samples < 2 {
        return CycleOutcome::new(CycleStage::CollectingMetrics { samples });
    }
    let restart_time = state.scaling_tracking.restart_time(opts);

    let mut evaluation = match evaluate(&state.metric_history, &topology, opts, restart_time) {
        Ok(e) => e,
        Err(e) => return CycleOutcome::fail(job, e),
    };
    let mut outcome = CycleOutcome::new(CycleStage::WindowNotFull);
    outcome.restart_time = Some(restart_time);
    outcome.backlog = evaluation.backlog;
    for metrics in evaluation.vertices.values_mut() {
        if let Some(p) = metrics.get(&ScalingMetric::Parallelism).copied() {
            metrics.insert(ScalingMetric::RecommendedParallelism, p);
        }
    }
    if collection.fully_collected {
        let sdk_topology = topology.to_sdk();
        let params = aligner.params();
        let ctx = ScalerContext {
            job,
            opts,
            aligner,
            params: &params,
            topology: &sdk_topology,
            restart_time,
            now_ms,
        };
        outcome.stage = execute(
            &ctx,
            &topology,
            &mut evaluation,
            &collection.excluded,
            state,
            &mut outcome,
        );
    } else {
        for metrics in evaluation.vertices.values_mut() {
            metrics.remove(&ScalingMetric::RecommendedParallelism);
        }
    }
    outcome.evaluated = evaluation.vertices;
    outcome.global = evaluation.global;
    outcome
}
