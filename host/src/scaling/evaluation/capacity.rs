//! The processing capacity a vertex needs at a utilization: what both the band's thresholds and
//! the target parallelism are computed from.

use std::time::Duration;

use crate::scaling::metrics::{ScalingMetric, VertexEvaluation};
use crate::scaling::numeric::round_half_up;
use crate::scaling::options::{AutoscalerOptions, whole_seconds};

/// The processing capacity a vertex needs at utilization `u` (docs/decision-pipeline.md#capacity): catch-up rate,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::metrics::EvaluatedScalingMetric;

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
}
