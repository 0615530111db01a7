//! The evaluated metrics of a vertex as gauges: what the last decision cycle found for it (the
//! rates, lag, load and thresholds the Flink autoscaler reports per vertex), one family each.
//!
//! A vertex holds one atomic per family, the bits of an `f64`; NaN means not known (the series
//! is not written): a metric the vertex has no value of (lag of a non-source), and every one of
//! them once a decision cycle ran without an evaluation (the metric window was cleared by a
//! restart or a rescale and is collecting again).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::scaling::{ScalingMetric, VertexEvaluation};

/// How many families.
pub(super) const COUNT: usize = 8;

/// The families, name and help text, in the order of a vertex's values.
pub(super) const FAMILIES: [(&str, &str); COUNT] = [
    (
        "flowscale_vertex_true_processing_rate_records_per_second",
        "Records per second the vertex could process if it were busy all the time (window \
         average of its true processing rate)",
    ),
    (
        "flowscale_vertex_target_data_rate_records_per_second",
        "Records per second the vertex must sustain (window average of its target data rate)",
    ),
    (
        "flowscale_vertex_catch_up_data_rate_records_per_second",
        "Records per second on top of the target data rate that catch up the lag within \
         scaling.catch-up.duration",
    ),
    (
        "flowscale_vertex_lag_seconds",
        "Of a source: its pending records in seconds of its target data rate (0 without pending \
         records, +Inf when records are pending and none arrive)",
    ),
    (
        "flowscale_vertex_lag_records",
        "Of a source: the records pending in the source system at the last sample",
    ),
    (
        "flowscale_vertex_load_ratio",
        "Busy time of the vertex per second, 0 to 1, its subtasks aggregated as \
         metrics.busy-time.aggregator says (window average)",
    ),
    (
        "flowscale_vertex_scale_up_rate_threshold_records_per_second",
        "A true processing rate below this means scale up (the capacity needed at the upper \
         utilization)",
    ),
    (
        "flowscale_vertex_scale_down_rate_threshold_records_per_second",
        "A true processing rate above this means scale down (the capacity needed at the lower \
         utilization; +Inf while a source processes a backlog)",
    ),
];

/// The place of each family's value.
pub(super) const TRUE_PROCESSING_RATE: usize = 0;
pub(super) const TARGET_DATA_RATE: usize = 1;
pub(super) const CATCH_UP_DATA_RATE: usize = 2;
pub(super) const LAG_SECONDS: usize = 3;
pub(super) const LAG_RECORDS: usize = 4;
pub(super) const LOAD: usize = 5;
pub(super) const SCALE_UP_THRESHOLD: usize = 6;
pub(super) const SCALE_DOWN_THRESHOLD: usize = 7;

/// A vertex's values, as `f64` bits; NaN when not known.
pub(super) struct VertexGauges([AtomicU64; COUNT]);

impl VertexGauges {
    /// Nothing known.
    pub(super) fn new() -> VertexGauges {
        VertexGauges([f64::NAN.to_bits(); COUNT].map(AtomicU64::new))
    }

    /// A copy with the same values.
    pub(super) fn copy(&self) -> VertexGauges {
        VertexGauges(
            self.0
                .each_ref()
                .map(|v| AtomicU64::new(v.load(Ordering::Relaxed))),
        )
    }

    /// Stores every value.
    pub(super) fn set(&self, values: [f64; COUNT]) {
        for (gauge, value) in self.0.iter().zip(values) {
            gauge.store(value.to_bits(), Ordering::Relaxed);
        }
    }

    /// The value of family `index` (NaN when not known, or out of range).
    pub(super) fn get(&self, index: usize) -> f64 {
        self.0
            .get(index)
            .map_or(f64::NAN, |v| f64::from_bits(v.load(Ordering::Relaxed)))
    }
}

/// The values of [`FAMILIES`] from a vertex's evaluated metrics, NaN where it has none; each
/// half as the pipeline computes it (an average for rates and load, the latest value for lag,
/// catch-up rate and thresholds, see docs/decision-pipeline.md#evaluation).
pub(super) fn values_of(m: &VertexEvaluation) -> [f64; COUNT] {
    let current = |metric| m.get(&metric).map_or(f64::NAN, |x| x.current);
    let average = |metric| m.get(&metric).map_or(f64::NAN, |x| x.average);
    let target = average(ScalingMetric::TargetDataRate);
    let lag = current(ScalingMetric::Lag);
    let mut values = [f64::NAN; COUNT];
    values[TRUE_PROCESSING_RATE] = average(ScalingMetric::TrueProcessingRate);
    values[TARGET_DATA_RATE] = target;
    values[CATCH_UP_DATA_RATE] = current(ScalingMetric::CatchUpDataRate);
    values[LAG_SECONDS] = lag_seconds(lag, target);
    values[LAG_RECORDS] = lag;
    values[LOAD] = average(ScalingMetric::Load);
    values[SCALE_UP_THRESHOLD] = current(ScalingMetric::ScaleUpRateThreshold);
    values[SCALE_DOWN_THRESHOLD] = current(ScalingMetric::ScaleDownRateThreshold);
    values
}

/// A source's `lag` (records) in seconds of its target data rate `target` (records/s): how far
/// behind the arrivals it reads, as the simulator's lag is measured. No lag is 0 s whatever the
/// rate; a lag with nothing arriving is +Inf; NaN when either is unknown.
pub(super) fn lag_seconds(lag: f64, target: f64) -> f64 {
    if lag == 0.0 { 0.0 } else { lag / target }
}

/// The recommended parallelism in a vertex's evaluated metrics, when it has one.
pub(super) fn recommended(m: &VertexEvaluation) -> Option<i64> {
    let p = m.get(&ScalingMetric::RecommendedParallelism)?.current;
    // A parallelism is a whole number within u32; anything else is not one.
    (p.is_finite() && p >= 0.0 && p <= f64::from(u32::MAX)).then_some(p as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::EvaluatedScalingMetric;

    #[test]
    fn each_family_reads_its_metric_and_half() {
        let mut m = VertexEvaluation::new();
        // Distinct values on both halves, so that reading the wrong one shows.
        let pair = |current: f64, average: f64| EvaluatedScalingMetric { current, average };
        m.insert(ScalingMetric::TrueProcessingRate, pair(1.0, 1500.0));
        m.insert(ScalingMetric::TargetDataRate, pair(2.0, 400.0));
        m.insert(ScalingMetric::CatchUpDataRate, pair(10.0, 3.0));
        m.insert(ScalingMetric::Lag, pair(6000.0, 4.0));
        m.insert(ScalingMetric::Load, pair(5.0, 0.25));
        m.insert(ScalingMetric::ScaleUpRateThreshold, pair(610.0, 6.0));
        m.insert(ScalingMetric::ScaleDownRateThreshold, pair(1210.0, 7.0));
        m.insert(ScalingMetric::RecommendedParallelism, pair(12.0, 8.0));
        let values = values_of(&m);
        assert_eq!(values[TRUE_PROCESSING_RATE], 1500.0);
        assert_eq!(values[TARGET_DATA_RATE], 400.0);
        assert_eq!(values[CATCH_UP_DATA_RATE], 10.0);
        // 6000 records at 400 records/s.
        assert_eq!(values[LAG_SECONDS], 15.0);
        assert_eq!(values[LAG_RECORDS], 6000.0);
        assert_eq!(values[LOAD], 0.25);
        assert_eq!(values[SCALE_UP_THRESHOLD], 610.0);
        assert_eq!(values[SCALE_DOWN_THRESHOLD], 1210.0);
        assert_eq!(recommended(&m), Some(12));
    }

    #[test]
    fn a_vertex_without_lag_or_recommendation_has_none() {
        let mut m = VertexEvaluation::new();
        m.insert(
            ScalingMetric::TargetDataRate,
            EvaluatedScalingMetric::avg(400.0),
        );
        let values = values_of(&m);
        assert!(values[LAG_RECORDS].is_nan());
        assert!(values[LAG_SECONDS].is_nan());
        assert!(values[LOAD].is_nan());
        assert_eq!(recommended(&m), None);
    }

    #[test]
    fn lag_in_seconds_of_the_target_rate() {
        assert_eq!(lag_seconds(0.0, 0.0), 0.0);
        assert_eq!(lag_seconds(0.0, 100.0), 0.0);
        assert_eq!(lag_seconds(500.0, 0.0), f64::INFINITY);
        assert_eq!(lag_seconds(500.0, 100.0), 5.0);
        assert!(lag_seconds(f64::NAN, 100.0).is_nan());
        assert!(lag_seconds(500.0, f64::NAN).is_nan());
    }
}
