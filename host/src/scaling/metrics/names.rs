//! The names of collected and evaluated scaling metrics, an evaluated value pair, and the
//! evaluated metrics of one vertex.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::scaling::numeric::round_metric;
use crate::scaling::serde_double;

/// A scaling metric, named as the Flink autoscaler names it (`TRUE_PROCESSING_RATE`, `LAG`, ...).
///
/// One set serves the collected samples, the evaluated metrics and the global metrics, as in
/// the Flink autoscaler; which metric appears where is documented per variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ScalingMetric {
    /// Busy ratio (0..1): collected per sample, evaluated as the window average.
    Load,
    /// Pending records of a source: collected; evaluated as the latest value.
    Lag,
    /// Cumulative busy time in ms (collected).
    AccumulatedBusyTime,
    /// Cumulative records in (collected).
    NumRecordsIn,
    /// Cumulative records out (collected).
    NumRecordsOut,
    /// Records in per second of a non-source (collected).
    NumRecordsInPerSecond,
    /// Observed true processing rate of a source (collected).
    ObservedTpr,
    /// True processing rate (evaluated, average).
    TrueProcessingRate,
    /// Target data rate (evaluated, average).
    TargetDataRate,
    /// Extra rate needed to catch up the lag within `catch-up.duration` (evaluated, current).
    CatchUpDataRate,
    /// Current parallelism (evaluated).
    Parallelism,
    /// Recommended parallelism (evaluated; NaN until a complete window is evaluated).
    RecommendedParallelism,
    /// Max parallelism, i.e. key groups (evaluated).
    MaxParallelism,
    /// Source partitions, 0 when unknown (evaluated).
    NumSourcePartitions,
    /// A slower processing rate means scale up (evaluated, current).
    ScaleUpRateThreshold,
    /// A faster processing rate means scale down (evaluated, current).
    ScaleDownRateThreshold,
    /// Processing rate expected after a scaling (evaluated, current).
    ExpectedProcessingRate,
    /// Task slots in use (global).
    NumTaskSlotsUsed,
    /// GC time ratio (global).
    GcPressure,
    /// Heap used, bytes (global).
    HeapMemoryUsed,
    /// Heap used / heap max (global).
    HeapMaxUsageRatio,
    /// Managed memory used, bytes (global).
    ManagedMemoryUsed,
    /// Metaspace used, bytes (global).
    MetaspaceMemoryUsed,
}

/// How many scaling metrics there are.
pub(crate) const METRIC_COUNT: usize = ScalingMetric::MetaspaceMemoryUsed as usize + 1;

impl ScalingMetric {
    /// Every metric, in order: metric `m` at place `m as usize`.
    pub const ALL: [ScalingMetric; METRIC_COUNT] = [
        ScalingMetric::Load,
        ScalingMetric::Lag,
        ScalingMetric::AccumulatedBusyTime,
        ScalingMetric::NumRecordsIn,
        ScalingMetric::NumRecordsOut,
        ScalingMetric::NumRecordsInPerSecond,
        ScalingMetric::ObservedTpr,
        ScalingMetric::TrueProcessingRate,
        ScalingMetric::TargetDataRate,
        ScalingMetric::CatchUpDataRate,
        ScalingMetric::Parallelism,
        ScalingMetric::RecommendedParallelism,
        ScalingMetric::MaxParallelism,
        ScalingMetric::NumSourcePartitions,
        ScalingMetric::ScaleUpRateThreshold,
        ScalingMetric::ScaleDownRateThreshold,
        ScalingMetric::ExpectedProcessingRate,
        ScalingMetric::NumTaskSlotsUsed,
        ScalingMetric::GcPressure,
        ScalingMetric::HeapMemoryUsed,
        ScalingMetric::HeapMaxUsageRatio,
        ScalingMetric::ManagedMemoryUsed,
        ScalingMetric::MetaspaceMemoryUsed,
    ];

    /// The Flink autoscaler's name (`TRUE_PROCESSING_RATE`).
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            ScalingMetric::Load => "LOAD",
            ScalingMetric::Lag => "LAG",
            ScalingMetric::AccumulatedBusyTime => "ACCUMULATED_BUSY_TIME",
            ScalingMetric::NumRecordsIn => "NUM_RECORDS_IN",
            ScalingMetric::NumRecordsOut => "NUM_RECORDS_OUT",
            ScalingMetric::NumRecordsInPerSecond => "NUM_RECORDS_IN_PER_SECOND",
            ScalingMetric::ObservedTpr => "OBSERVED_TPR",
            ScalingMetric::TrueProcessingRate => "TRUE_PROCESSING_RATE",
            ScalingMetric::TargetDataRate => "TARGET_DATA_RATE",
            ScalingMetric::CatchUpDataRate => "CATCH_UP_DATA_RATE",
            ScalingMetric::Parallelism => "PARALLELISM",
            ScalingMetric::RecommendedParallelism => "RECOMMENDED_PARALLELISM",
            ScalingMetric::MaxParallelism => "MAX_PARALLELISM",
            ScalingMetric::NumSourcePartitions => "NUM_SOURCE_PARTITIONS",
            ScalingMetric::ScaleUpRateThreshold => "SCALE_UP_RATE_THRESHOLD",
            ScalingMetric::ScaleDownRateThreshold => "SCALE_DOWN_RATE_THRESHOLD",
            ScalingMetric::ExpectedProcessingRate => "EXPECTED_PROCESSING_RATE",
            ScalingMetric::NumTaskSlotsUsed => "NUM_TASK_SLOTS_USED",
            ScalingMetric::GcPressure => "GC_PRESSURE",
            ScalingMetric::HeapMemoryUsed => "HEAP_MEMORY_USED",
            ScalingMetric::HeapMaxUsageRatio => "HEAP_MAX_USAGE_RATIO",
            ScalingMetric::ManagedMemoryUsed => "MANAGED_MEMORY_USED",
            ScalingMetric::MetaspaceMemoryUsed => "METASPACE_MEMORY_USED",
        }
    }
}

impl fmt::Display for ScalingMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An evaluated metric: the latest value and the window average; a half that is not produced
/// is NaN. Both halves pass through [`round_metric`] at construction, as in the Flink autoscaler.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EvaluatedScalingMetric {
    /// The latest value.
    #[serde(with = "serde_double::value")]
    pub current: f64,
    /// The window average.
    #[serde(with = "serde_double::value")]
    pub average: f64,
}

impl EvaluatedScalingMetric {
    /// Both halves (rounded).
    #[inline]
    pub(crate) fn new(current: f64, average: f64) -> EvaluatedScalingMetric {
        EvaluatedScalingMetric {
            current: round_metric(current),
            average: round_metric(average),
        }
    }
    /// Only the current half (`of(x)`). The NaN half is its own rounding.
    #[inline]
    pub(crate) fn of(current: f64) -> EvaluatedScalingMetric {
        EvaluatedScalingMetric {
            current: round_metric(current),
            average: f64::NAN,
        }
    }
    /// Only the current half, for a value [`round_metric`] returns unchanged: a whole number
    /// (a count, a capacity rounded to a whole rate) or a non-finite one. Every vertex of every
    /// cycle reports several of these, so they skip the rounding.
    #[inline]
    pub(crate) fn of_whole(current: f64) -> EvaluatedScalingMetric {
        debug_assert!(current.to_bits() == round_metric(current).to_bits() || current.is_nan());
        EvaluatedScalingMetric {
            current,
            average: f64::NAN,
        }
    }
    /// Only the average half (`avg(x)`). The NaN half is its own rounding.
    #[inline]
    pub(crate) fn avg(average: f64) -> EvaluatedScalingMetric {
        EvaluatedScalingMetric {
            current: f64::NAN,
            average: round_metric(average),
        }
    }
    /// The SDK's view of the same pair, for alignment contexts.
    pub(crate) fn to_sdk(self) -> flowscale_sdk::EvaluatedMetric {
        flowscale_sdk::EvaluatedMetric {
            current: self.current,
            average: self.average,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_values_are_their_own_rounding() {
        for x in [
            0.0,
            1.0,
            48.0,
            32_768.0,
            1_126.0,
            4_503_599_627_370_497.0,
            9.2e18,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            let whole = EvaluatedScalingMetric::of_whole(x);
            let rounded = EvaluatedScalingMetric::of(x);
            assert_eq!(whole.current.to_bits(), rounded.current.to_bits(), "{x}");
            assert!(whole.average.is_nan());
        }
        assert!(EvaluatedScalingMetric::of_whole(f64::NAN).current.is_nan());
    }

    #[test]
    fn evaluated_values_are_rounded_and_named() {
        let m = EvaluatedScalingMetric::avg(588.235_294);
        assert!(m.current.is_nan());
        assert_eq!(m.average, 588.235);
        assert_eq!(
            ScalingMetric::TrueProcessingRate.as_str(),
            "TRUE_PROCESSING_RATE"
        );
        assert_eq!(
            serde_json::to_string(&ScalingMetric::ObservedTpr).unwrap(),
            "\"OBSERVED_TPR\""
        );
    }
}
