//! The keys flowscale reads, to catch misspellings without rejecting the rest of a Flink
//! configuration (which legitimately carries many keys that are not ours).

use super::closest::typo_of;

/// Canonical keys flowscale reads (without `job.autoscaler.`).
pub(crate) const KNOWN_KEYS: &[&str] = &[
    "enabled",
    "scaling.enabled",
    "metrics.window",
    "stabilization.interval",
    "excluded.periods",
    "excluded.periods.time-zone",
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
    "metrics.custom-evaluators",
    "scaling.custom-executors",
    "observed-scalability.enabled",
    "observed-scalability.min-observations",
    "observed-scalability.coefficient-min",
    "scaling-cooldown-period",
    "scaling.priority",
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
const KNOWN_PREFIXES: &[&str] = &[
    "scaling.alignment.mode.",
    "metrics.custom-evaluator.",
    "scaling.custom-executor.",
];

/// How an unknown key is reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UnknownKey {
    /// Reported and ignored (an autoscaler-prefixed key flowscale does not read).
    Warning(String),
    /// Refused: a misspelling of a known key (whose default would silently be used instead),
    /// or any unknown key under `--strict`.
    Error(String),
}

/// How to treat keys flowscale does not read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KeyPolicy {
    /// Every unknown key is an error, not only misspellings of known ones (`--strict`).
    pub(crate) strict: bool,
}

/// The verdict on `key` (canonical) written as `raw_key`, or `None` when it is known or passes
/// silently. A key within a typo of a known key (or of a known family such as
/// `scaling.alignment.mode.`) is an error naming the known key; other keys of a Flink
/// configuration pass silently (a key written with an autoscaler prefix is a warning), unless
/// `policy` is strict.
pub(crate) fn check_key(key: &str, raw_key: &str, policy: KeyPolicy) -> Option<UnknownKey> {
    if KNOWN_KEYS.contains(&key) || KNOWN_PREFIXES.iter().any(|p| key.starts_with(p)) {
        return None;
    }
    // The prefix the user wrote (`job.autoscaler.` ...), kept in the suggestion.
    let written_prefix = raw_key.strip_suffix(key).unwrap_or_default();
    if let Some(known) = typo_of(key, KNOWN_KEYS.iter().copied()) {
        return Some(UnknownKey::Error(format!(
            "unknown key `{raw_key}` (did you mean `{written_prefix}{known}`? a misspelt key \
             would be ignored and its default used)"
        )));
    }
    if let Some(fixed) = family_typo(key) {
        return Some(UnknownKey::Error(format!(
            "unknown key `{raw_key}` (did you mean `{written_prefix}{fixed}`? a misspelt key \
             would be ignored and its default used)"
        )));
    }
    if policy.strict {
        return Some(UnknownKey::Error(format!(
            "unknown key `{raw_key}` (--strict refuses every key flowscale does not read; see \
             the configuration table in the README)"
        )));
    }
    (raw_key != key).then(|| {
        UnknownKey::Warning(format!(
            "unknown autoscaler key `{raw_key}`, ignored (see the configuration table in the README)"
        ))
    })
}

/// `key` with its leading segments corrected when they are a typo of a known family
/// (`scaling.alignment.mod.x.class` -> `scaling.alignment.mode.x.class`).
fn family_typo(key: &str) -> Option<String> {
    KNOWN_PREFIXES.iter().find_map(|family| {
        let segments = family.trim_end_matches('.').split('.').count();
        let mut parts = key.splitn(segments + 1, '.');
        let head: Vec<&str> = parts.by_ref().take(segments).collect();
        let tail = parts.next()?;
        let head = head.join(".");
        let family = family.trim_end_matches('.');
        typo_of(&head, [family]).map(|f| format!("{f}.{tail}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LENIENT: KeyPolicy = KeyPolicy { strict: false };
    const STRICT: KeyPolicy = KeyPolicy { strict: true };

    fn error(key: &str, raw: &str) -> String {
        match check_key(key, raw, LENIENT) {
            Some(UnknownKey::Error(message)) => message,
            other => panic!("{raw}: expected an error, got {other:?}"),
        }
    }

    #[test]
    fn misspelt_keys_are_errors_naming_the_known_key() {
        assert_eq!(
            check_key("utilization.target", "utilization.target", LENIENT),
            None
        );
        assert_eq!(
            check_key("scaling.alignment.mode.x.rule", "x", LENIENT),
            None
        );
        let e = error("utilisation.target", "utilisation.target");
        assert!(e.contains("did you mean `utilization.target`"), "{e}");
        let e = error("utilization.targt", "job.autoscaler.utilization.targt");
        assert!(
            e.contains("did you mean `job.autoscaler.utilization.target`"),
            "{e}"
        );
        let e = error("scaling.alignment.mod", "scaling.alignment.mod");
        assert!(e.contains("did you mean `scaling.alignment.mode`"), "{e}");
        let e = error(
            "scaling.alignment.mod.x.class",
            "scaling.alignment.mod.x.class",
        );
        assert!(
            e.contains("did you mean `scaling.alignment.mode.x.class`"),
            "{e}"
        );
        let e = error("metrics.widnow", "metrics.widnow");
        assert!(e.contains("did you mean `metrics.window`"), "{e}");
    }

    /// Keys of a real Flink configuration (and autoscaler keys Flink has that flowscale does
    /// not read) are accepted and ignored: none may be taken for a typo of ours.
    #[test]
    fn keys_pasted_from_a_flink_configuration_pass() {
        for key in [
            "taskmanager.numberOfTaskSlots",
            "state.backend.type",
            "state.checkpoints.dir",
            "state.savepoints.dir",
            "parallelism.default",
            "pipeline.max-parallelism",
            "execution.checkpointing.interval",
            "execution.checkpointing.timeout",
            "execution.runtime-mode",
            "restart-strategy.type",
            "restart-strategy.fixed-delay.attempts",
            "restart-strategy.fixed-delay.delay",
            "jobmanager.scheduler",
            "jobmanager.memory.process.size",
            "taskmanager.memory.process.size",
            "taskmanager.memory.managed.fraction",
            "rest.port",
            "rest.address",
            "rest.bind-port",
            "heartbeat.interval",
            "heartbeat.timeout",
            "high-availability.type",
            "metrics.reporters",
            "metrics.latency.interval",
            "metrics.fetcher.update-interval",
            "web.timeout",
            "pekko.ask.timeout",
            "slot.request.timeout",
            "slotmanager.number-of-slots.max",
            "table.exec.resource.default-parallelism",
            "scheduler-mode",
            "cluster.evenly-spread-out-slots",
            "kubernetes.operator.job.restart.failed",
            "kubernetes.operator.periodic.savepoint.interval",
        ] {
            assert_eq!(check_key(key, key, LENIENT), None, "{key}");
        }
        // Autoscaler keys Flink has and flowscale does not implement: a warning, not an error.
        for key in ["memory.tuning.enabled", "quota.cpu", "quota.memory"] {
            let raw = format!("job.autoscaler.{key}");
            assert!(
                matches!(check_key(key, &raw, LENIENT), Some(UnknownKey::Warning(_))),
                "{raw}"
            );
        }
    }

    #[test]
    fn strict_refuses_every_unknown_key() {
        for key in ["state.backend.type", "frobnicate"] {
            match check_key(key, key, STRICT) {
                Some(UnknownKey::Error(e)) => assert!(e.contains("--strict"), "{e}"),
                other => panic!("{key}: {other:?}"),
            }
        }
        assert_eq!(check_key("metrics.window", "metrics.window", STRICT), None);
        assert_eq!(
            check_key(
                "scaling.alignment.mode.x.class",
                "scaling.alignment.mode.x.class",
                STRICT
            ),
            None
        );
    }
}
