//! A vertex's evaluated metrics in the order of their names, the order in which the SDK lists
//! them (alignment and evaluator contexts): filled in this order, a context's list needs no
//! sorting and keeps the number of its names from vertex to vertex.
//!
//! Only the present metrics are visited (a vertex has about half of them): each marks its
//! place in name order in a mask, whose bits then list them by name. The mask determines the
//! names, so a caller can tell "the same names as the vertex before" by comparing two
//! integers instead of the names.

use std::sync::LazyLock;

use super::metric_map::VertexEvaluation;
use super::names::ScalingMetric;

/// Every metric in name order, and for each byte of a map's present bits (one bit per metric
/// at its discriminant) and each value of that byte, the bits of those metrics' places in name
/// order: a mask is then four look-ups, whatever the number of metrics.
static BY_NAME: LazyLock<(Vec<ScalingMetric>, [[u32; 256]; 4])> = LazyLock::new(|| {
    let mut all = ScalingMetric::ALL.to_vec();
    all.sort_by_key(ScalingMetric::as_str);
    let mut place = [0u32; u32::BITS as usize];
    for (at, metric) in (0u32..).zip(&all) {
        place[*metric as usize] = at;
    }
    let mut bytes = [[0u32; 256]; 4];
    for (byte, table) in bytes.iter_mut().enumerate() {
        for (value, named) in table.iter_mut().enumerate() {
            for bit in 0..8 {
                let metric = byte * 8 + bit;
                if value & 1 << bit != 0 && metric < all.len() {
                    *named |= 1 << place[metric];
                }
            }
        }
    }
    (all, bytes)
});

/// The names of the metrics present in `metrics`, as a mask of their places in name order:
/// equal masks, equal names in the same order.
pub(crate) fn names_mask(metrics: &VertexEvaluation) -> u32 {
    let (_, bytes) = &*BY_NAME;
    let present = metrics.present().to_le_bytes();
    bytes
        .iter()
        .zip(present)
        .fold(0, |named, (table, byte)| named | table[usize::from(byte)])
}

/// The metrics of `metrics` named by `mask` ([`names_mask`] of them), by name, sorted.
pub(crate) fn metrics_by_name(
    metrics: &VertexEvaluation,
    mask: u32,
) -> impl Iterator<Item = (&'static str, flowscale_sdk::EvaluatedMetric)> + '_ {
    let (by_name, _) = &*BY_NAME;
    let mut left = mask;
    std::iter::from_fn(move || {
        while left != 0 {
            let at = left.trailing_zeros() as usize;
            left &= left - 1;
            let metric = &by_name[at];
            if let Some(value) = metrics.get(metric) {
                return Some((metric.as_str(), value.to_sdk()));
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::metrics::EvaluatedScalingMetric;

    #[test]
    fn the_present_metrics_come_sorted_by_name_and_the_mask_names_them() {
        let value = |x: f64| EvaluatedScalingMetric {
            current: x,
            average: x,
        };
        let mut m = VertexEvaluation::new();
        m.insert(ScalingMetric::TrueProcessingRate, value(1.0));
        m.insert(ScalingMetric::Lag, value(2.0));
        m.insert(ScalingMetric::CatchUpDataRate, value(3.0));
        let mask = names_mask(&m);
        let names: Vec<_> = metrics_by_name(&m, mask).map(|(n, _)| n).collect();
        let mut sorted = vec![
            ScalingMetric::TrueProcessingRate.as_str(),
            ScalingMetric::Lag.as_str(),
            ScalingMetric::CatchUpDataRate.as_str(),
        ];
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        assert_eq!(mask.count_ones(), 3);

        // Another value, same names: same mask; another metric: another mask.
        m.insert(ScalingMetric::Lag, value(5.0));
        assert_eq!(names_mask(&m), mask);
        m.insert(ScalingMetric::Load, value(0.5));
        assert_ne!(names_mask(&m), mask);
    }

    #[test]
    fn each_metric_has_the_bit_of_its_rank_among_the_names() {
        let mut names: Vec<_> = ScalingMetric::ALL
            .iter()
            .filter(|m| (**m as usize) < crate::scaling::metrics::EVALUATED_COUNT)
            .map(|m| m.as_str())
            .collect();
        let evaluated = names.clone();
        names.sort_unstable();
        let mut all = VertexEvaluation::new();
        for (metric, name) in ScalingMetric::ALL.iter().zip(&evaluated) {
            let mut one = VertexEvaluation::new();
            let v = EvaluatedScalingMetric {
                current: 1.0,
                average: 1.0,
            };
            one.insert(*metric, v);
            all.insert(*metric, v);
            // The metric's place among the names of all metrics, sorted.
            let mut every: Vec<_> = ScalingMetric::ALL.iter().map(|m| m.as_str()).collect();
            every.sort_unstable();
            let rank = every.iter().position(|n| n == name).expect("listed");
            assert_eq!(names_mask(&one), 1 << rank, "{name}");
        }
        let listed: Vec<_> = metrics_by_name(&all, names_mask(&all))
            .map(|(n, _)| n)
            .collect();
        assert_eq!(listed, names);
    }
}
