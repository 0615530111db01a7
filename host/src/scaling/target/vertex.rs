//! The target parallelism of one vertex (see docs/decision-pipeline.md#target-parallelism
//! and #observed-scalability), including the call to the job's aligner.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use flowscale_sdk::{JobTopology, ShipStrategy};

use super::ineffective::ineffective_scale_up;
use super::reason::{BandNote, Reason, ScaleNote, Step};
use super::scalability::observed_scalability_coefficient;
use super::scaled::{ScaledTarget, scaled_target};
use super::skew::{SkewInputs, SkewTarget, skew_aware_target};
use crate::alignment::{
    AlignOutcome, Aligner, AlignmentRequest, Explanation, metric_list, no_text, shared_job,
};
use crate::engine::{ObservedVertex, TaskManagerResources, VertexMetrics};
use crate::events::Event;
use crate::scaling::custom::resolve::JobCustom;
use crate::scaling::evaluation::capacity;
use crate::scaling::metrics::{
    EvaluatedScalingMetric, ScalingMetric, VertexEvaluation, evaluated_or_nan,
    metrics_by_name as by_name_iter, names_mask,
};
use crate::scaling::options::{AutoscalerOptions, millis};
use crate::scaling::outcome::VertexDecision;
use crate::scaling::state::{DelayedScaleDown, VertexHistory};
use crate::scaling::topology::{Topology, VertexInfo};

/// What the vertex scaler decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParallelismChange {
    /// Keep the current parallelism.
    NoChange,
    /// Change to `new`.
    Change {
        /// The new parallelism.
        new: u32,
        /// Whether the vertex is outside its utilization band.
        outside: bool,
    },
}

/// Where one vertex's decision is written: its record in the cycle's outcome, built in place
/// there (a record is a few hundred bytes, and building it aside and moving it into the
/// outcome copied it several times per vertex), the cycle's events, and the job's pending
/// scale-downs.
pub(crate) struct DecisionSink<'o> {
    /// The vertex's record: the decision fills in its target, alignment, band and reason.
    pub(crate) decision: &'o mut VertexDecision,
    /// The cycle's events (alignment's, ineffective scaling), appended in their order.
    pub(crate) events: &'o mut Vec<Event>,
    /// The job's pending scale-downs, bound to the cycle's graph
    /// ([`DelayedScaleDown::bind`]).
    pub(crate) delayed: &'o mut DelayedScaleDown,
    /// The vertex's index in the cycle's graph, by which its pending scale-down is kept.
    pub(crate) index: usize,
}

/// Everything the cycle shares between the vertices.
pub(crate) struct ScalerContext<'a> {
    pub(crate) job: &'a str,
    pub(crate) opts: &'a AutoscalerOptions,
    pub(crate) aligner: &'a dyn Aligner,
    /// The job's custom executors (and evaluator, which the evaluation already called).
    pub(crate) custom: &'a JobCustom,
    /// The job graph as alignment contexts carry it, built on first use (most cycles of a
    /// steady job align nothing) by an aligner that reads it.
    pub(crate) topology: &'a OnceCell<Arc<JobTopology>>,
    /// The graph the SDK view is built from.
    pub(crate) graph: &'a Topology,
    /// The observation's metrics by vertex id: alignment reads the per-subtask load there.
    pub(crate) observed: &'a BTreeMap<String, VertexMetrics>,
    /// The observed vertices: the resource quota reads their slot-sharing groups.
    pub(crate) observed_vertices: &'a [ObservedVertex],
    /// The size of one TaskManager, when the engine reports it (for the resource quota).
    pub(crate) task_managers: Option<TaskManagerResources>,
    pub(crate) restart_time: Duration,
    pub(crate) now_ms: i64,
}

/// A vertex's decision computed up to its alignment.
///
/// The cycle computes every vertex of a job this far, aligns all of them in one call to the
/// job's aligner ([`align_targets`]: for a plugin in a worker process, one round trip per job
/// instead of one per vertex), then completes each ([`finish_scale_target`]). Nothing up to
/// here reads what another vertex's completion writes (its own metrics and pending
/// scale-downs), so the decisions are those of computing the vertices one after the other.
///
/// Small on purpose: the request to the aligner goes straight into the job's batch, and the
/// answer straight into the vertex's record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PendingTarget(Pending);

#[derive(Debug, Clone, Copy)]
enum Pending {
    /// No decision is possible (unknown rates), for this reason: the outcome is final.
    Decided(&'static str),
    /// A clamped target, waiting for its alignment.
    Target {
        tpr: f64,
        target: u32,
        note: ScaleNote,
        /// Whether the target asked the job's aligner (it differs from the current
        /// parallelism and no skew-aware target replaces it): its answer is the next of the
        /// batch's.
        asks: bool,
        /// The skew-aware target (`scaling.skew-aware`), chosen by key-group ranges: it is
        /// applied as aligned, without asking the job's aligner.
        skew: Option<SkewTarget>,
    },
}

impl PendingTarget {
    /// Whether the target asked the job's aligner, and so takes the next answer of the batch.
    pub(crate) fn asks(&self) -> bool {
        matches!(self.0, Pending::Target { asks: true, .. })
    }
}

/// The first half of `computeScaleTargetParallelism` (docs/decision-pipeline.md#target-parallelism):
/// scale factor, limits and the clamped target; the alignment request it needs is appended to
/// `requests`, the job's batch.
pub(crate) fn prepare_scale_target(
    ctx: &ScalerContext<'_>,
    vertex: &VertexInfo,
    metrics: &VertexEvaluation,
    history: Option<&VertexHistory>,
    requests: &mut Vec<AlignmentRequest>,
) -> PendingTarget {
    let opts = ctx.opts;
    let cur = vertex.parallelism;
    let tpr = evaluated_or_nan(metrics, ScalingMetric::TrueProcessingRate).average;
    if tpr.is_nan() {
        return PendingTarget(Pending::Decided("true processing rate is unknown (NaN)"));
    }
    let capacity = capacity(
        metrics,
        opts.utilization_target,
        true,
        ctx.restart_time,
        opts,
    );
    if capacity.is_nan() {
        return PendingTarget(Pending::Decided(
            "target capacity is unknown (NaN target or catch-up rate)",
        ));
    }
    let factor = ScaleFactor::of(opts, capacity, tpr, history);
    let (lower, upper) = limits(cur, opts);
    let scaled = scaled_target(factor.value, cur, vertex.max_parallelism, lower, upper);
    let skew = skew_target(ctx, vertex, &factor, scaled.target, lower, upper);
    let asks = skew.is_none() && scaled.target != cur;
    if asks {
        requests.push(alignment_request(
            ctx,
            vertex,
            metrics,
            scaled.target,
            lower,
            upper,
        ));
    }
    PendingTarget(Pending::Target {
        tpr,
        target: scaled.target,
        note: factor.describe(cur, &scaled, lower),
        asks,
        skew,
    })
}

/// The skew-aware target of a keyed vertex (docs/skew-aware.md) when `scaling.skew-aware` is on
/// and the Flink autoscaler's `target` changes the parallelism; `None` leaves that target to
/// the job's aligner. Only vertices with a HASH input and no source partitions: their subtasks
/// own Flink's key-group ranges, which the prediction follows.
fn skew_target(
    ctx: &ScalerContext<'_>,
    vertex: &VertexInfo,
    factor: &ScaleFactor,
    target: u32,
    lower: i64,
    upper: i64,
) -> Option<SkewTarget> {
    let opts = ctx.opts;
    let cur = vertex.parallelism;
    let keyed =
        vertex.source_partitions == 0 && vertex.input_strategies.contains(&ShipStrategy::Hash);
    if !opts.skew_aware || target == cur || !keyed {
        return None;
    }
    let loads = ctx.observed.get(&*vertex.id)?.subtask_loads(cur);
    // The parallelisms the max factors and the limits allow, as `scaled_target` bounds them.
    let bound = |f: f64| scaled_target(f, cur, vertex.max_parallelism, lower, upper).target;
    let allowed = bound(1.0 - opts.scale_down_max_factor)..=bound(1.0 + opts.scale_up_max_factor);
    skew_aware_target(&SkewInputs {
        current: cur,
        target,
        max_parallelism: vertex.max_parallelism,
        allowed,
        factor: factor.unbounded(),
        aggregator: opts.busy_time_aggregator,
        loads: &loads,
    })
}

/// The mode a skew-aware decision reports (docs/skew-aware.md).
static SKEW_AWARE_MODE: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from("skew-aware"));

/// Aligns the requests of one job's pending targets with one call to its aligner
/// ([`Aligner::align_all`]); nothing is called when no target moves. The answers come in the
/// requests' order; an aligner may answer fewer.
pub(crate) fn align_targets(
    ctx: &ScalerContext<'_>,
    requests: Vec<AlignmentRequest>,
) -> std::vec::IntoIter<AlignOutcome> {
    if requests.is_empty() {
        return Vec::new().into_iter();
    }
    ctx.aligner.align_all(requests).into_iter()
}

/// The second half of `computeScaleTargetParallelism`: the aligned value (`aligned`: the
/// aligner's answer to the target's request, if it asked and was answered; else the target
/// stands), then the ineffective-scale-up and delayed-scale-down rules. Writes the decision
/// into `sink` and `EXPECTED_PROCESSING_RATE` into `metrics` when the parallelism changes.
pub(crate) fn finish_scale_target(
    ctx: &ScalerContext<'_>,
    vertex: &VertexInfo,
    metrics: &mut VertexEvaluation,
    history: Option<&VertexHistory>,
    pending: PendingTarget,
    aligned: Option<AlignOutcome>,
    sink: DecisionSink<'_>,
) -> ParallelismChange {
    let (tpr, target, scale_note, skew) = match pending.0 {
        Pending::Decided(reason) => {
            sink.decision.reason = Reason::text(reason);
            return ParallelismChange::NoChange;
        }
        Pending::Target {
            tpr,
            target,
            note,
            skew,
            ..
        } => (tpr, target, note, skew),
    };
    let DecisionSink {
        decision,
        events,
        delayed,
        index,
    } = sink;
    let cur = vertex.parallelism;
    decision.target = Some(target);
    let new = match (skew, aligned) {
        // Chosen by key-group ranges already: applied as aligned.
        (Some(skew), _) => {
            decision.mode = Some(Arc::clone(&SKEW_AWARE_MODE));
            decision.explanation = Explanation::text(skew.describe(cur, target));
            skew.parallelism
        }
        (None, Some(aligned)) => {
            // Kept as the aligner answered, moved field by field into the record.
            decision.mode = Some(aligned.mode);
            decision.explanation = aligned.explanation;
            events.extend(aligned.events);
            aligned.parallelism
        }
        // Nothing to align (the target is the current parallelism), or an aligner that left
        // a request of its batch unanswered: the target stands.
        (None, None) => target,
    };
    decision.aligned = Some(new);
    if new == 0 || new == cur {
        delayed.clear_vertex(index, &vertex.id);
        let step = if new == 0 {
            Step::AlignedZero
        } else {
            Step::NoChange
        };
        decision.reason = Reason::target(scale_note, None, step);
        return ParallelismChange::NoChange;
    }

    // A skew-aware target expects the rate its busiest subtask allows, not one in proportion
    // to the parallelism.
    let expected = match skew {
        Some(skew) => skew.expected_rate(tpr),
        None => tpr / f64::from(cur) * f64::from(new),
    };
    metrics.insert(
        ScalingMetric::ExpectedProcessingRate,
        EvaluatedScalingMetric::of(expected),
    );
    let band = Band::of(metrics, tpr);
    decision.outside_band = band.outside;
    let note = Note {
        scale: scale_note,
        band: band.describe(tpr),
    };
    let (change, step) = if new > cur {
        delayed.clear_vertex(index, &vertex.id);
        scale_up(ctx, vertex, history, tpr, new, band.outside, events)
    } else {
        scale_down(ctx, vertex, delayed, index, new, band.outside)
    };
    decision.reason = note.then(step);
    if let ParallelismChange::Change { new, outside } = change {
        decision.outside_band = outside;
        decision.proposed = Some(new);
    }
    change
}

/// The parallelism limits of a vertex running at `current`: `[min(current,
/// vertex.min-parallelism), max(current, vertex.max-parallelism)]`.
fn limits(current: u32, opts: &AutoscalerOptions) -> (i64, i64) {
    let current = i64::from(current);
    (
        current.min(opts.vertex_min_parallelism),
        current.max(opts.vertex_max_parallelism),
    )
}

/// The scale factor: target capacity over true processing rate, divided by the observed
/// scalability coefficient when that is enabled, bounded by `1 - scale-down.max-factor` and
/// `1 + scale-up.max-factor`.
struct ScaleFactor {
    capacity: f64,
    tpr: f64,
    /// The observed scalability coefficient, when enabled.
    coefficient: Option<f64>,
    value: f64,
}

impl ScaleFactor {
    fn of(
        opts: &AutoscalerOptions,
        capacity: f64,
        tpr: f64,
        history: Option<&VertexHistory>,
    ) -> ScaleFactor {
        let mut value = capacity / tpr;
        let coefficient = opts.observed_scalability_enabled.then(|| {
            let points: Vec<(u32, f64)> = history
                .map(|h| {
                    h.values()
                        .map(|s| {
                            let rate =
                                evaluated_or_nan(&s.metrics, ScalingMetric::TrueProcessingRate);
                            (s.current_parallelism, rate.average)
                        })
                        .collect()
                })
                .unwrap_or_default();
            observed_scalability_coefficient(&points, opts)
        });
        if let Some(coefficient) = coefficient {
            value /= coefficient;
        }
        let min_factor = 1.0 - opts.scale_down_max_factor;
        let max_factor = 1.0 + opts.scale_up_max_factor;
        if value < min_factor {
            value = min_factor;
        } else if value > max_factor {
            value = max_factor;
        }
        ScaleFactor {
            capacity,
            tpr,
            coefficient,
            value,
        }
    }

    /// `capacity / TPR`, divided by the coefficient when enabled, before the max-factor bounds.
    fn unbounded(&self) -> f64 {
        self.capacity / self.tpr / self.coefficient.unwrap_or(1.0)
    }

    /// How the target was computed, for the vertex's reason.
    fn describe(&self, current: u32, scaled: &ScaledTarget, lower: i64) -> ScaleNote {
        ScaleNote {
            capacity: self.capacity,
            tpr: self.tpr,
            coefficient: self.coefficient,
            factor: self.value,
            current,
            raw: scaled.raw,
            lower,
            upper_bound: scaled.upper_bound,
            target: scaled.target,
        }
    }
}

/// The vertex's utilization band as processing-rate thresholds, and whether its true processing
/// rate is outside.
struct Band {
    up_threshold: f64,
    down_threshold: f64,
    outside: bool,
}

impl Band {
    fn of(metrics: &VertexEvaluation, tpr: f64) -> Band {
        let up_threshold = evaluated_or_nan(metrics, ScalingMetric::ScaleUpRateThreshold).current;
        let down_threshold =
            evaluated_or_nan(metrics, ScalingMetric::ScaleDownRateThreshold).current;
        Band {
            up_threshold,
            down_threshold,
            outside: tpr < up_threshold || tpr > down_threshold,
        }
    }

    fn describe(&self, tpr: f64) -> BandNote {
        BandNote {
            tpr,
            outside: self.outside,
            up_threshold: self.up_threshold,
            down_threshold: self.down_threshold,
        }
    }
}

/// How the target was computed and where the vertex stands against its band: what every
/// reason of a changing vertex starts with.
#[derive(Clone, Copy)]
struct Note {
    scale: ScaleNote,
    band: BandNote,
}

impl Note {
    fn then(self, step: Step) -> Reason {
        Reason::target(self.scale, Some(self.band), step)
    }
}

/// A scale-up to `new`, unless the previous scale-up was ineffective and that blocks it
/// (docs/decision-pipeline.md#ineffective-scale-up); returns the change with the step that
/// decided it.
fn scale_up(
    ctx: &ScalerContext<'_>,
    vertex: &VertexInfo,
    history: Option<&VertexHistory>,
    tpr: f64,
    new: u32,
    outside: bool,
    events: &mut Vec<Event>,
) -> (ParallelismChange, Step) {
    let cur = vertex.parallelism;
    let last_scaled_up = history
        .and_then(|h| h.last_key_value())
        .map(|(_, last)| last)
        .filter(|last| {
            cur == last.new_parallelism && last.new_parallelism > last.current_parallelism
        });
    if let Some(last) = last_scaled_up {
        if let Some(event) = ineffective_scale_up(ctx.job, ctx.opts, vertex, last, tpr) {
            events.push(event);
            if ctx.opts.scaling_effectiveness_detection_enabled {
                return (ParallelismChange::NoChange, Step::Ineffective);
            }
        }
    }
    (
        ParallelismChange::Change { new, outside },
        Step::ScaleUp(new),
    )
}

/// A scale-down to `new`, delayed until it has been recommended for a whole
/// `scale-down.interval`, then to the highest parallelism recommended within it (docs/decision-pipeline.md#delayed-scale-down);
/// returns the change with the step that decided it.
fn scale_down(
    ctx: &ScalerContext<'_>,
    vertex: &VertexInfo,
    delayed: &mut DelayedScaleDown,
    index: usize,
    new: u32,
    outside: bool,
) -> (ParallelismChange, Step) {
    let cur = vertex.parallelism;
    let interval = millis(ctx.opts.scale_down_interval);
    if interval <= 0 {
        return (
            ParallelismChange::Change { new, outside },
            Step::ScaleDown(new),
        );
    }
    let window_start = ctx.now_ms.saturating_sub(interval);
    match delayed.trigger_in_window(index, &vertex.id, ctx.now_ms, new, outside, window_start) {
        None => (ParallelismChange::NoChange, Step::Delayed(new)),
        Some(max) if max.parallelism == cur => {
            (ParallelismChange::NoChange, Step::DelayedAtCurrent)
        }
        Some(max) => (
            ParallelismChange::Change {
                new: max.parallelism,
                outside: max.outside_utilization_bound,
            },
            Step::DelayedMax(max.parallelism),
        ),
    }
}

/// The graph the requests to an aligner that does not read it carry: one for the process.
static NO_TOPOLOGY: LazyLock<Arc<JobTopology>> = LazyLock::new(Arc::default);

/// Describes the vertex's decision to the job's aligner (docs/alignment.md#context).
fn alignment_request(
    ctx: &ScalerContext<'_>,
    vertex: &VertexInfo,
    metrics: &VertexEvaluation,
    target: u32,
    lower: i64,
    upper: i64,
) -> AlignmentRequest {
    let to_u32 = |x: i64| u32::try_from(x.max(0)).unwrap_or(u32::MAX);
    // Copies of the identity, the metrics and the graph only for aligners that read them.
    let details = ctx.aligner.reads_details();
    let text = |s: &Arc<str>| {
        if details { Arc::clone(s) } else { no_text() }
    };
    AlignmentRequest {
        job: if details {
            shared_job(ctx.job)
        } else {
            no_text()
        },
        vertex_id: text(&vertex.id),
        vertex_name: text(&vertex.name),
        current: vertex.parallelism,
        target,
        max_parallelism: vertex.max_parallelism,
        source_partitions: vertex.source_partitions,
        lower_limit: to_u32(lower),
        upper_limit: to_u32(upper),
        input_ship_strategies: Arc::clone(&vertex.input_strategies),
        metrics: if details {
            metrics_by_name(metrics)
        } else {
            flowscale_sdk::MetricList::new()
        },
        topology: if details {
            Arc::clone(ctx.topology.get_or_init(|| Arc::new(ctx.graph.to_sdk())))
        } else {
            // Not kept with the graph: a mode that reads the graph, configured for the job
            // later while the graph stays the same, must find the graph and not this stand-in.
            Arc::clone(&NO_TOPOLOGY)
        },
        subtask_loads: if details {
            ctx.observed
                .get(&*vertex.id)
                .map(|m| m.subtask_loads(vertex.parallelism))
                .unwrap_or_default()
        } else {
            Vec::new()
        },
    }
}

/// The vertex's metrics by name, the order a context keeps them in (so building one sorts
/// nothing), in the buffers of the previous context where it can. The mask of the present
/// metrics in name order determines the names: the list's key.
fn metrics_by_name(metrics: &VertexEvaluation) -> flowscale_sdk::MetricList {
    let named = names_mask(metrics);
    metric_list(named, || by_name_iter(metrics, named))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alignment::{Explanation, JobAlignment, NoCustomModes};
    use crate::config::config_map;
    use crate::scaling::custom::resolve::NO_CUSTOM;
    use crate::scaling::state::ScalingSummary;
    use crate::scaling::testing::{BalancedAligner, TargetAligner};
    use crate::scaling::topology::VertexIds;
    use flowscale_sdk::ShipStrategy;

    fn vertex(p: u32, max_p: u32) -> VertexInfo {
        VertexInfo {
            id: "v".into(),
            name: "v".into(),
            parallelism: p,
            max_parallelism: max_p,
            source_partitions: 0,
            finished: false,
            inputs: vec![(0, ShipStrategy::Hash)],
            input_strategies: Arc::from([ShipStrategy::Hash]),
            outputs: vec![],
        }
    }

    /// Metrics with no lag: capacity = target rate / u; thresholds from the default band.
    fn metrics(tpr: f64, target_rate: f64, opts: &AutoscalerOptions) -> VertexEvaluation {
        let mut m = VertexEvaluation::new();
        m.insert(
            ScalingMetric::TrueProcessingRate,
            EvaluatedScalingMetric::avg(tpr),
        );
        m.insert(
            ScalingMetric::TargetDataRate,
            EvaluatedScalingMetric::avg(target_rate),
        );
        m.insert(
            ScalingMetric::CatchUpDataRate,
            EvaluatedScalingMetric::of(0.0),
        );
        let up = capacity(&m, opts.upper_utilization(), false, Duration::ZERO, opts);
        let down = capacity(&m, opts.lower_utilization(), true, Duration::ZERO, opts);
        m.insert(
            ScalingMetric::ScaleUpRateThreshold,
            EvaluatedScalingMetric::of(up),
        );
        m.insert(
            ScalingMetric::ScaleDownRateThreshold,
            EvaluatedScalingMetric::of(down),
        );
        m
    }

    /// What one vertex's decision produced, for the assertions.
    #[derive(Debug, Clone, PartialEq)]
    pub(super) struct VertexOutcome {
        change: ParallelismChange,
        target: Option<u32>,
        aligned: Option<u32>,
        mode: Option<Arc<str>>,
        outside: bool,
        reason: Reason,
        explanation: Explanation,
        events: Vec<Event>,
    }

    /// Completes a pending target into a blank record, as the cycle does.
    fn finish(
        ctx: &ScalerContext<'_>,
        v: &VertexInfo,
        metrics: &mut VertexEvaluation,
        history: Option<&VertexHistory>,
        delayed: &mut DelayedScaleDown,
        pending: PendingTarget,
        aligned: Option<AlignOutcome>,
    ) -> VertexOutcome {
        let mut decision = VertexDecision::blank(v, false);
        let mut events = Vec::new();
        let change = finish_scale_target(
            ctx,
            v,
            metrics,
            history,
            pending,
            aligned,
            DecisionSink {
                decision: &mut decision,
                events: &mut events,
                delayed,
                // The vertices of these tests are in no graph: found by id.
                index: 0,
            },
        );
        VertexOutcome {
            change,
            target: decision.target,
            aligned: decision.aligned,
            mode: decision.mode,
            outside: decision.outside_band,
            reason: decision.reason,
            explanation: decision.explanation,
            events,
        }
    }

    /// `computeScaleTargetParallelism` for one vertex alone: [`prepare_scale_target`], its
    /// request aligned alone, then [`finish_scale_target`].
    fn compute_scale_target(
        ctx: &ScalerContext<'_>,
        v: &VertexInfo,
        metrics: &mut VertexEvaluation,
        history: Option<&VertexHistory>,
        delayed: &mut DelayedScaleDown,
    ) -> VertexOutcome {
        let mut requests = Vec::new();
        let pending = prepare_scale_target(ctx, v, metrics, history, &mut requests);
        let aligned = requests.pop().map(|r| ctx.aligner.align(r));
        finish(ctx, v, metrics, history, delayed, pending, aligned)
    }

    struct Fixture {
        opts: AutoscalerOptions,
        topology: OnceCell<Arc<JobTopology>>,
        graph: Topology,
        observed: BTreeMap<String, VertexMetrics>,
    }

    impl Fixture {
        fn new(opts: AutoscalerOptions) -> Fixture {
            Fixture {
                opts,
                topology: OnceCell::new(),
                graph: Topology {
                    vertices: Vec::new(),
                    index: Default::default(),
                },
                observed: BTreeMap::new(),
            }
        }
        fn ctx<'a>(&'a self, aligner: &'a dyn Aligner, now_ms: i64) -> ScalerContext<'a> {
            ScalerContext {
                job: "j",
                opts: &self.opts,
                aligner,
                custom: &NO_CUSTOM,
                topology: &self.topology,
                graph: &self.graph,
                observed: &self.observed,
                observed_vertices: &[],
                task_managers: None,
                restart_time: Duration::ZERO,
                now_ms,
            }
        }
        fn run(
            &self,
            v: &VertexInfo,
            tpr: f64,
            rate: f64,
            history: Option<&VertexHistory>,
            delayed: &mut DelayedScaleDown,
            now_ms: i64,
        ) -> VertexOutcome {
            let mut m = metrics(tpr, rate, &self.opts);
            compute_scale_target(
                &self.ctx(&TargetAligner, now_ms),
                v,
                &mut m,
                history,
                delayed,
            )
        }
    }

    fn no_delay() -> AutoscalerOptions {
        AutoscalerOptions {
            scale_down_interval: Duration::ZERO,
            ..AutoscalerOptions::default()
        }
    }

    #[test]
    fn scale_factor_bounds_are_one_minus_and_one_plus_the_max_factors() {
        // docs/decision-pipeline.md#scale-factor: down 0.6 => at least ceil(0.4 * cur); up 2.0 => at most ceil(3 * cur).
        let f = Fixture::new(AutoscalerOptions {
            scale_up_max_factor: 2.0,
            ..no_delay()
        });
        let mut d = DelayedScaleDown::default();
        let out = f.run(&vertex(10, 1000), 1000.0, 1.0, None, &mut d, 0);
        assert_eq!(out.target, Some(4));
        assert_eq!(
            out.change,
            ParallelismChange::Change {
                new: 4,
                outside: true
            }
        );
        let out = f.run(&vertex(10, 1000), 1.0, 1000.0, None, &mut d, 0);
        assert_eq!(out.target, Some(30));
        let out = f.run(&vertex(10, 25), 1.0, 1000.0, None, &mut d, 0);
        assert_eq!(out.target, Some(25), "max parallelism caps");
    }

    #[test]
    fn limits_and_max_parallelism() {
        let f = Fixture::new(AutoscalerOptions {
            vertex_min_parallelism: 5,
            vertex_max_parallelism: 12,
            ..no_delay()
        });
        let mut d = DelayedScaleDown::default();
        // lower = min(cur, 5) = 5: a big scale-down stops at 5.
        assert_eq!(
            f.run(&vertex(10, 128), 1e6, 1.0, None, &mut d, 0).target,
            Some(5)
        );
        // upper = max(cur, 12).
        assert_eq!(
            f.run(&vertex(10, 128), 1.0, 1e6, None, &mut d, 0).target,
            Some(12)
        );
        // The vertex max parallelism wins even over the lower limit.
        assert_eq!(
            f.run(&vertex(10, 3), 1e6, 1.0, None, &mut d, 0).target,
            Some(3)
        );
        // NaN rates: no decision.
        let out = f.run(&vertex(10, 128), f64::NAN, 1.0, None, &mut d, 0);
        assert_eq!(out.change, ParallelismChange::NoChange);
        assert_eq!(out.target, None);
    }

    #[test]
    fn alignment_is_skipped_when_the_clamped_target_equals_current() {
        let f = Fixture::new(no_delay());
        let mut d = DelayedScaleDown::default();
        // capacity 700/0.7 = 1000, TPR 1000 -> factor 1 -> 10.
        let mut m = metrics(1000.0, 700.0, &f.opts);
        let out = compute_scale_target(
            &f.ctx(&BalancedAligner, 0),
            &vertex(10, 128),
            &mut m,
            None,
            &mut d,
        );
        assert_eq!(out.mode, None);
        assert_eq!(out.change, ParallelismChange::NoChange);
        // 10 -> 7 with 128 key groups: BALANCED scale-down searches [7, 10] and finds 8.
        let mut m = metrics(1000.0, 490.0, &f.opts);
        let out = compute_scale_target(
            &f.ctx(&BalancedAligner, 0),
            &vertex(10, 128),
            &mut m,
            None,
            &mut d,
        );
        assert_eq!(out.target, Some(7));
        assert_eq!(out.aligned, Some(8));
        assert_eq!(out.mode.as_deref(), Some("BALANCED"));
        assert_eq!(
            out.change,
            ParallelismChange::Change {
                new: 8,
                outside: false
            }
        );
        assert_eq!(
            m[&ScalingMetric::ExpectedProcessingRate].current,
            800.0,
            "tpr / cur * new"
        );
    }

    fn summary(cur: u32, new: u32, tpr: f64, expected: f64) -> ScalingSummary {
        let mut metrics = VertexEvaluation::new();
        metrics.insert(
            ScalingMetric::TrueProcessingRate,
            EvaluatedScalingMetric::avg(tpr),
        );
        metrics.insert(
            ScalingMetric::ExpectedProcessingRate,
            EvaluatedScalingMetric::of(expected),
        );
        ScalingSummary {
            current_parallelism: cur,
            new_parallelism: new,
            metrics,
        }
    }

    #[test]
    fn ineffective_scale_up_is_reported_and_blocked_when_enabled() {
        let mut history = VertexHistory::default();
        history.insert(0, summary(4, 8, 100.0, 200.0));
        let mut d = DelayedScaleDown::default();
        // Now at 8 with TPR 105: expected +100, actual +5 -> 0.05 < 0.1.
        let f = Fixture::new(no_delay());
        let out = f.run(&vertex(8, 128), 105.0, 1000.0, Some(&history), &mut d, 0);
        assert!(matches!(out.change, ParallelismChange::Change { .. }));
        assert_eq!(out.events.len(), 1);
        assert_eq!(
            out.events[0].message,
            "Ineffective scaling detected for v (expected increase: 100.0, actual increase 5.0). Blocking of ineffective scaling decisions is disabled"
        );
        let f = Fixture::new(AutoscalerOptions {
            scaling_effectiveness_detection_enabled: true,
            ..no_delay()
        });
        let out = f.run(&vertex(8, 128), 105.0, 1000.0, Some(&history), &mut d, 0);
        assert_eq!(out.change, ParallelismChange::NoChange);
        assert!(out.events[0].message.ends_with("is enabled"));
        // Effective: actual +20 of +100 expected.
        let out = f.run(&vertex(8, 128), 120.0, 1000.0, Some(&history), &mut d, 0);
        assert!(out.events.is_empty());
        assert!(matches!(out.change, ParallelismChange::Change { .. }));
        // Only checked when scaling up again from exactly last.new after a scale-up.
        let out = f.run(&vertex(7, 128), 105.0, 1000.0, Some(&history), &mut d, 0);
        assert!(out.events.is_empty());
    }

    #[test]
    fn delayed_scale_down_takes_the_window_maximum() {
        let f = Fixture::new(AutoscalerOptions {
            scale_down_interval: Duration::from_secs(60),
            ..AutoscalerOptions::default()
        });
        let v = vertex(10, 1000);
        let mut d = DelayedScaleDown::default();
        // Band with defaults: [rate / 1.0, rate / 0.4]; capacity rate / 0.7.
        // t=0: 10 -> 5 requested (TPR 2000, rate 700: factor 0.5).
        let out = f.run(&v, 2000.0, 700.0, None, &mut d, 0);
        assert_eq!(out.change, ParallelismChange::NoChange);
        assert_eq!(out.aligned, Some(5));
        // t=30 s: 7 requested (factor 0.7 -> ceil 7).
        let out = f.run(&v, 1000.0, 490.0, None, &mut d, 30_000);
        assert_eq!(out.change, ParallelismChange::NoChange);
        // t=60 s: 4 requested; the window [0, 60 s] has max 7 (recorded at 30 s).
        let out = f.run(&v, 2500.0, 700.0, None, &mut d, 60_000);
        assert_eq!(
            out.change,
            ParallelismChange::Change {
                new: 7,
                outside: false
            }
        );
        // t=100 s: 6 requested; 7@30 s is before the window [40 s, 100 s] and is dropped.
        let out = f.run(&v, 1000.0, 420.0, None, &mut d, 100_000);
        assert_eq!(
            out.change,
            ParallelismChange::Change {
                new: 6,
                outside: false
            }
        );
        assert_eq!(
            d.entry("v")
                .unwrap()
                .recommendations
                .iter()
                .map(|r| r.parallelism)
                .collect::<Vec<_>>(),
            vec![6]
        );
        // A scale-up (or no change) forgets the pending scale-down.
        let out = f.run(&v, 100.0, 700.0, None, &mut d, 110_000);
        assert!(matches!(out.change, ParallelismChange::Change { .. }));
        assert!(d.is_empty());
    }

    #[test]
    fn observed_scalability_divides_the_scale_factor() {
        let f = Fixture::new(AutoscalerOptions {
            observed_scalability_enabled: true,
            observed_scalability_min_observations: 2,
            ..no_delay()
        });
        let mut history = VertexHistory::default();
        history.insert(0, summary(1, 2, 100.0, 200.0));
        history.insert(1, summary(2, 4, 120.625, 241.25));
        let mut d = DelayedScaleDown::default();
        // capacity 1000 / TPR 500 = 2; / 0.69 = 2.8986; ceil(2.8986 * 4) = 12.
        let out = f.run(&vertex(4, 128), 500.0, 700.0, Some(&history), &mut d, 0);
        assert_eq!(out.target, Some(12));
    }

    #[test]
    fn plain_ceil_without_alignment() {
        // A REBALANCE input and no partitions: BALANCED does not apply, 3.33 rounds up to 4.
        let f = Fixture::new(no_delay());
        let mut v = vertex(1, 720);
        v.inputs = vec![(0, ShipStrategy::Rebalance)];
        v.input_strategies = Arc::from([ShipStrategy::Rebalance]);
        let mut d = DelayedScaleDown::default();
        // capacity 700 / 0.7 = 1000, TPR 300 -> factor 3.333.
        let mut m = metrics(300.0, 700.0, &f.opts);
        let out = compute_scale_target(&f.ctx(&BalancedAligner, 0), &v, &mut m, None, &mut d);
        assert_eq!(out.target, Some(4));
        assert_eq!(out.aligned, Some(4));
    }

    #[test]
    fn hash_input_is_aligned_source_without_partitions_is_not() {
        let f = Fixture::new(no_delay());
        let mut d = DelayedScaleDown::default();
        // 1 -> 7 with 128 key groups: the HASH-input vertex becomes 8, a source stays 7.
        let mut m = metrics(1000.0, 4900.0, &f.opts);
        let sink = vertex(1, 128);
        let out = compute_scale_target(&f.ctx(&BalancedAligner, 0), &sink, &mut m, None, &mut d);
        assert_eq!((out.target, out.aligned), (Some(7), Some(8)));
        let mut source = vertex(1, 128);
        source.inputs.clear();
        source.input_strategies = Arc::default();
        let mut m = metrics(1000.0, 4900.0, &f.opts);
        let out = compute_scale_target(&f.ctx(&BalancedAligner, 0), &source, &mut m, None, &mut d);
        assert_eq!((out.target, out.aligned), (Some(7), Some(7)));
    }

    /// BALANCED, counting the requests it gets through each of its two entry points.
    #[derive(Default)]
    struct Counting {
        one: std::cell::Cell<usize>,
        batches: std::cell::RefCell<Vec<usize>>,
    }

    impl Aligner for Counting {
        fn align(&self, request: AlignmentRequest) -> AlignOutcome {
            self.one.set(self.one.get() + 1);
            BalancedAligner.align(request)
        }
        fn align_all(&self, requests: Vec<AlignmentRequest>) -> Vec<AlignOutcome> {
            self.batches.borrow_mut().push(requests.len());
            requests
                .into_iter()
                .map(|r| BalancedAligner.align(r))
                .collect()
        }
    }

    #[test]
    fn a_job_is_aligned_in_one_call_with_the_decisions_of_one_vertex_after_the_other() {
        let f = Fixture::new(AutoscalerOptions {
            scale_down_interval: Duration::from_secs(60),
            ..AutoscalerOptions::default()
        });
        // 10 -> 7 (aligned to 8, a delayed scale-down), 1 -> 7 (aligned to 8), 10 -> 10
        // (nothing to align), an unknown rate (no decision).
        let mut vertices = [
            vertex(10, 128),
            vertex(1, 128),
            vertex(10, 128),
            vertex(4, 128),
        ];
        for (v, id) in vertices.iter_mut().zip(["a", "b", "c", "d"]) {
            v.id = id.into();
        }
        let rates = [
            (1000.0, 490.0),
            (1000.0, 4900.0),
            (1000.0, 700.0),
            (f64::NAN, 1.0),
        ];
        let mut batched_metrics: Vec<VertexEvaluation> = rates
            .iter()
            .map(|&(tpr, rate)| metrics(tpr, rate, &f.opts))
            .collect();
        let mut single_metrics = batched_metrics.clone();

        let counting = Counting::default();
        let ctx = f.ctx(&counting, 0);
        let mut requests = Vec::new();
        let pending: Vec<PendingTarget> = vertices
            .iter()
            .zip(&batched_metrics)
            .map(|(v, m)| prepare_scale_target(&ctx, v, m, None, &mut requests))
            .collect();
        let mut answers = align_targets(&ctx, requests);
        assert_eq!(
            *counting.batches.borrow(),
            vec![2],
            "one call, two requests"
        );
        let mut delayed = DelayedScaleDown::default();
        let batched: Vec<VertexOutcome> = vertices
            .iter()
            .zip(batched_metrics.iter_mut())
            .zip(pending)
            .map(|((v, m), p)| {
                let aligned = if p.asks() { answers.next() } else { None };
                finish(&ctx, v, m, None, &mut delayed, p, aligned)
            })
            .collect();
        assert_eq!(counting.one.get(), 0, "nothing aligned vertex by vertex");

        let mut single_delayed = DelayedScaleDown::default();
        let single: Vec<VertexOutcome> = vertices
            .iter()
            .zip(single_metrics.iter_mut())
            .map(|(v, m)| {
                compute_scale_target(&f.ctx(&BalancedAligner, 0), v, m, None, &mut single_delayed)
            })
            .collect();
        assert_eq!(batched, single);
        assert_eq!(
            batched.iter().map(|o| o.aligned).collect::<Vec<_>>(),
            vec![Some(8), Some(8), Some(10), None]
        );
        assert_eq!(delayed, single_delayed);
        assert_eq!(
            format!("{batched_metrics:?}"),
            format!("{single_metrics:?}"),
            "the same metrics written"
        );

        // A job whose targets all stay put calls nothing.
        let counting = Counting::default();
        let ctx = f.ctx(&counting, 0);
        let steady = metrics(1000.0, 700.0, &f.opts);
        let mut requests = Vec::new();
        prepare_scale_target(&ctx, &vertex(10, 128), &steady, None, &mut requests);
        assert_eq!(align_targets(&ctx, requests).len(), 0);
        assert!(counting.batches.borrow().is_empty());
    }

    /// Records how many vertices the graph of each request it gets has.
    #[derive(Default)]
    struct GraphReader(std::cell::RefCell<Vec<usize>>);

    impl Aligner for GraphReader {
        fn align(&self, request: AlignmentRequest) -> AlignOutcome {
            self.0.borrow_mut().push(request.topology.vertices.len());
            TargetAligner.align(request)
        }
    }

    #[test]
    fn a_mode_that_reads_the_graph_finds_it_after_one_that_does_not() {
        let mut f = Fixture::new(no_delay());
        let v = vertex(1, 128);
        f.graph = Topology {
            vertices: vec![v.clone()],
            index: Arc::new(VertexIds::new(vec![Arc::clone(&v.id)])),
        };
        // BALANCED does not read the graph; a mode configured later for the same graph does.
        let balanced = JobAlignment::resolve("j", &config_map(&[]), &NoCustomModes)
            .expect("BALANCED resolves");
        let reader = GraphReader::default();
        let mut d = DelayedScaleDown::default();
        for aligner in [&balanced as &dyn Aligner, &reader] {
            // 1 -> 7: aligned.
            let mut m = metrics(1000.0, 4900.0, &f.opts);
            let out = compute_scale_target(&f.ctx(aligner, 0), &v, &mut m, None, &mut d);
            assert_eq!(out.target, Some(7));
        }
        assert_eq!(*reader.0.borrow(), vec![1]);
    }

    #[test]
    fn a_request_lists_the_metrics_by_name_once_each() {
        let mut m = VertexEvaluation::new();
        // Inserted in the metrics' own order, which is not the names' order.
        m.insert(ScalingMetric::Load, EvaluatedScalingMetric::avg(0.5));
        m.insert(ScalingMetric::Lag, EvaluatedScalingMetric::avg(3.0));
        m.insert(
            ScalingMetric::TrueProcessingRate,
            EvaluatedScalingMetric::avg(9.0),
        );
        m.insert(
            ScalingMetric::CatchUpDataRate,
            EvaluatedScalingMetric::avg(1.0),
        );
        let named = metrics_by_name(&m);
        let names: Vec<&str> = named.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["CATCH_UP_DATA_RATE", "LAG", "LOAD", "TRUE_PROCESSING_RATE"]
        );
        assert_eq!(named[1].1.average, 3.0);
    }

    /// A fixture whose vertex `v` (K = 128, at p = 2) reported 3000 and 1000 records/s:
    /// subtask 0 owns key groups [0, 64) and carries 75% of the load.
    fn skewed(opts: AutoscalerOptions) -> Fixture {
        use crate::engine::SubtaskMetrics;
        let mut f = Fixture::new(opts);
        let subtask = |records: f64| SubtaskMetrics {
            busy_time_ms_per_second: Some(records / 4.0),
            num_records_in_per_second: Some(records),
        };
        f.observed.insert(
            "v".to_string(),
            VertexMetrics {
                subtasks: vec![subtask(3000.0), subtask(1000.0)],
                ..VertexMetrics::default()
            },
        );
        f
    }

    /// TPR 1000 and a target rate of 1736: capacity roundHalfUp(1736 / 0.7) = 2480, factor
    /// 2.48, the Flink autoscaler's target ceil(2.48 · 2) = 5. Skew-aware (MAX aggregator, the
    /// busiest share 0.75 measured): the busiest subtask must stay within 0.75 / 2.48 =
    /// 30.24%; at 5 it is predicted 30.47% (26 of the 64 hot key groups), at 6 25.78% (22):
    /// 6 (the derivation in skew.rs's tests).
    #[test]
    fn skew_aware_targets_replace_the_mean_based_one_only_when_the_key_is_on() {
        let mut d = DelayedScaleDown::default();
        let on = skewed(AutoscalerOptions {
            skew_aware: true,
            ..no_delay()
        });
        let out = on.run(&vertex(2, 128), 1000.0, 1736.0, None, &mut d, 0);
        assert_eq!(out.target, Some(5), "the Flink autoscaler's target is kept");
        assert_eq!(out.aligned, Some(6));
        assert_eq!(out.mode.as_deref(), Some("skew-aware"));
        assert_eq!(
            out.change,
            ParallelismChange::Change {
                new: 6,
                outside: true
            }
        );
        assert_eq!(
            out.explanation.lines(),
            [
                "skew-aware (scaling.skew-aware): 2 -> 6: predicted busiest subtask 25.78% of the \
              load there, within 30.24% (the measured 75.00% over the scale factor); the \
              mean-based target 5 predicts 30.47%"
            ]
        );
        let mut m = metrics(1000.0, 1736.0, &on.opts);
        let ctx = on.ctx(&TargetAligner, 0);
        compute_scale_target(&ctx, &vertex(2, 128), &mut m, None, &mut d);
        // TPR · 0.75 / 0.2578125 = 2909.0909..., metrics rounded half up to 3 decimals.
        assert_eq!(m[&ScalingMetric::ExpectedProcessingRate].current, 2909.091);

        // Off (the default): the same observation decides exactly as without per-subtask
        // load, the aligner answering the target 5.
        assert!(!AutoscalerOptions::default().skew_aware);
        let off = skewed(no_delay());
        let without_loads = Fixture::new(no_delay());
        let a = off.run(&vertex(2, 128), 1000.0, 1736.0, None, &mut d, 0);
        let b = without_loads.run(&vertex(2, 128), 1000.0, 1736.0, None, &mut d, 0);
        assert_eq!(a, b);
        assert_eq!(a.aligned, Some(5));
        assert_eq!(a.mode.as_deref(), Some("OFF"));

        // On, but a vertex without a HASH input (no key-group ranges): the aligner decides.
        let mut unkeyed = vertex(2, 128);
        unkeyed.input_strategies = Arc::from([ShipStrategy::Rebalance]);
        let out = on.run(&unkeyed, 1000.0, 1736.0, None, &mut d, 0);
        assert_eq!((out.aligned, out.mode.as_deref()), (Some(5), Some("OFF")));
    }
}
