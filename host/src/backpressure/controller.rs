//! The per-job rate controller: feeds each completed batch to the estimator and publishes the
//! new limit for the job's sources.
//!
//! # From a streaming job's metrics to a "batch"
//!
//! The estimator was designed for micro-batches: `elements` records, processed in
//! `processing_delay_ms`, after waiting `scheduling_delay_ms`. A continuously running job is cut
//! into batches of `backpressure.batch-interval` (T ms) and each interval is described, by
//! [`BatchInfo::from_observation`], from the observation taken at its end:
//!
//! - `time_ms`: the end of the interval;
//! - `elements`: the records the sources admitted during the interval, `rate * T / 1000` summed
//!   over the source vertices (vertices without an input edge), where `rate` is the source's
//!   intake rate (`Source__*.numRecordsInPerSecond`, else `Source__*.numRecordsOutPerSecond`,
//!   else `numRecordsOutPerSecond`, else `numRecordsInPerSecond`; the `sum` over subtasks);
//! - `processing_delay_ms`: `T * busy / 1000` where `busy` is the busiest vertex's
//!   `busyTimeMsPerSecond` (`max` over subtasks, clamped to `[0, 1000]`): the time the bottleneck
//!   needed for this batch, so `elements / processing_delay` is the rate the job could process at
//!   full load (the true processing rate, as the Flink autoscaler defines it);
//! - `scheduling_delay_ms`: `T * bp / 1000` where `bp` is the largest
//!   `backPressuredTimeMsPerSecond` (`avg` over subtasks) of a source: the part of the interval in
//!   which the sources had to wait because earlier records were still queued inside the job.
//!   The estimator's integral term turns it into the overflow rate to shed.
//!
//! Records the sources did not admit stay pending in the source system; they are not a delay of
//! the job and are deliberately not counted.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::engine::{AggregatedMetric, JobObservation};
use crate::events::{Event, EventReason, Severity};

use super::estimator::RateEstimator;
use super::options::BackpressureSettings;

/// One completed batch interval, in the estimator's terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchInfo {
    /// When the interval ended, in ms.
    pub time_ms: i64,
    /// Records admitted by the job's sources during the interval.
    pub elements: i64,
    /// How long the job needed to process them, in ms.
    pub processing_delay_ms: i64,
    /// How long the sources waited for the job during the interval, in ms.
    pub scheduling_delay_ms: i64,
    /// Records each source vertex admitted; the job's limit is split in these proportions.
    /// Empty when the caller only wants the job-level rate.
    pub source_elements: BTreeMap<String, i64>,
}

const BUSY_TIME: &str = "busyTimeMsPerSecond";
const BACKPRESSURED_TIME: &str = "backPressuredTimeMsPerSecond";

impl BatchInfo {
    /// The batch of the `interval_ms` that ended at `time_ms`, derived from the observation
    /// taken then (see the module documentation for the mapping). Missing metrics count as 0,
    /// which makes the estimator skip the batch rather than guess.
    pub(crate) fn from_observation(
        observation: &JobObservation,
        time_ms: i64,
        interval_ms: i64,
    ) -> BatchInfo {
        let interval = interval_ms.max(0) as f64;
        let has_input: BTreeSet<&str> = observation.edges.iter().map(|e| e.to.as_str()).collect();
        let mut source_elements = BTreeMap::new();
        let mut max_busy: f64 = 0.0;
        let mut max_backpressure: f64 = 0.0;
        for vertex in observation.vertices.iter().filter(|v| !v.finished) {
            let Some(metrics) = observation.metrics.get(&vertex.id) else {
                if !has_input.contains(vertex.id.as_str()) {
                    source_elements.insert(vertex.id.clone(), 0);
                }
                continue;
            };
            if let Some(busy) = metrics.aggregated.get(BUSY_TIME) {
                max_busy = max_busy.max(per_second_fraction(busy.max.or(busy.avg)));
            }
            if !has_input.contains(vertex.id.as_str()) {
                let rate = source_intake_rate(&metrics.aggregated);
                let elements = (rate * interval / 1000.0).round();
                source_elements.insert(vertex.id.clone(), elements as i64);
                if let Some(bp) = metrics.aggregated.get(BACKPRESSURED_TIME) {
                    max_backpressure = max_backpressure.max(per_second_fraction(bp.avg));
                }
            }
        }
        BatchInfo {
            time_ms,
            elements: source_elements
                .values()
                .fold(0_i64, |sum, e| sum.saturating_add(*e)),
            processing_delay_ms: (interval * max_busy).round() as i64,
            scheduling_delay_ms: (interval * max_backpressure).round() as i64,
            source_elements,
        }
    }
}

/// A `...MsPerSecond` metric as a fraction of the second in `[0, 1]`; unknown or NaN is 0.
fn per_second_fraction(value: Option<f64>) -> f64 {
    match value {
        Some(v) if v.is_finite() => (v / 1000.0).clamp(0.0, 1.0),
        _ => 0.0,
    }
}

/// Records per second a source vertex admits, by the first metric that exists (see the module
/// documentation); 0 when none does.
fn source_intake_rate(aggregated: &BTreeMap<String, AggregatedMetric>) -> f64 {
    let by_pattern = |suffix: &str| {
        aggregated
            .iter()
            .find(|(name, _)| name.starts_with("Source__") && name.ends_with(suffix))
            .and_then(|(_, m)| m.sum)
    };
    let rate = by_pattern(".numRecordsInPerSecond")
        .or_else(|| by_pattern(".numRecordsOutPerSecond"))
        .or_else(|| aggregated.get("numRecordsOutPerSecond").and_then(|m| m.sum))
        .or_else(|| aggregated.get("numRecordsInPerSecond").and_then(|m| m.sum));
    match rate {
        Some(r) if r.is_finite() && r > 0.0 => r,
        _ => 0.0,
    }
}

/// A new rate limit to realize.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimitUpdate {
    /// When it was computed (the batch's `time_ms`).
    pub(crate) at_ms: i64,
    /// The job's limit, records per second over all its sources.
    pub rate: f64,
    /// The limit of each source vertex: the job's limit split in proportion to what each
    /// source admitted in the batch. A source that admitted nothing gets the whole job limit,
    /// so it is bounded without being starved when its input resumes. Realize each with
    /// `Realizer::set_rate_limit(vertex, Some(limit))`.
    pub per_source: BTreeMap<String, f64>,
    /// The `RateLimit` event describing the change.
    pub(crate) event: Event,
}

/// Maintains one job's source rate limit.
pub struct RateController {
    job: String,
    estimator: Box<dyn RateEstimator + Send>,
    rate_limit: Option<f64>,
}

impl fmt::Debug for RateController {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateController")
            .field("job", &self.job)
            .field("rate_limit", &self.rate_limit)
            .finish_non_exhaustive()
    }
}

impl RateController {
    /// A controller for `job` using `estimator`.
    pub(crate) fn new(
        job: impl Into<String>,
        estimator: Box<dyn RateEstimator + Send>,
    ) -> RateController {
        RateController {
            job: job.into(),
            estimator,
            rate_limit: None,
        }
    }

    /// The controller a job's validated settings ask for, or `None` when `backpressure.enabled`
    /// is false. Feed it batches every `settings.options.batch_interval_ms`.
    pub fn from_settings(
        job: impl Into<String>,
        settings: &BackpressureSettings,
    ) -> Option<RateController> {
        settings
            .options
            .enabled
            .then(|| RateController::new(job, settings.estimator.estimator()))
    }

    /// The job's current limit, records per second (`None` until the first estimate).
    #[cfg(test)]
    pub(crate) fn rate_limit(&self) -> Option<f64> {
        self.rate_limit
    }

    /// Feeds one completed batch to the estimator; returns the new limit to publish when the
    /// estimator produced one.
    pub fn on_batch_completed(&mut self, batch: &BatchInfo) -> Option<RateLimitUpdate> {
        let rate = self.estimator.compute(
            batch.time_ms,
            batch.elements,
            batch.processing_delay_ms,
            batch.scheduling_delay_ms,
        )?;
        if !rate.is_finite() {
            tracing::warn!(job = %self.job, rate, "rate estimator returned a non-finite rate; limit kept");
            return None;
        }
        let previous = self.rate_limit.replace(rate);
        let per_source = split_by_share(rate, &batch.source_elements);
        let processing_rate = batch.elements as f64 / batch.processing_delay_ms as f64 * 1000.0;
        let message = match previous {
            Some(p) => format!(
                "source rate limit changed from {p:.1} to {rate:.1} records/s (the job processed {processing_rate:.1} records/s at full load)"
            ),
            None => format!(
                "source rate limit set to {rate:.1} records/s (the job processed {processing_rate:.1} records/s at full load)"
            ),
        };
        let mut event = Event::new(EventReason::RateLimit, Severity::Normal, message)
            .job(self.job.clone())
            .detail("rate", rate.round() as i64)
            .detail("elements", batch.elements)
            .detail("processing_delay_ms", batch.processing_delay_ms)
            .detail("scheduling_delay_ms", batch.scheduling_delay_ms);
        if let [(only, _)] = per_source.iter().collect::<Vec<_>>().as_slice() {
            event = event.vertex(only.as_str());
        }
        Some(RateLimitUpdate {
            at_ms: batch.time_ms,
            rate,
            per_source,
            event,
        })
    }
}

fn split_by_share(rate: f64, source_elements: &BTreeMap<String, i64>) -> BTreeMap<String, f64> {
    let total: f64 = source_elements.values().map(|e| (*e).max(0) as f64).sum();
    source_elements
        .iter()
        .map(|(vertex, elements)| {
            let limit = if *elements > 0 && total > 0.0 {
                rate * (*elements as f64 / total)
            } else {
                rate
            };
            (vertex.clone(), limit)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::engine::{AggregatedMetric, JobStatus, ObservedEdge, ObservedVertex, VertexMetrics};

    use super::super::estimator::PidRateEstimator;
    use super::*;

    fn vertex(id: &str) -> ObservedVertex {
        ObservedVertex {
            id: id.into(),
            name: id.into(),
            parallelism: 2,
            max_parallelism: 128,
            source_partitions: 0,
            finished: false,
            slot_sharing_group: None,
        }
    }

    fn metrics(pairs: &[(&str, AggregatedMetric)]) -> VertexMetrics {
        VertexMetrics {
            aggregated: pairs.iter().map(|(k, m)| (k.to_string(), *m)).collect(),
            io: Default::default(),
            subtasks: Vec::new(),
        }
    }

    fn agg(max: f64, avg: f64, sum: f64) -> AggregatedMetric {
        AggregatedMetric {
            min: None,
            max: Some(max),
            avg: Some(avg),
            sum: Some(sum),
        }
    }

    fn observation() -> JobObservation {
        JobObservation {
            status: JobStatus::Running,
            running_since_ms: 0,
            vertices: vec![vertex("src-a"), vertex("src-b"), vertex("map")],
            edges: vec![
                ObservedEdge {
                    from: "src-a".into(),
                    to: "map".into(),
                    ship_strategy: "HASH".into(),
                },
                ObservedEdge {
                    from: "src-b".into(),
                    to: "map".into(),
                    ship_strategy: "HASH".into(),
                },
            ],
            metrics: [
                (
                    "src-a".to_string(),
                    metrics(&[
                        ("Source__a.numRecordsInPerSecond", agg(0.0, 0.0, 300.0)),
                        ("busyTimeMsPerSecond", agg(200.0, 100.0, 0.0)),
                        ("backPressuredTimeMsPerSecond", agg(900.0, 250.0, 0.0)),
                    ]),
                ),
                (
                    "src-b".to_string(),
                    metrics(&[
                        ("numRecordsOutPerSecond", agg(0.0, 0.0, 100.0)),
                        ("backPressuredTimeMsPerSecond", agg(900.0, 500.0, 0.0)),
                    ]),
                ),
                (
                    "map".to_string(),
                    metrics(&[("busyTimeMsPerSecond", agg(800.0, 600.0, 0.0))]),
                ),
            ]
            .into_iter()
            .collect(),
            global: Default::default(),
            task_managers: None,
        }
    }

    #[test]
    fn batch_from_observation() {
        let batch = BatchInfo::from_observation(&observation(), 10_000, 2000);
        assert_eq!(batch.time_ms, 10_000);
        // 300/s and 100/s over 2 s.
        assert_eq!(
            batch.source_elements,
            [("src-a".to_string(), 600), ("src-b".to_string(), 200)]
                .into_iter()
                .collect()
        );
        assert_eq!(batch.elements, 800);
        // Busiest vertex: map, max 800 ms/s -> 1600 ms of 2000.
        assert_eq!(batch.processing_delay_ms, 1600);
        // Largest source backpressure (avg): 500 ms/s -> 1000 ms.
        assert_eq!(batch.scheduling_delay_ms, 1000);
    }

    #[test]
    fn finished_and_unmeasured_vertices() {
        let mut obs = observation();
        obs.vertices[2].finished = true;
        obs.metrics.remove("src-b");
        let batch = BatchInfo::from_observation(&obs, 0, 1000);
        assert_eq!(batch.elements, 300);
        assert_eq!(batch.source_elements.get("src-b"), Some(&0));
        // map is finished: busiest is src-a with 200 ms/s.
        assert_eq!(batch.processing_delay_ms, 200);
        assert_eq!(batch.scheduling_delay_ms, 250);
    }

    #[test]
    fn busy_values_are_clamped() {
        let mut obs = observation();
        obs.metrics.insert(
            "map".into(),
            metrics(&[("busyTimeMsPerSecond", agg(1500.0, f64::NAN, 0.0))]),
        );
        assert_eq!(
            BatchInfo::from_observation(&obs, 0, 1000).processing_delay_ms,
            1000
        );
        obs.metrics.insert(
            "map".into(),
            metrics(&[("busyTimeMsPerSecond", agg(f64::NAN, f64::NAN, 0.0))]),
        );
        assert_eq!(
            BatchInfo::from_observation(&obs, 0, 1000).processing_delay_ms,
            200
        );
    }

    fn controller() -> RateController {
        let pid = PidRateEstimator::new(1000, 1.0, 0.2, 0.0, 100.0).unwrap();
        RateController::new("orders", Box::new(pid))
    }

    fn batch(time_ms: i64, a: i64, b: i64, processing: i64, scheduling: i64) -> BatchInfo {
        BatchInfo {
            time_ms,
            elements: a + b,
            processing_delay_ms: processing,
            scheduling_delay_ms: scheduling,
            source_elements: [("a".to_string(), a), ("b".to_string(), b)]
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn publishes_after_the_first_run() {
        let mut rc = controller();
        assert_eq!(
            rc.on_batch_completed(&batch(1000, 1500, 500, 1000, 0)),
            None
        );
        assert_eq!(rc.rate_limit(), None);
        // processing rate 1000, latest 2000: error 1000 -> 1000.
        let update = rc
            .on_batch_completed(&batch(2000, 750, 250, 1000, 0))
            .unwrap();
        assert_eq!(update.rate, 1000.0);
        assert_eq!(update.at_ms, 2000);
        assert_eq!(update.per_source.get("a"), Some(&750.0));
        assert_eq!(update.per_source.get("b"), Some(&250.0));
        assert_eq!(rc.rate_limit(), Some(1000.0));
        assert_eq!(update.event.reason, EventReason::RateLimit);
        assert_eq!(update.event.job.as_deref(), Some("orders"));
        assert_eq!(update.event.details.get("rate"), Some(&1000));
        assert!(
            update.event.message.contains("1000.0 records/s"),
            "{}",
            update.event.message
        );
        // A skipped batch publishes nothing and keeps the limit.
        assert_eq!(rc.on_batch_completed(&batch(3000, 0, 0, 1000, 0)), None);
        assert_eq!(rc.rate_limit(), Some(1000.0));
        let update = rc
            .on_batch_completed(&batch(4000, 0, 500, 1000, 0))
            .unwrap();
        // processing 500, error 500 -> 500; source a admitted nothing: bounded by the job limit.
        assert_eq!(update.rate, 500.0);
        assert_eq!(update.per_source.get("a"), Some(&500.0));
        assert_eq!(update.per_source.get("b"), Some(&500.0));
        assert!(update.event.message.contains("from 1000.0 to 500.0"));
    }

    #[test]
    fn from_config_respects_the_switch() {
        let off: BTreeMap<String, String> = BTreeMap::new();
        let settings = BackpressureSettings::from_config(&off).unwrap();
        assert!(RateController::from_settings("j", &settings).is_none());
        assert_eq!(settings.options.batch_interval_ms, 1000);
        let on: BTreeMap<String, String> = [("backpressure.enabled", "true")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let settings = BackpressureSettings::from_config(&on).unwrap();
        assert!(RateController::from_settings("j", &settings).is_some());
        let bad: BTreeMap<String, String> = [("backpressure.rate-estimator", "fuzzy")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(
            BackpressureSettings::from_config(&bad).unwrap_err().key,
            "backpressure.rate-estimator"
        );
    }

    #[test]
    fn closed_loop_converges_to_capacity() {
        // A job that can process 1000 records/s, fed 3000/s until limited; the limit must settle
        // at its capacity (the proportional term removes the error in one step at kp = 1).
        let capacity = 1000.0_f64;
        let mut rc = controller();
        let mut offered = 3000.0_f64;
        let mut last = None;
        for step in 1..=10_i64 {
            let admitted = match rc.rate_limit() {
                Some(limit) => offered.min(limit),
                None => offered,
            };
            let processed = admitted.min(capacity);
            let busy = processed / capacity;
            let batch = BatchInfo {
                time_ms: step * 1000,
                elements: processed.round() as i64,
                processing_delay_ms: (1000.0 * busy).round() as i64,
                scheduling_delay_ms: 0,
                source_elements: BTreeMap::new(),
            };
            if let Some(update) = rc.on_batch_completed(&batch) {
                last = Some(update.rate);
            }
            offered = 3000.0;
        }
        assert_eq!(last, Some(capacity));
    }

    /// A job with a bounded internal buffer: the sources fill it until it is full (then they are
    /// backpressured), the bottleneck drains `capacity` records per second. Fed through the
    /// module's mapping with the default gains, the limit must settle at the capacity and the
    /// buffer must drain first (while it drains, the job processes at full load, so the
    /// measured processing rate is what the sources admit and the limit holds below capacity).
    #[test]
    fn closed_loop_with_an_internal_buffer_settles_and_drains() {
        let capacity = 1000.0_f64;
        let buffer = 2000.0_f64;
        let offered = 3000.0_f64;
        let pid = PidRateEstimator::new(1000, 1.0, 0.2, 0.0, 100.0).unwrap();
        let mut rc = RateController::new("j", Box::new(pid));
        let mut queued = 0.0_f64;
        let mut settled_at = None;
        for step in 1..=30_i64 {
            let wanted = rc.rate_limit().map_or(offered, |l| offered.min(l));
            let admitted = wanted.min(capacity + buffer - queued).max(0.0);
            let backpressured = if wanted > 0.0 {
                1.0 - admitted / wanted
            } else {
                0.0
            };
            let processed = capacity.min(queued + admitted);
            queued += admitted - processed;
            let batch = BatchInfo {
                time_ms: step * 1000,
                elements: admitted.round() as i64,
                processing_delay_ms: (1000.0 * processed / capacity).round() as i64,
                scheduling_delay_ms: (1000.0 * backpressured).round() as i64,
                source_elements: BTreeMap::new(),
            };
            rc.on_batch_completed(&batch);
            let near = rc
                .rate_limit()
                .is_some_and(|l| (l - capacity).abs() <= 0.05 * capacity);
            if settled_at.is_none() && near && queued == 0.0 {
                settled_at = Some(step);
            }
        }
        let settled_at = settled_at.expect("the limit settles at the capacity");
        let expected = buffered_settling_batch(capacity, buffer, offered, 0.2);
        assert_eq!(settled_at, expected, "settled after {settled_at} batches");
        assert_eq!(rc.rate_limit(), Some(capacity));
        assert_eq!(queued, 0.0);
    }

    /// The batch after which the limit of [`closed_loop_with_an_internal_buffer_settles_and_drains`]
    /// is within 5% of `capacity` with the buffer empty, derived from the PID formula
    /// `new = latest - kp * (latest - processing) - ki * scheduling * processing / interval`
    /// (kp = 1, kd = 0, interval 1 s, so each batch is one second and rates are per batch):
    ///
    /// 1. Batch 1: the empty buffer takes `capacity + buffer` (= `offered` here, no wait); the
    ///    first valid batch only records its processing rate, `offered`: no limit yet.
    /// 2. Batch 2: the buffer is full, so the sources get in only what the bottleneck drained,
    ///    `capacity`, and wait `1 - capacity / offered` of the batch (scheduling delay
    ///    `round(1000 * (1 - 1000 / 3000)) = 667` ms). Processing rate `capacity`, so
    ///    `limit = offered - (offered - capacity) - ki * 667 * capacity / 1000`
    ///    `= 1000 - 0.2 * 667 = 866.6`.
    /// 3. From batch 3 on the queue is not empty: the bottleneck is busy the whole batch and the
    ///    processing rate is what the sources admitted, `round(866.6) = 867` records per second.
    ///    kp = 1 sets the limit to it: 867. Batch 3 drains `capacity - 866.6 = 133.4` of the
    ///    queue (left: `buffer - 133.4 = 1866.6`), each later batch `capacity - 867 = 133`.
    /// 4. A batch drains a full 133 while the queue at its start is at least 133: that is
    ///    `floor(1866.6 / 133) = 14` batches (4 to 17), leaving `1866.6 - 14 * 133 = 4.6`.
    /// 5. The next batch (18) processes `4.6 + 867 = 871.6` records in `round(871.6) = 872` ms:
    ///    processing rate `867 / 0.872 = 994.3`, the new limit, within 5% of 1000, and the queue
    ///    is empty. (Batch 19 then admits 994 records in 994 ms: the limit is exactly 1000.)
    fn buffered_settling_batch(capacity: f64, buffer: f64, offered: f64, ki: f64) -> i64 {
        assert_eq!(
            capacity + buffer,
            offered,
            "batch 1 fills the buffer exactly"
        );
        let waited_ms = (1000.0 * (1.0 - capacity / offered)).round();
        let first_limit = capacity - ki * waited_ms * capacity / 1000.0;
        let held = first_limit.round();
        let left_after_3 = buffer - (capacity - first_limit);
        let full_drains = (left_after_3 / (capacity - held)).floor();
        let remainder = left_after_3 - full_drains * (capacity - held);
        let draining_ms = (1000.0 * (remainder + held) / capacity).round();
        let limit = held / draining_ms * 1000.0;
        assert!(
            (limit - capacity).abs() <= 0.05 * capacity,
            "the draining batch already brings the limit within 5%: {limit}"
        );
        3 + full_drains as i64 + 1
    }
}
