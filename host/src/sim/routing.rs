//! Where records go: Flink's key-group assignment, ship strategies and integer apportionment.
//!
//! HASH edges route by key group exactly as Flink's `KeyGroupRangeAssignment` does, so a
//! parallelism that does not divide the key-group count really leaves some subtasks with one group
//! more than others, and the vertex really runs at the speed of its busiest subtask.

use flowscale_sdk::ShipStrategy;

use crate::alignment::key_groups::operator_index_for_key_group;

/// How the output of an upstream vertex is spread over the subtasks of the downstream vertex.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Route {
    /// Every upstream subtask sends the same shares (summing to 1) to the downstream subtasks
    /// (HASH, CUSTOM, REBALANCE, SHUFFLE, GLOBAL); the simulator pools the upstream output.
    Shared(Vec<f64>),
    /// Every record goes to every downstream subtask.
    Broadcast,
    /// Upstream subtask `i` sends to its own list of `(downstream subtask, share)` (FORWARD,
    /// RESCALE).
    Pointwise(Vec<Vec<(usize, f64)>>),
}

/// The route of an edge with `strategy` from `upstream` to `downstream` subtasks.
/// `key_weights` is the load share of each key group (HASH, length = the downstream max
/// parallelism) or of each bucket (CUSTOM, length = the bucket count); others ignore it.
pub(crate) fn route(
    strategy: &ShipStrategy,
    key_weights: &[f64],
    upstream: u32,
    downstream: u32,
) -> Route {
    let p = downstream.max(1) as usize;
    match strategy {
        ShipStrategy::Hash => {
            let k = key_weights.len() as u32;
            let mut weights = vec![0.0; p];
            for (kg, w) in key_weights.iter().enumerate() {
                weights[operator_index_for_key_group(k, p as u32, kg as u32) as usize] += w;
            }
            Route::Shared(weights)
        }
        ShipStrategy::Custom { buckets } if *buckets > 0 && !key_weights.is_empty() => {
            let mut weights = vec![0.0; p];
            for (bucket, w) in key_weights.iter().enumerate() {
                weights[bucket % p] += w;
            }
            Route::Shared(weights)
        }
        ShipStrategy::Global => {
            let mut weights = vec![0.0; p];
            weights[0] = 1.0;
            Route::Shared(weights)
        }
        ShipStrategy::Broadcast => Route::Broadcast,
        ShipStrategy::Forward | ShipStrategy::Rescale => Route::Pointwise(pointwise(upstream, p)),
        _ => Route::Shared(vec![1.0 / p as f64; p]),
    }
}

/// Flink's pointwise pattern: with more upstream than downstream subtasks, upstream `i` feeds
/// downstream `i * d / u`; otherwise upstream `i` feeds downstream `[i*d/u, (i+1)*d/u)` evenly.
fn pointwise(upstream: u32, downstream: usize) -> Vec<Vec<(usize, f64)>> {
    let u = upstream.max(1) as usize;
    let d = downstream;
    (0..u)
        .map(|i| {
            if u >= d {
                vec![(i * d / u, 1.0)]
            } else {
                let (start, end) = (i * d / u, (i + 1) * d / u);
                let n = (end - start).max(1);
                (start..start + n).map(|j| (j, 1.0 / n as f64)).collect()
            }
        })
        .collect()
}

/// Splits `total` into integer parts proportional to `weights` (which need not be normalised)
/// by cumulative rounding, so the parts sum to `total` exactly and each is within one of its
/// exact share. `offset` rotates where rounding starts, so a trickle of single records does not
/// always land on the same subtask.
pub(crate) fn apportion(total: u64, weights: &[f64], offset: usize, out: &mut [u64]) {
    let n = weights.len();
    let sum: f64 = weights.iter().sum();
    if n == 0 || total == 0 || sum <= 0.0 {
        out.fill(0);
        return;
    }
    if out.len() > n {
        out[n..].fill(0);
    }
    let scale = total as f64 / sum;
    let mut cumulative = 0.0;
    let mut assigned = 0u64;
    let mut part = |w: f64, out: &mut u64| {
        cumulative += w;
        // Rounding by adding one half and truncating: the value is non-negative, and this
        // avoids a libm call in the hottest loop of the simulator. Signed conversion: the value
        // is below `total` + 1 < 2^63.
        let target = ((cumulative * scale + 0.5) as i64 as u64).min(total);
        *out = target.saturating_sub(assigned);
        assigned += *out;
    };
    // Elements `start, start + 1, ..., n - 1, 0, ..., start - 1`, as two runs of the slices
    // (no index arithmetic or bounds check per element); the last one takes what is left.
    let start = offset % n;
    let last = if start == 0 { n - 1 } else { start - 1 };
    let (first_run, second_run) = if start == 0 {
        (0..n - 1, 0..0)
    } else {
        (start..n, 0..start - 1)
    };
    for run in [first_run, second_run] {
        for (w, o) in weights[run.clone()].iter().zip(&mut out[run]) {
            part(*w, o);
        }
    }
    out[last] = total.saturating_sub(assigned);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_route_reflects_group_counts() {
        let uniform = vec![1.0 / 128.0; 128];
        let Route::Shared(w) = route(&ShipStrategy::Hash, &uniform, 4, 24) else {
            panic!("hash is shared");
        };
        let max = w.iter().copied().fold(0.0, f64::max);
        assert!((max - 6.0 / 128.0).abs() < 1e-12);
        let Route::Shared(w) = route(&ShipStrategy::Hash, &uniform, 4, 32) else {
            panic!("hash is shared");
        };
        assert!(w.iter().all(|x| (x - 4.0 / 128.0).abs() < 1e-12));
    }

    #[test]
    fn custom_route_sends_bucket_b_to_b_mod_p() {
        let buckets = vec![1.0 / 48.0; 48];
        let Route::Shared(w) = route(&ShipStrategy::Custom { buckets: 48 }, &buckets, 2, 10) else {
            panic!("custom is shared");
        };
        // 48 = 4*10 + 8: subtasks 0..8 get 5 buckets, 8 and 9 get 4.
        assert!((w[0] - 5.0 / 48.0).abs() < 1e-12);
        assert!((w[9] - 4.0 / 48.0).abs() < 1e-12);
    }

    #[test]
    fn pointwise_covers_every_downstream_subtask() {
        let Route::Pointwise(up) = route(&ShipStrategy::Rescale, &[], 2, 6) else {
            panic!("rescale is pointwise");
        };
        let targets: Vec<usize> = up.iter().flatten().map(|(j, _)| *j).collect();
        assert_eq!(targets, vec![0, 1, 2, 3, 4, 5]);
        let Route::Pointwise(up) = route(&ShipStrategy::Forward, &[], 3, 3) else {
            panic!("forward is pointwise");
        };
        assert_eq!(up, vec![vec![(0, 1.0)], vec![(1, 1.0)], vec![(2, 1.0)]]);
    }

    #[test]
    fn apportion_sums_exactly_and_rotates() {
        let mut out = vec![0; 3];
        apportion(10, &[1.0, 1.0, 1.0], 0, &mut out);
        assert_eq!(out.iter().sum::<u64>(), 10);
        assert!(out.iter().all(|&x| (3..=4).contains(&x)));
        apportion(1, &[1.0, 1.0, 1.0], 0, &mut out);
        let first = out.clone();
        apportion(1, &[1.0, 1.0, 1.0], 1, &mut out);
        assert_ne!(first, out);
        apportion(7, &[0.0, 2.0, 0.0], 2, &mut out);
        assert_eq!(out, vec![0, 7, 0]);
    }
}
