//! What arrives: source rates over time and how load spreads over keys, buckets and partitions.

use serde::Serialize;

use super::rng::SplitMix64;

/// A component of a source's rate over time (records/s); a source's rate is the sum of its
/// components, so a step plus a spike is two components.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum RateProfile {
    /// `rate` all the time.
    Constant {
        /// Records/s.
        rate: f64,
    },
    /// `from` before `at_s`, `to` from then on.
    Step {
        /// Rate before the step.
        from: f64,
        /// Rate after the step.
        to: f64,
        /// When the step happens (s).
        at_s: f64,
    },
    /// `from` until `start_s`, linear to `to` at `end_s`, `to` afterwards.
    Ramp {
        /// Rate before the ramp.
        from: f64,
        /// Rate after the ramp.
        to: f64,
        /// Ramp start (s).
        start_s: f64,
        /// Ramp end (s).
        end_s: f64,
    },
    /// `mean + amplitude * sin(2π (t - phase) / period)`, never negative.
    Sine {
        /// Mean rate.
        mean: f64,
        /// Amplitude.
        amplitude: f64,
        /// Period (s).
        period_s: f64,
        /// Phase shift (s).
        phase_s: f64,
    },
    /// A daily cycle between `low` and `high`, peaking at `peak_s` into each `period_s`.
    Diurnal {
        /// Rate at the trough.
        low: f64,
        /// Rate at the peak.
        high: f64,
        /// Time of the peak within a period (s).
        peak_s: f64,
        /// Period (s), a day by default.
        period_s: f64,
    },
    /// `extra` records/s added during `[at_s, at_s + duration_s)`.
    Spike {
        /// Added rate.
        extra: f64,
        /// Start (s).
        at_s: f64,
        /// Length (s).
        duration_s: f64,
    },
    /// A recorded trace of `(seconds, rate)` points, held (or interpolated) between points and
    /// held after the last.
    Trace {
        /// Points sorted by time.
        points: Vec<(f64, f64)>,
        /// Linear interpolation between points instead of holding the previous value.
        interpolate: bool,
    },
}

impl RateProfile {
    /// The rate at `t_s` seconds into the run.
    pub(crate) fn rate_at(&self, t_s: f64) -> f64 {
        let rate = match self {
            RateProfile::Constant { rate } => *rate,
            RateProfile::Step { from, to, at_s } => {
                if t_s < *at_s {
                    *from
                } else {
                    *to
                }
            }
            RateProfile::Ramp {
                from,
                to,
                start_s,
                end_s,
            } => {
                if t_s <= *start_s {
                    *from
                } else if t_s >= *end_s {
                    *to
                } else {
                    from + (to - from) * (t_s - start_s) / (end_s - start_s)
                }
            }
            RateProfile::Sine {
                mean,
                amplitude,
                period_s,
                phase_s,
            } => mean + amplitude * (std::f64::consts::TAU * (t_s - phase_s) / period_s).sin(),
            RateProfile::Diurnal {
                low,
                high,
                peak_s,
                period_s,
            } => {
                let angle = std::f64::consts::TAU * (t_s - peak_s) / period_s;
                low + (high - low) * (1.0 + angle.cos()) / 2.0
            }
            RateProfile::Spike {
                extra,
                at_s,
                duration_s,
            } => {
                if t_s >= *at_s && t_s < at_s + duration_s {
                    *extra
                } else {
                    0.0
                }
            }
            RateProfile::Trace {
                points,
                interpolate,
            } => trace_at(points, *interpolate, t_s),
        };
        rate.max(0.0)
    }
}

fn trace_at(points: &[(f64, f64)], interpolate: bool, t_s: f64) -> f64 {
    let after = points.partition_point(|(t, _)| *t <= t_s);
    match (after.checked_sub(1).map(|i| points[i]), points.get(after)) {
        (None, Some((_, r))) => *r,
        (Some((_, r)), None) => r,
        (Some((t0, r0)), Some((t1, r1))) if interpolate && t1 > &t0 => {
            r0 + (r1 - r0) * (t_s - t0) / (t1 - t0)
        }
        (Some((_, r)), Some(_)) => r,
        (None, None) => 0.0,
    }
}

/// How load spreads over `n` slots (key groups, buckets or partitions).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum Distribution {
    /// Every slot gets the same share.
    Uniform,
    /// Slot of rank `r` (1-based) gets a share proportional to `1 / r^exponent`; ranks are
    /// assigned to slots by a seeded shuffle, since hashing scatters hot keys.
    Zipf {
        /// The Zipf exponent (0 = uniform).
        exponent: f64,
    },
    /// Explicit relative weights, one per slot (cycled if shorter than the slot count).
    Weights {
        /// The weights.
        weights: Vec<f64>,
    },
}

impl Distribution {
    /// Normalised shares of `n` slots; `rng` places Zipf ranks.
    pub(crate) fn shares(&self, n: usize, rng: &mut SplitMix64) -> Vec<f64> {
        if n == 0 {
            return Vec::new();
        }
        let mut raw: Vec<f64> = match self {
            Distribution::Uniform => vec![1.0; n],
            Distribution::Zipf { exponent } => {
                let mut w: Vec<f64> = (1..=n).map(|r| 1.0 / (r as f64).powf(*exponent)).collect();
                rng.shuffle(&mut w);
                w
            }
            Distribution::Weights { weights } if !weights.is_empty() => (0..n)
                .map(|i| weights[i % weights.len()].max(0.0))
                .collect(),
            Distribution::Weights { .. } => vec![1.0; n],
        };
        let sum: f64 = raw.iter().sum();
        if sum <= 0.0 {
            raw = vec![1.0; n];
            return raw.iter().map(|_| 1.0 / n as f64).collect();
        }
        raw.iter().map(|w| w / sum).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_evaluate_as_documented() {
        let step = RateProfile::Step {
            from: 10.0,
            to: 20.0,
            at_s: 5.0,
        };
        assert_eq!((step.rate_at(4.9), step.rate_at(5.0)), (10.0, 20.0));
        let ramp = RateProfile::Ramp {
            from: 0.0,
            to: 100.0,
            start_s: 10.0,
            end_s: 20.0,
        };
        assert_eq!(ramp.rate_at(15.0), 50.0);
        let spike = RateProfile::Spike {
            extra: 7.0,
            at_s: 1.0,
            duration_s: 2.0,
        };
        assert_eq!(
            (spike.rate_at(0.5), spike.rate_at(2.9), spike.rate_at(3.0)),
            (0.0, 7.0, 0.0)
        );
        let day = RateProfile::Diurnal {
            low: 100.0,
            high: 300.0,
            peak_s: 50_400.0,
            period_s: 86_400.0,
        };
        assert!((day.rate_at(50_400.0) - 300.0).abs() < 1e-9);
        assert!((day.rate_at(7_200.0) - 100.0).abs() < 1e-9);
        let sine = RateProfile::Sine {
            mean: 10.0,
            amplitude: 20.0,
            period_s: 4.0,
            phase_s: 0.0,
        };
        assert_eq!(sine.rate_at(3.0), 0.0, "never negative");
        let trace = RateProfile::Trace {
            points: vec![(0.0, 1.0), (10.0, 3.0)],
            interpolate: true,
        };
        assert_eq!((trace.rate_at(5.0), trace.rate_at(99.0)), (2.0, 3.0));
        let held = RateProfile::Trace {
            points: vec![(0.0, 1.0), (10.0, 3.0)],
            interpolate: false,
        };
        assert_eq!(held.rate_at(9.9), 1.0);
    }

    #[test]
    fn zipf_shares_are_skewed_and_normalised() {
        let mut rng = SplitMix64::new(1);
        let shares = Distribution::Zipf { exponent: 1.0 }.shares(128, &mut rng);
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let max = shares.iter().copied().fold(0.0, f64::max);
        assert!(max > 10.0 / 128.0);
        let uniform = Distribution::Uniform.shares(4, &mut rng);
        assert_eq!(uniform, vec![0.25; 4]);
    }
}
