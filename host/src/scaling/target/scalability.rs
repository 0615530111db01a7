//! The observed scalability coefficient: how much of a parallelism increase turned into
//! processing rate in the vertex's scaling history, to divide the scale factor by.

use crate::scaling::numeric::{ceil_2_decimals, java_max, java_min};
use crate::scaling::options::AutoscalerOptions;

/// The observed scalability coefficient of a vertex from its scaling history (docs/decision-pipeline.md#observed-scalability).
pub(crate) fn observed_scalability_coefficient(
    history: &[(u32, f64)],
    opts: &AutoscalerOptions,
) -> f64 {
    let min_obs =
        usize::try_from(opts.observed_scalability_min_observations.max(0)).unwrap_or(usize::MAX);
    if history.is_empty() || history.len() < min_obs {
        return 1.0;
    }
    // Baseline: newest entry at parallelism 1, else the smallest parallelism (newest on ties).
    let mut baseline = None;
    let mut smallest: Option<(u32, f64)> = None;
    for &(p, r) in history.iter().rev() {
        if p == 1 {
            baseline = Some(r);
            break;
        }
        if smallest.is_none_or(|(sp, _)| p < sp) {
            smallest = Some((p, r));
        }
    }
    let baseline = match (baseline, smallest) {
        (Some(b), _) => b,
        (None, Some((p, r))) => r / f64::from(p),
        (None, None) => f64::NAN,
    };
    if baseline.is_nan() || history.iter().any(|(_, r)| r.is_nan()) {
        return 1.0;
    }
    let sum_pr: f64 = history.iter().map(|&(p, r)| f64::from(p) * r).sum();
    let sum_p2: f64 = history
        .iter()
        .map(|&(p, _)| f64::from(p) * f64::from(p))
        .sum();
    if sum_p2 == 0.0 {
        return 1.0;
    }
    let alpha = sum_pr / (sum_p2 * baseline);
    let clamped = java_min(
        1.0,
        java_max(opts.observed_scalability_coefficient_min, alpha),
    );
    if clamped.is_nan() {
        // The Flink autoscaler fails on a NaN coefficient (0/0 with a zero baseline); keep the factor.
        return 1.0;
    }
    ceil_2_decimals(clamped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observed_scalability_coefficient_examples() {
        let opts = AutoscalerOptions {
            observed_scalability_min_observations: 2,
            ..AutoscalerOptions::default()
        };
        // P = 1 is the baseline: (100 + 2 * 120.625) / (5 * 100) = 0.6825 -> 0.69.
        assert_eq!(
            observed_scalability_coefficient(&[(1, 100.0), (2, 120.625)], &opts),
            0.69
        );
        // No P = 1: the smallest P, newest on ties: (2, 180) -> baseline 90.
        // (400 + 1200 + 360) / (24 * 90) = 0.9074 -> 0.91.
        assert_eq!(
            observed_scalability_coefficient(&[(2, 200.0), (4, 300.0), (2, 180.0)], &opts),
            0.91
        );
        // Clamped to coefficient-min, and never above 1.
        assert_eq!(
            observed_scalability_coefficient(&[(1, 100.0), (8, 100.0)], &opts),
            0.5
        );
        assert_eq!(
            observed_scalability_coefficient(&[(1, 100.0), (2, 250.0)], &opts),
            1.0
        );
        // Too few observations, or a NaN rate: 1.0.
        assert_eq!(observed_scalability_coefficient(&[(1, 100.0)], &opts), 1.0);
        assert_eq!(
            observed_scalability_coefficient(&[(1, 100.0), (2, f64::NAN)], &opts),
            1.0
        );
    }
}
