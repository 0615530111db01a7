//! Skew-aware targets (`scaling.skew-aware`, docs/skew-aware.md): where the per-subtask load of
//! a keyed vertex is known, the target is the smallest parallelism whose busiest subtask,
//! predicted by Flink's key-group ranges, can carry its share of the target capacity, instead of
//! the scale factor's `ceil(factor · current)`, which assumes the busiest subtask's share shrinks
//! in proportion to the parallelism.
//!
//! The vertex runs at the speed of its busiest subtask. Its true processing rate `TPR` was
//! measured with a busiest share `ŝ` (which share depends on `metrics.busy-time.aggregator`:
//! MAX the busiest subtask's, AVG the mean `1/c`, MIN the least busy subtask's); at parallelism
//! `p` with busiest share `s(p)` it processes `TPR · ŝ / s(p)`. That reaches the capacity the
//! scale factor asks for (`capacity / coefficient`) exactly when `s(p) ≤ ŝ / f`, with
//! `f = capacity / TPR / coefficient` the scale factor before its max-factor bounds.
//!
//! What it can know: each subtask's load at the current parallelism. What it cannot: how that
//! load is spread over the key groups a subtask owns; it assumes evenly
//! (docs/skew-aware.md#what-it-cannot-know).

use std::ops::RangeInclusive;

use flowscale_sdk::SubtaskLoad;

use crate::alignment::key_groups::key_group_range;
use crate::scaling::options::BusyTimeAggregator;

/// Below this skew (the estimated hottest key group over the mean one, minus 1) the load counts
/// as even and the Flink autoscaler's target stands: the subtask loads of a job with uniform
/// keys differ by the measurement noise (a few percent), which must not move the parallelism.
pub(crate) const MIN_SKEW: f64 = 0.1;

/// Relative slack for float comparisons: shares equal in exact arithmetic compare equal.
const EPS: f64 = 1e-9;

/// The per-subtask loads as one non-negative number each: records in per second when every
/// subtask reports it (it counts the load itself, also where a saturated subtask's busy time
/// is capped at 100%), else the busy ratios; `None` when neither is known for every subtask or
/// they sum to nothing.
pub(crate) fn load_vector(loads: &[SubtaskLoad]) -> Option<Vec<f64>> {
    let pick = |f: fn(&SubtaskLoad) -> Option<f64>| -> Option<Vec<f64>> {
        let v: Option<Vec<f64>> = loads
            .iter()
            .map(|l| f(l).filter(|x| x.is_finite() && *x >= 0.0))
            .collect();
        v.filter(|v| v.iter().sum::<f64>() > 0.0)
    };
    pick(|l| l.records_in_per_second).or_else(|| pick(|l| l.busy_ratio))
}

/// The estimated load of each key group, as prefix sums: each subtask's observed load spread
/// evenly over the key groups it owns at the current parallelism.
#[derive(Debug, Clone)]
pub(crate) struct KeyGroupLoads {
    /// `prefix[g]`: the estimated load of key groups `[0, g)`.
    prefix: Vec<f64>,
    /// The estimated load of the hottest key group.
    hottest: f64,
}

impl KeyGroupLoads {
    /// The estimate for `max_parallelism` key groups from the loads of the `loads.len()`
    /// subtasks that run now (a subtask that owns no key group adds nothing).
    pub(crate) fn estimate(loads: &[f64], max_parallelism: u32) -> KeyGroupLoads {
        let k = max_parallelism as usize;
        let current = u32::try_from(loads.len()).unwrap_or(u32::MAX);
        let mut units = vec![0.0; k];
        for (i, load) in (0u32..).zip(loads) {
            let range = key_group_range(max_parallelism, current, i);
            let (a, b) = (range.start as usize, (range.end as usize).min(k));
            if b > a {
                let each = load / (b - a) as f64;
                units[a..b].iter_mut().for_each(|u| *u = each);
            }
        }
        let mut prefix = Vec::with_capacity(k + 1);
        let mut acc = 0.0;
        prefix.push(acc);
        for u in &units {
            acc += u;
            prefix.push(acc);
        }
        KeyGroupLoads {
            prefix,
            hottest: units.iter().copied().fold(0.0, f64::max),
        }
    }

    fn total(&self) -> f64 {
        self.prefix.last().copied().unwrap_or(0.0)
    }

    fn key_groups(&self) -> u32 {
        u32::try_from(self.prefix.len() - 1).unwrap_or(u32::MAX)
    }

    /// The load of subtask `i` of `p`: the key groups of its range.
    fn subtask(&self, p: u32, i: u32) -> f64 {
        let range = key_group_range(self.key_groups(), p, i);
        self.prefix[range.end as usize] - self.prefix[range.start as usize]
    }

    /// The busiest subtask's share of the load at parallelism `p` (0 without load).
    pub(crate) fn busiest_share(&self, p: u32) -> f64 {
        let total = self.total();
        if p == 0 || total <= 0.0 {
            return 0.0;
        }
        (0..p).map(|i| self.subtask(p, i)).fold(0.0, f64::max) / total
    }

    /// The least busy subtask's share at parallelism `p`.
    fn lightest_share(&self, p: u32) -> f64 {
        let total = self.total();
        if p == 0 || total <= 0.0 {
            return 0.0;
        }
        (0..p)
            .map(|i| self.subtask(p, i))
            .fold(f64::INFINITY, f64::min)
            / total
    }

    /// The hottest key group's share: no parallelism has a busiest subtask below it.
    pub(crate) fn hottest_share(&self) -> f64 {
        let total = self.total();
        if total <= 0.0 {
            0.0
        } else {
            self.hottest / total
        }
    }

    /// The hottest key group over the mean one, minus 1.
    pub(crate) fn skew(&self) -> f64 {
        self.hottest_share() * f64::from(self.key_groups()) - 1.0
    }
}

/// What the skew-aware target is computed from.
#[derive(Debug, Clone)]
pub(crate) struct SkewInputs<'a> {
    /// The current parallelism `c`.
    pub(crate) current: u32,
    /// The Flink autoscaler's target, `ceil(factor · c)` within the limits: its direction (up,
    /// down, none) is kept.
    pub(crate) target: u32,
    /// The key groups `K`.
    pub(crate) max_parallelism: u32,
    /// The parallelisms the scale factor's bounds and the limits allow: from
    /// `ceil((1 − scale-down.max-factor) · c)` to `ceil((1 + scale-up.max-factor) · c)`, within
    /// `[lower, min(K, upper)]`.
    pub(crate) allowed: RangeInclusive<u32>,
    /// `f = capacity / TPR / coefficient`, before the max-factor bounds.
    pub(crate) factor: f64,
    pub(crate) aggregator: BusyTimeAggregator,
    /// The load of each subtask at `c`.
    pub(crate) loads: &'a [SubtaskLoad],
}

/// The skew-aware answer and the figures it rests on (for the decision's explanation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SkewTarget {
    /// The parallelism to apply.
    pub(crate) parallelism: u32,
    /// The predicted busiest share there.
    pub(crate) share: f64,
    /// The largest busiest share that carries the capacity: `ŝ / f`.
    pub(crate) limit: f64,
    /// `ŝ`: the share the true processing rate was measured with.
    pub(crate) measured: f64,
    /// The predicted busiest share at the Flink autoscaler's target.
    pub(crate) share_at_target: f64,
}

impl SkewTarget {
    /// The processing rate expected at the chosen parallelism: `TPR · ŝ / s(p)`.
    pub(crate) fn expected_rate(&self, tpr: f64) -> f64 {
        tpr * self.measured / self.share
    }

    /// One line for the decision's explanation.
    pub(crate) fn describe(&self, current: u32, target: u32) -> String {
        format!(
            "skew-aware (scaling.skew-aware): {current} -> {}: predicted busiest subtask {:.2}% \
             of the load there, within {:.2}% (the measured {:.2}% over the scale factor); the \
             mean-based target {target} predicts {:.2}%",
            self.parallelism,
            self.share * 100.0,
            self.limit * 100.0,
            self.measured * 100.0,
            self.share_at_target * 100.0,
        )
    }
}

/// The smallest allowed parallelism in the Flink autoscaler's direction (scale-up: above `c`;
/// scale-down: up to `c`) whose predicted busiest subtask stays within `ŝ / f`; `None` where the
/// Flink autoscaler's target stands: no change asked, per-subtask load unknown or nearly even,
/// or (scaling up) no allowed parallelism that can carry the load.
pub(crate) fn skew_aware_target(inputs: &SkewInputs<'_>) -> Option<SkewTarget> {
    let (c, t) = (inputs.current, inputs.target);
    if t == c || c == 0 || inputs.loads.len() != c as usize || inputs.max_parallelism < c {
        return None;
    }
    let loads = load_vector(inputs.loads)?;
    let estimate = KeyGroupLoads::estimate(&loads, inputs.max_parallelism);
    if estimate.skew() <= MIN_SKEW {
        return None;
    }
    let measured = match inputs.aggregator {
        BusyTimeAggregator::Max => estimate.busiest_share(c),
        BusyTimeAggregator::Avg => 1.0 / f64::from(c),
        BusyTimeAggregator::Min => estimate.lightest_share(c),
    };
    let limit = measured / inputs.factor;
    if !(limit.is_finite() && limit > 0.0) {
        return None;
    }
    let (lo, hi) = (*inputs.allowed.start(), *inputs.allowed.end());
    let region = if t > c {
        c.saturating_add(1).max(lo)..=hi
    } else {
        lo.max(1)..=c.min(hi)
    };
    // No parallelism has a busiest subtask below the hottest key group or below 1/p.
    if estimate.hottest_share() > limit * (1.0 + EPS) {
        return None;
    }
    let first = (1.0 / limit).ceil().min(f64::from(u32::MAX)) as u32;
    let start = (*region.start()).max(first.saturating_sub(1)).max(1);
    (start..=*region.end())
        .map(|p| (p, estimate.busiest_share(p)))
        .find(|&(_, share)| share <= limit * (1.0 + EPS))
        .map(|(parallelism, share)| SkewTarget {
            parallelism,
            share,
            limit,
            measured,
            share_at_target: estimate.busiest_share(t),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(loads: &[f64]) -> Vec<SubtaskLoad> {
        loads
            .iter()
            .map(|&r| SubtaskLoad {
                busy_ratio: Some(0.5),
                records_in_per_second: Some(r),
            })
            .collect()
    }

    fn inputs<'a>(
        current: u32,
        target: u32,
        factor: f64,
        aggregator: BusyTimeAggregator,
        loads: &'a [SubtaskLoad],
    ) -> SkewInputs<'a> {
        SkewInputs {
            current,
            target,
            max_parallelism: 128,
            allowed: 1..=128,
            factor,
            aggregator,
            loads,
        }
    }

    const CLOSE: f64 = 1e-12;

    /// K = 128 at p = 2: subtask 0 owns [0, 64), subtask 1 [64, 128). Loads 3000 and 1000
    /// records/s: 46.875 per key group in the first half, 15.625 in the second; total 4000.
    fn hot_half() -> Vec<SubtaskLoad> {
        records(&[3000.0, 1000.0])
    }

    #[test]
    fn the_estimate_spreads_each_subtask_over_its_key_groups() {
        let e = KeyGroupLoads::estimate(&[3000.0, 1000.0], 128);
        // At the current parallelism the prediction is the observation: 3000/4000.
        assert!((e.busiest_share(2) - 0.75).abs() < CLOSE);
        assert!((e.lightest_share(2) - 0.25).abs() < CLOSE);
        // p = 4: [0, 32) = 32 · 46.875 = 1500 -> 0.375.
        assert!((e.busiest_share(4) - 0.375).abs() < CLOSE);
        // p = 5: starts 0, 26, 52, 77, 103 (ceil(128·i/5)); [0, 26) and [26, 52) are hot:
        // 26 · 46.875 = 1218.75 -> 0.3046875.
        assert!((e.busiest_share(5) - 0.3046875).abs() < CLOSE);
        // p = 6: starts 0, 22, 43, 64, ...; [0, 22): 22 · 46.875 = 1031.25 -> 0.2578125.
        assert!((e.busiest_share(6) - 0.2578125).abs() < CLOSE);
        // The hottest group: 46.875 / 4000; skew 46.875 · 128 / 4000 − 1 = 0.5.
        assert!((e.hottest_share() - 46.875 / 4000.0).abs() < CLOSE);
        assert!((e.skew() - 0.5).abs() < CLOSE);
    }

    #[test]
    fn a_scale_up_takes_the_smallest_parallelism_whose_busiest_subtask_carries_the_capacity() {
        // MAX aggregator: TPR was measured at the busiest share ŝ = 0.75. Factor 2.48: the
        // Flink autoscaler's target is ceil(2.48 · 2) = 5, which assumes the busiest share
        // at 5 is 0.75 · 2/5 = 0.3. The capacity needs s(p) ≤ 0.75 / 2.48 = 0.302419...:
        // p = 4 (0.375) and p = 5 (0.3046875, the hot half splits 26/26 groups) do not
        // carry it; p = 6 (0.2578125) does.
        let loads = hot_half();
        let got = skew_aware_target(&inputs(2, 5, 2.48, BusyTimeAggregator::Max, &loads))
            .expect("skewed");
        assert_eq!(got.parallelism, 6);
        assert!((got.limit - 0.75 / 2.48).abs() < CLOSE);
        assert!((got.measured - 0.75).abs() < CLOSE);
        assert!((got.share - 0.2578125).abs() < CLOSE);
        assert!((got.share_at_target - 0.3046875).abs() < CLOSE);
        // Expected rate at 6: TPR · 0.75 / 0.2578125 = 2.909... · TPR (≥ 2.48 · TPR).
        assert!((got.expected_rate(1000.0) - 1000.0 * 0.75 / 0.2578125).abs() < 1e-9);
        // Factor 2.45 (the same target 5): the limit 0.75 / 2.45 = 0.306122... holds at 5.
        let got = skew_aware_target(&inputs(2, 5, 2.45, BusyTimeAggregator::Max, &loads))
            .expect("skewed");
        assert_eq!(got.parallelism, 5);
    }

    #[test]
    fn with_the_avg_aggregator_the_mean_share_is_what_was_measured() {
        // AVG: TPR assumes every subtask as busy as the mean, ŝ = 1/2. Factor 1.5: the Flink
        // autoscaler's target is ceil(3) = 3; the limit is 0.5 / 1.5 = 1/3. p = 3: [0, 43)
        // = 43 · 46.875 = 2015.625 -> 0.50390625; p = 4: 0.375; p = 5: 0.3046875 ≤ 1/3.
        let loads = hot_half();
        let got =
            skew_aware_target(&inputs(2, 3, 1.5, BusyTimeAggregator::Avg, &loads)).expect("skewed");
        assert_eq!(got.parallelism, 5);
        assert!((got.share_at_target - 0.50390625).abs() < CLOSE);
        // MIN: ŝ is the lightest subtask's 0.25; limit 0.25 / 1.5 = 1/6. p = 6: 0.2578; the
        // first p at or below 1/6: p = 9, starts ceil(128·i/9) = 0, 15, 29, ...: [0, 15) =
        // 703.125 -> 0.17578 > 1/6; p = 10: [0, 13) = 609.375 -> 0.15234 ≤ 1/6.
        let got =
            skew_aware_target(&inputs(2, 3, 1.5, BusyTimeAggregator::Min, &loads)).expect("skewed");
        assert_eq!(got.parallelism, 10);
        assert!((got.share - 13.0 * 46.875 / 4000.0).abs() < CLOSE);
    }

    #[test]
    fn a_scale_down_goes_as_far_as_the_busiest_subtask_allows() {
        // p = 4 over K = 128 (32 groups each), loads 3000, 1000, 1000, 1000: ŝ = 0.5 (MAX).
        // Factor 0.7: the Flink autoscaler's target is ceil(2.8) = 3, assuming the busiest
        // share at 3 is 0.5 · 4/3 = 0.667 and at 2 is 1.0. The limit is 0.5 / 0.7 = 0.714:
        // at p = 2, [0, 64) = old subtasks 0 and 1 = 4000 / 6000 = 0.667 ≤ 0.714.
        let loads = records(&[3000.0, 1000.0, 1000.0, 1000.0]);
        let down = SkewInputs {
            allowed: 2..=128,
            ..inputs(4, 3, 0.7, BusyTimeAggregator::Max, &loads)
        };
        let got = skew_aware_target(&down).expect("skewed");
        assert_eq!(got.parallelism, 2);
        assert!((got.share - 4000.0 / 6000.0).abs() < CLOSE);
        // At 3: [0, 43) = 32 · 93.75 + 11 · 31.25 = 3343.75 -> 0.557.
        assert!((got.share_at_target - 3343.75 / 6000.0).abs() < CLOSE);
        // The lower bound (e.g. ceil(0.6 · 4) = 3 with scale-down.max-factor 0.4) holds.
        let bounded = SkewInputs {
            allowed: 3..=128,
            ..down.clone()
        };
        assert_eq!(skew_aware_target(&bounded).map(|s| s.parallelism), Some(3));
        // Factor 0.9: limit 0.5 / 0.9 = 0.556; p = 2 (0.667) and p = 3 (0.557...) exceed it,
        // so the current parallelism stays: 4 (0.5).
        let mild = SkewInputs {
            factor: 0.9,
            ..down
        };
        assert_eq!(skew_aware_target(&mild).map(|s| s.parallelism), Some(4));
    }

    #[test]
    fn the_bounds_hold_and_what_cannot_carry_the_load_is_left_to_the_flink_target() {
        let loads = hot_half();
        // The upper bound 5 (e.g. vertex.max-parallelism): nothing up to 5 carries 0.3024.
        let bounded = SkewInputs {
            allowed: 1..=5,
            ..inputs(2, 5, 2.48, BusyTimeAggregator::Max, &loads)
        };
        assert_eq!(skew_aware_target(&bounded), None);
        // Factor 100: limit 0.0075 is below the hottest group's 46.875/4000 = 0.0117.
        assert_eq!(
            skew_aware_target(&inputs(2, 128, 100.0, BusyTimeAggregator::Max, &loads)),
            None
        );
    }

    #[test]
    fn without_skew_or_load_the_flink_target_stands() {
        // 1100 and 1000: the hottest group is 1100/64 over the mean 2100/128: skew 0.0476.
        let even = records(&[1100.0, 1000.0]);
        assert_eq!(
            skew_aware_target(&inputs(2, 4, 2.0, BusyTimeAggregator::Max, &even)),
            None
        );
        // No change asked, no loads, loads of another parallelism, unknown signals.
        let loads = hot_half();
        assert_eq!(
            skew_aware_target(&inputs(2, 2, 1.0, BusyTimeAggregator::Max, &loads)),
            None
        );
        assert_eq!(
            skew_aware_target(&inputs(2, 5, 2.48, BusyTimeAggregator::Max, &[])),
            None
        );
        assert_eq!(
            skew_aware_target(&inputs(3, 5, 2.48, BusyTimeAggregator::Max, &loads)),
            None
        );
        let unknown = vec![SubtaskLoad::default(); 2];
        assert_eq!(
            skew_aware_target(&inputs(2, 5, 2.48, BusyTimeAggregator::Max, &unknown)),
            None
        );
    }

    #[test]
    fn busy_ratios_stand_in_when_records_are_not_reported_everywhere() {
        let loads = [
            SubtaskLoad {
                busy_ratio: Some(0.9),
                records_in_per_second: Some(3000.0),
            },
            SubtaskLoad {
                busy_ratio: Some(0.3),
                records_in_per_second: None,
            },
        ];
        assert_eq!(load_vector(&loads), Some(vec![0.9, 0.3]));
        assert_eq!(load_vector(&hot_half()), Some(vec![3000.0, 1000.0]));
    }
}
