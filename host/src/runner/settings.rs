//! Everything a job's configuration sets besides its alignment mode, checked together so that
//! `validate` reports every problem at once.

use std::time::Duration;

use crate::backpressure::{BackpressureOptions, estimator_from_config};
use crate::config::{ConfigLookup, ConfigLookupExt, KeyError};
use crate::scaling::AutoscalerOptions;
use crate::state::EventLog;

use super::cooldown::CooldownExecutor;

/// The master switch. The anchor defaults it to false; in flowscale, listing a job in the fleet
/// is the opt-in, so only an explicit `false` turns the autoscaler off for it.
pub const ENABLED_KEY: &str = "enabled";

/// A job's validated settings.
#[derive(Debug, Clone)]
pub struct JobSettings {
    /// Whether the autoscaler acts on the job.
    pub enabled: bool,
    /// The decision pipeline's options.
    pub autoscaler: AutoscalerOptions,
    /// `scaling-cooldown-period`.
    pub cooldown: Duration,
    /// Rate control.
    pub backpressure: BackpressureOptions,
    /// `scaling.event.interval`.
    pub event_interval_ms: i64,
}

impl JobSettings {
    /// Reads and checks every option of a job, collecting all problems.
    pub fn from_config(config: &impl ConfigLookup) -> Result<JobSettings, Vec<KeyError>> {
        let mut errors = Vec::new();
        let enabled = config
            .bool_or(ENABLED_KEY, true)
            .map_err(|e| errors.push(e))
            .unwrap_or(true);
        let autoscaler = AutoscalerOptions::from_config(config)
            .map_err(|e| errors.extend(e))
            .ok();
        let cooldown = CooldownExecutor::period_from_config(config)
            .map_err(|e| errors.push(e))
            .ok();
        let backpressure = BackpressureOptions::from_config(config)
            .map_err(|e| errors.push(e))
            .ok();
        if let Some(options) = backpressure
            && let Err(e) = estimator_from_config(config, options.batch_interval_ms)
        {
            errors.push(e);
        }
        let event_interval_ms = EventLog::from_config(config)
            .map_err(|e| errors.push(e))
            .map(|log| log.interval_ms())
            .ok();
        match (autoscaler, cooldown, backpressure, event_interval_ms) {
            (Some(autoscaler), Some(cooldown), Some(backpressure), Some(event_interval_ms))
                if errors.is_empty() =>
            {
                Ok(JobSettings {
                    enabled,
                    autoscaler,
                    cooldown,
                    backpressure,
                    event_interval_ms,
                })
            }
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
        assert!(!settings.backpressure.enabled);
    }
}
