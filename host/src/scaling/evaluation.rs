//! Evaluation of the metric window (anchor §3): rates and averages over the window, processing
//! backlog, per-vertex target/catch-up/true-processing rates along the graph, and the
//! utilization band as processing-rate thresholds.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::error::CycleError;
use super::metric::{EvaluatedScalingMetric, ScalingMetric};
use super::numeric::{java_max, round_half_up};
use super::options::{AutoscalerOptions, BusyTimeAggregator, whole_seconds};
use super::topology::{Topology, VertexInfo};
use super::window::MetricHistory;

/// Evaluated metrics of one vertex, by metric.
pub type VertexEvaluation = BTreeMap<ScalingMetric, EvaluatedScalingMetric>;

/// The result of evaluating one job's window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Evaluation {
    /// Per vertex id.
    pub vertices: BTreeMap<String, VertexEvaluation>,
    /// Job-wide (GC pressure, heap usage, slots).
    pub global: BTreeMap<ScalingMetric, EvaluatedScalingMetric>,
    /// True when some source processes a backlog (anchor §3.2).
    pub backlog: bool,
}

/// `1000 · (last − first) / max(Δt_ms, 1)` between the first and the last sample where the
/// metric is present and not NaN (infinities count); NaN with fewer than two such samples.
pub fn rate(history: &MetricHistory, vertex: &str, metric: ScalingMetric) -> f64 {
    let mut first: Option<(i64, f64)> = None;
    let mut last: Option<(i64, f64)> = None;
    for (&at, sample) in &history.samples {
        if let Some(v) = sample.vertex(vertex, metric) {
            if v.is_nan() {
                continue;
            }
            if first.is_none() {
                first = Some((at, v));
            } else {
                last = Some((at, v));
            }
        }
    }
    match (first, last) {
        (Some((t0, v0)), Some((t1, v1))) => 1000.0 * (v1 - v0) / ((t1 - t0).max(1) as f64),
        _ => f64::NAN,
    }
}

/// Mean of the finite values of a metric over the window. No finite value: +∞ if an infinite
/// one was seen, else NaN; fewer than `min_observations` finite values: NaN.
pub fn average(
    history: &MetricHistory,
    vertex: &str,
    metric: ScalingMetric,
    min_observations: i64,
) -> f64 {
    average_of(
        history
            .samples
            .values()
            .filter_map(|s| s.vertex(vertex, metric)),
        min_observations,
    )
}

fn average_of(values: impl Iterator<Item = f64>, min_observations: i64) -> f64 {
    let mut sum = 0.0;
    let mut n: i64 = 0;
    let mut infinite = false;
    for v in values {
        if v.is_nan() {
            continue;
        }
        if v.is_infinite() {
            infinite = true;
            continue;
        }
        sum += v;
        n += 1;
    }
    if n == 0 {
        return if infinite { f64::INFINITY } else { f64::NAN };
    }
    if n < min_observations {
        return f64::NAN;
    }
    sum / n as f64
}

/// `average(metric)` unless it is NaN or infinite, then `rate(fallback)`.
pub fn average_or_rate(
    history: &MetricHistory,
    vertex: &str,
    metric: ScalingMetric,
    fallback: ScalingMetric,
) -> f64 {
    let avg = average(history, vertex, metric, 1);
    if avg.is_finite() {
        avg
    } else {
        rate(history, vertex, fallback)
    }
}

/// The metric's value in the newest sample.
fn latest(history: &MetricHistory, vertex: &str, metric: ScalingMetric) -> Option<f64> {
    history.latest()?.vertex(vertex, metric)
}

/// True when some source's lag, in seconds of its input rate, exceeds
/// `backlog-processing.lag-threshold` (anchor §3.2).
pub(crate) fn is_processing_backlog(
    history: &MetricHistory,
    topology: &Topology,
    opts: &AutoscalerOptions,
) -> bool {
    let threshold = whole_seconds(opts.backlog_processing_lag_threshold);
    topology.vertices.iter().filter(|v| v.is_source()).any(|v| {
        let lag = latest(history, &v.id, ScalingMetric::Lag).unwrap_or(0.0);
        let r = rate(history, &v.id, ScalingMetric::NumRecordsIn);
        !r.is_nan() && lag / r > threshold
    })
}

/// The processing capacity a vertex needs at utilization `u` (anchor §3.4): catch-up rate,
/// restart catch-up (optional) and target rate / u, rounded half up.
pub(crate) fn capacity(
    metrics: &VertexEvaluation,
    utilization: f64,
    with_restart: bool,
    restart_time: Duration,
    opts: &AutoscalerOptions,
) -> f64 {
    let catch_up = metrics
        .get(&ScalingMetric::CatchUpDataRate)
        .map_or(f64::NAN, |m| m.current);
    if catch_up.is_nan() {
        return f64::NAN;
    }
    let u = utilization.clamp(0.0, 1.0);
    let target = metrics
        .get(&ScalingMetric::TargetDataRate)
        .map_or(f64::NAN, |m| m.average);
    if target.is_nan() {
        return f64::NAN;
    }
    if u == 0.0 {
        return f64::INFINITY;
    }
    let catch_up_secs = whole_seconds(opts.catch_up_duration);
    let restart_rate = if !with_restart || catch_up_secs == 0.0 {
        0.0
    } else {
        target * whole_seconds(restart_time) / catch_up_secs
    };
    round_half_up(catch_up + restart_rate + target / u)
}

/// Evaluates every vertex in topological order (anchor §3.3–§3.4) and the global metrics.
pub(crate) fn evaluate(
    history: &MetricHistory,
    topology: &Topology,
    opts: &AutoscalerOptions,
    restart_time: Duration,
) -> Result<Evaluation, CycleError> {
    let backlog = is_processing_backlog(history, topology, opts);
    let catch_up_secs = whole_seconds(opts.catch_up_duration);
    let mut evaluated: Vec<VertexEvaluation> = Vec::with_capacity(topology.vertices.len());

    for vertex in &topology.vertices {
        let id = vertex.id.as_str();
        let mut m = VertexEvaluation::new();
        let in_rate = rate(history, id, ScalingMetric::NumRecordsIn);
        let latest_lag = latest(history, id, ScalingMetric::Lag);

        if vertex.is_source() {
            let target = java_max(0.0, in_rate + rate(history, id, ScalingMetric::Lag));
            if target.is_nan() {
                return Err(CycleError::NoIngestionRate { vertex: id.into() });
            }
            m.insert(
                ScalingMetric::TargetDataRate,
                EvaluatedScalingMetric::avg(target),
            );
            let lag = latest_lag.unwrap_or(0.0);
            let catch_up = if catch_up_secs == 0.0 {
                0.0
            } else {
                lag / catch_up_secs
            };
            m.insert(
                ScalingMetric::CatchUpDataRate,
                EvaluatedScalingMetric::of(catch_up),
            );
        } else {
            let mut target = 0.0;
            let mut catch_up = 0.0;
            for u in distinct_inputs(vertex) {
                let ratio = output_ratio(history, topology, u, vertex_index(topology, id));
                let upstream = &evaluated[u];
                let up_target = upstream
                    .get(&ScalingMetric::TargetDataRate)
                    .map_or(f64::NAN, |x| x.average);
                let up_catch_up = upstream
                    .get(&ScalingMetric::CatchUpDataRate)
                    .map_or(f64::NAN, |x| x.current);
                target += up_target * ratio;
                catch_up += up_catch_up * ratio;
            }
            m.insert(
                ScalingMetric::TargetDataRate,
                EvaluatedScalingMetric::avg(target),
            );
            m.insert(
                ScalingMetric::CatchUpDataRate,
                EvaluatedScalingMetric::of(catch_up),
            );
        }

        let (busy_ms, input_rate) = match opts.busy_time_aggregator {
            BusyTimeAggregator::Avg => (
                rate(history, id, ScalingMetric::AccumulatedBusyTime)
                    / f64::from(vertex.parallelism),
                in_rate,
            ),
            BusyTimeAggregator::Max | BusyTimeAggregator::Min => (
                average(history, id, ScalingMetric::Load, 1) * 1000.0,
                average_or_rate(
                    history,
                    id,
                    ScalingMetric::NumRecordsInPerSecond,
                    ScalingMetric::NumRecordsIn,
                ),
            ),
        };
        let busy_tpr = if input_rate == 0.0 {
            f64::INFINITY
        } else {
            input_rate / (busy_ms / 1000.0)
        };
        let observed = average(
            history,
            id,
            ScalingMetric::ObservedTpr,
            opts.observed_tpr_min_observations,
        );
        let tpr = if !observed.is_nan()
            && (!busy_tpr.is_finite()
                || busy_tpr > observed * (1.0 + opts.observed_tpr_switch_threshold))
        {
            observed
        } else {
            busy_tpr
        };
        m.insert(
            ScalingMetric::TrueProcessingRate,
            EvaluatedScalingMetric::avg(tpr),
        );
        m.insert(
            ScalingMetric::Load,
            EvaluatedScalingMetric::avg(busy_ms / 1000.0),
        );
        if let Some(lag) = latest_lag {
            m.insert(ScalingMetric::Lag, EvaluatedScalingMetric::of(lag));
        }
        m.insert(
            ScalingMetric::Parallelism,
            EvaluatedScalingMetric::of(f64::from(vertex.parallelism)),
        );
        m.insert(
            ScalingMetric::MaxParallelism,
            EvaluatedScalingMetric::of(f64::from(vertex.max_parallelism)),
        );
        m.insert(
            ScalingMetric::NumSourcePartitions,
            EvaluatedScalingMetric::of(f64::from(vertex.source_partitions)),
        );

        let (up_u, low_u) = if backlog {
            (1.0, 0.0)
        } else {
            (opts.upper_utilization(), opts.lower_utilization())
        };
        let up = capacity(&m, up_u, false, restart_time, opts);
        let down = capacity(&m, low_u, true, restart_time, opts);
        m.insert(
            ScalingMetric::ScaleUpRateThreshold,
            EvaluatedScalingMetric::of(up),
        );
        m.insert(
            ScalingMetric::ScaleDownRateThreshold,
            EvaluatedScalingMetric::of(down),
        );
        evaluated.push(m);
    }

    let vertices = topology
        .vertices
        .iter()
        .zip(evaluated)
        .map(|(v, m)| (v.id.clone(), m))
        .collect();
    Ok(Evaluation {
        vertices,
        global: evaluate_global(history),
        backlog,
    })
}

fn vertex_index(topology: &Topology, id: &str) -> usize {
    topology.index.get(id).copied().unwrap_or(usize::MAX)
}

/// Inputs of a vertex without repetitions (an upstream vertex counts once, as in the anchor's
/// keyed maps), in edge order.
fn distinct_inputs(vertex: &VertexInfo) -> Vec<usize> {
    let mut seen = Vec::with_capacity(vertex.inputs.len());
    for &(u, _) in &vertex.inputs {
        if !seen.contains(&u) {
            seen.push(u);
        }
    }
    seen
}

fn distinct_output_count(topology: &Topology, w: usize) -> usize {
    let mut seen: Vec<usize> = Vec::new();
    for &o in &topology.vertices[w].outputs {
        if !seen.contains(&o) {
            seen.push(o);
        }
    }
    seen.len()
}

/// `ratio(u, v)`: the share of `u`'s input that reaches `v` (anchor §3.3).
fn output_ratio(history: &MetricHistory, topology: &Topology, u: usize, v: usize) -> f64 {
    let Some(from) = topology.vertices.get(u) else {
        return 0.0;
    };
    let input_rate = rate(history, &from.id, ScalingMetric::NumRecordsIn);
    if input_rate > 0.0 {
        let edge = edge_rate(history, topology, u, v);
        if edge > 0.0 {
            return edge / input_rate;
        }
    }
    0.0
}

/// The records per second flowing along `u -> v`.
fn edge_rate(history: &MetricHistory, topology: &Topology, u: usize, v: usize) -> f64 {
    let from = &topology.vertices[u];
    let Some(to) = topology.vertices.get(v) else {
        return rate(history, &from.id, ScalingMetric::NumRecordsOut);
    };
    let inputs = distinct_inputs(to);
    if inputs.len() == 1 {
        return rate(history, &to.id, ScalingMetric::NumRecordsIn);
    }
    let mut other = 0.0;
    let mut usable = true;
    for &w in inputs.iter().filter(|&&w| w != u) {
        if distinct_output_count(topology, w) > 1 {
            usable = false;
            break;
        }
        other += rate(
            history,
            &topology.vertices[w].id,
            ScalingMetric::NumRecordsOut,
        );
        if other.is_nan() {
            usable = false;
            break;
        }
    }
    if usable {
        return rate(history, &to.id, ScalingMetric::NumRecordsIn) - other;
    }
    rate(history, &from.id, ScalingMetric::NumRecordsOut)
}

/// Global evaluated metrics (anchor §3.6).
fn evaluate_global(history: &MetricHistory) -> BTreeMap<ScalingMetric, EvaluatedScalingMetric> {
    let latest = |m: ScalingMetric| {
        history
            .latest()
            .and_then(|s| s.global.get(&m).copied())
            .unwrap_or(f64::NAN)
    };
    let avg = |m: ScalingMetric| {
        average_of(
            history
                .samples
                .values()
                .filter_map(|s| s.global.get(&m).copied()),
            1,
        )
    };
    let mut out = BTreeMap::new();
    for m in [ScalingMetric::GcPressure, ScalingMetric::NumTaskSlotsUsed] {
        out.insert(m, EvaluatedScalingMetric::of(latest(m)));
    }
    for m in [
        ScalingMetric::HeapMaxUsageRatio,
        ScalingMetric::HeapMemoryUsed,
        ScalingMetric::ManagedMemoryUsed,
        ScalingMetric::MetaspaceMemoryUsed,
    ] {
        out.insert(m, EvaluatedScalingMetric::new(latest(m), avg(m)));
    }
    out
}
