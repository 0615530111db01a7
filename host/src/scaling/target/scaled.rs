//! From a scale factor to a target parallelism: `ceil(factor · current)` with Java's saturating
//! double-to-int conversion, clamped to `[lower, min(max parallelism, upper)]`. One function for
//! the pipeline and for `flowscale align --scale-factor`, so that both compute the same target.

use crate::scaling::numeric::to_int_saturating;

/// A target computed from a scale factor, with the intermediate values a reason cites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScaledTarget {
    /// `ceil(factor · current)` as Java's `(int)` cast gives it (NaN gives 0).
    pub(crate) raw: i32,
    /// `min(max parallelism, upper)`.
    pub(crate) upper_bound: i64,
    /// `raw` clamped to `[lower, upper_bound]`; 0 if that is negative.
    pub(crate) target: u32,
}

/// The target for `factor` at `current` parallelism, between `lower` and
/// `min(max_parallelism, upper)` (the upper bound wins over the lower one).
pub(crate) fn scaled_target(
    factor: f64,
    current: u32,
    max_parallelism: u32,
    lower: i64,
    upper: i64,
) -> ScaledTarget {
    let raw = to_int_saturating((factor * f64::from(current)).ceil());
    let upper_bound = i64::from(max_parallelism).min(upper);
    let clamped = i64::from(raw).max(lower).min(upper_bound);
    ScaledTarget {
        raw,
        upper_bound,
        target: u32::try_from(clamped).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(factor: f64, current: u32, lower: u32, max_parallelism: u32, upper: u32) -> u32 {
        scaled_target(
            factor,
            current,
            max_parallelism,
            i64::from(lower),
            i64::from(upper),
        )
        .target
    }

    #[test]
    fn scale_factor_targets_are_the_ceiled_product_clamped_to_the_limits() {
        // ceil(1.5 · 16) = 24.
        assert_eq!(target(1.5, 16, 1, 128, 200), 24);
        // Clamped to min(K, upper) and to lower.
        assert_eq!(target(100.0, 16, 1, 128, 200), 128);
        assert_eq!(target(0.01, 16, 3, 128, 200), 3);
        // NaN converts to 0, then lower applies; huge values saturate.
        assert_eq!(target(f64::NAN, 16, 1, 128, 200), 1);
        assert_eq!(target(1e300, 16, 1, 32768, u32::MAX), 32768);
        // Negative factors clamp to lower.
        assert_eq!(target(-2.0, 16, 2, 128, 200), 2);
    }
}
