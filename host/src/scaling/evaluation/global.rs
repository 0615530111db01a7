//! The job-wide evaluated metrics: GC pressure, heap and memory usage, task slots.

use std::collections::BTreeMap;

use crate::scaling::metrics::{EvaluatedScalingMetric, MetricHistory, ScalingMetric, average_of};

/// Global evaluated metrics (docs/decision-pipeline.md#global-metrics).
pub(crate) fn evaluate_global(
    history: &MetricHistory,
) -> BTreeMap<ScalingMetric, EvaluatedScalingMetric> {
    let newest = history.latest().map(|s| &s.global);
    let latest = |m: ScalingMetric| {
        newest
            .and_then(|global| global.get(&m).copied())
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
