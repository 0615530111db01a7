//! The backpressure options of a job and the estimator they select.

use std::time::Duration;

use crate::config::reference::{
    BACKPRESSURE_ENABLED, BATCH_INTERVAL, PID_DERIVED, PID_INTEGRAL, PID_MIN_RATE,
    PID_PROPORTIONAL, RATE_ESTIMATOR,
};
use crate::config::spec::FloatKey;
use crate::config::{ConfigLookup, ConfigLookupExt, KeyError, format_duration};

use super::estimator::{PidRateEstimator, RateEstimator, keys};

/// Turns rate control on for a job's sources.
pub(crate) const ENABLED_KEY: &str = BACKPRESSURE_ENABLED.about.name;

/// How often a completed batch is fed to the controller when `backpressure.batch-interval` is
/// unset (see the reference's entry for why it should be set).
pub(crate) const DEFAULT_BATCH_INTERVAL: Duration = BATCH_INTERVAL.default_or_zero();

/// The names `backpressure.rate-estimator` accepts.
pub(crate) const RATE_ESTIMATORS: &[&str] = RATE_ESTIMATOR.choices;

/// A PID parameter, or its default.
fn pid_parameter(lookup: &impl ConfigLookup, key: &FloatKey) -> Result<f64, KeyError> {
    lookup.f64_or(key.about.name, key.default.unwrap_or(f64::NAN))
}

/// Whether rate control is on and how long a batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackpressureOptions {
    /// `backpressure.enabled`.
    pub(crate) enabled: bool,
    /// `backpressure.batch-interval` in milliseconds, always > 0.
    pub batch_interval_ms: i64,
}

impl BackpressureOptions {
    /// Reads `backpressure.enabled` and `backpressure.batch-interval`.
    pub(crate) fn from_config(lookup: &impl ConfigLookup) -> Result<BackpressureOptions, KeyError> {
        let enabled = lookup.bool_or(ENABLED_KEY, BACKPRESSURE_ENABLED.default)?;
        let interval = lookup.duration_or(keys::BATCH_INTERVAL, DEFAULT_BATCH_INTERVAL)?;
        let batch_interval_ms = i64::try_from(interval.as_millis())
            .ok()
            .filter(|_| BATCH_INTERVAL.range.check(interval).is_ok())
            .ok_or_else(|| {
                KeyError::new(
                    keys::BATCH_INTERVAL,
                    format!(
                        "`{}` is not a usable batch interval (valid: greater than 0 and at most 365d, e.g. 1s)",
                        format_duration(interval)
                    ),
                )
            })?;
        Ok(BackpressureOptions {
            enabled,
            batch_interval_ms,
        })
    }
}

/// The rate estimator `backpressure.rate-estimator` selects, with its parameters validated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EstimatorSettings {
    /// `pid`: a PID estimator that has not seen a batch yet.
    Pid(PidRateEstimator),
}

impl EstimatorSettings {
    /// Reads `backpressure.rate-estimator` (only `pid`) with `backpressure.pid.proportional`,
    /// `backpressure.pid.integral`, `backpressure.pid.derived` and `backpressure.pid.min-rate`
    /// (defaults in the reference), for batches of `batch_interval_ms`.
    pub(crate) fn from_config(
        lookup: &impl ConfigLookup,
        batch_interval_ms: i64,
    ) -> Result<EstimatorSettings, KeyError> {
        match lookup.choice_or(
            keys::RATE_ESTIMATOR,
            RATE_ESTIMATORS,
            RATE_ESTIMATOR.default,
        )? {
            "pid" => {
                let proportional = pid_parameter(lookup, &PID_PROPORTIONAL)?;
                let integral = pid_parameter(lookup, &PID_INTEGRAL)?;
                let derivative = pid_parameter(lookup, &PID_DERIVED)?;
                let min_rate = pid_parameter(lookup, &PID_MIN_RATE)?;
                let pid = PidRateEstimator::new(
                    batch_interval_ms,
                    proportional,
                    integral,
                    derivative,
                    min_rate,
                )
                .map_err(|e| {
                    KeyError::new(
                        e.key,
                        format!(
                            "invalid {} `{}` for the PID rate estimator (expected {})",
                            e.parameter, e.value, e.expected
                        ),
                    )
                })?;
                Ok(EstimatorSettings::Pid(pid))
            }
            other => Err(KeyError::new(
                keys::RATE_ESTIMATOR,
                format!(
                    "unknown rate estimator `{other}` (valid: {})",
                    RATE_ESTIMATORS.join(", ")
                ),
            )),
        }
    }

    /// A fresh estimator with these settings: every controller starts from its first run.
    pub(crate) fn estimator(&self) -> Box<dyn RateEstimator + Send> {
        match self {
            EstimatorSettings::Pid(pid) => Box::new(pid.clone()),
        }
    }
}

/// A job's rate control, read and checked once: whether it is on, the batch interval, and the
/// estimator. The control loop builds its [`RateController`](super::RateController) from this,
/// without reading the configuration again.
#[derive(Debug, Clone, PartialEq)]
pub struct BackpressureSettings {
    /// `backpressure.enabled` and `backpressure.batch-interval`.
    pub options: BackpressureOptions,
    /// The estimator, for batches of `options.batch_interval_ms`.
    pub(crate) estimator: EstimatorSettings,
}

impl BackpressureSettings {
    /// Reads every backpressure option. The estimator's are checked even when rate control is
    /// off, so that turning it on later does not reveal an old mistake.
    pub fn from_config(lookup: &impl ConfigLookup) -> Result<BackpressureSettings, KeyError> {
        let options = BackpressureOptions::from_config(lookup)?;
        let estimator = EstimatorSettings::from_config(lookup, options.batch_interval_ms)?;
        Ok(BackpressureSettings { options, estimator })
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    use crate::config::config_map as cfg;

    #[test]
    fn defaults() {
        let opts = BackpressureOptions::from_config(&cfg(&[])).unwrap();
        assert_eq!(
            opts,
            BackpressureOptions {
                enabled: false,
                batch_interval_ms: 1000
            }
        );
        // Defaults 1.0 / 0.2 / 0.0 / 100: rate 2000 then processing 1000 -> 2000 - 1000 = 1000.
        let mut est = EstimatorSettings::from_config(&cfg(&[]), 1000)
            .unwrap()
            .estimator();
        assert_eq!(est.compute(1000, 2000, 1000, 0), None);
        assert_eq!(est.compute(2000, 1000, 1000, 0), Some(1000.0));
        // ... and the floor is 100: processing 10 -> 1000 - 990 = 10 -> 100.
        assert_eq!(est.compute(3000, 10, 1000, 0), Some(100.0));
    }

    #[test]
    fn reads_every_option() {
        let c = cfg(&[
            ("backpressure.enabled", "true"),
            ("backpressure.batch-interval", "10 s"),
            ("backpressure.rate-estimator", "PID"),
            ("backpressure.pid.proportional", "0.5"),
            ("backpressure.pid.integral", "0"),
            ("backpressure.pid.derived", "0"),
            ("backpressure.pid.min-rate", "1"),
        ]);
        let opts = BackpressureOptions::from_config(&c).unwrap();
        assert!(opts.enabled);
        assert_eq!(opts.batch_interval_ms, 10_000);
        let mut est = EstimatorSettings::from_config(&c, opts.batch_interval_ms)
            .unwrap()
            .estimator();
        assert_eq!(est.compute(1000, 2000, 1000, 0), None);
        // error 1000, kp 0.5 -> 2000 - 500.
        assert_eq!(est.compute(2000, 1000, 1000, 0), Some(1500.0));
    }

    #[test]
    fn unknown_estimator_names_the_valid_ones() {
        let err =
            EstimatorSettings::from_config(&cfg(&[("backpressure.rate-estimator", "pi")]), 1000)
                .err()
                .unwrap();
        assert_eq!(err.key, "backpressure.rate-estimator");
        assert!(err.message.contains("valid: pid"), "{err}");
    }

    #[test]
    fn out_of_range_parameters_name_their_key() {
        for (key, value) in [
            ("backpressure.pid.proportional", "-1"),
            ("backpressure.pid.integral", "-0.2"),
            ("backpressure.pid.derived", "NaN"),
            ("backpressure.pid.min-rate", "0"),
        ] {
            let err = EstimatorSettings::from_config(&cfg(&[(key, value)]), 1000)
                .err()
                .unwrap();
            assert_eq!(err.key, key);
            assert!(err.message.contains("expected"), "{err}");
        }
        let err = EstimatorSettings::from_config(&cfg(&[("backpressure.pid.integral", "x")]), 1000)
            .err()
            .unwrap();
        assert_eq!(err.key, "backpressure.pid.integral");
        let err = EstimatorSettings::from_config(&cfg(&[]), 0).err().unwrap();
        assert_eq!(err.key, "backpressure.batch-interval");
    }

    #[test]
    fn bad_switch_or_interval() {
        let err =
            BackpressureOptions::from_config(&cfg(&[("backpressure.enabled", "yes")])).unwrap_err();
        assert_eq!(err.key, "backpressure.enabled");
        let err = BackpressureOptions::from_config(&cfg(&[("backpressure.batch-interval", "0")]))
            .unwrap_err();
        assert_eq!(err.key, "backpressure.batch-interval");
        assert!(
            err.message
                .contains("valid: greater than 0 and at most 365d"),
            "{err}"
        );
        let err =
            BackpressureOptions::from_config(&cfg(&[("backpressure.batch-interval", "366d")]))
                .unwrap_err();
        assert_eq!(err.key, "backpressure.batch-interval");
        let err =
            BackpressureOptions::from_config(&cfg(&[("backpressure.batch-interval", "500us")]))
                .unwrap_err();
        assert_eq!(err.key, "backpressure.batch-interval");
        let err =
            BackpressureOptions::from_config(&cfg(&[("backpressure.batch-interval", "soon")]))
                .unwrap_err();
        assert_eq!(err.key, "backpressure.batch-interval");
    }
}
