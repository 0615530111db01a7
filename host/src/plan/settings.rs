//! Everything a job's configuration sets besides its alignment mode, checked together so that
//! `validate` reports every problem at once.

use std::time::Duration;

use crate::backpressure::BackpressureSettings;
use crate::config::reference::{COOLDOWN_PERIOD, ENABLED, SCALING_PRIORITY};
use crate::config::{ConfigLookup, ConfigLookupExt, KeyError};
use crate::scaling::AutoscalerOptions;
use crate::state::EventLog;

/// The configuration key of the minimum time between two scaling operations of one job.
pub(crate) const COOLDOWN_PERIOD_KEY: &str = COOLDOWN_PERIOD.about.name;

/// The cooldown period when `scaling-cooldown-period` is unset.
pub(crate) const DEFAULT_COOLDOWN_PERIOD: Duration = COOLDOWN_PERIOD.default_or_zero();

/// Reads `scaling-cooldown-period` (Flink duration, `0` disables; default and range in the
/// reference).
pub(crate) fn cooldown_period(lookup: &impl ConfigLookup) -> Result<Duration, KeyError> {
    lookup.duration_in(
        COOLDOWN_PERIOD_KEY,
        DEFAULT_COOLDOWN_PERIOD,
        COOLDOWN_PERIOD.range,
    )
}

/// The configuration key of a job's share of its cluster's slots: when the scale-ups due in
/// one round need more slots than are free, a job of a higher priority is served first.
pub(crate) const PRIORITY_KEY: &str = SCALING_PRIORITY.about.name;

/// Reads `scaling.priority` (an integer, default 0).
fn priority(lookup: &impl ConfigLookup) -> Result<i64, KeyError> {
    lookup.i64_or(PRIORITY_KEY, SCALING_PRIORITY.default.unwrap_or(0))
}

/// The master switch (see the reference's `enabled`: only an explicit `false` turns the
/// autoscaler off for a job).
pub(crate) const ENABLED_KEY: &str = ENABLED.about.name;

/// A job's validated settings.
#[derive(Debug, Clone)]
pub struct JobSettings {
    /// Whether the autoscaler acts on the job.
    pub(crate) enabled: bool,
    /// The decision pipeline's options.
    pub autoscaler: AutoscalerOptions,
    /// `scaling-cooldown-period`.
    pub(crate) cooldown: Duration,
    /// Rate control, estimator included.
    pub(crate) backpressure: BackpressureSettings,
    /// `scaling.event.interval`.
    pub(crate) event_interval_ms: i64,
    /// `scaling.priority`: who gets a shared cluster's slots first.
    pub(crate) priority: i64,
}

impl JobSettings {
    /// Reads and checks every option of a job, collecting all problems.
    pub fn from_config(config: &impl ConfigLookup) -> Result<JobSettings, Vec<KeyError>> {
        let mut errors = Vec::new();
        let enabled = config
            .bool_or(ENABLED_KEY, ENABLED.default)
            .map_err(|e| errors.push(e))
            .unwrap_or(ENABLED.default);
        let autoscaler = AutoscalerOptions::from_config(config)
            .map_err(|e| errors.extend(e))
            .ok();
        let cooldown = cooldown_period(config).map_err(|e| errors.push(e)).ok();
        let backpressure = BackpressureSettings::from_config(config)
            .map_err(|e| errors.push(e))
            .ok();
        let event_interval_ms = EventLog::from_config(config)
            .map_err(|e| errors.push(e))
            .map(|log| log.interval_ms())
            .ok();
        let priority = priority(config).map_err(|e| errors.push(e)).ok();
        match (
            autoscaler,
            cooldown,
            backpressure,
            event_interval_ms,
            priority,
        ) {
            (
                Some(autoscaler),
                Some(cooldown),
                Some(backpressure),
                Some(event_interval_ms),
                Some(priority),
            ) if errors.is_empty() => Ok(JobSettings {
                enabled,
                autoscaler,
                cooldown,
                backpressure,
                event_interval_ms,
                priority,
            }),
            _ => Err(errors),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn collects_every_problem() {
        let config: BTreeMap<String, String> = [
            ("utilization.target", "2"),
            ("scaling-cooldown-period", "soon"),
            ("backpressure.rate-estimator", "magic"),
            ("enabled", "maybe"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let errors = JobSettings::from_config(&config).unwrap_err();
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        for key in [
            "utilization.target",
            "scaling-cooldown-period",
            "backpressure.rate-estimator",
            "enabled",
        ] {
            assert!(keys.contains(&key), "{key} missing from {errors:?}");
        }
    }

    #[test]
    fn defaults_enable_the_job() {
        let settings = JobSettings::from_config(&BTreeMap::<String, String>::new()).expect("valid");
        assert!(settings.enabled);
        assert_eq!(settings.cooldown, Duration::from_secs(300));
        assert!(!settings.backpressure.options.enabled);
    }

    #[test]
    fn priority_defaults_to_zero_and_must_be_an_integer() {
        let cfg = |v: &str| -> BTreeMap<String, String> {
            [(PRIORITY_KEY.to_string(), v.to_string())]
                .into_iter()
                .collect()
        };
        let empty = BTreeMap::<String, String>::new();
        assert_eq!(JobSettings::from_config(&empty).expect("valid").priority, 0);
        assert_eq!(
            JobSettings::from_config(&cfg(" -3 "))
                .expect("valid")
                .priority,
            -3
        );
        let errors = JobSettings::from_config(&cfg("high")).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].key, PRIORITY_KEY);
        assert!(
            errors[0]
                .message
                .contains("expected an integer, got `high`"),
            "{errors:?}"
        );
    }

    #[test]
    fn cooldown_period_from_config() {
        let cfg = |v: &str| -> BTreeMap<String, String> {
            [("scaling-cooldown-period".to_string(), v.to_string())]
                .into_iter()
                .collect()
        };
        let empty: BTreeMap<String, String> = BTreeMap::new();
        assert_eq!(cooldown_period(&empty), Ok(Duration::from_secs(300)));
        assert_eq!(cooldown_period(&cfg("5 min")), Ok(Duration::from_secs(300)));
        assert_eq!(cooldown_period(&cfg("0")), Ok(Duration::ZERO));
        assert_eq!(
            cooldown_period(&cfg("1500")),
            Ok(Duration::from_millis(1500))
        );
        let err = cooldown_period(&cfg("soon")).unwrap_err();
        assert_eq!(err.key, "scaling-cooldown-period");
        let err = cooldown_period(&cfg("99999999999999999 d")).unwrap_err();
        assert_eq!(err.key, "scaling-cooldown-period");
        // A year is the bound (365 d = 8760 h); one more day is refused with the range.
        assert_eq!(
            cooldown_period(&cfg("8760h")),
            Ok(Duration::from_secs(365 * 24 * 3600))
        );
        let err = cooldown_period(&cfg("366 d")).unwrap_err();
        assert!(
            err.message
                .contains("`366 d` is out of range (valid: 0 to 365d; 0 disables the cooldown)"),
            "{err}"
        );
        assert_eq!(cooldown_period(&cfg("30s")), Ok(Duration::from_secs(30)));
    }
}
