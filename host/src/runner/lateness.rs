//! How late the cycles of a job started: for every cycle with a due time (a wall-clock job's
//! next interval, a paced virtual clock's next step), the time from when it was due to when it
//! started. A scheduler that keeps up shows a few milliseconds; a fleet too large for its
//! workers shows it here first.

use std::time::Duration;

use serde::Serialize;

/// The upper bounds of the histogram's buckets, in milliseconds; a last bucket holds the rest.
/// `flowscale_cycle_lateness_seconds` has the same buckets.
pub(crate) const BOUNDS_MS: [u64; 15] = [
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 60_000,
];

/// A histogram of cycle lateness, small enough to keep one per job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lateness {
    buckets: [u64; BOUNDS_MS.len() + 1],
    cycles: u64,
    max_us: u64,
}

/// A lateness histogram in a few numbers, as printed and serialized. The quantiles are the
/// upper bound of the bucket they fall in (1, 2, 5, 10, 20, 50 ms, ...), or the maximum when
/// that is smaller.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatenessSummary {
    /// Cycles with a due time.
    pub(crate) cycles: u64,
    /// Half the cycles started at most this late (ms).
    pub(crate) p50_ms: f64,
    /// 90 % of the cycles started at most this late (ms).
    pub(crate) p90_ms: f64,
    /// 99 % of the cycles started at most this late (ms).
    pub(crate) p99_ms: f64,
    /// The latest cycle (ms).
    pub(crate) max_ms: f64,
}

impl Lateness {
    /// Counts one cycle that started `late` after it was due.
    pub(crate) fn record(&mut self, late: Duration) {
        let us = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
        let ms = us / 1000;
        let bucket = BOUNDS_MS
            .iter()
            .position(|&bound| ms < bound)
            .unwrap_or(BOUNDS_MS.len());
        self.buckets[bucket] += 1;
        self.cycles += 1;
        self.max_us = self.max_us.max(us);
    }

    /// Adds another histogram's cycles to this one.
    pub fn merge(&mut self, other: &Lateness) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets) {
            *mine += theirs;
        }
        self.cycles += other.cycles;
        self.max_us = self.max_us.max(other.max_us);
    }

    /// Cycles counted.
    #[cfg(test)]
    pub(crate) fn cycles(&self) -> u64 {
        self.cycles
    }

    /// The latest cycle.
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.max_us)
    }

    /// The lateness at most a fraction `q` (0 to 1) of the cycles reached, as the upper
    /// bound of its bucket (never more than the maximum); zero without cycles.
    pub(crate) fn quantile(&self, q: f64) -> Duration {
        if self.cycles == 0 {
            return Duration::ZERO;
        }
        // The rank of the cycle the quantile falls on, 1-based.
        let rank = ((q.clamp(0.0, 1.0) * self.cycles as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, count) in self.buckets.iter().enumerate() {
            seen += count;
            if seen >= rank {
                let bound = BOUNDS_MS
                    .get(bucket)
                    .map_or(self.max(), |&ms| Duration::from_millis(ms));
                return bound.min(self.max());
            }
        }
        self.max()
    }

    /// The histogram in a few numbers; `None` without cycles.
    pub fn summary(&self) -> Option<LatenessSummary> {
        // Whole microseconds, so that a bound reads 8.535 rather than 8.534999999999998.
        let ms = |d: Duration| d.as_micros() as f64 / 1000.0;
        (self.cycles > 0).then(|| LatenessSummary {
            cycles: self.cycles,
            p50_ms: ms(self.quantile(0.5)),
            p90_ms: ms(self.quantile(0.9)),
            p99_ms: ms(self.quantile(0.99)),
            max_ms: ms(self.max()),
        })
    }
}

impl std::fmt::Display for LatenessSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cycles started late by p50 <= {:.1} ms, p90 <= {:.1} ms, p99 <= {:.1} ms, max {:.1} ms",
            self.cycles, self.p50_ms, self.p90_ms, self.p99_ms, self.max_ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_bucket_bounds_capped_by_the_maximum() {
        let mut lateness = Lateness::default();
        assert_eq!(lateness.summary(), None);
        // 90 cycles at 0.5 ms (bucket < 1 ms), 9 at 30 ms (bucket < 50 ms), 1 at 700 ms.
        for _ in 0..90 {
            lateness.record(Duration::from_micros(500));
        }
        for _ in 0..9 {
            lateness.record(Duration::from_millis(30));
        }
        lateness.record(Duration::from_millis(700));
        assert_eq!(lateness.cycles(), 100);
        // Rank 50 and rank 90 are among the 0.5 ms cycles; rank 99 is a 30 ms one; rank 100
        // the 700 ms one, in the bucket below 1 s, capped by the maximum.
        assert_eq!(lateness.quantile(0.5), Duration::from_millis(1));
        assert_eq!(lateness.quantile(0.9), Duration::from_millis(1));
        assert_eq!(lateness.quantile(0.99), Duration::from_millis(50));
        assert_eq!(lateness.quantile(1.0), Duration::from_millis(700));
        assert_eq!(lateness.max(), Duration::from_millis(700));

        // A merged histogram counts both.
        let mut other = Lateness::default();
        other.record(Duration::from_secs(90));
        lateness.merge(&other);
        assert_eq!(lateness.cycles(), 101);
        assert_eq!(lateness.max(), Duration::from_secs(90));
        // Past the last bound: the maximum.
        assert_eq!(lateness.quantile(1.0), Duration::from_secs(90));
        let summary = lateness.summary().expect("cycles");
        assert_eq!(summary.max_ms, 90_000.0);
    }
}
