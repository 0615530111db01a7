//! Rate estimators: from one completed batch to the rate a job's sources should be allowed.
//!
//! The PID estimator is Spark Streaming's `PIDRateEstimator`, reproduced number for number
//! (IEEE doubles, the same order of operations, the same skip conditions and the same first-run
//! behaviour) so that its tuning advice carries over.

use std::fmt;

use crate::config::reference as r;
use crate::config::spec::FloatKey;

/// Computes a new rate limit after each completed batch.
pub(crate) trait RateEstimator {
    /// The rate (records per second) the sources should be limited to, given the batch that ended
    /// at `time_ms`: `elements` records, processed in `processing_delay_ms`, after waiting
    /// `scheduling_delay_ms`. `None` when there is no estimate (yet).
    fn compute(
        &mut self,
        time_ms: i64,
        elements: i64,
        processing_delay_ms: i64,
        scheduling_delay_ms: i64,
    ) -> Option<f64>;
}

/// A PID parameter outside its valid range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid {parameter} `{value}` for the PID rate estimator (`{key}`): expected {expected}")]
pub(crate) struct PidConfigError {
    /// The parameter's name (`batch interval`, `proportional`, `integral`, `derivative`,
    /// `min rate`).
    pub(crate) parameter: &'static str,
    /// The canonical configuration key that sets it.
    pub(crate) key: &'static str,
    /// The refused value, as given.
    pub(crate) value: String,
    /// What would be valid.
    pub(crate) expected: &'static str,
}

/// Canonical keys of the estimator's parameters (entries of the configuration reference).
pub(crate) mod keys {
    use crate::config::reference as r;

    /// Which estimator (`pid` is the only one).
    pub(crate) const RATE_ESTIMATOR: &str = r::RATE_ESTIMATOR.about.name;
    /// The batch interval the controller is fed at.
    pub(crate) const BATCH_INTERVAL: &str = r::BATCH_INTERVAL.about.name;
    /// Lowest rate ever published.
    pub(crate) const MIN_RATE: &str = r::PID_MIN_RATE.about.name;
}

/// A proportional-integral-derivative controller on the ingestion rate.
///
/// The "error" is the difference between the rate published for the previous batch and the rate
/// the job actually processed; the integral term is estimated from the scheduling delay (records
/// that overflowed earlier batches); the derivative is the change of the error per second.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PidRateEstimator {
    batch_interval_ms: i64,
    proportional: f64,
    integral: f64,
    derivative: f64,
    min_rate: f64,
    first_run: bool,
    latest_time: i64,
    latest_rate: f64,
    latest_error: f64,
}

impl PidRateEstimator {
    /// A PID estimator for batches of `batch_interval_ms` (> 0) with gains `proportional`,
    /// `integral`, `derivative` (each >= 0) and a floor `min_rate` (> 0, records per second).
    /// NaN and infinite values are refused: an infinite gain multiplies a zero error into NaN.
    pub(crate) fn new(
        batch_interval_ms: i64,
        proportional: f64,
        integral: f64,
        derivative: f64,
        min_rate: f64,
    ) -> Result<PidRateEstimator, PidConfigError> {
        if batch_interval_ms <= 0 {
            return Err(PidConfigError {
                parameter: "batch interval",
                key: keys::BATCH_INTERVAL,
                value: format!("{batch_interval_ms}ms"),
                expected: "a duration of at least 1 ms",
            });
        }
        check_gain("proportional", &r::PID_PROPORTIONAL, proportional)?;
        check_gain("integral", &r::PID_INTEGRAL, integral)?;
        check_gain("derivative", &r::PID_DERIVED, derivative)?;
        if !r::PID_MIN_RATE.accepts(min_rate) {
            return Err(PidConfigError {
                parameter: "min rate",
                key: keys::MIN_RATE,
                value: min_rate.to_string(),
                expected: "a finite number of records per second > 0",
            });
        }
        tracing::info!(
            proportional,
            integral,
            derivative,
            min_rate,
            "created PID rate estimator"
        );
        Ok(PidRateEstimator {
            batch_interval_ms,
            proportional,
            integral,
            derivative,
            min_rate,
            first_run: true,
            latest_time: -1,
            latest_rate: -1.0,
            latest_error: -1.0,
        })
    }
}

/// A gain within its range in the configuration reference (finite, at least 0).
fn check_gain(parameter: &'static str, key: &FloatKey, value: f64) -> Result<(), PidConfigError> {
    if key.accepts(value) {
        Ok(())
    } else {
        Err(PidConfigError {
            parameter,
            key: key.about.name,
            value: value.to_string(),
            expected: "a finite number >= 0",
        })
    }
}

impl RateEstimator for PidRateEstimator {
    fn compute(
        &mut self,
        time_ms: i64,
        elements: i64,
        processing_delay_ms: i64,
        scheduling_delay_ms: i64,
    ) -> Option<f64> {
        PidRateEstimator::compute(
            self,
            time_ms,
            elements,
            processing_delay_ms,
            scheduling_delay_ms,
        )
    }
}

impl PidRateEstimator {
    /// The new rate after the batch that ended at `time_ms` (see [`RateEstimator::compute`]).
    ///
    /// No estimate, and no change of state, unless `time_ms` is later than the last valid
    /// batch, `elements > 0` and `processing_delay_ms > 0`. The first valid batch only records
    /// its processing rate (`elements / processing_delay * 1000`) as the latest rate and returns
    /// `None`; every later one returns
    /// `max(latest_rate - kp*error - ki*historical_error - kd*d_error, min_rate)` and remembers it.
    pub(crate) fn compute(
        &mut self,
        time_ms: i64,
        elements: i64,
        processing_delay_ms: i64,
        scheduling_delay_ms: i64,
    ) -> Option<f64> {
        tracing::trace!(
            time = time_ms,
            records = elements,
            processing_time = processing_delay_ms,
            scheduling_delay = scheduling_delay_ms,
            "computing rate"
        );
        if !(time_ms > self.latest_time && elements > 0 && processing_delay_ms > 0) {
            tracing::trace!("rate estimation skipped");
            return None;
        }
        // The difference is taken in 128 bits: `time - latest_time` cannot overflow, which the
        // JVM's wrapping `Long` arithmetic would turn into a negative interval.
        let delay_since_update =
            (i128::from(time_ms) - i128::from(self.latest_time)) as f64 / 1000.0;
        let processing_rate = elements as f64 / processing_delay_ms as f64 * 1000.0;
        let error = self.latest_rate - processing_rate;
        let historical_error =
            scheduling_delay_ms as f64 * processing_rate / self.batch_interval_ms as f64;
        let d_error = (error - self.latest_error) / delay_since_update;
        let new_rate = f64_max(
            self.latest_rate
                - self.proportional * error
                - self.integral * historical_error
                - self.derivative * d_error,
            self.min_rate,
        );
        tracing::trace!(
            latest_rate = self.latest_rate,
            error,
            latest_error = self.latest_error,
            historical_error,
            delay_since_update,
            d_error,
            "rate estimation terms"
        );
        self.latest_time = time_ms;
        if self.first_run {
            self.latest_rate = processing_rate;
            self.latest_error = 0.0;
            self.first_run = false;
            tracing::trace!("first run, rate estimation skipped");
            None
        } else {
            self.latest_rate = new_rate;
            self.latest_error = error;
            tracing::trace!(new_rate, "new rate");
            Some(new_rate)
        }
    }
}

/// Scala's `Double.max` (`java.lang.Math.max`): NaN if either side is NaN. Rust's `f64::max`
/// would silently return the other side instead.
fn f64_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a >= b {
        a
    } else {
        b
    }
}

impl fmt::Display for PidRateEstimator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid(batch interval {}ms, proportional {}, integral {}, derivative {}, min rate {})",
            self.batch_interval_ms,
            self.proportional,
            self.integral,
            self.derivative,
            self.min_rate
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(kp: f64, ki: f64, kd: f64, min_rate: f64) -> PidRateEstimator {
        PidRateEstimator::new(1000, kp, ki, kd, min_rate).unwrap()
    }

    #[test]
    fn first_valid_call_records_the_processing_rate_and_returns_nothing() {
        let mut est = pid(1.0, 0.2, 0.0, 10.0);
        assert_eq!(est.compute(1000, 500, 250, 0), None);
        // processing rate 500 / 250 * 1000 = 2000 became the latest rate; the second call sees
        // error = 2000 - 1000 = 1000 and returns 2000 - 1000 = 1000.
        assert_eq!(est.compute(2000, 1000, 1000, 0), Some(1000.0));
    }

    #[test]
    fn first_run_updates_latest_time() {
        let mut est = pid(1.0, 0.0, 0.0, 10.0);
        assert_eq!(est.compute(5000, 100, 100, 0), None);
        // Same time again is not later than the first run's time: skipped.
        assert_eq!(est.compute(5000, 100, 100, 0), None);
        assert_eq!(est.compute(4000, 100, 100, 0), None);
        assert_eq!(est.compute(6000, 100, 100, 0), Some(1000.0));
    }

    #[test]
    fn negative_time_before_the_first_run_is_skipped() {
        // Spark starts with latest_time = -1: a first batch at -1 or earlier is not "later".
        let mut est = pid(1.0, 0.0, 0.0, 10.0);
        assert_eq!(est.compute(-1, 100, 100, 0), None);
        assert_eq!(est.compute(0, 100, 100, 0), None);
        assert_eq!(est.compute(1, 100, 100, 0), Some(1000.0));
    }

    #[test]
    fn hand_computed_sequence_with_all_terms() {
        // kp 1.0, ki 0.25, kd 0.5, min 10, batch interval 1000 ms (gains exact in binary).
        let mut est = PidRateEstimator::new(1000, 1.0, 0.25, 0.5, 10.0).unwrap();
        // t=1000: rate 1000/500*1000 = 2000 -> latest_rate 2000, latest_error 0.
        assert_eq!(est.compute(1000, 1000, 500, 0), None);
        // t=3000: processing rate = 1500/1000*1000 = 1500; error = 2000-1500 = 500;
        // historical = 200*1500/1000 = 300; dt = 2 s; d_error = (500-0)/2 = 250;
        // new = 2000 - 500 - 0.25*300 - 0.5*250 = 2000 - 500 - 75 - 125 = 1300.
        assert_eq!(est.compute(3000, 1500, 1000, 200), Some(1300.0));
        // t=4000: processing rate = 1200/800*1000 = 1500; error = 1300-1500 = -200;
        // historical = 0; d_error = (-200-500)/1 = -700;
        // new = 1300 + 200 - 0 + 350 = 1850.
        assert_eq!(est.compute(4000, 1200, 800, 0), Some(1850.0));
    }

    #[test]
    fn skipped_calls_leave_the_state_unchanged() {
        let mut reference = pid(1.0, 0.2, 0.5, 10.0);
        let mut probed = reference.clone();
        assert_eq!(reference.compute(1000, 1000, 500, 0), None);
        assert_eq!(probed.compute(1000, 1000, 500, 0), None);
        let before = probed.clone();
        assert_eq!(probed.compute(2000, 0, 500, 0), None, "no elements");
        assert_eq!(probed.compute(2000, -5, 500, 0), None, "negative elements");
        assert_eq!(
            probed.compute(2000, 1000, 0, 0),
            None,
            "no processing delay"
        );
        assert_eq!(probed.compute(1000, 1000, 500, 0), None, "same time");
        assert_eq!(probed.compute(999, 1000, 500, 0), None, "earlier time");
        assert_eq!(probed, before);
        assert_eq!(
            probed.compute(2000, 800, 500, 100),
            reference.compute(2000, 800, 500, 100)
        );
        assert_eq!(probed, reference);
    }

    #[test]
    fn skipped_first_calls_do_not_consume_the_first_run() {
        let mut est = pid(1.0, 0.0, 0.0, 10.0);
        assert_eq!(est.compute(1000, 0, 100, 0), None);
        assert_eq!(
            est.compute(2000, 100, 100, 0),
            None,
            "this is the first run"
        );
        assert_eq!(est.compute(3000, 100, 100, 0), Some(1000.0));
    }

    #[test]
    fn min_rate_floors_the_estimate() {
        let mut est = pid(1.0, 0.2, 0.0, 100.0);
        assert_eq!(est.compute(1000, 10_000, 1000, 0), None); // latest rate 10000
        // processing rate 50; error = 9950; new = 10000 - 9950 - 0.2*(5000*50/1000=250) = 0
        // -> floored to 100.
        assert_eq!(est.compute(2000, 50, 1000, 5000), Some(100.0));
        // The floored value is what later errors are measured against: processing rate 80,
        // error = 100 - 80 = 20, new = 100 - 20 = 80 -> floored to 100 again.
        assert_eq!(est.compute(3000, 80, 1000, 0), Some(100.0));
        // processing 400: error = 100 - 400 = -300, new = 100 + 300 = 400.
        assert_eq!(est.compute(4000, 400, 1000, 0), Some(400.0));
    }

    #[test]
    fn derivative_term_uses_the_time_since_the_last_valid_update() {
        let mut est = pid(0.0, 0.0, 1.0, 1.0);
        assert_eq!(est.compute(0, 1000, 1000, 0), None); // latest rate 1000, error 0
        // A skipped call must not shorten the interval used by the derivative.
        assert_eq!(est.compute(1000, 0, 1000, 0), None);
        // t=4000: processing 500, error = 500, d_error = (500 - 0) / 4 = 125, new = 1000 - 125.
        assert_eq!(est.compute(4000, 500, 1000, 0), Some(875.0));
        // t=4500: processing 875 -> error 0; d_error = (0 - 500) / 0.5 = -1000; new = 875 + 1000.
        assert_eq!(est.compute(4500, 875, 1000, 0), Some(1875.0));
    }

    #[test]
    fn integral_term_scales_with_the_batch_interval() {
        let mut est = PidRateEstimator::new(2000, 0.0, 1.0, 0.0, 1.0).unwrap();
        assert_eq!(est.compute(1000, 1000, 1000, 0), None); // latest rate 1000
        // historical = 500 * 1000 / 2000 = 250 -> new = 1000 - 250.
        assert_eq!(est.compute(3000, 1000, 1000, 500), Some(750.0));
    }

    #[test]
    fn division_is_floating_point() {
        // 1 / 3 * 1000 in doubles, not integer division.
        let mut est = pid(1.0, 0.0, 0.0, 0.001);
        assert_eq!(est.compute(1000, 1, 3, 0), None);
        let expected_latest = 1.0_f64 / 3.0 * 1000.0;
        let processing = 2.0_f64 / 3.0 * 1000.0;
        let got = est.compute(2000, 2, 3, 0).unwrap();
        assert_eq!(got, expected_latest - (expected_latest - processing));
    }

    #[test]
    fn arguments_are_checked() {
        let err = PidRateEstimator::new(0, 1.0, 0.2, 0.0, 100.0).unwrap_err();
        assert_eq!(err.parameter, "batch interval");
        assert_eq!(err.key, "backpressure.batch-interval");
        assert!(PidRateEstimator::new(-5, 1.0, 0.2, 0.0, 100.0).is_err());

        let err = PidRateEstimator::new(1000, -0.1, 0.2, 0.0, 100.0).unwrap_err();
        assert_eq!(err.key, "backpressure.pid.proportional");
        assert!(err.to_string().contains(">= 0"), "{err}");
        let err = PidRateEstimator::new(1000, 1.0, f64::NAN, 0.0, 100.0).unwrap_err();
        assert_eq!(err.key, "backpressure.pid.integral");
        let err = PidRateEstimator::new(1000, 1.0, 0.2, -1.0, 100.0).unwrap_err();
        assert_eq!(
            (err.parameter, err.key),
            ("derivative", "backpressure.pid.derived")
        );
        let err = PidRateEstimator::new(1000, 1.0, 0.2, 0.0, 0.0).unwrap_err();
        assert_eq!(err.key, "backpressure.pid.min-rate");
        assert!(err.to_string().contains("> 0"), "{err}");
        assert!(PidRateEstimator::new(1000, 1.0, 0.2, 0.0, f64::NAN).is_err());
        assert!(PidRateEstimator::new(1000, f64::INFINITY, 0.2, 0.0, 1.0).is_err());

        // Zero gains are allowed.
        assert!(PidRateEstimator::new(1, 0.0, 0.0, 0.0, 0.5).is_ok());
    }
}
