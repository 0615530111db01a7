//! One sample of scaling metrics per cycle, derived from an observation's Flink-named metrics
//! (docs/decision-pipeline.md#sample).
//!
//! Differences from the REST collector, both because an observation is already a snapshot:
//! TaskManager/JobManager metrics are optional (missing ones are simply absent, so memory
//! pressure never triggers on them), and `Source__*.numRecordsOutPerSecond` is never used,
//! because the Flink autoscaler's collector never requests it.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::metric_map::SampleMetrics;
use super::names::ScalingMetric;
use super::statistics::vertex_average;
use super::window::{CollectedMetrics, MetricHistory, VertexSamples};
use crate::engine::{AggregatedMetric, IoMetrics, JobObservation, VertexMetrics};
use crate::scaling::error::CycleError;
use crate::scaling::numeric::{java_max, round_metric};
use crate::scaling::options::{AutoscalerOptions, BusyTimeAggregator, whole_seconds};
use crate::scaling::topology::{Topology, VertexInfo};

/// The Flink metrics of one vertex that the pipeline uses (docs/decision-pipeline.md#metric-collection).
#[derive(Debug, Default, Clone, Copy)]
struct FlinkMetrics {
    busy_time: Option<AggregatedMetric>,
    backpressure: Option<AggregatedMetric>,
    source_in_per_sec: Option<AggregatedMetric>,
    source_in: Option<AggregatedMetric>,
    pending_records: Option<AggregatedMetric>,
    source_out: Option<AggregatedMetric>,
    in_per_sec: Option<AggregatedMetric>,
}

fn zero() -> AggregatedMetric {
    AggregatedMetric {
        min: Some(0.0),
        max: Some(0.0),
        avg: Some(0.0),
        sum: Some(0.0),
    }
}

/// Merges several matches of one Flink metric: min of mins, max of maxes, sum of sums, no avg.
fn merge(a: AggregatedMetric, b: AggregatedMetric) -> AggregatedMetric {
    let combine = |x: Option<f64>, y: Option<f64>, f: fn(f64, f64) -> f64| match (x, y) {
        (Some(x), Some(y)) => Some(f(x, y)),
        (x, None) => x,
        (None, y) => y,
    };
    AggregatedMetric {
        min: combine(a.min, b.min, f64::min),
        max: combine(a.max, b.max, f64::max),
        avg: None,
        sum: combine(a.sum, b.sum, |x, y| x + y),
    }
}

impl FlinkMetrics {
    /// Picks the metrics by name; "any one" matches take the first name in order.
    fn select(metrics: Option<&VertexMetrics>, source: bool) -> FlinkMetrics {
        let mut fm = FlinkMetrics::default();
        let Some(metrics) = metrics else {
            return fm;
        };
        for (name, value) in &metrics.aggregated {
            let v = *value;
            let source_task = name.starts_with("Source__");
            if name == "busyTimeMsPerSecond" {
                fm.busy_time = Some(v);
            } else if !source {
                if name == "numRecordsInPerSecond" {
                    fm.in_per_sec.get_or_insert(v);
                }
            } else if name == "backPressuredTimeMsPerSecond" {
                fm.backpressure = Some(v);
            } else if name.ends_with(".pendingRecords") {
                fm.pending_records = Some(match fm.pending_records {
                    Some(prev) => merge(prev, v),
                    None => v,
                });
            } else if source_task && name.ends_with(".numRecordsInPerSecond") {
                fm.source_in_per_sec.get_or_insert(v);
            } else if source_task && name.ends_with(".numRecordsIn") {
                fm.source_in.get_or_insert(v);
            } else if source_task && name.ends_with(".numRecordsOut") {
                fm.source_out.get_or_insert(v);
            }
        }
        fm
    }

    /// What a finished vertex reports: zeros, never queried.
    fn finished() -> FlinkMetrics {
        FlinkMetrics {
            busy_time: Some(zero()),
            pending_records: Some(zero()),
            source_in_per_sec: Some(zero()),
            source_in: Some(zero()),
            source_out: Some(zero()),
            ..FlinkMetrics::default()
        }
    }

    fn require(&self, vertex: &VertexInfo) -> Result<(), CycleError> {
        let missing = |metric: &'static str| CycleError::MetricNotFound {
            metric,
            vertex: String::from(&*vertex.id),
        };
        if self.busy_time.is_none() {
            return Err(missing("BUSY_TIME_PER_SEC"));
        }
        if vertex.is_source() {
            if self.backpressure.is_none() {
                return Err(missing("BACKPRESSURE_TIME_PER_SEC"));
            }
            if self.source_in_per_sec.is_none() {
                return Err(missing("SOURCE_TASK_NUM_RECORDS_IN_PER_SEC"));
            }
            if self.source_in.is_none() {
                return Err(missing("SOURCE_TASK_NUM_RECORDS_IN"));
            }
        }
        Ok(())
    }

    /// The busy ratio (0..1) by the configured aggregator; None when the busy time is not
    /// finite.
    fn load(&self, opts: &AutoscalerOptions) -> Option<f64> {
        let busy_metric = self.busy_time.unwrap_or_default();
        let busy = match opts.busy_time_aggregator {
            BusyTimeAggregator::Max => busy_metric.max,
            BusyTimeAggregator::Min => busy_metric.min,
            BusyTimeAggregator::Avg => busy_metric.avg,
        }
        .unwrap_or(f64::NAN);
        busy.is_finite().then(|| java_max(0.0, busy) / 1000.0)
    }

    /// Records in: the vertex's counter, or for a source that reports 0 there, its source
    /// task's records in, else its records out.
    fn records_in(&self, io: IoMetrics, source: bool) -> f64 {
        let mut records_in = io.num_records_in;
        if source && records_in == 0.0 {
            if let Some(sum) = self.source_in.and_then(|m| m.sum) {
                records_in = sum;
            }
        }
        if source && records_in == 0.0 {
            if let Some(sum) = self.source_out.and_then(|m| m.sum) {
                records_in = sum;
            }
        }
        records_in
    }

    /// A source's observed true processing rate at input `rate` with `lag` pending records:
    /// infinite when nothing comes in (so that it may scale down), the rate over the share of
    /// time not back-pressured while it catches up a lag, else `from_history`.
    fn observed_tpr(
        &self,
        rate: f64,
        lag: f64,
        opts: &AutoscalerOptions,
        from_history: impl FnOnce() -> f64,
    ) -> f64 {
        let backpressure = self.backpressure.and_then(|b| b.avg).unwrap_or(f64::NAN);
        let lag_threshold = whole_seconds(opts.observed_tpr_lag_threshold);
        if rate == 0.0 {
            // Nothing comes in: allow scaling down.
            f64::INFINITY
        } else if lag >= lag_threshold * rate && backpressure < 1000.0 {
            rate / (1.0 - backpressure / 1000.0)
        } else {
            from_history()
        }
    }
}

/// One cycle's sample and the vertices that must not be scaled in this cycle (finished
/// vertices, and vertices without a finite busy time).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sample {
    pub(crate) metrics: CollectedMetrics,
    pub(crate) excluded: BTreeSet<String>,
}

/// Derives the sample of this cycle (docs/decision-pipeline.md#sample). `history` holds the previously stored
/// samples (the current one is not in it yet); the per-vertex metrics are written into
/// `values`, a buffer of any contents.
pub(crate) fn compute_sample(
    obs: &JobObservation,
    topology: &Topology,
    opts: &AutoscalerOptions,
    history: &MetricHistory,
    mut values: Vec<SampleMetrics>,
) -> Result<Sample, CycleError> {
    let mut sample = Sample::default();
    values.clear();
    values.reserve(topology.vertices.len());
    let observed = observed_by_index(obs, topology);
    for (index, vertex) in topology.vertices.iter().enumerate() {
        let (fm, io) = if vertex.finished {
            sample.excluded.insert(String::from(&*vertex.id));
            (FlinkMetrics::finished(), Default::default())
        } else {
            let vm = observed.get(index).copied().flatten();
            let fm = FlinkMetrics::select(vm, vertex.is_source());
            fm.require(vertex)?;
            (fm, vm.map(|m| m.io).unwrap_or_default())
        };
        let load = fm.load(opts);
        if load.is_none() {
            tracing::warn!(vertex = %vertex.id, "no finite busyTimeMsPerSecond; the vertex is not scaled in this cycle");
            sample.excluded.insert(String::from(&*vertex.id));
        }
        // The window average of the observed true processing rate, when a source needs it.
        let observed_tpr_average = || {
            vertex_average(
                history,
                topology,
                index,
                ScalingMetric::ObservedTpr,
                opts.observed_tpr_min_observations,
            )
        };
        // Written in place: a vertex's map is a few hundred bytes, and returning then pushing
        // it copied it twice.
        values.push(SampleMetrics::new());
        if let Some(out) = values.last_mut() {
            vertex_sample(out, vertex, &fm, io, load, opts, observed_tpr_average);
        }
    }
    sample.metrics.vertices = VertexSamples::new(Arc::clone(&topology.index), values);
    sample.metrics.global = global_metrics(&obs.global);
    Ok(sample)
}

/// The observed metrics of every vertex of `topology`, by index: found in one walk over the
/// observation's map alongside the topology's ids in the same order, rather than by a search
/// per vertex (a search compares the id with several keys, and ids are long and often share
/// their beginning).
fn observed_by_index<'o>(
    obs: &'o JobObservation,
    topology: &Topology,
) -> Vec<Option<&'o VertexMetrics>> {
    let ids = topology.index.ids();
    let mut found = vec![None; ids.len()];
    let mut observed = obs.metrics.iter().peekable();
    for &index in topology.index.in_id_order() {
        let id: &str = &ids[index];
        while let Some(&(key, metrics)) = observed.peek() {
            match key.as_str().cmp(id) {
                Ordering::Less => {
                    observed.next();
                }
                Ordering::Equal => {
                    found[index] = Some(metrics);
                    break;
                }
                Ordering::Greater => break,
            }
        }
    }
    found
}

/// The metrics of one vertex, each rounded as it is written into the empty map `out`; `load`
/// is None without a finite busy time.
fn vertex_sample(
    out: &mut SampleMetrics,
    vertex: &VertexInfo,
    fm: &FlinkMetrics,
    io: IoMetrics,
    load: Option<f64>,
    opts: &AutoscalerOptions,
    observed_tpr_average: impl FnOnce() -> f64,
) {
    let mut put = |metric: ScalingMetric, value: f64| {
        out.insert(metric, round_metric(value));
    };
    let source = vertex.is_source();
    let lag = fm.pending_records.and_then(|p| p.sum).unwrap_or(0.0);
    if source {
        put(ScalingMetric::Lag, lag);
    }
    put(ScalingMetric::Load, load.unwrap_or(f64::NAN));
    put(ScalingMetric::AccumulatedBusyTime, io.accumulated_busy_time);
    put(
        ScalingMetric::NumRecordsIn,
        java_max(0.0, fm.records_in(io, source)),
    );
    put(ScalingMetric::NumRecordsOut, io.num_records_out);
    if source {
        if let Some(rate_metric) = fm.source_in_per_sec {
            let rate = rate_metric.sum.unwrap_or(f64::NAN);
            let observed = fm.observed_tpr(rate, lag, opts, observed_tpr_average);
            put(ScalingMetric::ObservedTpr, observed);
        }
    } else if let Some(m) = fm.in_per_sec {
        put(
            ScalingMetric::NumRecordsInPerSecond,
            m.sum.unwrap_or(f64::NAN),
        );
    }
}

/// Job-wide metrics (docs/decision-pipeline.md#sample), from the observation's global map (TaskManager
/// values are the maximum over TaskManagers).
fn global_metrics(global: &BTreeMap<String, f64>) -> BTreeMap<ScalingMetric, f64> {
    let mut out = BTreeMap::new();
    let get = |k: &str| global.get(k).copied();
    if let (Some(total), Some(available)) = (get("taskSlotsTotal"), get("taskSlotsAvailable")) {
        out.insert(ScalingMetric::NumTaskSlotsUsed, total - available);
    }
    if let Some(gc) = get("Status.JVM.GarbageCollector.All.TimeMsPerSecond") {
        out.insert(ScalingMetric::GcPressure, gc / 1000.0);
    }
    let heap_used = get("Status.JVM.Memory.Heap.Used");
    if let Some(used) = heap_used {
        out.insert(ScalingMetric::HeapMemoryUsed, used);
    }
    if let (Some(used), Some(max)) = (heap_used, get("Status.JVM.Memory.Heap.Max")) {
        out.insert(ScalingMetric::HeapMaxUsageRatio, used / max);
    }
    if let Some(managed) = get("Status.Flink.Memory.Managed.Used") {
        out.insert(ScalingMetric::ManagedMemoryUsed, managed);
    }
    if let Some(metaspace) = get("Status.JVM.Memory.Metaspace.Used") {
        out.insert(ScalingMetric::MetaspaceMemoryUsed, metaspace);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{IoMetrics, JobStatus, ObservedEdge, ObservedVertex};

    fn agg(v: f64) -> AggregatedMetric {
        AggregatedMetric {
            min: Some(v),
            max: Some(v),
            avg: Some(v),
            sum: Some(v),
        }
    }

    fn obs(source_metrics: Vec<(&str, AggregatedMetric)>, source_io: IoMetrics) -> JobObservation {
        let vertex = |id: &str| ObservedVertex {
            id: id.into(),
            name: id.into(),
            parallelism: 1,
            max_parallelism: 128,
            source_partitions: 0,
            finished: false,
            slot_sharing_group: None,
        };
        let mut metrics = BTreeMap::new();
        metrics.insert(
            "src".to_string(),
            VertexMetrics {
                aggregated: source_metrics
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
                io: source_io,
                subtasks: Vec::new(),
            },
        );
        metrics.insert(
            "sink".to_string(),
            VertexMetrics {
                aggregated: [
                    ("busyTimeMsPerSecond".to_string(), agg(100.0)),
                    ("numRecordsInPerSecond".to_string(), agg(12.0)),
                ]
                .into_iter()
                .collect(),
                io: IoMetrics {
                    num_records_in: 7.0,
                    num_records_out: 0.0,
                    accumulated_busy_time: 3.0,
                },
                subtasks: Vec::new(),
            },
        );
        JobObservation {
            status: JobStatus::Running,
            running_since_ms: 0,
            vertices: vec![vertex("src"), vertex("sink")],
            edges: vec![ObservedEdge {
                from: "src".into(),
                to: "sink".into(),
                ship_strategy: "HASH".into(),
            }],
            metrics,
            global: BTreeMap::new(),
            task_managers: None,
        }
    }

    fn full_source() -> Vec<(&'static str, AggregatedMetric)> {
        vec![
            (
                "busyTimeMsPerSecond",
                AggregatedMetric {
                    min: Some(100.0),
                    max: Some(850.0),
                    avg: Some(400.0),
                    sum: Some(1200.0),
                },
            ),
            ("backPressuredTimeMsPerSecond", agg(500.0)),
            ("Source__kafka.numRecordsInPerSecond", agg(100.0)),
            ("Source__kafka.numRecordsIn", agg(42.0)),
            ("Source__kafka.numRecordsOut", agg(43.0)),
            ("a.pendingRecords", agg(2000.0)),
            ("b.pendingRecords", agg(1000.0)),
        ]
    }

    #[test]
    fn per_sample_metrics() {
        let o = obs(full_source(), IoMetrics::default());
        let t = Topology::from_observation(&o).unwrap();
        let opts = AutoscalerOptions::default();
        let s = compute_sample(&o, &t, &opts, &MetricHistory::default(), Vec::new()).unwrap();
        let src = &s.metrics.vertices["src"];
        assert_eq!(src[&ScalingMetric::Lag], 3000.0);
        assert_eq!(src[&ScalingMetric::Load], 0.85);
        // io.numRecordsIn is 0, so the source-task counter is used.
        assert_eq!(src[&ScalingMetric::NumRecordsIn], 42.0);
        // Lag 3000 >= 30 s * 100/s and backpressure 500 < 1000: 100 / (1 - 0.5).
        assert_eq!(src[&ScalingMetric::ObservedTpr], 200.0);
        let sink = &s.metrics.vertices["sink"];
        assert_eq!(sink[&ScalingMetric::NumRecordsInPerSecond], 12.0);
        assert_eq!(sink[&ScalingMetric::NumRecordsIn], 7.0);
        assert!(!sink.contains_key(&ScalingMetric::Lag));
        assert!(s.excluded.is_empty());

        let opts = AutoscalerOptions {
            busy_time_aggregator: BusyTimeAggregator::Min,
            ..AutoscalerOptions::default()
        };
        let s = compute_sample(&o, &t, &opts, &MetricHistory::default(), Vec::new()).unwrap();
        assert_eq!(s.metrics.vertices["src"][&ScalingMetric::Load], 0.1);
    }

    #[test]
    fn observed_tpr_falls_back_to_history_average_and_infinity() {
        let mut src = full_source();
        src[5] = ("a.pendingRecords", agg(0.0));
        src[6] = ("b.pendingRecords", agg(0.0));
        let o = obs(src.clone(), IoMetrics::default());
        let t = Topology::from_observation(&o).unwrap();
        let opts = AutoscalerOptions::default();
        // Not catching up and no history: NaN.
        let s = compute_sample(&o, &t, &opts, &MetricHistory::default(), Vec::new()).unwrap();
        assert!(s.metrics.vertices["src"][&ScalingMetric::ObservedTpr].is_nan());
        // With two previous observations: their average.
        let mut h = MetricHistory::default();
        for (at, v) in [(1, 300.0), (2, 500.0)] {
            let mut m = CollectedMetrics::default();
            m.vertices
                .entry_or_default("src")
                .insert(ScalingMetric::ObservedTpr, v);
            h.samples.insert(at, m);
        }
        let s = compute_sample(&o, &t, &opts, &h, Vec::new()).unwrap();
        assert_eq!(
            s.metrics.vertices["src"][&ScalingMetric::ObservedTpr],
            400.0
        );
        // Nothing comes in: +Infinity.
        src[2] = ("Source__kafka.numRecordsInPerSecond", agg(0.0));
        let o = obs(src, IoMetrics::default());
        let s = compute_sample(&o, &t, &opts, &h, Vec::new()).unwrap();
        assert_eq!(
            s.metrics.vertices["src"][&ScalingMetric::ObservedTpr],
            f64::INFINITY
        );
    }

    #[test]
    fn missing_required_metric_and_nan_busy_time() {
        let mut src = full_source();
        src.remove(1);
        let o = obs(src, IoMetrics::default());
        let t = Topology::from_observation(&o).unwrap();
        let err = compute_sample(
            &o,
            &t,
            &AutoscalerOptions::default(),
            &MetricHistory::default(),
            Vec::new(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Could not find required metric BACKPRESSURE_TIME_PER_SEC for src"
        );

        let mut src = full_source();
        src[0] = ("busyTimeMsPerSecond", AggregatedMetric::default());
        let o = obs(src, IoMetrics::default());
        let s = compute_sample(
            &o,
            &t,
            &AutoscalerOptions::default(),
            &MetricHistory::default(),
            Vec::new(),
        )
        .unwrap();
        assert!(s.metrics.vertices["src"][&ScalingMetric::Load].is_nan());
        assert!(s.excluded.contains("src"));
    }

    #[test]
    fn finished_vertices_report_zeros_and_are_excluded() {
        let mut o = obs(vec![], IoMetrics::default());
        o.vertices[0].finished = true;
        let t = Topology::from_observation(&o).unwrap();
        let s = compute_sample(
            &o,
            &t,
            &AutoscalerOptions::default(),
            &MetricHistory::default(),
            Vec::new(),
        )
        .unwrap();
        let src = &s.metrics.vertices["src"];
        assert_eq!(src[&ScalingMetric::Load], 0.0);
        assert_eq!(src[&ScalingMetric::Lag], 0.0);
        assert_eq!(src[&ScalingMetric::ObservedTpr], f64::INFINITY);
        assert!(s.excluded.contains("src"));
    }
}
