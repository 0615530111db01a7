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

/// The samples of one vertex in time order (one map lookup per sample, shared by every rate
/// and average of the vertex).
type Series<'a> = Vec<(i64, &'a BTreeMap<ScalingMetric, f64>)>;

fn series<'a>(history: &'a MetricHistory, vertex: &str) -> Series<'a> {
    history
        .samples
        .iter()
        .filter_map(|(&at, s)| s.vertices.get(vertex).map(|m| (at, m)))
        .collect()
}

/// `1000 · (last − first) / max(Δt_ms, 1)` between the first and the last sample where the
/// metric is present and not NaN (infinities count); NaN with fewer than two such samples.
pub fn rate(history: &MetricHistory, vertex: &str, metric: ScalingMetric) -> f64 {
    series_rate(&series(history, vertex), metric)
}

fn series_rate(series: &Series<'_>, metric: ScalingMetric) -> f64 {
    let mut first: Option<(i64, f64)> = None;
    let mut last: Option<(i64, f64)> = None;
    for &(at, sample) in series {
        if let Some(&v) = sample.get(&metric) {
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
    series_average(&series(history, vertex), metric, min_observations)
}

fn series_average(series: &Series<'_>, metric: ScalingMetric, min_observations: i64) -> f64 {
    average_of(
        series.iter().filter_map(|(_, s)| s.get(&metric).copied()),
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
    series_average_or_rate(&series(history, vertex), metric, fallback)
}

fn series_average_or_rate(
    series: &Series<'_>,
    metric: ScalingMetric,
    fallback: ScalingMetric,
) -> f64 {
    let avg = series_average(series, metric, 1);
    if avg.is_finite() {
        avg
    } else {
        series_rate(series, fallback)
    }
}

/// The metric's value in the newest sample.
fn latest(history: &MetricHistory, vertex: &str, metric: ScalingMetric) -> Option<f64> {
    history.latest()?.vertex(vertex, metric)
}

/// True when some source's lag, in seconds of its input rate, exceeds
/// `backlog-processing.lag-threshold` (anchor §3.2).
#[cfg(test)]
pub(crate) fn is_processing_backlog(
    history: &MetricHistory,
    topology: &Topology,
    opts: &AutoscalerOptions,
) -> bool {
    let all: Vec<Series<'_>> = topology
        .vertices
        .iter()
        .map(|v| series(history, v.id))
        .collect();
    backlog_in(history, topology, &all, opts)
}

fn backlog_in(
    history: &MetricHistory,
    topology: &Topology,
    all: &[Series<'_>],
    opts: &AutoscalerOptions,
) -> bool {
    let threshold = whole_seconds(opts.backlog_processing_lag_threshold);
    topology
        .vertices
        .iter()
        .zip(all)
        .filter(|(v, _)| v.is_source())
        .any(|(v, s)| {
            let lag = latest(history, v.id, ScalingMetric::Lag).unwrap_or(0.0);
            let r = series_rate(s, ScalingMetric::NumRecordsIn);
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
    let all: Vec<Series<'_>> = topology
        .vertices
        .iter()
        .map(|v| series(history, v.id))
        .collect();
    let backlog = backlog_in(history, topology, &all, opts);
    let catch_up_secs = whole_seconds(opts.catch_up_duration);
    let mut evaluated: Vec<VertexEvaluation> = Vec::with_capacity(topology.vertices.len());

    for (index, vertex) in topology.vertices.iter().enumerate() {
        let id = vertex.id;
        let own = &all[index];
        let mut m = VertexEvaluation::new();
        let in_rate = series_rate(own, ScalingMetric::NumRecordsIn);
        let latest_lag = latest(history, id, ScalingMetric::Lag);

        if vertex.is_source() {
            let target = java_max(0.0, in_rate + series_rate(own, ScalingMetric::Lag));
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
                let ratio = output_ratio(&all, topology, u, index);
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
                series_rate(own, ScalingMetric::AccumulatedBusyTime)
                    / f64::from(vertex.parallelism),
                in_rate,
            ),
            BusyTimeAggregator::Max | BusyTimeAggregator::Min => (
                series_average(own, ScalingMetric::Load, 1) * 1000.0,
                series_average_or_rate(
                    own,
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
        let observed = series_average(
            own,
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
        .map(|(v, m)| (v.id.to_string(), m))
        .collect();
    Ok(Evaluation {
        vertices,
        global: evaluate_global(history),
        backlog,
    })
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
fn output_ratio(all: &[Series<'_>], topology: &Topology, u: usize, v: usize) -> f64 {
    let input_rate = series_rate(&all[u], ScalingMetric::NumRecordsIn);
    if input_rate > 0.0 {
        let edge = edge_rate(all, topology, u, v);
        if edge > 0.0 {
            return edge / input_rate;
        }
    }
    0.0
}

/// The records per second flowing along `u -> v`.
fn edge_rate(all: &[Series<'_>], topology: &Topology, u: usize, v: usize) -> f64 {
    let inputs = distinct_inputs(&topology.vertices[v]);
    if inputs.len() == 1 {
        return series_rate(&all[v], ScalingMetric::NumRecordsIn);
    }
    let mut other = 0.0;
    let mut usable = true;
    for &w in inputs.iter().filter(|&&w| w != u) {
        if distinct_output_count(topology, w) > 1 {
            usable = false;
            break;
        }
        other += series_rate(&all[w], ScalingMetric::NumRecordsOut);
        if other.is_nan() {
            usable = false;
            break;
        }
    }
    if usable {
        return series_rate(&all[v], ScalingMetric::NumRecordsIn) - other;
    }
    series_rate(&all[u], ScalingMetric::NumRecordsOut)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::metrics::CollectedMetrics;
    use crate::scaling::test_support::Job;

    fn history(points: &[(i64, Option<f64>)], metric: ScalingMetric) -> MetricHistory {
        let mut h = MetricHistory::default();
        for &(at, v) in points {
            let mut m = CollectedMetrics::default();
            let vm = m.vertices.entry("v".into()).or_default();
            if let Some(v) = v {
                vm.insert(metric, v);
            }
            h.samples.insert(at, m);
        }
        h
    }

    #[test]
    fn rate_uses_first_and_last_present_values() {
        let m = ScalingMetric::NumRecordsIn;
        let h = history(
            &[
                (0, Some(0.0)),
                (500, Some(f64::NAN)),
                (1000, Some(500.0)),
                (2000, None),
            ],
            m,
        );
        assert_eq!(rate(&h, "v", m), 500.0);
        // Fewer than two values.
        let h = history(&[(0, Some(1.0)), (1000, None)], m);
        assert!(rate(&h, "v", m).is_nan());
        // Same instant twice is impossible in a map; one ms apart still divides by 1.
        let h = history(&[(0, Some(1.0)), (1, Some(3.0))], m);
        assert_eq!(rate(&h, "v", m), 2000.0);
        // Infinities count.
        let h = history(&[(0, Some(1.0)), (10, Some(f64::INFINITY))], m);
        assert_eq!(rate(&h, "v", m), f64::INFINITY);
        assert!(rate(&h, "other", m).is_nan());
    }

    #[test]
    fn average_skips_nan_and_infinity() {
        let m = ScalingMetric::Load;
        let h = history(
            &[
                (0, Some(0.5)),
                (1, Some(f64::NAN)),
                (2, Some(f64::INFINITY)),
                (3, Some(0.7)),
            ],
            m,
        );
        assert!((average(&h, "v", m, 1) - 0.6).abs() < 1e-12);
        assert!(average(&h, "v", m, 3).is_nan());
        let h = history(&[(0, Some(f64::INFINITY)), (1, Some(f64::NAN))], m);
        assert_eq!(average(&h, "v", m, 1), f64::INFINITY);
        let h = history(&[(0, None)], m);
        assert!(average(&h, "v", m, 1).is_nan());
        // avgOrRate falls back to the rate when the average is not finite.
        let mut h = history(&[(0, Some(f64::INFINITY)), (1000, Some(f64::INFINITY))], m);
        for (i, (_, s)) in h.samples.iter_mut().enumerate() {
            s.vertices
                .get_mut("v")
                .unwrap()
                .insert(ScalingMetric::NumRecordsIn, 100.0 * i as f64);
        }
        assert_eq!(
            average_or_rate(&h, "v", m, ScalingMetric::NumRecordsIn),
            100.0
        );
    }

    fn evaluate_two_samples(
        a: &Job,
        b: &Job,
        opts: &AutoscalerOptions,
    ) -> (Evaluation, MetricHistory) {
        let t = Topology::from_observation(&a.obs).unwrap();
        let mut h = MetricHistory::default();
        for (at, j) in [(0, a), (1000, b)] {
            let s = crate::scaling::metrics::compute_sample(&j.obs, &t, opts, &h).unwrap();
            h.samples.insert(at, s.metrics);
        }
        (evaluate(&h, &t, opts, Duration::ZERO).unwrap(), h)
    }

    #[test]
    fn join_splits_rates_by_output_records() {
        // Two sources into a join: the join's input is attributed per edge with the other
        // inputs' output rates.
        let base = Job::new()
            .vertex("a", 1, 128)
            .vertex("b", 1, 128)
            .vertex("join", 1, 128)
            .edge("a", "join", "HASH")
            .edge("b", "join", "HASH");
        let mut j0 = base.clone();
        j0.source("a", 500.0, 0.0, 0.0, 100.0);
        j0.source("b", 500.0, 0.0, 0.0, 300.0);
        j0.operator("join", 500.0, 0.0, 0.0, 400.0);
        let mut j1 = base.clone();
        j1.source("a", 500.0, 100.0, 0.0, 100.0);
        j1.source("b", 500.0, 300.0, 0.0, 300.0);
        j1.operator("join", 500.0, 400.0, 0.0, 400.0);
        let opts = AutoscalerOptions::default();
        let (e, _) = evaluate_two_samples(&j0, &j1, &opts);
        // a -> join: 400 - out(b) = 100 => ratio 1; b -> join: 400 - 100 = 300 => ratio 1.
        assert_eq!(
            e.vertices["join"][&ScalingMetric::TargetDataRate].average,
            400.0
        );
        assert_eq!(
            e.vertices["a"][&ScalingMetric::TargetDataRate].average,
            100.0
        );
        // TPR = 400 / 0.5.
        assert_eq!(
            e.vertices["join"][&ScalingMetric::TrueProcessingRate].average,
            800.0
        );
        assert!(!e.backlog);
        // Default band [target / 1.0, target / 0.4 + restart], restart 0 here.
        assert_eq!(
            e.vertices["join"][&ScalingMetric::ScaleUpRateThreshold].current,
            400.0
        );
        assert_eq!(
            e.vertices["join"][&ScalingMetric::ScaleDownRateThreshold].current,
            1000.0
        );
    }

    #[test]
    fn backlog_and_catch_up() {
        let base = Job::new().vertex("s", 1, 128);
        let mut j0 = base.clone();
        j0.source("s", 500.0, 0.0, 90_000.0, 100.0);
        let mut j1 = base.clone();
        j1.source("s", 500.0, 100.0, 90_000.0, 100.0);
        let opts = AutoscalerOptions::default();
        let (e, h) = evaluate_two_samples(&j0, &j1, &opts);
        let t = Topology::from_observation(&j0.obs).unwrap();
        // 90000 / 100 = 900 s > 300 s.
        assert!(e.backlog);
        assert!(is_processing_backlog(&h, &t, &opts));
        let m = &e.vertices["s"];
        assert_eq!(m[&ScalingMetric::CatchUpDataRate].current, 50.0);
        assert_eq!(m[&ScalingMetric::Lag].current, 90_000.0);
        // Backlog: up threshold at u = 1 without restart, down threshold +inf.
        assert_eq!(m[&ScalingMetric::ScaleUpRateThreshold].current, 150.0);
        assert_eq!(
            m[&ScalingMetric::ScaleDownRateThreshold].current,
            f64::INFINITY
        );
        // Catch-up disabled: no catch-up rate.
        let opts = AutoscalerOptions {
            catch_up_duration: Duration::ZERO,
            ..opts
        };
        let (e, _) = evaluate_two_samples(&j0, &j1, &opts);
        assert_eq!(
            e.vertices["s"][&ScalingMetric::CatchUpDataRate].current,
            0.0
        );
    }

    #[test]
    fn restart_term_only_in_the_scale_down_threshold_and_capacity() {
        let opts = AutoscalerOptions::default();
        let mut m = VertexEvaluation::new();
        m.insert(
            ScalingMetric::TargetDataRate,
            EvaluatedScalingMetric::avg(700.0),
        );
        m.insert(
            ScalingMetric::CatchUpDataRate,
            EvaluatedScalingMetric::of(10.0),
        );
        let restart = Duration::from_secs(300);
        // 10 + 700 * 300 / 1800 + 700 / 0.7 = 10 + 116.67 + 1000 = 1126.67 -> 1127.
        assert_eq!(capacity(&m, 0.7, true, restart, &opts), 1127.0);
        assert_eq!(capacity(&m, 0.7, false, restart, &opts), 1010.0);
        assert_eq!(capacity(&m, 0.0, true, restart, &opts), f64::INFINITY);
        assert_eq!(capacity(&m, 2.0, false, restart, &opts), 710.0);
        m.insert(
            ScalingMetric::TargetDataRate,
            EvaluatedScalingMetric::avg(f64::NAN),
        );
        assert!(capacity(&m, 0.7, true, restart, &opts).is_nan());
    }

    #[test]
    fn observed_tpr_replaces_a_much_higher_busy_time_tpr() {
        // Source with lag (catching up): observed TPR = r / (1 - bp) each sample.
        let base = Job::new().vertex("s", 1, 128);
        let mut j0 = base.clone();
        j0.source("s", 100.0, 0.0, 100_000.0, 100.0);
        let mut j1 = base.clone();
        j1.source("s", 100.0, 100.0, 100_000.0, 100.0);
        let opts = AutoscalerOptions::default();
        let (e, _) = evaluate_two_samples(&j0, &j1, &opts);
        // busy TPR = 100 / 0.1 = 1000 > 100 * 1.15 => observed (100, backpressure 0).
        assert_eq!(
            e.vertices["s"][&ScalingMetric::TrueProcessingRate].average,
            100.0
        );
        // Switch threshold high enough: busy-time TPR stays.
        let opts = AutoscalerOptions {
            observed_tpr_switch_threshold: 10.0,
            ..opts
        };
        let (e, _) = evaluate_two_samples(&j0, &j1, &opts);
        assert_eq!(
            e.vertices["s"][&ScalingMetric::TrueProcessingRate].average,
            1000.0
        );
    }

    #[test]
    fn avg_aggregator_uses_accumulated_busy_time() {
        let base = Job::new()
            .vertex("s", 2, 128)
            .vertex("o", 2, 128)
            .edge("s", "o", "REBALANCE");
        let mut j0 = base.clone();
        j0.source("s", 100.0, 0.0, 0.0, 100.0);
        j0.operator("o", 100.0, 0.0, 0.0, 100.0);
        let mut j1 = base.clone();
        j1.source("s", 100.0, 100.0, 0.0, 100.0);
        j1.operator("o", 100.0, 100.0, 0.0, 100.0);
        j1.obs
            .metrics
            .get_mut("o")
            .unwrap()
            .io
            .accumulated_busy_time = 500.0;
        let opts = AutoscalerOptions {
            busy_time_aggregator: BusyTimeAggregator::Avg,
            ..AutoscalerOptions::default()
        };
        let (e, _) = evaluate_two_samples(&j0, &j1, &opts);
        // B = rate(accumulated busy) / parallelism = 500 / 2 = 250 ms/s; TPR = 100 / 0.25.
        assert_eq!(e.vertices["o"][&ScalingMetric::Load].average, 0.25);
        assert_eq!(
            e.vertices["o"][&ScalingMetric::TrueProcessingRate].average,
            400.0
        );
    }

    #[test]
    fn backlog_threshold_is_the_default_five_minutes_anchor_note_10_12() {
        let opts = AutoscalerOptions::default();
        for (lag, expected) in [(37_500.0, true), (27_000.0, false)] {
            let base = Job::new().vertex("s", 1, 128);
            let mut j0 = base.clone();
            j0.source("s", 500.0, 0.0, lag, 100.0);
            let mut j1 = base.clone();
            j1.source("s", 500.0, 100.0, lag, 100.0);
            // 375 s and 270 s of input at 100 records/s.
            let (e, _) = evaluate_two_samples(&j0, &j1, &opts);
            assert_eq!(e.backlog, expected, "lag {lag}");
        }
    }
}
