//! Record counts as floats and back, by the cheapest conversions: both run per subtask per
//! tick.

/// A record count as a float. Counts stay far below 2^63, and the signed conversion is one
/// instruction where the unsigned one is a branchy sequence; this runs per subtask per tick.
#[inline]
pub(super) fn to_f64(n: u64) -> f64 {
    n as i64 as f64
}

/// The floor of a non-negative finite value as a count (0 for negative or NaN input), by the
/// same single-instruction signed conversion.
#[inline]
pub(super) fn floor_u64(x: f64) -> u64 {
    if x >= 0.0 { x as i64 as u64 } else { 0 }
}
