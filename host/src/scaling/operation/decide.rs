//! Deciding the scaling operation (see docs/decision-pipeline.md#execution): memory pressure, the per-vertex summaries, the "at least one vertex outside its band"
//! rule, advisor mode and excluded periods, the resource quota, restart-aware hysteresis, and applying a decision to the
//! job's state.
//!
//! The resource quota (the Flink autoscaler's step 8, after memory tuning and its cluster
//! resource check) sees the operation after the advisor check; the job's custom scaling
//! executors (step 9, docs/plugin-kinds.md) see it after the quota and before it is reported
//! and applied; they may change or veto it. Restart-aware hysteresis (`scaling.restart-aware`,
//! off by default) sits between the two: it skips an operation not worth its restart.
//!
//! Not implemented (the Flink autoscaler's step 7 and the first half of 8): memory tuning and
//! the cluster-resource check. A decided operation is handed to the job's cooldown executor as
//! [`crate::scaling::CycleOutcome::decision`].

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::memory::memory_pressure;
use super::quota::resource_quota_reached;
use super::report::{REPORT_HEADER_DISABLED, REPORT_HEADER_ENABLED, scaling_report};
use super::restart::scaling_skipped;
use crate::scaling::custom::chain::{ChainInput, Vetoed, run_chain};
use crate::scaling::evaluation::Evaluation;
use crate::scaling::metrics::{EvaluatedScalingMetric, ScalingMetric};
use crate::scaling::options::{EXCLUDED_PERIODS_KEY, SCALING_ENABLED_KEY};
use crate::scaling::outcome::{CycleOutcome, CycleStage, VertexDecision};
use crate::scaling::state::{JobScalingState, ScalingSummary, VertexHistory};
use crate::scaling::target::{
    DecisionSink, ParallelismChange, Reason, ScalerContext, align_targets, finish_scale_target,
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
    outcome.vertices.reserve_exact(topology.vertices.len());
    let (changes, any_outside) =
        decide_vertices(ctx, topology, evaluation, cycle_excluded, state, outcome);
    if !any_outside {
        // All changed vertices are within their band: nothing to do ("all within target").
        return CycleStage::WithinBounds;
    }
    // Each vertex's metrics are as its own decision left them: later vertices only write
    // their own. Keyed by the topology's shared ids: nothing is copied but the metrics.
    let summaries: BTreeMap<Arc<str>, ScalingSummary> = changes
        .iter()
        .filter_map(|&(index, vertex, new)| {
            let metrics = evaluation.vertices.values.get(index)?.clone();
            let summary = ScalingSummary {
                current_parallelism: vertex.parallelism,
                new_parallelism: new,
                metrics,
            };
            Some((Arc::clone(&vertex.id), summary))
        })
        .collect();
    // By the graph's index, which the changes carry (a graph's ids are unique).
    for &(index, _, new) in &changes {
        if let Some(m) = evaluation.vertices.values.get_mut(index) {
            m.insert(
                ScalingMetric::RecommendedParallelism,
                EvaluatedScalingMetric::of(f64::from(new)),
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
    if let Some(event) = resource_quota_reached(
        ctx.job,
        ctx.opts,
        ctx.observed_vertices,
        ctx.task_managers,
        &summaries,
    ) {
        outcome.events.push(event);
        return CycleStage::ResourceQuotaReached;
    }
    // Restart-aware hysteresis: like the quota, nothing is applied and pending scale-downs
    // are kept.
    if let Some(event) = scaling_skipped(
        ctx.job,
        ctx.opts,
        topology,
        ctx.observed_vertices,
        &summaries,
        &state.scaling_history,
        ctx.restart_time,
    ) {
        outcome.events.push(event);
        return CycleStage::ScalingSkipped;
    }
    let (changes, summaries) = if ctx.custom.executors.is_empty() {
        (changes, summaries)
    } else {
        match execute(ctx, topology, evaluation, summaries) {
            Ok(executed) => executed,
            Err(vetoed) => {
                let (veto, event) = *vetoed;
                outcome.events.push(event);
                return CycleStage::Vetoed(veto);
            }
        }
    };
    outcome
        .events
        .push(scaling_report(ctx.job, REPORT_HEADER_ENABLED, &summaries));
    apply(
        ctx.now_ms, topology, evaluation, &changes, summaries, state, outcome,
    );
    CycleStage::Scaled
}

/// A changing vertex: its index in the graph, the vertex, and the parallelism it asks for.
type Change<'t> = (usize, &'t VertexInfo, u32);

/// The changes of an executed operation with their summaries.
type Executed<'t> = (Vec<Change<'t>>, BTreeMap<Arc<str>, ScalingSummary>);

/// The operation as the job's executors leave it (docs/plugin-kinds.md): the vertices their
/// chain keeps changing, at the parallelism it gives them, with their summaries (the evaluated
/// metrics as decided, `RECOMMENDED_PARALLELISM` included, are kept as they were); or the
/// veto. A vertex the chain dropped keeps its current parallelism.
fn execute<'t>(
    ctx: &ScalerContext<'_>,
    topology: &'t Topology,
    evaluation: &Evaluation,
    summaries: BTreeMap<Arc<str>, ScalingSummary>,
) -> Result<Executed<'t>, Vetoed> {
    let input = ChainInput {
        job: ctx.job,
        graph: topology,
        topology: Arc::clone(ctx.topology.get_or_init(|| Arc::new(topology.to_sdk()))),
        now_ms: ctx.now_ms,
        restart_time_ms: u64::try_from(ctx.restart_time.as_millis()).unwrap_or(u64::MAX),
        vertex_max_parallelism: ctx.opts.vertex_max_parallelism,
    };
    let executed = run_chain(&input, &ctx.custom.executors, &summaries)?;
    let mut changes = Vec::with_capacity(executed.len());
    let mut kept = BTreeMap::new();
    let mut summaries = summaries;
    for (id, new) in executed {
        let Some((index, vertex)) = topology
            .index
            .get(&id)
            .and_then(|&i| Some((i, topology.vertices.get(i)?)))
        else {
            continue;
        };
        // A vertex the chain added keeps its evaluated metrics as its summary's.
        let summary = match summaries.remove(&id) {
            Some(mut s) => {
                s.new_parallelism = new;
                s
            }
            None => ScalingSummary {
                current_parallelism: vertex.parallelism,
                new_parallelism: new,
                metrics: evaluation
                    .vertices
                    .values
                    .get(index)
                    .cloned()
                    .unwrap_or_default(),
            },
        };
        changes.push((index, vertex, new));
        kept.insert(id, summary);
    }
    Ok((changes, kept))
}

/// Every evaluated vertex's decision, in the graph's order, into `outcome`; returns the
/// vertices that ask for a change with their new parallelism, and whether any of them is
/// outside its band.
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
) -> (Vec<Change<'t>>, bool) {
    // The history is looked up once per vertex, for both halves of its decision.
    let JobScalingState {
        scaling_history,
        delayed_scale_down,
        ..
    } = state;
    let histories = histories_by_index(topology, &scaling_history.vertices);
    // Pending scale-downs are kept by this graph's indices from here on.
    delayed_scale_down.bind(&topology.index);
    let mut prepared = Vec::with_capacity(topology.vertices.len());
    let mut requests = Vec::with_capacity(topology.vertices.len());
    for (index, vertex) in topology.vertices.iter().enumerate() {
        let Some(metrics) = evaluation.vertices.values.get(index) else {
            continue;
        };
        let pending = (!excluded(ctx, vertex, cycle_excluded)).then(|| {
            let history = histories.get(index).copied().flatten();
            let pending = prepare_scale_target(ctx, vertex, metrics, history, &mut requests);
            (pending, history)
        });
        prepared.push((index, vertex, pending));
    }
    let mut answers = align_targets(ctx, requests);
    let mut changes = Vec::with_capacity(prepared.len());
    let mut any_outside = false;
    for (index, vertex, pending) in prepared {
        let Some(metrics) = evaluation.vertices.values.get_mut(index) else {
            continue;
        };
        // The record is built in place in the outcome, and the decision fills it in there.
        outcome
            .vertices
            .push(VertexDecision::blank(vertex, pending.is_none()));
        let Some(decision) = outcome.vertices.last_mut() else {
            continue;
        };
        let Some((pending, history)) = pending else {
            decision.reason = Reason::text(if vertex.finished {
                "finished; not scaled"
            } else if cycle_excluded.contains(&*vertex.id) {
                "no finite busy time; not scaled in this cycle"
            } else {
                "listed in vertex.exclude.ids; not scaled"
            });
            continue;
        };
        let aligned = if pending.asks() { answers.next() } else { None };
        let sink = DecisionSink {
            decision,
            events: &mut outcome.events,
            delayed: delayed_scale_down,
            index,
        };
        let change = finish_scale_target(ctx, vertex, metrics, history, pending, aligned, sink);
        if let ParallelismChange::Change { new, outside } = change {
            any_outside |= outside;
            changes.push((index, vertex, new));
        }
    }
    (changes, any_outside)
}

/// Each vertex's scaling history (the entry of its id), by the graph's index. The history is
/// kept in id order and the graph knows its vertices in id order, so one walk along both finds
/// them all; searching the history for each vertex compared ids several times per vertex, every
/// cycle.
fn histories_by_index<'h, K: Borrow<str>>(
    topology: &Topology,
    history: &'h BTreeMap<K, VertexHistory>,
) -> Vec<Option<&'h VertexHistory>> {
    let mut found = vec![None; topology.vertices.len()];
    let mut entries = history.iter().peekable();
    for &index in topology.index.in_id_order() {
        let Some(vertex) = topology.vertices.get(index) else {
            continue;
        };
        while let Some(&(id, summaries)) = entries.peek() {
            match id.borrow().cmp(&*vertex.id) {
                Ordering::Less => {
                    entries.next();
                }
                Ordering::Equal => {
                    if let Some(slot) = found.get_mut(index) {
                        *slot = Some(summaries);
                    }
                    entries.next();
                    break;
                }
                Ordering::Greater => break,
            }
        }
        if entries.peek().is_none() {
            break;
        }
    }
    found
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
    changes: &[Change<'_>],
    summaries: BTreeMap<Arc<str>, ScalingSummary>,
    state: &mut JobScalingState,
    outcome: &mut CycleOutcome,
) {
    state.scaling_history.add(now_ms, &summaries);
    state.scaling_tracking.add(now_ms);
    // Every change has its summary (its vertex was evaluated): the new parallelism by the
    // graph's index, without searching the summaries by id for every vertex.
    let mut new_by_index = vec![None; topology.vertices.len()];
    for &(index, _, new) in changes {
        if let Some(slot) = new_by_index.get_mut(index) {
            *slot = Some(new);
        }
    }
    // In id order, as the map keeps them.
    let decided = topology.index.in_id_order().iter().filter_map(|&i| {
        let v = topology.vertices.get(i)?;
        evaluation.vertices.values.get(i)?;
        let p = new_by_index
            .get(i)
            .copied()
            .flatten()
            .unwrap_or(v.parallelism);
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
    use crate::scaling::metrics::VertexEvaluation;
    use crate::scaling::topology::VertexIds;

    fn topology(ids: &[&str]) -> Topology {
        let ids: Vec<Arc<str>> = ids.iter().map(|&id| Arc::from(id)).collect();
        let vertices = ids
            .iter()
            .map(|id| VertexInfo {
                id: Arc::clone(id),
                name: Arc::clone(id),
                parallelism: 1,
                max_parallelism: 128,
                source_partitions: 0,
                finished: false,
                inputs: vec![],
                input_strategies: Arc::from([]),
                outputs: vec![],
            })
            .collect();
        Topology {
            vertices,
            index: Arc::new(VertexIds::new(ids)),
        }
    }

    #[test]
    fn histories_by_index_are_those_of_the_ids() {
        let graph = topology(&["m", "b", "zz", "a", "ba", "c"]);
        let summary = |p: u32| {
            VertexHistory::from([(
                7,
                ScalingSummary {
                    current_parallelism: p,
                    new_parallelism: p + 1,
                    metrics: VertexEvaluation::new(),
                },
            )])
        };
        // Histories of some graph vertices, and of ids the graph does not have (before, between
        // and after its ids).
        for kept in [
            vec![],
            vec!["a"],
            vec!["zz"],
            vec!["0", "b", "bb", "m", "zzz"],
            vec!["a", "b", "ba", "c", "m", "zz"],
            vec!["x", "y"],
        ] {
            let history: BTreeMap<String, _> = kept
                .iter()
                .enumerate()
                .map(|(p, id)| (id.to_string(), summary(p as u32)))
                .collect();
            let found = histories_by_index(&graph, &history);
            assert_eq!(found.len(), graph.vertices.len());
            for (vertex, found) in graph.vertices.iter().zip(found) {
                assert_eq!(found, history.get(&*vertex.id), "{kept:?} {}", vertex.id);
            }
        }
    }

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
