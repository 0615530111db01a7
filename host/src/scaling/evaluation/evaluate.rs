//! Evaluation of the metric window (docs/decision-pipeline.md#evaluation): processing backlog, per-vertex
//! target/catch-up/true-processing rates along the graph, and the utilization band as
//! processing-rate thresholds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::capacity::capacity;
use super::global::evaluate_global;
use super::rates::{DataRates, Processing, downstream_rates, source_rates};
use super::vertices::EvaluatedVertices;
use crate::events::Event;
use crate::scaling::custom::merge::EvaluatorRun;
use crate::scaling::error::CycleError;
use crate::scaling::metrics::{
    EvaluatedScalingMetric, MetricHistory, ScalingMetric, VertexEvaluation, WindowSeries,
    series_latest, series_rate,
};
use crate::scaling::options::{AutoscalerOptions, whole_seconds};
use crate::scaling::topology::{Topology, VertexInfo};

/// The result of evaluating one job's window.
#[derive(Debug, Clone, Default)]
pub(crate) struct Evaluation {
    /// Per vertex, in the topology's order.
    pub(crate) vertices: EvaluatedVertices,
    /// Job-wide (GC pressure, heap usage, slots).
    pub(crate) global: BTreeMap<ScalingMetric, EvaluatedScalingMetric>,
    /// True when some source processes a backlog (docs/decision-pipeline.md#backlog).
    pub(crate) backlog: bool,
    /// Events of the evaluation (faults of the job's custom evaluator).
    pub(crate) events: Vec<Event>,
}

/// True when some source's lag, in seconds of its input rate, exceeds
/// `backlog-processing.lag-threshold` (docs/decision-pipeline.md#backlog).
#[cfg(test)]
pub(crate) fn is_processing_backlog(
    history: &MetricHistory,
    topology: &Topology,
    opts: &AutoscalerOptions,
) -> bool {
    let window = WindowSeries::of(history, topology);
    let in_rates = input_rates(&window, topology);
    backlog_in(&window, topology, &in_rates, opts)
}

/// The records-in rate of every vertex over the window, by index: each is read for the vertex
/// itself and again by the output ratios of its inputs.
fn input_rates(window: &WindowSeries<'_>, topology: &Topology) -> Vec<f64> {
    (0..topology.vertices.len())
        .map(|index| series_rate(&window.series(index), ScalingMetric::NumRecordsIn))
        .collect()
}

fn backlog_in(
    window: &WindowSeries<'_>,
    topology: &Topology,
    in_rates: &[f64],
    opts: &AutoscalerOptions,
) -> bool {
    let threshold = whole_seconds(opts.backlog_processing_lag_threshold);
    topology
        .vertices
        .iter()
        .zip(in_rates)
        .enumerate()
        .filter(|(_, (v, _))| v.is_source())
        .any(|(index, (_, &r))| {
            let lag = series_latest(&window.series(index), ScalingMetric::Lag).unwrap_or(0.0);
            !r.is_nan() && lag / r > threshold
        })
}

/// Evaluates every vertex in topological order (docs/decision-pipeline.md#evaluation) and the global metrics.
///
/// With the job's custom evaluator (`custom`), each vertex's metrics are merged with its answer
/// right after the vertex's own evaluation and band (docs/plugin-kinds.md): the downstream
/// vertices then read the merged target and catch-up rates, and the band stays as computed.
pub(crate) fn evaluate(
    history: &MetricHistory,
    topology: &Topology,
    opts: &AutoscalerOptions,
    restart_time: Duration,
    mut custom: Option<&mut EvaluatorRun<'_>>,
) -> Result<Evaluation, CycleError> {
    let mut events = Vec::new();
    let window = WindowSeries::of(history, topology);
    let in_rates = input_rates(&window, topology);
    let backlog = backlog_in(&window, topology, &in_rates, opts);
    let mut evaluated: Vec<VertexEvaluation> = Vec::with_capacity(topology.vertices.len());
    for (index, vertex) in topology.vertices.iter().enumerate() {
        let own = window.series(index);
        let in_rate = in_rates[index];
        let latest_lag = series_latest(&own, ScalingMetric::Lag);
        let rates = if vertex.is_source() {
            source_rates(vertex, &own, in_rate, latest_lag, opts)?
        } else {
            downstream_rates(&window, topology, &in_rates, &evaluated, index)
        };
        let processing = Processing::of(vertex, &own, in_rate, opts);
        // Written in place: returning the map and pushing it would copy it twice.
        evaluated.push(VertexEvaluation::new());
        if let Some(m) = evaluated.last_mut() {
            insert_vertex_metrics(m, vertex, rates, processing, latest_lag);
            insert_thresholds(m, backlog, restart_time, opts);
            if let Some(run) = custom.as_deref_mut() {
                events.extend(run.evaluate_vertex(&vertex.id, &vertex.name, m, backlog));
            }
        }
    }
    Ok(Evaluation {
        vertices: EvaluatedVertices::new(Arc::clone(&topology.index), evaluated),
        global: evaluate_global(history),
        backlog,
        events,
    })
}

/// The evaluated metrics of one vertex before its band, written into the empty map `m`.
fn insert_vertex_metrics(
    m: &mut VertexEvaluation,
    vertex: &VertexInfo,
    rates: DataRates,
    processing: Processing,
    latest_lag: Option<f64>,
) {
    let of_count = |count: u32| EvaluatedScalingMetric::of_whole(f64::from(count));
    m.insert(
        ScalingMetric::Load,
        EvaluatedScalingMetric::avg(processing.busy_ms / 1000.0),
    );
    if let Some(lag) = latest_lag {
        m.insert(ScalingMetric::Lag, EvaluatedScalingMetric::of(lag));
    }
    m.insert(
        ScalingMetric::TrueProcessingRate,
        EvaluatedScalingMetric::avg(processing.true_processing_rate),
    );
    m.insert(
        ScalingMetric::TargetDataRate,
        EvaluatedScalingMetric::avg(rates.target),
    );
    m.insert(
        ScalingMetric::CatchUpDataRate,
        EvaluatedScalingMetric::of(rates.catch_up),
    );
    m.insert(ScalingMetric::Parallelism, of_count(vertex.parallelism));
    m.insert(
        ScalingMetric::MaxParallelism,
        of_count(vertex.max_parallelism),
    );
    m.insert(
        ScalingMetric::NumSourcePartitions,
        of_count(vertex.source_partitions),
    );
}

/// The utilization band as processing-rate thresholds: the capacity needed at the upper
/// utilization (without the restart term) and at the lower one (with it); `[1, 0]` while some
/// source processes a backlog.
fn insert_thresholds(
    m: &mut VertexEvaluation,
    backlog: bool,
    restart_time: Duration,
    opts: &AutoscalerOptions,
) {
    let (up_u, low_u) = if backlog {
        (1.0, 0.0)
    } else {
        (opts.upper_utilization(), opts.lower_utilization())
    };
    // A capacity is rounded to a whole rate, or not finite: no further rounding.
    let up = capacity(m, up_u, false, restart_time, opts);
    let down = capacity(m, low_u, true, restart_time, opts);
    m.insert(
        ScalingMetric::ScaleUpRateThreshold,
        EvaluatedScalingMetric::of_whole(up),
    );
    m.insert(
        ScalingMetric::ScaleDownRateThreshold,
        EvaluatedScalingMetric::of_whole(down),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::options::BusyTimeAggregator;
    use crate::scaling::testing::Job;

    fn evaluate_two_samples(
        a: &Job,
        b: &Job,
        opts: &AutoscalerOptions,
    ) -> (Evaluation, MetricHistory) {
        let t = Topology::from_observation(&a.obs).unwrap();
        let mut h = MetricHistory::default();
        for (at, j) in [(0, a), (1000, b)] {
            let s =
                crate::scaling::metrics::compute_sample(&j.obs, &t, opts, &h, Vec::new()).unwrap();
            h.samples.insert(at, s.metrics);
        }
        (evaluate(&h, &t, opts, Duration::ZERO, None).unwrap(), h)
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
    fn backlog_threshold_is_the_default_five_minutes() {
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
