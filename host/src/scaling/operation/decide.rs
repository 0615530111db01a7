//! Deciding the scaling operation (see docs/decision-pipeline.md#execution): memory pressure, the per-vertex summaries, the "at least one vertex outside its band"
//! rule, advisor mode and excluded periods, and applying a decision to the job's state.
//!
//! Not implemented (the Flink autoscaler's steps 7–9): memory tuning, cluster-resource and quota checks,
//! custom scaling executors. A decided operation is handed to the job's cooldown executor as
//! [`crate::scaling::CycleOutcome::decision`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::memory::memory_pressure;
use super::report::{REPORT_HEADER_DISABLED, REPORT_HEADER_ENABLED, scaling_report};
use crate::alignment::Explanation;
use crate::scaling::evaluation::Evaluation;
use crate::scaling::metrics::{EvaluatedScalingMetric, ScalingMetric, VertexEvaluation};
use crate::scaling::options::{EXCLUDED_PERIODS_KEY, SCALING_ENABLED_KEY};
use crate::scaling::outcome::{CycleOutcome, CycleStage, VertexDecision};
use crate::scaling::state::{JobScalingState, ScalingSummary};
use crate::scaling::target::{
    ParallelismChange, PendingTarget, Reason, ScalerContext, align_targets, finish_scale_target,
    prepare_scale_target,
};
use crate::scaling::topology::{Topology, VertexInfo};

/// Decides the cycle's scaling operation on an evaluated, fully collected window.
pub(crate) fn decide_operation(
    ctx: &ScalerContext<'_>,
    topology: &Topology,
    evaluation: &mut Evaluation,
    cycle_excluded: &BTreeSet<String>,
    state: &mut JobScalingState,
    outcome: &mut CycleOutcome,
) -> CycleStage {
    let opts = ctx.opts;
    if let Some(event) = memory_pressure(ctx.job, opts, evaluation) {
        outcome.events.push(event);
        return CycleStage::MemoryPressure;
    }

    // The changing vertices with their new parallelism; their summaries are only built when
    // some vertex is outside its band, since most cycles of a steady job end within bounds.
    let mut changes: Vec<(usize, &VertexInfo, u32)> = Vec::with_capacity(topology.vertices.len());
    outcome.vertices.reserve_exact(topology.vertices.len());
    let mut any_outside = false;
    for (index, vertex, change) in
        decide_vertices(ctx, topology, evaluation, cycle_excluded, state, outcome)
    {
        if let Some((new, outside)) = change {
            any_outside |= outside;
            changes.push((index, vertex, new));
        }
    }
    if !any_outside {
        // All changed vertices are within their band: nothing to do ("all within target").
        return CycleStage::WithinBounds;
    }
    // Each vertex's metrics are as its own decision left them: later vertices only write
    // their own. Keyed by the topology's shared ids: nothing is copied but the metrics.
    let summaries: BTreeMap<Arc<str>, ScalingSummary> = changes
        .into_iter()
        .filter_map(|(index, vertex, new)| {
            let metrics = evaluation.vertices.values.get(index)?.clone();
            let summary = ScalingSummary {
                current_parallelism: vertex.parallelism,
                new_parallelism: new,
                metrics,
            };
            Some((Arc::clone(&vertex.id), summary))
        })
        .collect();

    for (vertex, summary) in &summaries {
        let index = topology.index.get(vertex).copied();
        if let Some(m) = index.and_then(|i| evaluation.vertices.values.get_mut(i)) {
            m.insert(
                ScalingMetric::RecommendedParallelism,
                EvaluatedScalingMetric::of(f64::from(summary.new_parallelism)),
            );
        }
    }
    if let Some(reason) = blocked_by(ctx) {
        let header = format!("{REPORT_HEADER_DISABLED}{reason}, recommended parallelism change:");
        outcome
            .events
            .push(scaling_report(ctx.job, &header, &summaries));
        return CycleStage::Blocked(reason);
    }
    outcome
        .events
        .push(scaling_report(ctx.job, REPORT_HEADER_ENABLED, &summaries));
    apply(ctx.now_ms, topology, evaluation, summaries, state, outcome);
    CycleStage::Scaled
}

/// A decided vertex: its index in the graph, the vertex, and the parallelism it asks for with
/// whether it is outside its band, when it asks for a change.
type DecidedVertex<'t> = (usize, &'t VertexInfo, Option<(u32, bool)>);

/// Every evaluated vertex's decision, in the graph's order, into `outcome`; returns each vertex
/// with the parallelism it asks for and whether it is outside its band, when it asks for a
/// change.
///
/// Each vertex is first computed up to its alignment, then one call aligns the job's vertices
/// together (for a plugin in a worker process, one round trip per job and cycle instead of one
/// per vertex), then each vertex completes with its answer. A vertex's alignment reads nothing
/// another vertex's completion writes, so the decisions are those of one vertex after the other.
fn decide_vertices<'t>(
    ctx: &ScalerContext<'_>,
    topology: &'t Topology,
    evaluation: &mut Evaluation,
    cycle_excluded: &BTreeSet<String>,
    state: &mut JobScalingState,
    outcome: &mut CycleOutcome,
) -> Vec<DecidedVertex<'t>> {
    let mut prepared: Vec<(usize, &VertexInfo, Option<PendingTarget>)> =
        Vec::with_capacity(topology.vertices.len());
    for (index, vertex) in topology.vertices.iter().enumerate() {
        let Some(metrics) = evaluation.vertices.values.get(index) else {
            continue;
        };
        let pending = (!excluded(ctx, vertex, cycle_excluded)).then(|| {
            prepare_scale_target(ctx, vertex, metrics, state.scaling_history.of(&vertex.id))
        });
        prepared.push((index, vertex, pending));
    }
    align_targets(ctx, prepared.iter_mut().filter_map(|(_, _, p)| p.as_mut()));
    let mut decided = Vec::with_capacity(prepared.len());
    for (index, vertex, pending) in prepared.iter_mut() {
        let (index, vertex) = (*index, *vertex);
        let Some(metrics) = evaluation.vertices.values.get_mut(index) else {
            continue;
        };
        let change = decide_vertex(
            ctx,
            vertex,
            metrics,
            cycle_excluded,
            pending.as_mut(),
            state,
            outcome,
        );
        decided.push((index, vertex, change));
    }
    decided
}

/// Whether the vertex keeps its parallelism whatever its metrics say (`vertex.exclude.ids`,
/// finished, no finite busy time in this cycle).
fn excluded(
    ctx: &ScalerContext<'_>,
    vertex: &VertexInfo,
    cycle_excluded: &BTreeSet<String>,
) -> bool {
    ctx.opts
        .vertex_exclude_ids
        .iter()
        .any(|e| **e == *vertex.id)
        || cycle_excluded.contains(&*vertex.id)
}

/// One vertex's decision, completed from its `pending` target (`None` for an excluded vertex)
/// and appended to the outcome's decisions (built in place there rather than moved out); returns
/// the parallelism it asks for with whether it is outside its band when it asks for a change. Excluded vertices (`vertex.exclude.ids`, finished, no finite busy time) keep their
/// parallelism.
fn decide_vertex(
    ctx: &ScalerContext<'_>,
    vertex: &VertexInfo,
    metrics: &mut VertexEvaluation,
    cycle_excluded: &BTreeSet<String>,
    pending: Option<&mut PendingTarget>,
    state: &mut JobScalingState,
    outcome: &mut CycleOutcome,
) -> Option<(u32, bool)> {
    let mut decision = VertexDecision {
        vertex: String::from(&*vertex.id),
        name: vertex.name.clone(),
        current: vertex.parallelism,
        target: None,
        aligned: None,
        proposed: None,
        mode: None,
        outside_band: false,
        excluded: pending.is_none(),
        reason: Reason::default(),
        explanation: Explanation::default(),
    };
    let Some(pending) = pending else {
        decision.reason = Reason::text(if vertex.finished {
            "finished; not scaled"
        } else if cycle_excluded.contains(&*vertex.id) {
            "no finite busy time; not scaled in this cycle"
        } else {
            "listed in vertex.exclude.ids; not scaled"
        });
        outcome.vertices.push(decision);
        return None;
    };
    let result = finish_scale_target(
        ctx,
        vertex,
        metrics,
        state.scaling_history.of(&vertex.id),
        &mut state.delayed_scale_down,
        pending,
    );
    decision.target = result.target;
    decision.aligned = result.aligned;
    decision.mode = result.mode;
    decision.outside_band = result.outside;
    decision.reason = result.reason;
    decision.explanation = result.explanation;
    outcome.events.extend(result.events);
    let ParallelismChange::Change { new, outside } = result.change else {
        outcome.vertices.push(decision);
        return None;
    };
    decision.proposed = Some(new);
    outcome.vertices.push(decision);
    Some((new, outside))
}

/// Why a decided operation is not executed, in the Flink autoscaler's words: advisor mode
/// (`scaling.enabled` false) or an excluded period.
fn blocked_by(ctx: &ScalerContext<'_>) -> Option<String> {
    let opts = ctx.opts;
    if !opts.scaling_enabled {
        Some(format!("job.autoscaler.{SCALING_ENABLED_KEY}:false"))
    } else if opts.excluded_periods.is_excluded(ctx.now_ms) {
        Some(format!(
            "job.autoscaler.{EXCLUDED_PERIODS_KEY}:{}",
            opts.excluded_periods
        ))
    } else {
        None
    }
}

/// Applies an executed operation to the job's state (history, tracking, overrides, pending
/// scale-downs) and hands it over as the cycle's decision: every evaluated vertex, changed ones
/// at their new parallelism.
fn apply(
    now_ms: i64,
    topology: &Topology,
    evaluation: &Evaluation,
    summaries: BTreeMap<Arc<str>, ScalingSummary>,
    state: &mut JobScalingState,
    outcome: &mut CycleOutcome,
) {
    state.scaling_history.add(now_ms, &summaries);
    state.scaling_tracking.add(now_ms);
    // In id order, as the map keeps them.
    let decided = topology.index.in_id_order().iter().filter_map(|&i| {
        let v = topology.vertices.get(i)?;
        evaluation.vertices.values.get(i)?;
        let p = summaries
            .get(&*v.id)
            .map_or(v.parallelism, |s| s.new_parallelism);
        Some((&*v.id, p))
    });
    overwrite_overrides(&mut state.parallelism_overrides, decided);
    state.delayed_scale_down.clear_all();
    outcome.decision = Some(state.parallelism_overrides.clone());
    outcome.summaries = summaries;
}

/// Replaces `overrides` by `decided` (in id order). A job keeps its vertices from one operation
/// to the next, so the map usually has exactly these ids already: then only the parallelisms
/// are written, without copying an id or rebuilding the map.
fn overwrite_overrides<'a>(
    overrides: &mut BTreeMap<String, u32>,
    decided: impl Iterator<Item = (&'a str, u32)> + Clone,
) {
    let same_ids = overrides.len() == decided.clone().count()
        && overrides
            .keys()
            .zip(decided.clone())
            .all(|(kept, (id, _))| kept == id);
    if same_ids {
        for (kept, (_, p)) in overrides.values_mut().zip(decided) {
            *kept = p;
        }
    } else {
        *overrides = decided.map(|(id, p)| (id.to_string(), p)).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, u32)]) -> BTreeMap<String, u32> {
        entries.iter().map(|&(id, p)| (id.to_string(), p)).collect()
    }

    #[test]
    fn overrides_are_overwritten_in_place_or_rebuilt() {
        let mut overrides = map(&[("a", 1), ("b", 2)]);
        overwrite_overrides(&mut overrides, [("a", 3), ("b", 4)].into_iter());
        assert_eq!(overrides, map(&[("a", 3), ("b", 4)]));
        // Other ids, fewer ids, more ids: the map is the decided one.
        overwrite_overrides(&mut overrides, [("a", 5), ("c", 6)].into_iter());
        assert_eq!(overrides, map(&[("a", 5), ("c", 6)]));
        overwrite_overrides(&mut overrides, [("a", 7)].into_iter());
        assert_eq!(overrides, map(&[("a", 7)]));
        overwrite_overrides(&mut overrides, [("a", 8), ("d", 9)].into_iter());
        assert_eq!(overrides, map(&[("a", 8), ("d", 9)]));
    }
}
