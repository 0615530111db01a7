//! The keys flowscale reads, to catch misspellings without rejecting the rest of a Flink
//! configuration (which legitimately carries many keys that are not ours).

use super::closest::closest;

/// Canonical keys flowscale reads (without `job.autoscaler.`).
pub const KNOWN_KEYS: &[&str] = &[
    "enabled",
    "scaling.enabled",
    "metrics.window",
    "stabilization.interval",
    "excluded.periods",
    "utilization.target",
    "target.utilization",
    "target.utilization.boundary",
    "utilization.max",
    "utilization.min",
    "scale-down.interval",
    "scale-up.grace-period",
    "vertex.min-parallelism",
    "vertex.max-parallelism",
    "scale-down.max-factor",
    "scale-up.max-factor",
    "catch-up.duration",
    "restart.time",
    "restart.time-tracking.enabled",
    "restart.time-tracking.limit",
    "backlog-processing.lag-threshold",
    "observed-true-processing-rate.lag-threshold",
    "observed-true-processing-rate.switch-threshold",
    "observed-true-processing-rate.min-observations",
    "scaling.effectiveness.detection.enabled",
    "scaling.effectiveness.threshold",
    "memory.gc-pressure.threshold",
    "memory.heap-usage.threshold",
    "history.max.count",
    "history.max.age",
    "metrics.busy-time.aggregator",
    "vertex.exclude.ids",
    "scaling.event.interval",
    "flink.rest-client.timeout",
    "scaling.key-group.partitions.adjust.mode",
    "scaling.alignment.mode",
    "observed-scalability.enabled",
    "observed-scalability.min-observations",
    "observed-scalability.coefficient-min",
    "scaling-cooldown-period",
    "backpressure.enabled",
    "backpressure.rate-estimator",
    "backpressure.batch-interval",
    "backpressure.pid.proportional",
    "backpressure.pid.integral",
    "backpressure.pid.derived",
    "backpressure.pid.min-rate",
    "pipeline.jobvertex-parallelism-overrides",
];

/// Families of keys whose tails are free-form (mode parameters and the like).
const KNOWN_PREFIXES: &[&str] = &["scaling.alignment.mode."];

/// A warning for `key` (canonical) written as `raw_key`, if it looks like a misspelt key of ours.
/// Keys of other Flink components pass silently; a key written with an autoscaler prefix, or
/// one close to a known key, is reported.
pub fn unknown_key_warning(key: &str, raw_key: &str) -> Option<String> {
    if KNOWN_KEYS.contains(&key) || KNOWN_PREFIXES.iter().any(|p| key.starts_with(p)) {
        return None;
    }
    let prefixed = raw_key != key;
    match closest(key, KNOWN_KEYS.iter().copied()) {
        Some(suggestion) => Some(format!(
            "unknown key `{raw_key}`, ignored (did you mean `{suggestion}`?)"
        )),
        None if prefixed => Some(format!(
            "unknown autoscaler key `{raw_key}`, ignored (see the configuration table in the README)"
        )),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_for_misspellings_only() {
        assert!(unknown_key_warning("utilization.target", "utilization.target").is_none());
        assert!(unknown_key_warning("scaling.alignment.mode.x.rule", "x").is_none());
        assert!(unknown_key_warning("state.backend.type", "state.backend.type").is_none());
        let w = unknown_key_warning("utilisation.target", "utilisation.target").expect("warns");
        assert!(w.contains("did you mean `utilization.target`"), "{w}");
        let w = unknown_key_warning("frobnicate", "job.autoscaler.frobnicate").expect("warns");
        assert!(w.contains("unknown autoscaler key"), "{w}");
    }
}
