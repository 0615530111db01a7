//! Scaling execution (anchor §5.1 steps 1–6 and 10, §5.2, §5.3): memory pressure, the
//! per-vertex summaries, the "at least one vertex outside its band" rule, advisor mode and
//! excluded periods, and applying a decision.
//!
//! Not implemented (the anchor's steps 7–9): memory tuning, cluster-resource and quota checks,
//! custom scaling executors. A decided operation is handed to the job's executor with cooldown
//! as [`super::CycleOutcome::decision`].

use std::collections::{BTreeMap, BTreeSet};

use crate::events::{Event, EventReason, Severity};

use super::cycle::{CycleOutcome, CycleStage, VertexDecision};
use super::evaluation::Evaluation;
use super::history::ScalingSummary;
use super::metric::{EvaluatedScalingMetric, ScalingMetric};
use super::numeric::{java_double_to_string, java_format_fixed};
use super::options::{EXCLUDED_PERIODS_KEY, SCALING_ENABLED_KEY};
use super::state::JobScalingState;
use super::topology::Topology;
use super::vertex_scaler::{ParallelismChange, ScalerContext, compute_scale_target};

/// Header of an executed operation's scaling report.
pub const REPORT_HEADER_ENABLED: &str = "Scaling execution enabled, begin scaling vertices:";
/// Header of a report when scaling is disabled or in an excluded period.
pub const REPORT_HEADER_DISABLED: &str = "Scaling execution disabled by config ";

/// Runs the executor part of a cycle on an evaluated, fully collected window.
pub(crate) fn execute(
    ctx: &ScalerContext<'_>,
    topology: &Topology,
    evaluation: &mut Evaluation,
    cycle_excluded: &BTreeSet<String>,
    state: &mut JobScalingState,
    outcome: &mut CycleOutcome,
) -> CycleStage {
    let opts = ctx.opts;
    if let Some(event) = memory_pressure(ctx, evaluation) {
        outcome.events.push(event);
        return CycleStage::MemoryPressure;
    }

    let mut summaries: BTreeMap<String, ScalingSummary> = BTreeMap::new();
    let mut any_outside = false;
    for vertex in &topology.vertices {
        let Some(metrics) = evaluation.vertices.get_mut(vertex.id) else {
            continue;
        };
        let excluded = opts.vertex_exclude_ids.iter().any(|e| e == vertex.id)
            || cycle_excluded.contains(vertex.id);
        let mut decision = VertexDecision {
            vertex: vertex.id.to_string(),
            name: vertex.name.to_string(),
            current: vertex.parallelism,
            target: None,
            aligned: None,
            proposed: None,
            mode: None,
            outside_band: false,
            excluded,
            reason: String::new(),
            explanation: Vec::new(),
        };
        if excluded {
            decision.reason = if vertex.finished {
                "finished; not scaled".into()
            } else if cycle_excluded.contains(vertex.id) {
                "no finite busy time; not scaled in this cycle".into()
            } else {
                "listed in vertex.exclude.ids; not scaled".into()
            };
            outcome.vertices.push(decision);
            continue;
        }
        let result = compute_scale_target(
            ctx,
            vertex,
            metrics,
            state.scaling_history.of(vertex.id),
            &mut state.delayed_scale_down,
        );
        decision.target = result.target;
        decision.aligned = result.aligned;
        decision.mode = result.mode;
        decision.outside_band = result.outside;
        decision.reason = result.reason;
        decision.explanation = result.explanation;
        outcome.events.extend(result.events);
        if let ParallelismChange::Change { new, outside } = result.change {
            decision.proposed = Some(new);
            any_outside |= outside;
            summaries.insert(
                vertex.id.to_string(),
                ScalingSummary {
                    current_parallelism: vertex.parallelism,
                    new_parallelism: new,
                    metrics: metrics.clone(),
                },
            );
        }
        outcome.vertices.push(decision);
    }
    if !any_outside {
        // All changed vertices are within their band: nothing to do ("all within target").
        return CycleStage::WithinBounds;
    }

    for (vertex, summary) in &summaries {
        if let Some(m) = evaluation.vertices.get_mut(vertex) {
            m.insert(
                ScalingMetric::RecommendedParallelism,
                EvaluatedScalingMetric::of(f64::from(summary.new_parallelism)),
            );
        }
    }

    let blocked = if !opts.scaling_enabled {
        Some(format!("job.autoscaler.{SCALING_ENABLED_KEY}:false"))
    } else if opts.excluded_periods.is_excluded(ctx.now_ms) {
        Some(format!(
            "job.autoscaler.{EXCLUDED_PERIODS_KEY}:{}",
            opts.excluded_periods
        ))
    } else {
        None
    };
    if let Some(reason) = blocked {
        let header = format!("{REPORT_HEADER_DISABLED}{reason}, recommended parallelism change:");
        outcome
            .events
            .push(scaling_report(ctx.job, &header, &summaries));
        return CycleStage::Blocked(reason);
    }

    outcome
        .events
        .push(scaling_report(ctx.job, REPORT_HEADER_ENABLED, &summaries));
    state.scaling_history.add(ctx.now_ms, &summaries);
    state.scaling_tracking.add(ctx.now_ms);
    let overrides: BTreeMap<String, u32> = topology
        .vertices
        .iter()
        .filter(|v| evaluation.vertices.contains_key(v.id))
        .map(|v| {
            let p = summaries
                .get(v.id)
                .map_or(v.parallelism, |s| s.new_parallelism);
            (v.id.to_string(), p)
        })
        .collect();
    state.parallelism_overrides = overrides.clone();
    state.delayed_scale_down.clear_all();
    outcome.decision = Some(overrides);
    outcome.summaries = summaries;
    CycleStage::Scaled
}

/// GC or heap pressure above the thresholds blocks scaling (anchor §5.1 step 2).
fn memory_pressure(ctx: &ScalerContext<'_>, evaluation: &Evaluation) -> Option<Event> {
    let get = |m: ScalingMetric| evaluation.global.get(&m).copied();
    let gc = get(ScalingMetric::GcPressure).map_or(f64::NAN, |m| m.current);
    let heap = get(ScalingMetric::HeapMaxUsageRatio).map_or(f64::NAN, |m| m.average);
    let (key, message) = if gc > ctx.opts.gc_pressure_threshold {
        (
            "gcPressure",
            format!(
                "GC Pressure {} is above the allowed limit for scaling operations. Please adjust the available memory manually.",
                java_double_to_string(gc)
            ),
        )
    } else if heap > ctx.opts.heap_usage_threshold {
        (
            "heapUsage",
            format!(
                "Heap Usage {} is above the allowed limit for scaling operations. Please adjust the available memory manually.",
                java_double_to_string(heap)
            ),
        )
    } else {
        return None;
    };
    Some(
        Event::new(EventReason::MemoryPressure, Severity::Normal, message)
            .job(ctx.job)
            .key(key),
    )
}

/// The anchor's scaling report: the header followed by one entry per vertex (no separator).
pub(crate) fn scaling_report(
    job: &str,
    header: &str,
    summaries: &BTreeMap<String, ScalingSummary>,
) -> Event {
    let mut message = header.to_string();
    let get = |s: &ScalingSummary, m: ScalingMetric| {
        s.metrics
            .get(&m)
            .copied()
            .unwrap_or(EvaluatedScalingMetric {
                current: f64::NAN,
                average: f64::NAN,
            })
    };
    for (vertex, s) in summaries {
        message.push_str(&format!(
            "{{ Vertex ID {} | Parallelism {} -> {} | Processing capacity {} -> {} | Target data rate {}}}",
            vertex,
            s.current_parallelism,
            s.new_parallelism,
            java_format_fixed(get(s, ScalingMetric::TrueProcessingRate).average, 2),
            java_format_fixed(get(s, ScalingMetric::ExpectedProcessingRate).current, 2),
            java_format_fixed(get(s, ScalingMetric::TargetDataRate).average, 2),
        ));
    }
    Event::new(EventReason::ScalingReport, Severity::Normal, message).job(job)
}
